//! The world's collectives across hosts, in two levels (inside each host,
//! then across one leader per host), against sequential references: a
//! barrier, broadcasts from every root, reduces and allreduces with a
//! non-commutative operation (which shows the fold's order), scans both
//! ways, gathers, scatters and allgathers of values and of buffers, on
//! hosts of consecutive ranks and on hosts dealt ranks in turn (where the
//! folds stay flat), calls joined before the levels are built, commutative
//! folds (which take the levels on dealt hosts too), a member's buffer of
//! another length, bad roots, a dup, and fewer messages than the flat
//! path; and the references on real processes across fake hosts.

use crate::common;

use catena_algorithms::prelude::*;
use catena_fabric::Rank;
use catena_sim::{LogGp, Sim, SimRank};

/// A 2x2 matrix product mod 2^64: associative, not commutative.
fn mul(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    let m = |x: u64, y: u64| x.wrapping_mul(y);
    [
        m(a[0], b[0]).wrapping_add(m(a[1], b[2])),
        m(a[0], b[1]).wrapping_add(m(a[1], b[3])),
        m(a[2], b[0]).wrapping_add(m(a[3], b[2])),
        m(a[2], b[1]).wrapping_add(m(a[3], b[3])),
    ]
}

fn matrix(rank: Rank, i: u64) -> [u64; 4] {
    let r = u64::from(rank);
    [r + 1, i + 2 * r, 3 + r * i, r * r + 1]
}

fn product(n: u32, i: u64) -> [u64; 4] {
    (0..n).fold([1, 0, 0, 1], |acc, r| mul(&acc, &matrix(r, i)))
}

fn word(rank: Rank) -> String {
    format!("<{rank}>")
}

/// Every two-level collective of the world on `t`, then of a split of it
/// and of a group created from it that span its hosts, against references.
async fn check<T: Transport>(t: &T) -> Result<()> {
    let world = Comm::world(t).with_timeout(common::TIMEOUT);
    check_on(&world).await?;
    // Every other pair of ranks, which keeps two members on hosts of
    // four ranks (and hosts of two whole or empty).
    let n = world.size();
    let color = (world.rank() / 2) % 2;
    let split = world.isplit(Some(color), world.rank()).await?;
    check_on(&split.expect("every rank has a color")).await?;
    let even_pairs: Vec<u32> = (0..n).filter(|r| (r / 2) % 2 == 0).collect();
    let map = GroupMap::from_ranks(n, &even_pairs, Strategy::Auto)?;
    if let Some(group) = world.icreate_group(map, 7, CreateAlgorithm::Direct).await? {
        check_on(&group).await?;
    }
    Ok(())
}

