//! Time-bounded fuzzing for catena's test suites: a fuzz target is a
//! proptest strategy and a check, run batch after batch of fresh random
//! cases until `CATENA_FUZZ_SECONDS` (default 5) have passed, so CI bounds
//! the time and a developer can run the same target for an hour.

#![deny(unsafe_code)]

pub mod alloc;

use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

pub use proptest;

/// How long each fuzz target runs, in seconds.
pub const ENV_FUZZ_SECONDS: &str = "CATENA_FUZZ_SECONDS";
/// Seeds the first batch (to replay a run); later batches follow from it.
pub const ENV_FUZZ_SEED: &str = "CATENA_FUZZ_SEED";
const DEFAULT_SECONDS: u64 = 5;
/// Cases per batch: small enough to notice the deadline soon.
const BATCH: u32 = 32;

/// What a fuzz run did.
#[derive(Clone, Copy, Debug)]
pub struct Ran {
    /// Cases checked, all passed.
    pub cases: u64,
    /// Wall time spent.
    pub elapsed: Duration,
}

/// The time budget of one target.
pub fn budget() -> Duration {
    let seconds = std::env::var(ENV_FUZZ_SECONDS)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    Duration::from_secs(seconds)
}

/// Checks `check` on random values of `strategy` until the budget runs out
/// (at least one batch). A failure panics with the shrunk input and the
/// seed that replays it; success prints the case count.
pub fn fuzz<S>(name: &str, strategy: S, check: impl Fn(S::Value) -> Result<(), TestCaseError>)
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let ran = fuzz_for(name, budget(), strategy, check);
    eprintln!(
        "fuzz {name}: {} cases in {:.1} s, no failure",
        ran.cases,
        ran.elapsed.as_secs_f64()
    );
}

/// [`fuzz`] with an explicit budget, returning what ran.
pub fn fuzz_for<S>(
    name: &str,
    budget: Duration,
    strategy: S,
    check: impl Fn(S::Value) -> Result<(), TestCaseError>,
) -> Ran
where
    S: Strategy,
    S::Value: std::fmt::Debug,
{
    let start = Instant::now();
    let mut seed: u64 = std::env::var(ENV_FUZZ_SEED)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| {
            start.elapsed().as_nanos() as u64 ^ std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15
        });
    let mut cases = 0u64;
    loop {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        let config = Config {
            cases: BATCH,
            failure_persistence: None,
            ..Config::default()
        };
        let mut runner = TestRunner::new_with_rng(config, rng);
        if let Err(e) = runner.run(&strategy, &check) {
            panic!("fuzz {name} failed (replay with {ENV_FUZZ_SEED}={seed}): {e}");
        }
        cases += u64::from(BATCH);
        if start.elapsed() >= budget {
            return Ran {
                cases,
                elapsed: start.elapsed(),
            };
        }
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn runs_until_the_budget_and_counts_cases() {
        let ran = fuzz_for(
            "sum",
            Duration::from_millis(50),
            any::<(u8, u8)>(),
            |(a, b)| {
                prop_assert_eq!(u16::from(a) + u16::from(b), u16::from(b) + u16::from(a));
                Ok(())
            },
        );
        assert!(ran.cases >= u64::from(BATCH));
    }

    #[test]
    #[should_panic(expected = "replay with CATENA_FUZZ_SEED=")]
    fn a_failure_names_its_seed() {
        fuzz_for("bad", Duration::from_millis(50), 0u32..1000, |x| {
            prop_assert!(x < 500);
            Ok(())
        });
    }
}
