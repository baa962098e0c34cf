//! The bulk collectives (scatter+allgather broadcast, ring allreduce) byte
//! for byte against sequential references: on the simulator for P in
//! {1, 2, 3, 5, 8} in a larger world, on shm processes; message sizes 0, 1,
//! not divisible by P and large; several roots; rank lists in world order
//! and permuted. Then each bad input and its typed error.

use crate::common;

use std::time::Duration;

use catena_algorithms::chain::{
    ring_allreduce, ring_allreduce_stream, scatter_allgather, scatter_allgather_stream, BulkCall,
};
use catena_algorithms::Error;
use catena_fabric::{Rank, Rma, Transport};
use catena_sim::{LogGp, Sim, SimRank};
use common::{deadline, Rng};

const GROUP_SIZES: [u32; 5] = [1, 2, 3, 5, 8];

/// One call: the rank list, the broadcast's root, the length (bytes for the
/// broadcast, elements for the allreduce), the seed of the inputs, and the
/// allreduces' results computed sequentially.
struct Case {
    ranks: Vec<Rank>,
    root: Rank,
    len: usize,
    seed: u64,
    sum: Vec<i64>,
    small_sum: Vec<u16>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ranks {:?}, root {}, length {}, seed {:#x}",
            self.ranks, self.root, self.len, self.seed
        )
    }
}

/// `p` of the world's ranks in random order.
fn permuted(world: u32, p: u32, rng: &mut Rng) -> Vec<Rank> {
    let mut all: Vec<Rank> = (0..world).collect();
    for i in (1..all.len()).rev() {
        all.swap(i, rng.below(i as u64 + 1) as usize);
    }
    all.truncate(p as usize);
    all
}

/// The cases for groups of `p` in a world of `world`, the same on every
/// process: ranks 0..p in order and a permuted subset of the world, each
/// with sizes 0, 1, a few not divisible by p and `large`, each from the
/// first, the last and a random member.
fn cases_for(world: u32, p: u32, large: usize, seed: u64) -> Vec<Case> {
    let mut rng = Rng::new(seed, p);
    let lists = [(0..p).collect::<Vec<_>>(), permuted(world, p, &mut rng)];
    let mut out = Vec::new();
    let p = p as usize;
    for ranks in lists {
        for len in [0, 1, 7 * p + 1, 14 * p - 1, large] {
            let random = ranks[rng.below(p as u64) as usize];
            for root in [ranks[0], ranks[p - 1], random] {
                let mut case = Case {
                    ranks: ranks.clone(),
                    root,
                    len,
                    seed: rng.next(),
                    sum: Vec::new(),
                    small_sum: Vec::new(),
                };
                case.sum = sequential_sum(&case, contribution, wrapping_sum);
                case.small_sum = sequential_sum(&case, small_contribution, wrapping_sum_u16);
                out.push(case);
            }
        }
    }
    out
}

fn message(case: &Case) -> Vec<u8> {
    let mut rng = Rng::new(case.seed, 0);
    (0..case.len).map(|_| rng.next() as u8).collect()
}

fn contribution(case: &Case, rank: Rank) -> Vec<i64> {
    let mut rng = Rng::new(case.seed, 1 + rank);
    (0..case.len).map(|_| rng.next() as i64).collect()
}

/// u16 elements: two bytes, so pieces start at odd byte offsets of a
/// message when they are taken as bytes.
fn small_contribution(case: &Case, rank: Rank) -> Vec<u16> {
    let mut rng = Rng::new(case.seed, 1000 + rank);
    (0..case.len).map(|_| rng.next() as u16).collect()
}

fn wrapping_sum(acc: &mut [i64], other: &[i64]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.wrapping_add(*b);
    }
}

fn wrapping_sum_u16(acc: &mut [u16], other: &[u16]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.wrapping_add(*b);
    }
}

/// The sum over the members, element by element, one member after another.
fn sequential_sum<E: Copy>(
    case: &Case,
    input: impl Fn(&Case, Rank) -> Vec<E>,
    add: impl Fn(&mut [E], &[E]),
) -> Vec<E> {
    let mut sum = input(case, case.ranks[0]);
    for &r in &case.ranks[1..] {
        add(&mut sum, &input(case, r));
    }
    sum
}

