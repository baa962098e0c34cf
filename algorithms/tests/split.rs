//! The generalized split on real processes: every algorithm against a
//! sequential reference on random cases (proptest strategies, drawn from one
//! seed so every rank draws the same case), and bad input that must fail on
//! every process instead of hanging.

use crate::common;
use crate::split_reference;

use std::cmp::Ordering;
use std::time::Duration;

use catena_algorithms::chain::{split, split_by, Chain};
use catena_algorithms::{Algorithm, Color, Error, Key};
use catena_fabric::{Rma, Transport};
use catena_sim::{LogGp, Sim, SimRank};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde::{Deserialize, Serialize};
use split_reference::{check_partition, observed, reference, Expected};

/// A user struct key, ordered by a comparator (here: reversed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Point {
    x: i32,
    y: i32,
}

fn reversed(a: &Point, b: &Point) -> Ordering {
    (b.x, b.y).cmp(&(a.x, a.y))
}

#[derive(Clone, Debug)]
enum Colors {
    Ints(Vec<Option<i64>>),
    Strings(Vec<Option<String>>),
    /// Do not split; `false` is a non-member.
    Everyone(Vec<bool>),
}

#[derive(Clone, Debug)]
enum Keys {
    Ints(Vec<i64>),
    Points(Vec<Point>),
    ParentOrder,
}

#[derive(Clone, Debug)]
struct Case {
    colors: Colors,
    keys: Keys,
    /// The parent chain runs through the world in reverse.
    reversed_parent: bool,
}

/// Which processes are members: all, most, or about half (so runs of
/// members are separated by runs of non-members).
fn membership(n: usize) -> impl Strategy<Value = Vec<bool>> {
    prop_oneof![Just(1.0), Just(0.8), Just(0.5)]
        .prop_flat_map(move |p| prop::collection::vec(prop::bool::weighted(p), n))
}

fn mask<V>(values: Vec<V>, members: Vec<bool>) -> Vec<Option<V>> {
    values
        .into_iter()
        .zip(members)
        .map(|(c, m)| m.then_some(c))
        .collect()
}

/// `n` picks from a palette of `colors` values (few, or one per process).
fn picks<V: Clone + std::fmt::Debug>(n: usize, palette: Vec<V>) -> impl Strategy<Value = Vec<V>> {
    let len = palette.len();
    prop::collection::vec(0..len, n)
        .prop_map(move |i| i.iter().map(|&i| palette[i].clone()).collect())
}

fn colors(n: usize) -> impl Strategy<Value = Colors> {
    let palette_size = prop_oneof![Just(1usize), Just(2), Just(3), Just(n.max(1))];
    let ints = (palette_size.clone(), membership(n)).prop_flat_map(move |(p, m)| {
        let palette: Vec<i64> = (0..p as i64).map(|c| c * 1_000_003 - 7).collect();
        picks(n, palette).prop_map(move |v| Colors::Ints(mask(v, m.clone())))
    });
    let own = membership(n).prop_map(move |m| Colors::Ints(mask((0..n as i64).rev().collect(), m)));
    // Lengths 0, 5 and 80 mixed within one case.
    let string = prop_oneof![Just(0usize), Just(5), Just(80)]
        .prop_flat_map(|len| prop::collection::vec(prop::char::range('a', 'c'), len))
        .prop_map(|c| c.into_iter().collect::<String>());
    let strings = (palette_size, membership(n)).prop_flat_map(move |(p, m)| {
        prop::collection::vec(string.clone(), p)
            .prop_flat_map(move |palette| picks(n, palette))
            .prop_map(move |v| Colors::Strings(mask(v, m.clone())))
    });
    let everyone = membership(n).prop_map(Colors::Everyone);
    prop_oneof![ints, own, strings, everyone]
}

fn keys(n: usize) -> impl Strategy<Value = Keys> {
    prop_oneof![
        // Negative and duplicate keys.
        prop::collection::vec(-3i64..3, n).prop_map(Keys::Ints),
        prop::collection::vec((-2i32..2, -2i32..2), n)
            .prop_map(|v| Keys::Points(v.into_iter().map(|(x, y)| Point { x, y }).collect())),
        Just(Keys::ParentOrder),
    ]
}