/// Every collective of `world` (a communicator) against references.
async fn check_on<T: Transport>(world: &Comm<'_, T>) -> Result<()> {
    let (rank, n) = (world.rank(), world.size());
    world.ibarrier().await?;
    for root in 0..n {
        let value = (rank == root).then(|| format!("from {root}"));
        assert_eq!(world.ibcast(root, value).await?, format!("from {root}"));
        let mut buf: Vec<u64> = match rank == root {
            true => (0..37).map(|i| i * u64::from(root + 1)).collect(),
            false => vec![0; 37],
        };
        world.ibcast_into(root, &mut buf).await?;
        let want: Vec<u64> = (0..37).map(|i| i * u64::from(root + 1)).collect();
        assert_eq!(buf, want, "rank {rank}: bcast_into from {root}");
    }
    let all: String = (0..n).map(word).collect();
    for root in [0, n / 2, n - 1] {
        let got = world
            .ireduce(root, word(rank), |a, b| format!("{a}{b}"))
            .await?;
        let want = (rank == root).then(|| all.clone());
        assert_eq!(got, want, "rank {rank}: reduce to {root} in rank order");
    }
    let got = world
        .iallreduce(word(rank), |a, b| format!("{a}{b}"))
        .await?;
    assert_eq!(got, all, "rank {rank}: the fold in rank order");
    let sum = world.iallreduce(u64::from(rank) + 1, |a, b| a + b).await?;
    assert_eq!(sum, u64::from(n) * u64::from(n + 1) / 2);
    let sum = world
        .iallreduce_commutative(u64::from(rank) + 1, |a, b| a + b)
        .await?;
    assert_eq!(sum, u64::from(n) * u64::from(n + 1) / 2);
    let send: Vec<u64> = (0..9).map(|i| i * u64::from(rank)).collect();
    let mut recv = vec![0u64; 9];
    world
        .iallreduce_into_commutative(&send, &mut recv, |a, b| a.wrapping_add(*b))
        .await?;
    let ranks = u64::from(n) * u64::from(n - 1) / 2;
    assert_eq!(recv, (0..9).map(|i| i * ranks).collect::<Vec<_>>());
    let send: Vec<[u64; 4]> = (0..5).map(|i| matrix(rank, i)).collect();
    let mut recv = vec![[0u64; 4]; 5];
    world.iallreduce_into(&send, &mut recv, mul).await?;
    let want: Vec<[u64; 4]> = (0..5).map(|i| product(n, i)).collect();
    assert_eq!(recv, want, "rank {rank}: allreduce_into in rank order");
    for root in [0, n / 2, n - 1] {
        let at_root = rank == root;
        let got = world.igather(root, &word(rank)).await?;
        let want = at_root.then(|| (0..n).map(word).collect::<Vec<_>>());
        assert_eq!(got, want, "rank {rank}: gather to {root}");
        let values = at_root.then(|| (0..n).map(|r| word(r + root)).collect());
        let got: String = world.iscatter(root, values).await?;
        assert_eq!(got, word(rank + root), "rank {rank}: scatter from {root}");
        let send: Vec<u32> = (0..3).map(|i| rank * 10 + i).collect();
        let mut all = vec![0u32; 3 * n as usize];
        let recv = at_root.then_some(&mut all[..]);
        world.igather_into(root, &send, recv).await?;
        let every: Vec<u32> = (0..n)
            .flat_map(|r| (0..3).map(move |i| r * 10 + i))
            .collect();
        if at_root {
            assert_eq!(all, every, "rank {rank}: gather_into to {root}");
        }
        let mut piece = [0u32; 3];
        let send = at_root.then_some(&every[..]);
        world.iscatter_into(root, send, &mut piece).await?;
        assert_eq!(
            piece[..],
            every[3 * rank as usize..][..3],
            "scatter_into from {root}"
        );
        let send: Vec<[u64; 4]> = (0..5).map(|i| matrix(rank, i)).collect();
        let mut folded = vec![[0u64; 4]; 5];
        let recv = at_root.then_some(&mut folded[..]);
        world.ireduce_into(root, &send, recv, mul).await?;
        if at_root {
            let want: Vec<[u64; 4]> = (0..5).map(|i| product(n, i)).collect();
            assert_eq!(
                folded, want,
                "rank {rank}: reduce_into to {root} in rank order"
            );
        }
    }
    let words = |run: std::ops::Range<u32>| run.map(word).collect::<String>();
    let cat = |a: &String, b: &String| format!("{a}{b}");
    assert_eq!(world.iscan(word(rank), cat).await?, words(0..rank + 1));
    let got = world.iexscan(word(rank), cat).await?;
    assert_eq!(
        got,
        (rank > 0).then(|| words(0..rank)),
        "rank {rank}: exscan"
    );
    let scan = world
        .idouble_scan(matrix(rank, 1), word(rank), mul, cat)
        .await?;
    let product_of =
        |run: std::ops::Range<u32>| run.fold([1, 0, 0, 1], |acc, r| mul(&acc, &matrix(r, 1)));
    assert_eq!(
        scan.inclusive_lr,
        product_of(0..rank + 1),
        "rank {rank}: scan"
    );
    assert_eq!(scan.exclusive_lr, (rank > 0).then(|| product_of(0..rank)));
    assert_eq!(
        scan.inclusive_rl,
        words(rank..n),
        "rank {rank}: scan right to left"
    );
    let want = (rank + 1 < n).then(|| words(rank + 1..n));
    assert_eq!(scan.exclusive_rl, want, "rank {rank}: exscan right to left");
    let got = world.iallgather(&word(rank)).await?;
    assert_eq!(got, (0..n).map(word).collect::<Vec<_>>());
    let send = [rank, rank * rank];
    let mut pairs = vec![0u32; 2 * n as usize];
    world.iallgather_into(&send, &mut pairs).await?;
    let want: Vec<u32> = (0..n).flat_map(|r| [r, r * r]).collect();
    assert_eq!(pairs, want, "rank {rank}: allgather_into");
    // A dup has levels of its own; calls on both keep apart.
    let dup = world.idup().await?;
    let got = dup.iallreduce(word(rank), |a, b| format!("{a}{b}")).await?;
    assert_eq!(got, all, "rank {rank}: the dup's fold");
    let value = (rank == n - 1).then_some(n);
    let (on_dup, on_world) = common::join(
        dup.ibcast(n - 1, value),
        world.iallreduce(1u32, |a, b| a + b),
        rank % 2 == 0,
    )
    .await;
    assert_eq!((on_dup?, on_world?), (n, n));
    dup.ibarrier().await?;
    world.ibarrier().await?;
    Ok(())
}

