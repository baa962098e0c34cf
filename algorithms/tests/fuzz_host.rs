//! Fuzz targets for communicators in host memory, on a simulated host:
//! the dense split with random groups, colors, keys and comparators (honest
//! ones must give the sequential reference; hostile ones must end every
//! rank with a typed error or a valid split, well before the deadline), and
//! a member that writes garbage into the others' regions while they run
//! collectives (every rank ends by its deadline with a result or a typed
//! error: no panic, no write outside an arena, no simulation stuck).

use crate::split_reference;

use std::cell::Cell;
use std::cmp::Ordering;
use std::time::Duration;

use catena_algorithms::{Comm, Error, Result};
use catena_fabric::{HostMemory, Rma};
use catena_fuzz::proptest::prelude::*;
use catena_sim::{LogGp, Sim, SimRank};
use split_reference::{check_partition, groups_by_color, reference, Expected};

#[derive(Clone, Copy, Debug)]
enum Comparator {
    Natural,
    Reversed,
    Random(u64),
    PerRank,
    Panics { rank: u32 },
}

#[derive(Clone, Debug)]
struct SplitCase {
    colors: Vec<Option<u16>>,
    keys: Vec<i8>,
    comparator: Comparator,
}

fn split_case() -> impl Strategy<Value = SplitCase> {
    let comparator = prop_oneof![
        3 => Just(Comparator::Natural),
        2 => Just(Comparator::Reversed),
        1 => any::<u64>().prop_map(Comparator::Random),
        1 => Just(Comparator::PerRank),
        1 => (0u32..12).prop_map(|rank| Comparator::Panics { rank }),
    ];
    (1usize..=12, 1u16..=4, comparator).prop_flat_map(|(n, palette, comparator)| {
        let color = prop_oneof![1 => Just(None), 5 => (0..palette).prop_map(Some)];
        (
            prop::collection::vec(color, n),
            prop::collection::vec(-3i8..3, n),
        )
            .prop_map(move |(colors, keys)| SplitCase {
                colors,
                keys,
                comparator,
            })
    })
}

const PANIC: &str = "a comparator that panics";

fn next(state: &Cell<u64>) -> u64 {
    state.set(state.get().wrapping_add(0x9E37_79B9_7F4A_7C15));
    let mut z = state.get();
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z ^ (z >> 31)
}

/// What this rank got: its place in its group (id and count from the
/// colors, which a communicator does not keep).
async fn split_rank(t: &SimRank<'_>, case: &SplitCase) -> Result<Expected> {
    let world = Comm::world(t).with_timeout(Duration::from_secs(2));
    let p = t.rank() as usize;
    let state = Cell::new(match case.comparator {
        Comparator::Random(seed) => seed ^ u64::from(t.rank()) << 32,
        _ => 0,
    });
    let order = |a: &i8, b: &i8| match case.comparator {
        Comparator::Natural => a.cmp(b),
        Comparator::Reversed => b.cmp(a),
        Comparator::Random(_) => {
            [Ordering::Less, Ordering::Equal, Ordering::Greater][(next(&state) % 3) as usize]
        }
        Comparator::PerRank if t.rank() % 2 == 0 => a.cmp(b),
        Comparator::PerRank => b.cmp(a),
        Comparator::Panics { rank } if rank == t.rank() => std::panic::panic_any(PANIC),
        Comparator::Panics { .. } => a.cmp(b),
    };
    let comm = match case.comparator {
        Comparator::Natural => world.isplit(case.colors[p], case.keys[p]).await?,
        _ => world.isplit_by(case.colors[p], case.keys[p], order).await?,
    };
    let groups = groups_by_color(&case.colors);
    let count = groups.len() as u32;
    Ok(match comm {
        None => Expected::NotMember { count },
        Some(c) => {
            let chain = c.chain();
            let id = groups.iter().position(|g| g.contains(&p)).unwrap_or(0) as u32;
            Expected::Member {
                rank: chain.rank(),
                size: chain.size(),
                left: chain.left(),
                right: chain.right(),
                id,
                count,
            }
        }
    })
}