fn case(n: usize) -> impl Strategy<Value = Case> {
    (colors(n), keys(n), any::<bool>()).prop_map(|(colors, keys, reversed_parent)| Case {
        colors,
        keys,
        reversed_parent,
    })
}

fn to_color<C: Clone>(c: &Option<C>) -> Color<C> {
    c.clone().map_or(Color::NotMember, Color::Is)
}

/// Runs one case with one algorithm on this process; returns what it got
/// and what the reference says.
async fn run_case<T: Transport>(
    t: &T,
    case: &Case,
    algorithm: Algorithm,
    context: u64,
) -> catena_algorithms::Result<(Expected, Expected)> {
    let n = t.size() as usize;
    let world: Vec<u32> = if case.reversed_parent {
        (0..n as u32).rev().collect()
    } else {
        (0..n as u32).collect()
    };
    let p = world
        .iter()
        .position(|&w| w == t.rank())
        .expect("in the world") as u32;
    let at = |p: Option<u32>| p.and_then(|p| world.get(p as usize).copied());
    let parent = Chain::from_links(
        p,
        n as u32,
        t.rank(),
        at(p.checked_sub(1)),
        at(Some(p + 1)),
        context,
    )?;
    let deadline = common::deadline(t);
    let pu = p as usize;
    // Colors and keys of every parent rank (the case lists them by parent rank).
    macro_rules! go {
        ($color:expr, $colors:expr) => {{
            match &case.keys {
                Keys::Ints(k) => {
                    let got =
                        split(t, &parent, $color, Key::Is(k[pu]), algorithm, deadline).await?;
                    (
                        observed(&got),
                        reference($colors, Some(k), i64::cmp, &world).swap_remove(pu),
                    )
                }
                Keys::Points(k) => {
                    let got = split_by(
                        t,
                        &parent,
                        $color,
                        Key::Is(k[pu].clone()),
                        reversed,
                        algorithm,
                        deadline,
                    )
                    .await?;
                    (
                        observed(&got),
                        reference($colors, Some(k), reversed, &world).swap_remove(pu),
                    )
                }
                Keys::ParentOrder => {
                    let got = split_by(
                        t,
                        &parent,
                        $color,
                        Key::<i64>::ParentOrder,
                        i64::cmp,
                        algorithm,
                        deadline,
                    )
                    .await?;
                    (
                        observed(&got),
                        reference($colors, None::<&[i64]>, i64::cmp, &world).swap_remove(pu),
                    )
                }
            }
        }};
    }
    Ok(match &case.colors {
        Colors::Ints(c) => go!(to_color(&c[pu]), c),
        Colors::Strings(c) => go!(to_color(&c[pu]), c),
        Colors::Everyone(m) => {
            let same: Vec<Option<()>> = m.iter().map(|&m| m.then_some(())).collect();
            let color: Color<()> = if m[pu] {
                Color::Everyone
            } else {
                Color::NotMember
            };
            go!(color, &same)
        }
    })
}

const CASES: u32 = 24;

/// Every algorithm, Cheng with M small enough that 1..33 processes have
/// several sorters.
const TESTED: [Algorithm; 11] = [
    Algorithm::AllgatherGroup,
    Algorithm::GatherScatter,
    Algorithm::Cheng(2),
    Algorithm::Cheng(4),
    Algorithm::Cheng(16),
    Algorithm::Cheng(128),
    Algorithm::Bitonic,
    Algorithm::Radix,
    Algorithm::Hash,
    Algorithm::Hash64,
    Algorithm::Auto,
];

impl Case {
    fn has_members(&self) -> bool {
        match &self.colors {
            Colors::Ints(c) => c.iter().any(Option::is_some),
            Colors::Strings(c) => c.iter().any(Option::is_some),
            Colors::Everyone(m) => m.contains(&true),
        }
    }
}

fn every_algorithm_matches_the_reference<T: Transport + catena_fabric::Blocking>(
    t: &T,
) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, check_every_algorithm(t)).map_err(common::to_fabric)
}

