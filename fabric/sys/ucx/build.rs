//! Generates UCX bindings against the headers pkg-config finds, and
//! compiles C wrappers for the `static inline` part of the API (`ucp_init`
//! is an inline call of `ucp_init_version`).

use std::env;
use std::path::PathBuf;

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("1.13")
        .probe("ucx")
        .unwrap_or_else(|e| {
            panic!(
                "ucx >= 1.13 not found by pkg-config ({e}); on Debian: apt-get install libucx-dev"
            )
        });
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let includes: Vec<String> = lib
        .include_paths
        .iter()
        .map(|p| format!("-I{}", p.display()))
        .collect();
    println!("cargo:rerun-if-changed=wrapper.h");
    bindgen::Builder::default()
        .header(here.join("wrapper.h").to_string_lossy())
        .clang_args(&includes)
        .allowlist_function("ucp_.*")
        .allowlist_type("ucp_.*")
        .allowlist_var("UCP_.*")
        .allowlist_function("ucs_status_string")
        .allowlist_type("ucs_.*")
        .allowlist_var("UCS_.*")
        // A newtype, not a Rust enum: UCX returns statuses the enum does not
        // name (the link and endpoint failure ranges), and status pointers
        // carry them as plain integers.
        .newtype_enum("ucs_status_t")
        // Flags and modes read as in C (`UCP_OP_ATTR_FIELD_CALLBACK`).
        .prepend_enum_name(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(out.join("static_fns"))
        .derive_default(true)
        .generate()
        .expect("bindgen failed on the UCX headers")
        .write_to_file(out.join("bindings.rs"))
        .expect("writing UCX bindings");
    cc::Build::new()
        .file(out.join("static_fns.c"))
        .includes(&lib.include_paths)
        .include(&here)
        .warnings(false)
        .compile("catena_ucx_static_fns");
}
