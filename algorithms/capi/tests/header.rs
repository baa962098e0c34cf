//! `include/catena.h` is what cbindgen makes of this crate today: the test
//! regenerates it and fails on any difference (`CATENA_BLESS=1` rewrites
//! the committed header instead).

use std::path::Path;

#[test]
fn the_committed_header_is_current() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not read the crate")
        .write(&mut generated);
    let committed_path = crate_dir.join("include/catena.h");
    if std::env::var_os("CATENA_BLESS").is_some() {
        std::fs::write(&committed_path, &generated).expect("writing include/catena.h");
        return;
    }
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/catena.h is out of date; regenerate it with \
         `CATENA_BLESS=1 cargo test -p catena-capi --test header`"
    );
}
