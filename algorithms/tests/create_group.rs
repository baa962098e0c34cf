//! Group-collective creation: random member subsets and orders (reversed,
//! non-contiguous, one member, the whole parent), concurrent creations with
//! different tags, disjoint groups with one tag, members that disagree
//! (`Mismatch` on every member) or never come (`Timeout`), and non-members
//! that provably send nothing; and context ids that stay distinct under
//! concurrent and overlapping creations, with no message crossing over.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use catena_algorithms::prelude::*;
use catena_fabric::Rank;
use catena_sim::{LogGp, Report, Sim, SimRank};
use common::{join, Rng};

fn on_sim<R>(n: u32, body: impl AsyncFn(&SimRank<'_>) -> R) -> (Vec<R>, Report) {
    Sim::new(n, LogGp::default())
        .run(body)
        .expect("every rank finishes")
}

fn map_of(n: u32, order: &[Rank]) -> GroupMap {
    GroupMap::from_ranks(n, order, Strategy::Auto).expect("a valid group")
}

/// The concatenated world ranks of `comm`'s members in its order, by an
/// allreduce on it: wrong if any message crossed from another communicator.
async fn members_by_allreduce<T: Transport>(comm: &Comm<'_, T>) -> Result<String> {
    let me = format!("{},", comm.transport().rank());
    comm.iallreduce(me, |a, b| format!("{a}{b}")).await
}

fn listed(order: &[Rank]) -> String {
    order.iter().map(|w| format!("{w},")).collect()
}

/// Creates the group of `order` on the world (members only) and checks it.
async fn create_and_check(
    t: &SimRank<'_>,
    order: &[Rank],
    tag: u32,
    algorithm: CreateAlgorithm,
) -> std::result::Result<(), String> {
    if !order.contains(&t.rank()) {
        return Ok(());
    }
    let world = Comm::world(t);
    let map = map_of(t.size(), order);
    let comm = world.icreate_group(map, tag, algorithm).await;
    let comm = comm.map_err(|e| format!("rank {}: {e}", t.rank()))?;
    let comm = comm.ok_or("a member got no communicator")?;
    let got = members_by_allreduce(&comm)
        .await
        .map_err(|e| e.to_string())?;
    let rank_ok = order[comm.rank() as usize] == t.rank() && comm.size() as usize == order.len();
    if got != listed(order) || !rank_ok {
        return Err(format!("rank {}: {got} for {order:?}", t.rank()));
    }
    Ok(())
}

/// Creates the group of `order` on `parent` where this process is in it
/// (the call is made when this is called, as a collective's must be).
fn create_if_member<'a, 't, T: Transport>(
    parent: &'a Comm<'t, T>,
    order: &[Rank],
    tag: u32,
) -> impl std::future::Future<Output = Result<Option<Comm<'t, T>>>> + 'a {
    let t = parent.transport();
    let member = order.contains(&t.rank());
    let future =
        member.then(|| parent.icreate_group(map_of(t.size(), order), tag, CreateAlgorithm::Direct));
    async move {
        match future {
            Some(future) => future.await,
            None => Ok(None),
        }
    }
}

#[test]
fn random_subsets_and_orders_by_both_algorithms() {
    for n in [1u32, 2, 3, 7, 16, 33] {
        let mut shapes: Vec<Vec<Rank>> = vec![
            (0..n).collect(),
            (0..n).rev().collect(),
            vec![n / 2],
            (0..n).step_by(3).collect(),
        ];
        for seed in 0..4 {
            let mut rng = Rng::new(seed, n);
            let mut order: Vec<Rank> = (0..n).filter(|_| rng.below(2) == 0).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            shapes.extend((!order.is_empty()).then_some(order));
        }
        for order in &shapes {
            for algorithm in [CreateAlgorithm::Direct, CreateAlgorithm::RecursiveMerge] {
                let (results, _) = on_sim(n, async |t: &SimRank<'_>| {
                    create_and_check(t, order, 3, algorithm).await
                });
                for r in results {
                    r.unwrap_or_else(|e| panic!("{n} ranks, {order:?}, {algorithm:?}: {e}"));
                }
            }
        }
    }
}

