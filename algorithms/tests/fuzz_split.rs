//! Fuzz target: split on the simulator with random groups, colors, keys and
//! algorithms. Honest comparators must give the sequential reference;
//! hostile ones (random answers, always Less, different on each rank,
//! intransitive, panicking) must not panic or hang: every rank ends by its
//! virtual deadline with a typed error or a placement, and placements on
//! every rank form a valid split.

use crate::split_reference;

use std::cell::Cell;
use std::cmp::Ordering;
use std::time::Duration;

use catena_algorithms::chain::{split, split_by, Chain, Split};
use catena_algorithms::{Algorithm, Color, Error, Key};
use catena_fabric::Rma;
use catena_fuzz::proptest::prelude::*;
use catena_sim::{LogGp, Sim, SimRank};
use split_reference::{check_partition, observed, reference, Expected};

#[derive(Clone, Copy, Debug)]
enum Comparator {
    /// The key's own order, through `split` (Radix can take it).
    Natural,
    /// Reversed, through `split_by`.
    Reversed,
    /// A fresh random answer on every call, different on every rank.
    Random(u64),
    AlwaysLess,
    /// Natural on even ranks, reversed on odd ones.
    PerRank,
    /// Rock, paper, scissors on the key modulo 3: not transitive.
    Intransitive,
    /// Natural, but panics on this rank from this call on.
    Panics {
        rank: u32,
        after: u32,
    },
}

impl Comparator {
    fn honest(self) -> bool {
        matches!(self, Comparator::Natural | Comparator::Reversed)
    }
}

#[derive(Clone, Debug)]
struct Case {
    algorithm: Algorithm,
    /// By parent rank (the world in order); `None`: not a member.
    colors: Vec<Option<u16>>,
    keys: Option<Vec<i8>>,
    comparator: Comparator,
}

fn algorithms() -> Vec<Algorithm> {
    // Small M, so that a few ranks make several sorters.
    let mut all = Algorithm::ALL.to_vec();
    all.extend([Algorithm::Cheng(2), Algorithm::Cheng(4)]);
    all
}

fn case() -> impl Strategy<Value = Case> {
    let comparator = prop_oneof![
        3 => Just(Comparator::Natural),
        2 => Just(Comparator::Reversed),
        2 => any::<u64>().prop_map(Comparator::Random),
        1 => Just(Comparator::AlwaysLess),
        1 => Just(Comparator::PerRank),
        1 => Just(Comparator::Intransitive),
        2 => (0u32..24, 0u32..6).prop_map(|(rank, after)| Comparator::Panics { rank, after }),
    ];
    // Mostly small; sometimes past 20 members, where the standard sort
    // checks the comparator.
    let n = prop_oneof![4 => 1usize..=12, 1 => 13usize..=24];
    (n, 1u16..=4, prop::sample::select(algorithms()), comparator).prop_flat_map(
        |(n, palette, algorithm, comparator)| {
            let color = prop_oneof![1 => Just(None), 5 => (0..palette).prop_map(Some)];
            let keys = prop::option::weighted(0.8, prop::collection::vec(-3i8..3, n));
            (prop::collection::vec(color, n), keys).prop_map(move |(colors, keys)| Case {
                algorithm,
                colors,
                keys,
                comparator,
            })
        },
    )
}

const COMPARATOR_PANIC: &str = "a comparator that panics";

