//! Generates libfabric bindings against the headers pkg-config finds, and
//! compiles C wrappers for the `static inline` part of the API (fi_write,
//! fi_cq_read, ... are inline calls through provider ops tables).

use std::env;
use std::path::PathBuf;

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("1.17")
        .probe("libfabric")
        .unwrap_or_else(|e| {
            panic!("libfabric >= 1.17 not found by pkg-config ({e}); on Debian: apt-get install libfabric-dev")
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
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*")
        .allowlist_var("FI_.*")
        .wrap_static_fns(true)
        .wrap_static_fns_path(out.join("static_fns"))
        .derive_default(true)
        .generate()
        .expect("bindgen failed on the libfabric headers")
        .write_to_file(out.join("bindings.rs"))
        .expect("writing libfabric bindings");
    cc::Build::new()
        .file(out.join("static_fns.c"))
        .includes(&lib.include_paths)
        .include(&here)
        .warnings(false)
        .compile("catena_ofi_static_fns");
}