#[test]
fn concurrent_creations_with_different_tags_and_disjoint_ones_with_one_tag() {
    let n = 12;
    let a: Vec<Rank> = (0..9).rev().collect();
    let b: Vec<Rank> = (3..12).step_by(2).chain((4..12).step_by(2)).collect();
    let (results, _) = on_sim(n, async |t: &SimRank<'_>| {
        let world = Comm::world(t);
        let me = t.rank();
        // Overlapping groups created concurrently under two tags, polled in
        // a rank-dependent order.
        let (in_a, in_b) = join(
            create_if_member(&world, &a, 10),
            create_if_member(&world, &b, 11),
            me % 2 == 0,
        )
        .await;
        let (in_a, in_b) = (in_a.unwrap(), in_b.unwrap());
        let mut contexts = Vec::new();
        for (comm, order) in [(&in_a, &a), (&in_b, &b)] {
            if let Some(comm) = comm {
                assert_eq!(members_by_allreduce(comm).await.unwrap(), listed(order));
                contexts.push(comm.context());
            }
        }
        // Disjoint groups, one tag.
        let (evens, odds): (Vec<Rank>, Vec<Rank>) = (0..n).partition(|r| r % 2 == 0);
        let mine = if me % 2 == 0 { &evens } else { &odds };
        let comm = world
            .icreate_group(map_of(n, mine), 12, CreateAlgorithm::Direct)
            .await
            .unwrap()
            .expect("a member");
        assert_eq!(members_by_allreduce(&comm).await.unwrap(), listed(mine));
        contexts.push(comm.context());
        contexts
    });
    for (rank, contexts) in results.iter().enumerate() {
        let distinct: BTreeSet<_> = contexts.iter().collect();
        assert_eq!(distinct.len(), contexts.len(), "rank {rank}: {contexts:x?}");
    }
}

#[test]
fn a_member_with_another_group_fails_everyone_with_mismatch_in_time() {
    let n = 8;
    let order: Vec<Rank> = (0..n).collect();
    // Rank 0 lists the last two members swapped: its chain still meets the
    // others', so every member learns of the disagreement.
    let mut swapped = order.clone();
    swapped.swap(6, 7);
    let timeout = Duration::from_millis(50);
    for algorithm in [CreateAlgorithm::Direct, CreateAlgorithm::RecursiveMerge] {
        let (results, _) = on_sim(n, async |t: &SimRank<'_>| {
            let world = Comm::world(t).with_timeout(timeout);
            let mine = if t.rank() == 0 { &swapped } else { &order };
            let got = world.icreate_group(map_of(n, mine), 4, algorithm).await;
            (got.map(|c| c.is_some()), t.now())
        });
        for (rank, (got, at)) in results.into_iter().enumerate() {
            let when = Duration::from_nanos(at.0);
            match algorithm {
                // The direct algorithm compares hashes in its one allreduce.
                CreateAlgorithm::Direct => assert!(
                    matches!(got, Err(Error::Mismatch { .. })),
                    "rank {rank}: {got:?}"
                ),
                // The merge exchanges along the other order: some members
                // detect a mismatch, the others time out.
                CreateAlgorithm::RecursiveMerge => assert!(
                    matches!(got, Err(Error::Mismatch { .. } | Error::Transport(_))),
                    "rank {rank}: {got:?}"
                ),
            }
            assert!(when <= timeout * 2, "rank {rank} ended at {when:?}");
        }
    }
}

#[test]
fn a_member_that_never_calls_times_out_the_others() {
    let n = 6;
    let timeout = Duration::from_millis(20);
    let (results, _) = on_sim(n, async |t: &SimRank<'_>| {
        if t.rank() == 3 {
            return None;
        }
        let world = Comm::world(t).with_timeout(timeout);
        let order: Vec<Rank> = (0..n).collect();
        let got = world
            .icreate_group(map_of(n, &order), 1, CreateAlgorithm::Direct)
            .await;
        Some((got.map(|c| c.is_some()), t.now()))
    });
    for (rank, r) in results.into_iter().enumerate() {
        let Some((got, at)) = r else { continue };
        assert!(
            matches!(
                got,
                Err(Error::Transport(catena_fabric::Error::Timeout { .. }))
            ),
            "rank {rank}: {got:?}"
        );
        assert!(
            Duration::from_nanos(at.0) <= timeout * 2,
            "rank {rank} ended late"
        );
    }
}

#[test]
fn non_members_send_nothing() {
    let n = 16;
    let order: Vec<Rank> = vec![9, 2, 14, 5, 11];
    let run = |non_members_call: bool| {
        let (results, report) = on_sim(n, async |t: &SimRank<'_>| {
            let member = order.contains(&t.rank());
            if !member && !non_members_call {
                return true;
            }
            let world = Comm::world(t);
            let got = world
                .icreate_group(map_of(n, &order), 2, CreateAlgorithm::Direct)
                .await;
            got.unwrap().is_some() == member
        });
        assert!(results.into_iter().all(|ok| ok));
        report.messages
    };
    let (with, without) = (run(true), run(false));
    assert!(without > 0);
    assert_eq!(with, without, "non-members that call send nothing");
}

