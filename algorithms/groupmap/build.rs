//! Says loudly when the build lacks the x86-64 target features that
//! vers-vecs' rank and select need to be fast: vers-vecs chooses them at
//! compile time (`cfg(target_feature)`), so a build without them silently
//! gets software loops, 2-4x slower (see the crate docs and
//! docs/groupmap.md). `catena_groupmap::fast_lookups()` tells the same at run
//! time.

use std::env;

/// The features vers-vecs' fast paths use: popcnt for rank, pdep (BMI2) for
/// select. bmi1 (tzcnt) and lzcnt are recommended with them but matter less.
const NEEDED: [&str; 2] = ["popcnt", "bmi2"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    // The target features come from these (or from .cargo/config.toml, whose
    // changes rebuild the build script itself).
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }
    let features = env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let enabled: Vec<&str> = features.split(',').collect();
    let missing: Vec<&str> = NEEDED
        .into_iter()
        .filter(|f| !enabled.contains(f))
        .collect();
    if missing.is_empty() {
        return;
    }
    println!(
        "cargo:warning=catena-groupmap is built without the x86-64 target feature(s) {}: \
         group-map lookups (vers-vecs rank/select) fall back to software loops, 2-4x slower",
        missing.join(", ")
    );
    println!(
        "cargo:warning=to enable them, build with RUSTFLAGS=\"-C target-feature=+popcnt,+bmi1,+bmi2,+lzcnt\" \
         or put `rustflags = [\"-C\", \"target-feature=+popcnt,+bmi1,+bmi2,+lzcnt\"]` under \
         [target.'cfg(target_arch = \"x86_64\")'] in .cargo/config.toml (every x86-64 CPU \
         since Haswell/Excavator has them; see catena's docs/groupmap.md)"
    );
}