/// Every call this process takes part in, each on a context of its own,
/// checked against the references; `what` names the failing case.
async fn run_cases<T: Transport>(t: &T, cases: &[Case]) -> Result<(), String> {
    let me = t.rank();
    let deadline = deadline(t);
    for (i, case) in cases.iter().enumerate() {
        if !case.ranks.contains(&me) {
            continue;
        }
        let what = |op: &str| format!("{op} at rank {me}, {case:?}");
        let ctx = 1000 + 4 * i as u64;
        let expected = message(case);

        // Broadcast in place.
        let mut data = match me == case.root {
            true => expected.clone(),
            false => vec![0xEE; case.len],
        };
        scatter_allgather(
            BulkCall {
                t,
                ranks: &case.ranks,
                context: ctx,
                deadline,
            },
            case.root,
            &mut data,
        )
        .await
        .map_err(|e| format!("{}: {e}", what("scatter_allgather")))?;
        if data != expected {
            return Err(format!("{}: wrong bytes", what("scatter_allgather")));
        }

        // Streamed: every byte arrives exactly once, at every member.
        let mut got = vec![0u8; case.len];
        let mut delivered = 0;
        scatter_allgather_stream(
            BulkCall {
                t,
                ranks: &case.ranks,
                context: ctx + 1,
                deadline,
            },
            case.root,
            case.len,
            |offset, out| out.copy_from_slice(&expected[offset..offset + out.len()]),
            |offset, piece| {
                got[offset..offset + piece.len()].copy_from_slice(piece);
                delivered += piece.len();
            },
        )
        .await
        .map_err(|e| format!("{}: {e}", what("scatter_allgather_stream")))?;
        if got != expected || delivered != case.len {
            return Err(format!(
                "{}: wrong bytes, or {delivered} delivered",
                what("scatter_allgather_stream")
            ));
        }

        // Allreduce in place, i64.
        let mut elements = contribution(case, me);
        ring_allreduce(
            BulkCall {
                t,
                ranks: &case.ranks,
                context: ctx + 2,
                deadline,
            },
            &mut elements,
            wrapping_sum,
        )
        .await
        .map_err(|e| format!("{}: {e}", what("ring_allreduce")))?;
        if elements != case.sum {
            return Err(format!("{}: wrong sums", what("ring_allreduce")));
        }

        // Streamed, u16: every element's sum arrives exactly once.
        let mine = small_contribution(case, me);
        let mut sums = vec![0u16; case.len];
        let mut delivered = 0;
        ring_allreduce_stream(
            BulkCall {
                t,
                ranks: &case.ranks,
                context: ctx + 3,
                deadline,
            },
            case.len,
            |offset, out| out.copy_from_slice(&mine[offset..offset + out.len()]),
            wrapping_sum_u16,
            |offset, reduced| {
                sums[offset..offset + reduced.len()].copy_from_slice(reduced);
                delivered += reduced.len();
            },
        )
        .await
        .map_err(|e| format!("{}: {e}", what("ring_allreduce_stream")))?;
        if sums != case.small_sum || delivered != case.len {
            return Err(format!(
                "{}: wrong sums, or {delivered} delivered",
                what("ring_allreduce_stream")
            ));
        }
    }
    Ok(())
}

#[test]
fn sim_matches_the_sequential_references() {
    for p in GROUP_SIZES {
        // Two ranks stay out, so permuted lists skip some.
        let world = p + 2;
        let cases = cases_for(world, p, (1 << 20) + 13, 0xB01C);
        let sim = Sim::new(world, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| run_cases(t, &cases).await)
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("P = {p}, world rank {rank}: {e}"));
        }
    }
}

#[test]
fn shm_matches_the_sequential_references() {
    const WORLD: u32 = 8;
    let case = catena_testkit::test_name(module_path!(), "shm_matches_the_sequential_references");
    catena_testkit::run_case(&case, WORLD, |t| {
        let cases: Vec<Case> = GROUP_SIZES
            .iter()
            .flat_map(|&p| cases_for(WORLD, p, (256 << 10) + 13, 0x5E1F))
            .collect();
        catena_fabric::block_on(t, run_cases(t, &cases)).map_err(catena_fabric::Error::Protocol)
    });
}

/// What each of 4 simulated ranks got from `body`.
fn on_sim<R>(body: impl AsyncFn(&SimRank<'_>) -> R) -> Vec<R> {
    Sim::new(4, LogGp::default())
        .run(body)
        .expect("every rank finishes")
        .0
}

fn short_deadline<T: Rma>(t: &T) -> catena_fabric::Time {
    t.deadline_in(Duration::from_millis(10))
}

/// A bulk call among ranks 0 to 3 with a short deadline.
fn of_four<T: Rma>(t: &T, context: catena_fabric::ContextId) -> BulkCall<'_, T> {
    BulkCall {
        t,
        ranks: &[0, 1, 2, 3],
        context,
        deadline: short_deadline(t),
    }
}

fn invalid_argument<R: std::fmt::Debug>(r: catena_algorithms::Result<R>, says: &str) {
    match r {
        Err(Error::InvalidArgument(message)) if message.contains(says) => {}
        other => panic!("expected InvalidArgument saying {says:?}, got {other:?}"),
    }
}