/// What one communicator looked like on one rank: its context, its members
/// as its map lists them, and its members as an allreduce on it saw them.
type Seen = (u64, String, String);

async fn seen<T: Transport>(comm: &Comm<'_, T>) -> Seen {
    let map: Vec<Rank> = comm.igroup_map().await.unwrap().iter().collect();
    let by_allreduce = members_by_allreduce(comm).await.unwrap();
    (comm.context(), listed(&map), by_allreduce)
}

/// Many communicators made concurrently and overlapping (joined splits,
/// dups, nested splits, created groups) on every rank: every rank's
/// contexts are distinct, communicators that share a context are disjoint
/// groups of one split, and every allreduce saw exactly its own members.
#[test]
fn contexts_stay_distinct_and_traffic_stays_inside() {
    let n = 12;
    let (results, _) = on_sim(n, async |t: &SimRank<'_>| {
        let me = t.rank();
        let world = Comm::world(t);
        let first = me % 2 == 0;
        let (by3, dup) = join(world.isplit(Some(me % 3), me), world.idup(), first).await;
        let (by3, dup) = (by3.unwrap().unwrap(), dup.unwrap());
        let (nested, by2) = join(
            by3.isplit(Some(by3.rank() % 2), 0u32),
            dup.isplit(Some(me / 6), n - me),
            !first,
        )
        .await;
        let (nested, by2) = (nested.unwrap().unwrap(), by2.unwrap().unwrap());
        // Two overlapping created groups on two parents, concurrently.
        let low: Vec<Rank> = (0..8).collect();
        let high: Vec<Rank> = (4..12).rev().collect();
        let (low, high) = join(
            create_if_member(&world, &low, 5),
            create_if_member(&dup, &high, 5),
            first,
        )
        .await;
        let (low, high) = (low.unwrap(), high.unwrap());
        let mut all = vec![seen(&world).await, seen(&dup).await, seen(&by3).await];
        all.push(seen(&nested).await);
        all.push(seen(&by2).await);
        for comm in low.iter().chain(&high) {
            all.push(seen(comm).await);
        }
        all
    });
    let mut groups: BTreeMap<u64, BTreeSet<String>> = BTreeMap::new();
    for (rank, all) in results.iter().enumerate() {
        let contexts: BTreeSet<u64> = all.iter().map(|s| s.0).collect();
        assert_eq!(contexts.len(), all.len(), "rank {rank}: {all:?}");
        for (context, map, by_allreduce) in all {
            assert_eq!(map, by_allreduce, "rank {rank}, context {context:#x}");
            groups.entry(*context).or_default().insert(map.clone());
        }
    }
    // Groups sharing a context (those of one split) have no member in common.
    for (context, members) in groups {
        let mut seen_ranks = BTreeSet::new();
        for group in &members {
            for w in group.split_terminator(',') {
                assert!(
                    seen_ranks.insert(w.to_string()),
                    "context {context:#x}: {members:?}"
                );
            }
        }
    }
}

/// Sequential creations on one parent may reuse a tag, whatever their
/// groups: a member makes its next only once its last returned, every call
/// takes in every message sent to it before it returns, and a pair's
/// messages arrive in order. Overlapping groups that change each round,
/// under seeded delays (a member may start round k + 1 while another is
/// still in round k), each checked by an allreduce of its members.
#[test]
fn sequential_creations_may_reuse_a_tag() {
    for n in [3u32, 8, 13] {
        for seed in 0..4 {
            let rounds: Vec<Vec<Rank>> = (0..12)
                .map(|round| common::random_group(&mut Rng::new(seed * 100 + round, n), n))
                .collect();
            for algorithm in [CreateAlgorithm::Direct, CreateAlgorithm::RecursiveMerge] {
                let sim = Sim::new(n, LogGp::default())
                    .with_delays(catena_sim::Seeded::new(seed, 20_000));
                let (results, _) = sim
                    .run(async |t: &SimRank<'_>| {
                        for order in &rounds {
                            create_and_check(t, order, 7, algorithm).await?;
                        }
                        Ok::<_, String>(())
                    })
                    .expect("every rank finishes");
                for r in results {
                    r.unwrap_or_else(|e| panic!("{n} ranks, seed {seed}, {algorithm:?}: {e}"));
                }
            }
        }
    }
}