async fn check_every_algorithm<T: Transport>(t: &T) -> catena_algorithms::Result<()> {
    let n = t.size() as usize;
    // The same seed on every rank: every rank draws the same cases.
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[n as u8; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = case(n);
    {
        for i in 0..CASES {
            let case = strategy.new_tree(&mut runner).expect("a case").current();
            for (a, algorithm) in TESTED.into_iter().enumerate() {
                let context = u64::from(1000 + i * 16 + a as u32);
                let got = run_case(t, &case, algorithm, context).await;
                if algorithm == Algorithm::Radix
                    && matches!(case.keys, Keys::Points(_))
                    && case.has_members()
                {
                    // A user comparator: Radix refuses on every process.
                    assert!(
                        matches!(got, Err(Error::InvalidArgument(_))),
                        "rank {} of {n}, Radix with a comparator gave {got:?}",
                        t.rank()
                    );
                    continue;
                }
                let (got, want) = got?;
                assert_eq!(
                    got,
                    want,
                    "rank {} of {n}, {algorithm}, case {i}: {case:?}",
                    t.rank()
                );
            }
        }
        Ok(())
    }
}

/// Bad input fails on every process within the deadline.
fn bad_input_fails_everywhere<T: Transport + catena_fabric::Blocking>(
    t: &T,
) -> catena_fabric::Result<()> {
    let short = || t.deadline_in(Duration::from_secs(3));
    let world = |context| Chain::world(t, context);
    let last = t.size() - 1;
    catena_fabric::block_on(t, async {
        for algorithm in [
            Algorithm::Bitonic,
            Algorithm::Hash,
            Algorithm::AllgatherGroup,
        ] {
            // A color type that differs across processes.
            let parent = world(5000);
            let got = if t.rank() == last {
                split_by(
                    t,
                    &parent,
                    Color::Is("x".to_string()),
                    Key::<i64>::ParentOrder,
                    i64::cmp,
                    algorithm,
                    short(),
                )
                .await
            } else {
                split_by(
                    t,
                    &parent,
                    Color::Is(1i64),
                    Key::<i64>::ParentOrder,
                    i64::cmp,
                    algorithm,
                    short(),
                )
                .await
            };
            assert!(
                matches!(got, Err(Error::Mismatch { .. })),
                "{algorithm}: mixed color types gave {got:?}"
            );
        }
        // A comparator that panics on the last rank: where it runs, every
        // rank gets UserCode (learnt, not waited for); where only others
        // compare (GatherScatter's root), every rank succeeds.
        for (i, algorithm) in [
            Algorithm::AllgatherGroup,
            Algorithm::GatherScatter,
            Algorithm::Cheng(2),
            Algorithm::Bitonic,
            Algorithm::Hash,
        ]
        .into_iter()
        .enumerate()
        {
            let parent = world(5010 + i as u64);
            let cmp = |a: &i64, b: &i64| {
                assert!(t.rank() != last, "a comparator that panics");
                a.cmp(b)
            };
            let got = split_by(
                t,
                &parent,
                Color::Is(0i64),
                Key::Is(-(t.rank() as i64)),
                cmp,
                algorithm,
                short(),
            )
            .await;
            assert!(
                matches!(got, Ok(_) | Err(Error::UserCode { .. })),
                "rank {}, {algorithm}: a comparator that panics on rank {last} gave {got:?}",
                t.rank()
            );
            let ok = u8::from(got.is_ok());
            let agreed = catena_algorithms::chain::allreduce(
                t,
                &world(5030 + i as u64),
                (ok, ok),
                |a, b| (a.0.min(b.0), a.1.max(b.1)),
                short(),
            )
            .await?;
            assert!(
                agreed.0 == agreed.1,
                "{algorithm}: some ranks failed, some not"
            );
            // Answers that differ across processes: placements that agree, or
            // UserCode everywhere.
            let parent = world(5020 + i as u64);
            let odd = t.rank() % 2 == 1;
            let cmp = |a: &i64, b: &i64| if odd { b.cmp(a) } else { a.cmp(b) };
            let got = split_by(
                t,
                &parent,
                Color::Is(0i64),
                Key::Is(t.rank() as i64 / 2),
                cmp,
                algorithm,
                short(),
            )
            .await;
            assert!(
                matches!(got, Ok(_) | Err(Error::UserCode { .. })),
                "rank {}, {algorithm}: a comparator that differs across ranks gave {got:?}",
                t.rank()
            );
        }
        // A process that never joins: the others time out.
        let parent = world(5002);
        if t.rank() != last {
            let got = split_by(
                t,
                &parent,
                Color::Is(0i64),
                Key::<i64>::ParentOrder,
                i64::cmp,
                Algorithm::Hash,
                short(),
            )
            .await;
            assert!(
                matches!(
                    got,
                    Err(Error::Transport(catena_fabric::Error::Timeout { .. }))
                ),
                "a split missing a process gave {got:?}"
            );
        }
        Ok(())
    })
    .map_err(common::to_fabric)?;
    // Stale messages of the failed calls are in other contexts; meet once more.
    catena_fabric::block_on(
        t,
        catena_algorithms::chain::barrier(
            t,
            &Chain::world(t, 5003),
            t.deadline_in(common::TIMEOUT),
        ),
    )
    .map_err(common::to_fabric)
}

#[test]
fn algorithm_names_round_trip_and_bad_names_are_refused() {
    for algorithm in TESTED.into_iter().chain(Algorithm::ALL) {
        assert_eq!(
            algorithm.to_string().parse::<Algorithm>().ok(),
            Some(algorithm)
        );
    }
    assert_eq!(
        "cheng8192".parse::<Algorithm>().ok(),
        Some(Algorithm::Cheng(8192))
    );
    for bad in ["Cheng100", "Cheng1", "Cheng", "Chengx", "Quick"] {
        let got = bad.parse::<Algorithm>();
        assert!(
            matches!(got, Err(Error::InvalidArgument(_))),
            "{bad} gave {got:?}"
        );
    }
}

common::provider_cases! {
    shm_split_1: catena_fabric::shm::ShmTransport, 1, &[], every_algorithm_matches_the_reference;
    shm_split_2: catena_fabric::shm::ShmTransport, 2, &[], every_algorithm_matches_the_reference;
    shm_split_3: catena_fabric::shm::ShmTransport, 3, &[], every_algorithm_matches_the_reference;
    shm_split_7: catena_fabric::shm::ShmTransport, 7, &[], every_algorithm_matches_the_reference;
    shm_split_8: catena_fabric::shm::ShmTransport, 8, &[], every_algorithm_matches_the_reference;
    shm_split_13: catena_fabric::shm::ShmTransport, 13, &[], every_algorithm_matches_the_reference;
    shm_split_33: catena_fabric::shm::ShmTransport, 33, &[], every_algorithm_matches_the_reference;
    shm_split_bad_input_4: catena_fabric::shm::ShmTransport, 4, &[], bad_input_fails_everywhere;
}

/// The same cases on the simulator, as many virtual ranks in this process.
#[test]
fn sim_split_1_to_33() {
    for n in [1, 2, 3, 7, 8, 13, 33] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| check_every_algorithm(t).await)
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("rank {rank} of {n} on the simulator: {e}"));
        }
    }
}

