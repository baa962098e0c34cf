//! Generates OpenPMIx client bindings against the headers pkg-config finds
//! (Debian's `libpmix-dev` puts them under a prefix of their own, which
//! its pkg-config file names; the library is also in the default path).

use std::env;
use std::path::PathBuf;

fn main() {
    let lib = pkg_config::Config::new()
        .atleast_version("4")
        .probe("pmix")
        .unwrap_or_else(|e| {
            panic!(
                "pmix >= 4 not found by pkg-config ({e}); on Debian: apt-get install libpmix-dev"
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
        .allowlist_function("PMIx_(Init|Finalize|Initialized|Put|Commit|Fence|Fence_nb|Get|Error_string|Value_destruct|Info_load)")
        .allowlist_type("pmix_(proc|value|info|status|scope|data_type|rank|byte_object|op_cbfunc)_t")
        .allowlist_var("PMIX_(SUCCESS|GLOBAL|BYTE_OBJECT|STRING|UINT32|INT|BOOL|JOB_SIZE|LOCAL_PEERS|NUM_NODES|TIMEOUT|MAX_NSLEN|MAX_KEYLEN|ERR_.*)")
        .derive_default(true)
        .generate()
        .expect("bindgen failed on the PMIx headers")
        .write_to_file(out.join("bindings.rs"))
        .expect("writing PMIx bindings");
}