fn check_blocking<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, check(t)).map_err(common::to_fabric)
}

catena_testkit::across_hosts_tests!(levels_across_hosts: check_blocking);

fn run_all(sim: Sim, what: &str) -> catena_sim::Report {
    let (results, report) = sim
        .run(async |t: &SimRank<'_>| check(t).await)
        .unwrap_or_else(|e| panic!("{what}: stuck: {e:?}"));
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("{what}, rank {rank}: {e}"));
    }
    report
}

#[test]
fn two_levels_match_the_references_on_hosts_of_consecutive_ranks() {
    for (n, per_host) in [
        (2, 1),
        (3, 2),
        (5, 2),
        (7, 3),
        (12, 4),
        (16, 4),
        (17, 8),
        (33, 8),
        (64, 2),
    ] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(per_host);
        run_all(sim, &format!("{n} ranks, {per_host} a host"));
    }
}

#[test]
fn two_levels_match_the_references_on_hosts_dealt_ranks_in_turn() {
    for (n, hosts) in [(4, 2), (7, 3), (12, 5), (16, 4)] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_dealt_over(hosts);
        run_all(sim, &format!("{n} ranks dealt over {hosts} hosts"));
    }
}

/// The messages `body` sends on every rank of `sim`, each succeeding.
fn messages_of(sim: Sim, body: impl AsyncFn(&SimRank<'_>) -> Result<()>) -> u64 {
    let (results, report) = sim.run(body).expect("every rank finishes");
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
    report.messages
}

/// 16 simulated ranks, `per_host` on each host.
fn on_hosts_of(per_host: u32) -> Sim {
    Sim::new(16, LogGp::default()).with_ranks_per_host(per_host)
}

fn assert_under_half(two_level: u64, flat: u64) {
    assert!(
        two_level * 2 < flat,
        "{two_level} messages in two levels against {flat} flat"
    );
}

#[test]
fn two_levels_cross_the_network_once_a_host() {
    // The same calls on 16 ranks, 4 to a host, and on 16 hosts of one
    // rank (where the levels find nothing to share and stay flat).
    let messages = |per_host| {
        messages_of(
            on_hosts_of(per_host),
            async |t: &SimRank<'_>| -> Result<()> {
                let world = Comm::world(t).with_timeout(common::TIMEOUT);
                let dup = world.idup().await?;
                for i in 0..20u64 {
                    world.iallreduce(i, |a, b| a + b).await?;
                    world.ibcast(3, (world.rank() == 3).then_some(i)).await?;
                    dup.ibarrier().await?;
                }
                Ok(())
            },
        )
    };
    let (two_level, flat) = (messages(4), messages(1));
    assert_under_half(two_level, flat);
}