/// Comparators that are not a total order, or panic (issue 16, item 4).
#[derive(Clone, Copy, Debug)]
enum Hostile {
    AlwaysLess,
    /// Natural on even ranks, reversed on odd: each rank is consistent,
    /// the ranks disagree.
    PerRank,
    /// Rock, paper, scissors on the key modulo 3.
    Intransitive,
    /// Panics on rank 5 only.
    PanicsOnOneRank,
}

/// On 16 ranks, every algorithm under every hostile comparator ends with a
/// placement on every rank that forms a valid split, or with `UserCode` on
/// every rank; none waits for the deadline, and no rank panics.
#[test]
fn sim_hostile_comparators_fail_every_rank_alike() {
    let n = 16;
    // Two groups, keys with ties.
    let colors: Vec<Option<i64>> = (0..n).map(|p| Some(p % 2)).collect();
    let world: Vec<u32> = (0..n as u32).collect();
    for hostile in [
        Hostile::AlwaysLess,
        Hostile::PerRank,
        Hostile::Intransitive,
        Hostile::PanicsOnOneRank,
    ] {
        for algorithm in TESTED.into_iter().filter(|&a| a != Algorithm::Radix) {
            let sim = Sim::new(n as u32, LogGp::default());
            let (results, report) = sim
                .run(async |t: &SimRank<'_>| {
                    let rank = t.rank();
                    let order = |a: &i64, b: &i64| match hostile {
                        Hostile::AlwaysLess => Ordering::Less,
                        Hostile::PerRank if rank % 2 == 0 => a.cmp(b),
                        Hostile::PerRank => b.cmp(a),
                        Hostile::Intransitive => match (b - a).rem_euclid(3) {
                            0 => Ordering::Equal,
                            1 => Ordering::Less,
                            _ => Ordering::Greater,
                        },
                        Hostile::PanicsOnOneRank => {
                            assert!(rank != 5, "a comparator that panics");
                            a.cmp(b)
                        }
                    };
                    let parent = Chain::world(t, 6000);
                    let key = Key::Is(i64::from(rank % 5));
                    let color = Color::Is(colors[rank as usize].unwrap());
                    let deadline = t.deadline_in(Duration::from_secs(5));
                    split_by(t, &parent, color, key, order, algorithm, deadline).await
                })
                .expect("every rank finishes");
            let what = format!("{algorithm} with {hostile:?}");
            assert!(
                report.completion < Duration::from_secs(1),
                "{what} took {:?} of virtual time",
                report.completion
            );
            let got: Option<Vec<Expected>> = results
                .iter()
                .map(|r| r.as_ref().ok().map(observed))
                .collect();
            match got {
                Some(got) => check_partition(&colors, &got, &world)
                    .unwrap_or_else(|e| panic!("{what}: an invalid split: {e}")),
                None => {
                    for (rank, r) in results.iter().enumerate() {
                        assert!(
                            matches!(r, Err(Error::UserCode { .. })),
                            "{what}: rank {rank} got {r:?} where another failed"
                        );
                    }
                }
            }
        }
    }
}

