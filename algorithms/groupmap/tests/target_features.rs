//! The workspace's `.cargo/config.toml` builds x86-64 with the target
//! features vers-vecs' fast rank and select need; without them every bitmap,
//! Elias-Fano and wavelet lookup silently takes a 2-4x slower software path.
//! This fails if that configuration goes away (or is overridden, e.g. by a
//! `RUSTFLAGS` that replaces it).

#[cfg(target_arch = "x86_64")]
#[test]
fn the_workspace_builds_the_fast_lookups() {
    assert!(
        catena_groupmap::fast_lookups(),
        "built without popcnt and BMI2: check .cargo/config.toml's \
         target-feature=+popcnt,+bmi1,+bmi2,+lzcnt, and that RUSTFLAGS does not replace it"
    );
    // The rest of what .cargo/config.toml promises.
    let missing: Vec<&str> = [
        ("bmi1", cfg!(target_feature = "bmi1")),
        ("lzcnt", cfg!(target_feature = "lzcnt")),
    ]
    .into_iter()
    .filter(|&(_, on)| !on)
    .map(|(feature, _)| feature)
    .collect();
    assert!(
        missing.is_empty(),
        "built without {missing:?}: check .cargo/config.toml"
    );
}