#[test]
fn gathers_scatters_and_scans_cross_the_network_once_a_host() {
    // As above, for the calls that move every member's value.
    let messages = |per_host| {
        messages_of(
            on_hosts_of(per_host),
            async |t: &SimRank<'_>| -> Result<()> {
                let world = Comm::world(t).with_timeout(common::TIMEOUT);
                let rank = world.rank();
                for i in 0..20u32 {
                    let root = i % 16;
                    world.igather(root, &rank).await?;
                    let values = (rank == root).then(|| (0..16).collect());
                    assert_eq!(world.iscatter::<u32>(root, values).await?, rank);
                    assert_eq!(world.iallgather(&rank).await?, (0..16).collect::<Vec<_>>());
                    let mut sum = [0u64];
                    let recv = (rank == root).then_some(&mut sum[..]);
                    world
                        .ireduce_into(root, &[1u64], recv, |a, b| a + b)
                        .await?;
                    assert_eq!(world.iscan(1u32, |a, b| a + b).await?, rank + 1);
                }
                Ok(())
            },
        )
    };
    let (two_level, flat) = (messages(4), messages(1));
    assert_under_half(two_level, flat);
}

#[test]
fn split_and_created_groups_across_hosts_take_two_levels() {
    // A split and a created group that span hosts, two of their members
    // on each host of four ranks; the same on hosts of one rank: the
    // messages of 20 rounds of calls on each, past the first 10 (which
    // make the communicators and build their levels).
    let messages = |per_host, rounds| {
        messages_of(
            on_hosts_of(per_host),
            async |t: &SimRank<'_>| -> Result<()> {
                let world = Comm::world(t).with_timeout(common::TIMEOUT);
                let color = (world.rank() / 2) % 2;
                let split = world.isplit(Some(color), world.rank()).await?;
                let split = split.expect("every rank has a color");
                let pairs: Vec<u32> = (0..16).filter(|r| (r / 2) % 2 == color).collect();
                let map = GroupMap::from_ranks(16, &pairs, Strategy::Auto)?;
                let created = world.icreate_group(map, color, CreateAlgorithm::Direct);
                let created = created.await?.expect("a member");
                for comm in [&split, &created] {
                    for i in 0..rounds {
                        assert_eq!(comm.iallreduce(i, |a, b| a + b).await?, 8 * i);
                        let got = comm.iallgather(&comm.rank()).await?;
                        assert_eq!(got, (0..8).collect::<Vec<u32>>());
                    }
                }
                Ok(())
            },
        )
    };
    let two_level = messages(4, 30) - messages(4, 10);
    let flat = messages(1, 30) - messages(1, 10);
    assert_under_half(two_level, flat);
}

#[test]
fn a_split_across_hosts_swaps_its_records_in_two_levels() {
    // Splits of 16 ranks on hosts of four once the levels are built: the
    // dense split across hosts (Auto) against the chain's Hash split.
    let messages = |algorithm| {
        let sim = Sim::new(16, LogGp::default()).with_ranks_per_host(4);
        messages_of(sim, async |t: &SimRank<'_>| -> Result<()> {
            let world = Comm::world(t)
                .with_timeout(common::TIMEOUT)
                .with_algorithm(algorithm);
            world.ibarrier().await?;
            for i in 0..10u32 {
                let color = (world.rank() + i) % 3;
                let split = world.isplit(Some(color), 16 - world.rank()).await?;
                let split = split.expect("every rank has a color");
                let members = (0..16).filter(|r| (r + i) % 3 == color).count();
                assert_eq!(split.size() as usize, members);
                let first = (0..16).rev().find(|r| (r + i) % 3 == color);
                assert_eq!(split.world_rank_of(0)?, first.expect("a member"));
            }
            Ok(())
        })
    };
    let (dense, chain) = (messages(Algorithm::Auto), messages(Algorithm::Hash));
    assert!(
        dense * 5 < chain,
        "{dense} messages by the dense split against {chain} by the chain's"
    );
}