#[test]
fn bad_rank_lists_fail_before_anything_is_sent() {
    let bcast = async |t: &SimRank<'_>, ranks: &[Rank], root: Rank| {
        let mut data = [7u8; 10];
        scatter_allgather(
            BulkCall {
                t,
                ranks,
                context: 1,
                deadline: short_deadline(t),
            },
            root,
            &mut data,
        )
        .await
    };
    let allreduce = async |t: &SimRank<'_>, ranks: &[Rank]| {
        let mut data = [7i64; 10];
        ring_allreduce(
            BulkCall {
                t,
                ranks,
                context: 2,
                deadline: short_deadline(t),
            },
            &mut data,
            wrapping_sum,
        )
        .await
    };
    for r in on_sim(async |t: &SimRank<'_>| bcast(t, &[], 0).await) {
        invalid_argument(r, "an empty rank list");
    }
    for r in on_sim(async |t: &SimRank<'_>| allreduce(t, &[]).await) {
        invalid_argument(r, "an empty rank list");
    }
    for r in on_sim(async |t: &SimRank<'_>| bcast(t, &[0, 1, 2, 3], 9).await) {
        invalid_argument(r, "the root 9 is not in the rank list");
    }
    for r in on_sim(async |t: &SimRank<'_>| bcast(t, &[3, 1, 0, 2, 1], 0).await) {
        invalid_argument(r, "rank 1 appears twice");
    }
    for r in on_sim(async |t: &SimRank<'_>| allreduce(t, &[2, 0, 3, 1, 2]).await) {
        invalid_argument(r, "rank 2 appears twice");
    }
    // A process that calls a collective of a list without it.
    let outsider = on_sim(async |t: &SimRank<'_>| match t.rank() {
        3 => Some((bcast(t, &[0, 1], 0).await, allreduce(t, &[2, 1]).await)),
        _ => None,
    });
    let (b, a) = outsider.into_iter().flatten().next().expect("rank 3's");
    invalid_argument(b, "this process (rank 3) is not in the rank list");
    invalid_argument(a, "this process (rank 3) is not in the rank list");
    // A rank outside the job of 4.
    for r in on_sim(async |t: &SimRank<'_>| allreduce(t, &[0, 1, 2, 3, 4]).await) {
        assert!(
            matches!(
                r,
                Err(Error::Transport(catena_fabric::Error::InvalidRank {
                    rank: 4,
                    size: 4
                }))
            ),
            "{r:?}"
        );
    }
}

#[test]
fn lengths_that_differ_across_processes_are_a_mismatch() {
    // The root broadcasts 10 bytes (pieces of 3, 3, 2, 2), the others
    // expect 13 (4, 3, 3, 3): ranks 1 and 2 get pieces of the wrong length,
    // and the others wait for pieces that never come until the deadline.
    let results = on_sim(async |t: &SimRank<'_>| {
        let mut data = vec![1u8; if t.rank() == 0 { 10 } else { 13 }];
        scatter_allgather(of_four(t, 1), 0, &mut data).await
    });
    assert_mismatch(&results, &[1, 2]);
    // Rank 1 sums 6 elements (pieces of 2, 2, 1, 1), the others 4: rank 1
    // gets a piece too short from rank 0, and rank 2 one too long from it.
    let results = on_sim(async |t: &SimRank<'_>| {
        let mut data = vec![1i64; if t.rank() == 1 { 6 } else { 4 }];
        ring_allreduce(of_four(t, 2), &mut data, wrapping_sum).await
    });
    assert_mismatch(&results, &[1, 2]);
}

/// Ranks `mismatched` found a mismatch, and every other one timed out.
fn assert_mismatch(results: &[catena_algorithms::Result<()>], mismatched: &[Rank]) {
    for (rank, r) in results.iter().enumerate() {
        match r {
            Err(Error::Mismatch { .. }) if mismatched.contains(&(rank as Rank)) => {}
            Err(Error::Transport(catena_fabric::Error::Timeout { .. }))
                if !mismatched.contains(&(rank as Rank)) => {}
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

#[test]
fn zero_sized_elements_and_panicking_operations_are_errors() {
    for r in on_sim(async |t: &SimRank<'_>| {
        let mut data = [(); 4];
        ring_allreduce(of_four(t, 2), &mut data, |_, _| {}).await
    }) {
        invalid_argument(r, "zero-sized elements");
    }
    let results = on_sim(async |t: &SimRank<'_>| {
        let mut data = [1i64; 8];
        let op = |_: &mut [i64], _: &[i64]| panic!("no sums today");
        ring_allreduce(of_four(t, 2), &mut data, op).await
    });
    // Every rank folds before it can wait on a peer that gave up.
    for r in results {
        assert!(
            matches!(&r, Err(Error::UserCode { message, .. }) if message == "no sums today"),
            "{r:?}"
        );
    }
}

/// A stream length near `usize::MAX` is an error where the message would
/// be held (the broadcast's root; every allreduce process), not an abort.
#[test]
fn lengths_memory_cannot_hold_are_errors() {
    let results = on_sim(async |t: &SimRank<'_>| {
        let deadline = short_deadline(t);
        let bcast = scatter_allgather_stream(
            BulkCall {
                t,
                ranks: &[t.rank()],
                context: 1,
                deadline,
            },
            t.rank(),
            usize::MAX,
            |_, _| {},
            |_, _| {},
        )
        .await;
        let allreduce = ring_allreduce_stream::<_, u64>(
            BulkCall {
                t,
                ranks: &[t.rank()],
                context: 2,
                deadline,
            },
            usize::MAX,
            |_, _| {},
            |_, _| {},
            |_, _| {},
        )
        .await;
        (bcast, allreduce)
    });
    for (bcast, allreduce) in results {
        invalid_argument(bcast, "does not fit in memory");
        invalid_argument(allreduce, "does not fit in memory");
    }
}