/// Bytes all ranks sent for a split of `n` simulated ranks into `n / 2`
/// groups of `color_bytes`-byte colors (issue 16, item 6).
fn bytes_sent(algorithm: Algorithm, n: u32, color_bytes: usize) -> u64 {
    let sim = Sim::new(n, LogGp::default());
    let (results, report) = sim
        .run(async |t: &SimRank<'_>| {
            let mut color = vec![0u8; color_bytes];
            color[0] = (t.rank() % (n / 2)) as u8;
            let parent = Chain::world(t, 6100);
            let deadline = t.deadline_in(Duration::from_secs(60));
            split(
                t,
                &parent,
                Color::Is(color),
                Key::<i64>::ParentOrder,
                algorithm,
                deadline,
            )
            .await
        })
        .expect("every rank finishes");
    for r in results {
        r.expect("the split succeeds");
    }
    report.bytes
}

/// Cheng's selection rounds carry no colors: its traffic grows with colors
/// no faster than Bitonic's, which moves each item once per round.
#[test]
fn sim_cheng_traffic_grows_with_colors_no_faster_than_bitonic() {
    let (n, small, large) = (65, 8, 4096);
    let growth = |a| bytes_sent(a, n, large) - bytes_sent(a, n, small);
    let (cheng, bitonic) = (growth(Algorithm::Cheng(2)), growth(Algorithm::Bitonic));
    assert!(
        cheng <= bitonic,
        "from {small}- to {large}-byte colors, Cheng2 sent {cheng} more bytes, Bitonic {bitonic}"
    );
}

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_shm_split_5: catena_fabric::ofi::OfiTransport, 5, &[("CATENA_OFI_PROVIDER", "shm")], every_algorithm_matches_the_reference;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_shm_split_5: catena_fabric::ucx::UcxTransport, 5, &[("UCX_TLS", "posix,cma,self")], every_algorithm_matches_the_reference;
}

// The same on every network provider across 2 and 3 fake hosts, under
// catena's launcher and under mpiexec.
catena_testkit::across_hosts_tests!(split_across_hosts: every_algorithm_matches_the_reference);