#[test]
fn commutative_folds_take_the_levels_on_hosts_dealt_ranks_in_turn() {
    // The same sums on 16 ranks dealt over 4 hosts, folded in rank order
    // (flat: the hosts' ranks are not consecutive) and in any order.
    let messages = |commutative: bool| {
        let sim = Sim::new(16, LogGp::default()).with_ranks_dealt_over(4);
        messages_of(sim, async |t: &SimRank<'_>| -> Result<()> {
            let world = Comm::world(t).with_timeout(common::TIMEOUT);
            let x = u64::from(world.rank());
            for _ in 0..20 {
                let (mut one, send) = ([0u64], [x]);
                let sum = match commutative {
                    true => world.iallreduce_commutative(x, |a, b| a + b).await?,
                    false => world.iallreduce(x, |a, b| a + b).await?,
                };
                match commutative {
                    true => {
                        let op = |a: &u64, b: &u64| a + b;
                        world
                            .iallreduce_into_commutative(&send, &mut one, op)
                            .await?
                    }
                    false => world.iallreduce_into(&send, &mut one, |a, b| a + b).await?,
                }
                assert_eq!((sum, one[0]), (120, 120));
            }
            Ok(())
        })
    };
    let (any_order, in_order) = (messages(true), messages(false));
    assert!(
        any_order * 2 < in_order,
        "{any_order} messages in any order against {in_order} in rank order"
    );
}

#[test]
fn calls_joined_before_the_build_take_their_places_in_call_order() {
    for a_first in [true, false] {
        let sim = Sim::new(12, LogGp::default()).with_ranks_per_host(4);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| -> Result<()> {
                let world = Comm::world(t).with_timeout(common::TIMEOUT);
                let rank = world.rank();
                let sum = world.iallreduce(u64::from(rank), |a, b| a + b);
                let value = world.ibcast(5, (rank == 5).then(|| "five".to_string()));
                let (sum, value) = common::join(sum, value, a_first).await;
                assert_eq!((sum?, value?), (66, "five".to_string()));
                let barrier = world.ibarrier();
                let words = world.iallreduce(word(rank), |a, b| format!("{a}{b}"));
                let (entered, words) = common::join(barrier, words, !a_first).await;
                entered?;
                assert_eq!(words?, (0..12).map(word).collect::<String>());
                Ok(())
            })
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("rank {rank}, a_first {a_first}: {e}"));
        }
    }
}

#[test]
fn a_buffer_of_another_length_fails_every_member_at_once() {
    for (per_host, odd) in [(4, 0), (4, 6), (4, 11), (1, 3)] {
        let sim = Sim::new(12, LogGp::default()).with_ranks_per_host(per_host);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| -> Result<u64> {
                let world = Comm::world(t).with_timeout(common::TIMEOUT);
                let len = if world.rank() == odd { 5 } else { 4 };
                let send = vec![1u64; len];
                let mut recv = vec![0u64; len];
                let out = world.iallreduce_into(&send, &mut recv, |a, b| a + b).await;
                assert!(
                    matches!(out, Err(Error::Mismatch { .. })),
                    "rank {}: {out:?}",
                    world.rank()
                );
                // A reduce's root learns it too, and no member waits.
                let root = 7;
                let recv = (world.rank() == root).then_some(&mut recv[..]);
                let out = world.ireduce_into(root, &send, recv, |a, b| a + b).await;
                if world.rank() == root {
                    assert!(matches!(out, Err(Error::Mismatch { .. })), "{out:?}");
                }
                // The world goes on.
                world.iallreduce(1u64, |a, b| a + b).await
            })
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            let got = r.unwrap_or_else(|e| panic!("rank {rank}, odd {odd}: {e}"));
            assert_eq!(got, 12);
        }
    }
}

#[test]
fn a_bad_root_fails_every_member_and_the_world_goes_on() {
    let sim = Sim::new(8, LogGp::default()).with_ranks_per_host(4);
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| -> Result<u32> {
            let world = Comm::world(t).with_timeout(common::TIMEOUT);
            let out = world.ibcast(8, Some(1u8)).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let mut buf = [0u8; 3];
            let out = world.ibcast_into(9, &mut buf).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let out = world.ireduce(8, 1u8, |a, b| a + b).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let out = world.ireduce_into(8, &buf, None, |a, b| a + b).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let out = world.igather(8, &1u8).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let out = world.iscatter(8, Some(vec![1u8; 8])).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            let out = world.igather_into(8, &buf, None).await;
            assert!(matches!(out, Err(Error::InvalidArgument(_))), "{out:?}");
            world.ibarrier().await?;
            world.iallreduce(world.rank(), |a, b| *a.max(b)).await
        })
        .expect("every rank finishes");
    for r in results {
        assert_eq!(r.expect("the world goes on"), 7);
    }
}