/// A splitmix64 step: the hostile comparator's answers.
fn next(state: &Cell<u64>) -> u64 {
    state.set(state.get().wrapping_add(0x9E37_79B9_7F4A_7C15));
    let mut z = state.get();
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn run_rank(t: &SimRank<'_>, case: &Case) -> catena_algorithms::Result<Split> {
    let p = t.rank() as usize;
    let parent = Chain::world(t, 7);
    // Virtual time: a hostile comparator must not stretch it either.
    let deadline = t.deadline_in(Duration::from_secs(2));
    let color = case.colors[p].map_or(Color::NotMember, Color::Is);
    let key = match &case.keys {
        Some(keys) => Key::Is(keys[p]),
        None => Key::ParentOrder,
    };
    let calls = Cell::new(0u32);
    let state = Cell::new(match case.comparator {
        Comparator::Random(seed) => seed ^ u64::from(t.rank()) << 32,
        _ => 0,
    });
    let order = |a: &i8, b: &i8| -> Ordering {
        calls.set(calls.get() + 1);
        match case.comparator {
            Comparator::Natural => a.cmp(b),
            Comparator::Reversed => b.cmp(a),
            Comparator::Random(_) => {
                [Ordering::Less, Ordering::Equal, Ordering::Greater][(next(&state) % 3) as usize]
            }
            Comparator::AlwaysLess => Ordering::Less,
            Comparator::PerRank if t.rank() % 2 == 0 => a.cmp(b),
            Comparator::PerRank => b.cmp(a),
            Comparator::Intransitive => match (i16::from(*b) - i16::from(*a)).rem_euclid(3) {
                0 => Ordering::Equal,
                1 => Ordering::Less,
                _ => Ordering::Greater,
            },
            Comparator::Panics { rank, after } => {
                if t.rank() == rank && calls.get() > after {
                    std::panic::panic_any(COMPARATOR_PANIC);
                }
                a.cmp(b)
            }
        }
    };
    match case.comparator {
        Comparator::Natural => split(t, &parent, color, key, case.algorithm, deadline).await,
        _ => split_by(t, &parent, color, key, order, case.algorithm, deadline).await,
    }
}

fn check(case: Case) -> Result<(), TestCaseError> {
    let n = case.colors.len();
    let sim = Sim::new(n as u32, LogGp::default());
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| run_rank(t, &case).await)
        .map_err(|stuck| TestCaseError::fail(format!("the simulation got stuck: {stuck:?}")))?;
    let world: Vec<u32> = (0..n as u32).collect();
    let radix_refuses = case.algorithm == Algorithm::Radix
        && case.keys.is_some()
        && case.colors.iter().any(Option::is_some)
        && !matches!(case.comparator, Comparator::Natural);
    if radix_refuses {
        for r in &results {
            prop_assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
        }
        return Ok(());
    }
    if case.comparator.honest() {
        let cmp = |a: &i8, b: &i8| match case.comparator {
            Comparator::Reversed => b.cmp(a),
            _ => a.cmp(b),
        };
        let want = reference(&case.colors, case.keys.as_deref(), cmp, &world);
        for (p, (got, want)) in results.iter().zip(want).enumerate() {
            match got {
                Ok(got) => prop_assert_eq!(observed(got), want, "rank {}", p),
                Err(e) => prop_assert!(false, "rank {} failed: {}", p, e),
            }
        }
        return Ok(());
    }
    // Hostile: errors are fine, but found, not waited for: one rank's fault
    // reaches the others before their deadline. Placements everywhere must
    // be a valid split, in any order within groups.
    for (p, r) in results.iter().enumerate() {
        let timed_out = matches!(
            r,
            Err(Error::Transport(catena_fabric::Error::Timeout { .. }))
        );
        prop_assert!(!timed_out, "rank {} waited for the deadline: {:?}", p, r);
    }
    let got: Option<Vec<Expected>> = results
        .iter()
        .map(|r| r.as_ref().ok().map(observed))
        .collect();
    if let Some(got) = got {
        check_partition(&case.colors, &got, &world).map_err(TestCaseError::fail)?;
    }
    Ok(())
}

/// The comparators' own panics are expected: they are not printed.
fn quiet_comparator_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&COMPARATOR_PANIC) {
            default(info);
        }
    }));
}

#[test]
fn fuzz_split_on_the_simulator() {
    quiet_comparator_panics();
    catena_fuzz::fuzz("split", case(), check);
}
