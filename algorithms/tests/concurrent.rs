//! Collectives called one after the other on one chain but run concurrently
//! (their futures joined, polled in a different order on different ranks)
//! give what they give when run one at a time: tags and contexts are handed
//! out in call order, as MPI requires of nonblocking collectives.

use crate::common;

use catena_algorithms::chain::{allgather, allreduce, bcast, scan, split, Chain, Split};
use catena_algorithms::{Algorithm, Color, Key};
use catena_fabric::{Rank, Transport};
use catena_sim::{LogGp, Sim, SimRank};
use common::join;

/// What a member sees of its group.
type Seen = Option<(u32, u32, Option<Rank>, Option<Rank>, u32, u32)>;

fn seen(split: &Split) -> Seen {
    split.group().map(|g| {
        let c = &g.chain;
        (c.rank(), c.size(), c.left(), c.right(), g.id, g.count)
    })
}

/// Split A: three colors, reversed keys, rank 4 left out. Split B: two
/// colors, keys that tie in pairs (ties go by parent rank).
fn colors(rank: u32) -> (Color<u32>, Key<i64>, Color<u32>, Key<i64>) {
    let a = if rank == 4 {
        Color::NotMember
    } else {
        Color::Is(rank % 3)
    };
    (
        a,
        Key::Is(-i64::from(rank)),
        Color::Is(rank % 2 * 1000),
        Key::Is(i64::from(rank / 2)),
    )
}

/// The sum of the world ranks of a member's group, by an allreduce on it.
async fn group_sum<T: Transport>(t: &T, split: &Split) -> catena_algorithms::Result<Option<u32>> {
    match split.group() {
        None => Ok(None),
        Some(g) => Ok(Some(
            allreduce(t, &g.chain, t.rank(), |a, b| a + b, common::deadline(t)).await?,
        )),
    }
}

/// Two splits, one after the other and then joined; and allreduces on the
/// groups of the joined ones, joined too. Returns the mismatches.
async fn two_splits<T: Transport>(t: &T, algorithm: Algorithm, context: u64) -> Vec<String> {
    let deadline = common::deadline(t);
    let (ca, ka, cb, kb) = colors(t.rank());
    let a_first = t.rank() % 2 == 0;
    let sequential = Chain::world(t, context);
    let one = split(t, &sequential, ca.clone(), ka.clone(), algorithm, deadline).await;
    let two = split(t, &sequential, cb.clone(), kb.clone(), algorithm, deadline).await;
    let concurrent = Chain::world(t, context + 1);
    // Called in the same order everywhere, polled in rank-dependent order.
    let first = split(t, &concurrent, ca, ka, algorithm, deadline);
    let second = split(t, &concurrent, cb, kb, algorithm, deadline);
    let (first, second) = join(first, second, a_first).await;
    let mut wrong = Vec::new();
    let rank = t.rank();
    match (one, two, first, second) {
        (Ok(one), Ok(two), Ok(first), Ok(second)) => {
            if (seen(&one), seen(&two)) != (seen(&first), seen(&second)) {
                wrong.push(format!(
                    "{algorithm}, rank {rank}: joined splits gave {:?} and {:?}, \
                     one at a time {:?} and {:?}",
                    seen(&first),
                    seen(&second),
                    seen(&one),
                    seen(&two)
                ));
            }
            let sums = (group_sum(t, &one).await, group_sum(t, &two).await);
            let joined = join(group_sum(t, &first), group_sum(t, &second), a_first).await;
            let (sums, joined) = (format!("{sums:?}"), format!("{joined:?}"));
            if sums != joined {
                wrong.push(format!(
                    "{algorithm}, rank {rank}: sums over the joined splits' groups {joined}, \
                     over the others' {sums}"
                ));
            }
        }
        other => wrong.push(format!("{algorithm}, rank {rank}: {other:?}")),
    }
    wrong
}

/// Scans, allreduces and tree collectives joined in pairs, against the
/// same calls one at a time.
async fn joined_collectives<T: Transport>(t: &T) -> catena_algorithms::Result<Vec<String>> {
    let deadline = common::deadline(t);
    let a_first = t.rank() % 2 == 1;
    let r = t.rank();
    let sequential = Chain::world(t, 50);
    let concurrent = Chain::world(t, 51);
    let mut wrong = Vec::new();
    let alone = (
        allreduce(t, &sequential, r, |a, b| a + b, deadline).await?,
        scan(t, &sequential, r * 10, |a, b| a + b, deadline).await?,
    );
    let (x, y) = join(
        allreduce(t, &concurrent, r, |a, b| a + b, deadline),
        scan(t, &concurrent, r * 10, |a, b| a + b, deadline),
        a_first,
    )
    .await;
    let joined = (x?, y?);
    if alone != joined {
        wrong.push(format!(
            "rank {r}: joined allreduce and scan {joined:?}, alone {alone:?}"
        ));
    }
    // The first tree collectives on a chain also find its neighbours.
    let root = t.size() - 1;
    let value = (r == root).then_some(r + 5);
    let alone = (
        bcast(t, &sequential, root, value, deadline).await?,
        allgather(t, &sequential, &r, deadline).await?,
    );
    let (x, y) = join(
        bcast(t, &concurrent, root, value, deadline),
        allgather(t, &concurrent, &r, deadline),
        a_first,
    )
    .await;
    let joined = (x?, y?);
    if alone != joined {
        wrong.push(format!(
            "rank {r}: joined bcast and allgather {joined:?}, alone {alone:?}"
        ));
    }
    Ok(wrong)
}

const ALGORITHMS: [Algorithm; 8] = [
    Algorithm::Bitonic,
    Algorithm::Hash,
    Algorithm::Hash64,
    Algorithm::AllgatherGroup,
    Algorithm::GatherScatter,
    Algorithm::Cheng(2),
    Algorithm::Radix,
    Algorithm::Auto,
];

#[test]
fn sim_joined_splits_match_splits_one_at_a_time() {
    for n in [2, 7, 13] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| {
                let mut wrong = Vec::new();
                for (i, algorithm) in ALGORITHMS.into_iter().enumerate() {
                    wrong.extend(two_splits(t, algorithm, 10 + 2 * i as u64).await);
                }
                wrong
            })
            .expect("every rank finishes");
        let wrong: Vec<String> = results.into_iter().flatten().collect();
        assert!(wrong.is_empty(), "{n} ranks: {wrong:#?}");
    }
}

#[test]
fn sim_joined_collectives_match_collectives_one_at_a_time() {
    for n in [1, 2, 5, 13] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| joined_collectives(t).await)
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            let wrong = r.unwrap_or_else(|e| panic!("rank {rank} of {n}: {e}"));
            assert!(wrong.is_empty(), "{n} ranks: {wrong:#?}");
        }
    }
}