fn check_split(case: SplitCase) -> std::result::Result<(), TestCaseError> {
    let n = case.colors.len() as u32;
    let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| split_rank(t, &case).await)
        .map_err(|stuck| TestCaseError::fail(format!("the simulation got stuck: {stuck:?}")))?;
    let world: Vec<u32> = (0..n).collect();
    let honest = matches!(case.comparator, Comparator::Natural | Comparator::Reversed);
    if honest {
        let cmp = |a: &i8, b: &i8| match case.comparator {
            Comparator::Reversed => b.cmp(a),
            _ => a.cmp(b),
        };
        let want = reference(&case.colors, Some(&case.keys), cmp, &world);
        for (p, (got, want)) in results.iter().zip(want).enumerate() {
            match got {
                Ok(got) => prop_assert_eq!(got, &want, "rank {}", p),
                Err(e) => prop_assert!(false, "rank {} failed: {}", p, e),
            }
        }
        return Ok(());
    }
    for (p, r) in results.iter().enumerate() {
        let timed_out = matches!(
            r,
            Err(Error::Transport(catena_fabric::Error::Timeout { .. }))
        );
        prop_assert!(!timed_out, "rank {} waited for the deadline: {:?}", p, r);
    }
    let got: Option<Vec<Expected>> = results.iter().map(|r| r.as_ref().ok().cloned()).collect();
    if let Some(got) = got {
        check_partition(&case.colors, &got, &world).map_err(TestCaseError::fail)?;
    }
    Ok(())
}

#[derive(Clone, Debug)]
struct GarbageCase {
    n: u32,
    attacker: u32,
    /// (victim, offset in its world region, bytes) the attacker writes.
    writes: Vec<(u32, u32, Vec<u8>)>,
}

fn garbage_case() -> impl Strategy<Value = GarbageCase> {
    (2u32..=6).prop_flat_map(|n| {
        let write = (
            0..n,
            0u32..(300 << 10),
            prop::collection::vec(any::<u8>(), 1..64),
        );
        (0..n, prop::collection::vec(write, 1..40)).prop_map(move |(attacker, writes)| {
            GarbageCase {
                n,
                attacker,
                writes,
            }
        })
    })
}

/// Every rank runs collectives; the attacker first writes its garbage into
/// the others' world regions (where the world's team lives).
async fn garbage_rank(t: &SimRank<'_>, case: &GarbageCase) -> Result<()> {
    let world = Comm::world(t).with_timeout(Duration::from_secs(1));
    if t.rank() == case.attacker {
        for (victim, offset, bytes) in &case.writes {
            let peer = t.host_peer(*victim)?;
            // Offsets past a region are refused, never written.
            let _ = t.host_write(&peer, u64::from(*offset), bytes);
            let _ = t.host_store(&peer, u64::from(*offset) & !7, u64::MAX);
        }
    }
    let mut out = [0u64; 300];
    for i in 0..4u64 {
        world.ibarrier().await?;
        world
            .iallreduce_into(&[i; 300], &mut out, |a, b| a ^ b)
            .await?;
        world.ibcast_into(0, &mut out[..3]).await?;
        let _ = world.iallgather(&(t.rank(), i)).await?;
        let _ = world.isplit(Some(t.rank() % 2), i).await?;
    }
    Ok(())
}

fn check_garbage(case: GarbageCase) -> std::result::Result<(), TestCaseError> {
    let sim = Sim::new(case.n, LogGp::default()).with_ranks_per_host(case.n);
    sim.run(async |t: &SimRank<'_>| garbage_rank(t, &case).await)
        .map_err(|stuck| TestCaseError::fail(format!("the simulation got stuck: {stuck:?}")))?;
    Ok(())
}

fn quiet_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if info.payload().downcast_ref::<&str>() != Some(&PANIC) {
            default(info);
        }
    }));
}

#[test]
fn fuzz_dense_split_on_a_simulated_host() {
    quiet_panics();
    catena_fuzz::fuzz("dense split", split_case(), check_split);
}

#[test]
fn fuzz_garbage_in_host_memory() {
    catena_fuzz::fuzz("garbage in host memory", garbage_case(), check_garbage);
}
