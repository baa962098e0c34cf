//! Fuzz targets for group maps (run for `CATENA_FUZZ_SECONDS` each): random
//! groups from every builder and strategy, every operation checked against
//! a plain `Vec<u32>` model; and hostile builder inputs (32-bit worlds,
//! extreme strides, any alpha) that must give the right group or a typed
//! error, with no allocation over 1 GiB.

use std::collections::{BTreeMap, HashSet};

use catena_groupmap::{
    Comparison, GroupMap, GroupMapError, OrderKind, RankRange, SetKind, Strategy,
};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;
use proptest::test_runner::TestCaseError;

#[global_allocator]
static ALLOC: catena_fuzz::alloc::Limited = catena_fuzz::alloc::Limited;

/// A strategy to build with: any of them, or a fixed representation pair.
fn strategies() -> impl proptest::strategy::Strategy<Value = Strategy> {
    prop_oneof![
        Just(Strategy::Space),
        Just(Strategy::Time),
        Just(Strategy::Auto),
        (0.0f64..=1.0).prop_map(|alpha| Strategy::Hybrid { alpha }),
        (0..SetKind::ALL.len(), 0..OrderKind::ALL.len()).prop_map(|(s, o)| Strategy::Fixed {
            set: SetKind::ALL[s],
            order: OrderKind::ALL[o],
        }),
    ]
}

/// How a random group is given to a builder.
#[derive(Clone, Debug)]
enum Given {
    /// World ranks in group order (`from_ranks`).
    Ranks(Vec<u32>),
    /// Range triples (`from_ranges`), possibly bad.
    Ranges(Vec<RankRange>),
}

fn ranges(bound: u32, most: usize) -> impl proptest::strategy::Strategy<Value = Vec<RankRange>> {
    let bound = bound.max(1);
    prop::collection::vec(
        (
            0..bound + 1,
            0..bound + 1,
            -(bound as i64) - 1..=bound as i64 + 1,
        ),
        0..most,
    )
    .prop_map(|v| {
        v.into_iter()
            .map(|(a, b, s)| RankRange::new(a, b, s))
            .collect()
    })
}

fn given(world: u32) -> impl proptest::strategy::Strategy<Value = Given> {
    prop_oneof![
        // A random subset in a random order (sorted half the time).
        (
            prop::collection::hash_set(0..world, 0..world.min(300) as usize + 1),
            any::<bool>(),
            any::<u64>()
        )
            .prop_map(|(set, sorted, seed)| {
                let mut v: Vec<u32> = set.into_iter().collect();
                v.sort_unstable();
                if !sorted {
                    shuffle(&mut v, seed);
                }
                Given::Ranks(v)
            }),
        // Ranks with repeats and out-of-range ones now and then.
        prop::collection::vec(0..world + 2, 0..20).prop_map(Given::Ranks),
        ranges(world, 4).prop_map(Given::Ranges),
    ]
}

fn shuffle(v: &mut [u32], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        v.swap(i, (seed >> 33) as usize % (i + 1));
    }
}

/// What MPI's range triples name, or the error the builders owe, checked
/// in the order they check: each triple's stride, direction and bound,
/// then repeats.
fn expand(ranges: &[RankRange], bound: u32) -> Result<Vec<u32>, GroupMapError> {
    let mut out = Vec::new();
    for (index, r) in ranges.iter().enumerate() {
        let (first, last, stride) = (r.first, r.last, r.stride);
        if stride == 0 {
            return Err(GroupMapError::ZeroStride {
                index,
                first,
                last,
                stride,
            });
        }
        if (last > first && stride < 0) || (last < first && stride > 0) {
            return Err(GroupMapError::StrideAwayFromLast {
                index,
                first,
                last,
                stride,
            });
        }
        if first.max(last) >= bound {
            return Err(GroupMapError::WorldRankOutOfRange {
                rank: first.max(last).into(),
                world: bound,
            });
        }
        let mut x = i64::from(first);
        while (stride > 0 && x <= i64::from(last)) || (stride < 0 && x >= i64::from(last)) {
            out.push(x as u32);
            x += stride;
        }
    }
    Ok(out)
}

fn smallest_repeat(ranks: &[u32]) -> Option<u32> {
    let mut counts = BTreeMap::new();
    for &r in ranks {
        *counts.entry(r).or_insert(0) += 1;
    }
    counts.into_iter().find(|&(_, n)| n > 1).map(|(r, _)| r)
}

/// The model's answer to building `given` in a world of `world`.
fn model_build(world: u32, given: &Given) -> Result<Vec<u32>, GroupMapError> {
    let ranks = match given {
        Given::Ranks(ranks) => ranks.clone(),
        Given::Ranges(ranges) => expand(ranges, world)?,
    };
    if let Some(&rank) = ranks.iter().find(|&&w| w >= world) {
        return Err(GroupMapError::WorldRankOutOfRange {
            rank: rank.into(),
            world,
        });
    }
    match smallest_repeat(&ranks) {
        Some(rank) => Err(GroupMapError::DuplicateWorldRank { rank }),
        None => Ok(ranks),
    }
}

fn build(world: u32, given: &Given, strategy: Strategy) -> Result<GroupMap, GroupMapError> {
    match given {
        Given::Ranks(ranks) => GroupMap::from_ranks(world, ranks, strategy),
        Given::Ranges(ranges) => GroupMap::from_ranges(world, ranges, strategy),
    }
}

/// Builds as the model says, or fails as it says; a fixed representation
/// may also refuse a group it cannot hold (then Space builds it).
fn built(
    world: u32,
    given: &Given,
    strategy: Strategy,
) -> Result<Option<(GroupMap, Vec<u32>)>, TestCaseError> {
    let want = model_build(world, given);
    let got = build(world, given, strategy);
    let got = match (got, &want) {
        (Err(GroupMapError::NotApplicable { .. }), Ok(_))
            if matches!(strategy, Strategy::Fixed { .. }) =>
        {
            build(world, given, Strategy::Space)
        }
        (got, _) => got,
    };
    match (got, want) {
        (Ok(map), Ok(model)) => {
            agrees(&map, world, &model)?;
            Ok(Some((map, model)))
        }
        (Err(e), Err(w)) => {
            prop_assert_eq!(e, w);
            Ok(None)
        }
        (got, want) => Err(TestCaseError::fail(format!(
            "built {got:?}, model {want:?}"
        ))),
    }
}

/// Every lookup of `map` against `model` (its world ranks in group order).
fn agrees(map: &GroupMap, world: u32, model: &[u32]) -> Result<(), TestCaseError> {
    prop_assert_eq!(map.world_size(), world);
    prop_assert_eq!(map.len() as usize, model.len());
    prop_assert_eq!(map.is_empty(), model.is_empty());
    prop_assert!(
        map.iter().eq(model.iter().copied()),
        "{map} is not {model:?}"
    );
    let mut sorted = model.to_vec();
    sorted.sort_unstable();
    prop_assert!(map.members().eq(sorted.iter().copied()));
    let ascending = model.windows(2).all(|p| p[0] < p[1]);
    match map.strategy() {
        // A fixed permutation representation, or the plain array, may
        // hold the identity.
        Strategy::Fixed { order, .. } if order != OrderKind::Sorted => {
            prop_assert!(!map.is_sorted())
        }
        _ if map.set_kind() == SetKind::Plain => prop_assert!(!map.is_sorted()),
        _ => prop_assert_eq!(map.is_sorted(), ascending),
    }
    for (g, &w) in model.iter().enumerate() {
        prop_assert_eq!(map.select(g as u32), Ok(w));
    }
    let past_the_end = map.select(model.len() as u32);
    let refused = matches!(past_the_end, Err(GroupMapError::GroupRankOutOfRange { .. }));
    prop_assert!(refused, "select past the end: {:?}", past_the_end);
    let position: BTreeMap<u32, u32> = model
        .iter()
        .enumerate()
        .map(|(g, &w)| (w, g as u32))
        .collect();
    for w in 0..world.min(2048) {
        prop_assert_eq!(map.rank(w), Ok(position.get(&w).copied()), "rank({})", w);
    }
    // The plain array's rank scans: every member's would be O(n^2).
    let rank_every = match map.set_kind() {
        SetKind::Plain => model.len() / 2000 + 1,
        _ => 1,
    };
    for &w in model.iter().step_by(rank_every) {
        prop_assert_eq!(map.rank(w), Ok(position.get(&w).copied()));
    }
    let outside = map.rank(world);
    let refused = matches!(outside, Err(GroupMapError::WorldRankOutOfRange { .. }));
    prop_assert!(refused, "rank outside the world: {:?}", outside);
    Ok(())
}

/// A derived map against the model's list, or the model's error. Derived
/// maps take the left operand's strategy: a fixed one may refuse.
fn derived_agrees(
    got: Result<GroupMap, GroupMapError>,
    world: u32,
    want: Result<Vec<u32>, GroupMapError>,
    fixed: bool,
) -> Result<(), TestCaseError> {
    match (got, want) {
        (Ok(map), Ok(model)) => agrees(&map, world, &model),
        (Err(GroupMapError::NotApplicable { .. }), Ok(_)) if fixed => Ok(()),
        (Err(e), Err(w)) => {
            prop_assert_eq!(e, w);
            Ok(())
        }
        (got, want) => Err(TestCaseError::fail(format!(
            "got {:?}, model {want:?}",
            got.map(|map| map.to_string())
        ))),
    }
}

/// MPI_Group_incl on the model: out-of-range ranks first (in list order),
/// then repeats (any repeated group rank may be named).
fn model_include(model: &[u32], ranks: &[u32]) -> Result<Vec<u32>, GroupMapError> {
    if let Some(&g) = ranks.iter().find(|&&g| g as usize >= model.len()) {
        return Err(GroupMapError::GroupRankOutOfRange {
            rank: g.into(),
            size: model.len() as u32,
        });
    }
    Ok(ranks.iter().map(|&g| model[g as usize]).collect())
}

fn check_include(
    world: u32,
    model: &[u32],
    ranks: &[u32],
    got: Result<GroupMap, GroupMapError>,
    fixed: bool,
) -> Result<(), TestCaseError> {
    let want = model_include(model, ranks);
    if want.is_ok() && smallest_repeat(ranks).is_some() {
        let rank = match got {
            Err(GroupMapError::DuplicateGroupRank { rank }) => rank,
            other => {
                let other = other.map(|map| map.to_string());
                return Err(TestCaseError::fail(format!("{other:?} for {ranks:?}")));
            }
        };
        prop_assert!(ranks.iter().filter(|&&g| g == rank).count() > 1);
        return Ok(());
    }
    derived_agrees(got, world, want, fixed)
}

/// MPI_Group_excl on the model: the smallest out-of-range rank, then the
/// smallest repeat.
fn model_exclude(model: &[u32], ranks: &[u32]) -> Result<Vec<u32>, GroupMapError> {
    let size = model.len() as u32;
    if let Some(&g) = ranks.iter().filter(|&&g| g >= size).min() {
        return Err(GroupMapError::GroupRankOutOfRange {
            rank: g.into(),
            size,
        });
    }
    if let Some(rank) = smallest_repeat(ranks) {
        return Err(GroupMapError::DuplicateGroupRank { rank });
    }
    let dropped: HashSet<u32> = ranks.iter().copied().collect();
    Ok((0..size)
        .filter(|g| !dropped.contains(g))
        .map(|g| model[g as usize])
        .collect())
}

/// Range triples over a group's ranks, as the group operations see them.
fn expand_group(ranges: &[RankRange], size: u32) -> Result<Vec<u32>, GroupMapError> {
    expand(ranges, size).map_err(|e| match e {
        GroupMapError::WorldRankOutOfRange { rank, .. } => {
            GroupMapError::GroupRankOutOfRange { rank, size }
        }
        e => e,
    })
}

#[derive(Clone, Debug)]
struct Case {
    world: u32,
    a: (Given, Strategy),
    b: (Given, Strategy),
    picks: Vec<u32>,
    ranges: Vec<RankRange>,
}

fn cases() -> impl proptest::strategy::Strategy<Value = Case> {
    prop_oneof![4 => 1u32..64, 2 => 64u32..600, 1 => 600u32..5000]
        .prop_flat_map(|world| {
            (
                Just(world),
                (given(world), strategies()),
                (given(world), strategies()),
                prop::collection::vec(0..world.min(400) + 3, 0..12),
                ranges(world.min(400), 3),
            )
        })
        .prop_map(|(world, a, b, picks, ranges)| Case {
            world,
            a,
            b,
            picks,
            ranges,
        })
}

fn check_case(case: Case) -> Result<(), TestCaseError> {
    let world = case.world;
    let Some((a, ma)) = built(world, &case.a.0, case.a.1)? else {
        return Ok(());
    };
    let fixed = matches!(a.strategy(), Strategy::Fixed { .. });
    let Some((b, mb)) = built(world, &case.b.0, case.b.1)? else {
        return Ok(());
    };
    // Translate, compare.
    let in_b: BTreeMap<u32, u32> = mb.iter().enumerate().map(|(g, &w)| (w, g as u32)).collect();
    let all: Vec<u32> = (0..a.len()).collect();
    let want: Vec<Option<u32>> = ma.iter().map(|w| in_b.get(w).copied()).collect();
    prop_assert_eq!(a.translate_ranks(&all, &b), Ok(want));
    let same_set = {
        let (mut x, mut y) = (ma.clone(), mb.clone());
        x.sort_unstable();
        y.sort_unstable();
        x == y
    };
    let want = match (same_set, ma == mb) {
        (false, _) => Comparison::Unequal,
        (true, true) => Comparison::Identical,
        (true, false) => Comparison::Similar,
    };
    prop_assert_eq!(a.compare(&b), want);
    // The set operations, in MPI's order and as sets.
    let sa: HashSet<u32> = ma.iter().copied().collect();
    let sb: HashSet<u32> = mb.iter().copied().collect();
    let mut union = ma.clone();
    union.extend(mb.iter().filter(|w| !sa.contains(w)));
    derived_agrees(a.union(&b), world, Ok(union.clone()), fixed)?;
    let both: Vec<u32> = ma.iter().copied().filter(|w| sb.contains(w)).collect();
    derived_agrees(a.intersection(&b), world, Ok(both.clone()), fixed)?;
    let only: Vec<u32> = ma.iter().copied().filter(|w| !sb.contains(w)).collect();
    derived_agrees(a.difference(&b), world, Ok(only.clone()), fixed)?;
    let sorted = |mut v: Vec<u32>| {
        v.sort_unstable();
        v
    };
    derived_agrees(a.set_union(&b), world, Ok(sorted(union)), fixed)?;
    derived_agrees(a.set_intersection(&b), world, Ok(sorted(both)), fixed)?;
    derived_agrees(a.set_difference(&b), world, Ok(sorted(only)), fixed)?;
    // Include and exclude, by list and by range.
    check_include(world, &ma, &case.picks, a.include(&case.picks), fixed)?;
    derived_agrees(
        a.exclude(&case.picks),
        world,
        model_exclude(&ma, &case.picks),
        fixed,
    )?;
    let size = a.len();
    match expand_group(&case.ranges, size) {
        Err(e) => {
            prop_assert_eq!(a.range_include(&case.ranges).err(), Some(e.clone()));
            prop_assert_eq!(a.range_exclude(&case.ranges).err(), Some(e));
        }
        Ok(picks) => {
            check_include(world, &ma, &picks, a.range_include(&case.ranges), fixed)?;
            derived_agrees(
                a.range_exclude(&case.ranges),
                world,
                model_exclude(&ma, &picks),
                fixed,
            )?;
        }
    }
    // Maps of another world do not combine.
    let other = GroupMap::world_group(world + 1);
    let mismatch =
        |r: Result<GroupMap, GroupMapError>| matches!(r, Err(GroupMapError::WorldMismatch { .. }));
    prop_assert!(mismatch(a.union(&other)) && mismatch(a.set_difference(&other)));
    prop_assert_eq!(a.compare(&other), Comparison::Unequal);
    Ok(())
}

#[test]
fn group_maps_agree_with_a_plain_array() {
    catena_fuzz::fuzz("group maps against a Vec<u32>", cases(), check_case);
}

/// Near the 32-bit and 64-bit limits: worlds up to `u32::MAX`, triples
/// whose ends sit at the world's edges, strides anywhere in `i64`.
fn hostile_ranges(world: u32) -> impl proptest::strategy::Strategy<Value = Vec<RankRange>> {
    let edge = prop_oneof![
        Just(0u32),
        Just(1),
        Just(world / 2),
        Just(world.saturating_sub(2)),
        Just(world.saturating_sub(1)),
        Just(world),
        Just(u32::MAX),
        any::<u32>(),
    ];
    let stride = prop_oneof![
        Just(i64::MAX),
        Just(i64::MIN),
        Just(1i64),
        Just(-1),
        Just(2),
        Just(-2),
        Just(0),
        Just(i64::from(u32::MAX)),
        any::<i64>(),
        -5i64..=5,
    ];
    prop::collection::vec((edge.clone(), edge, stride), 0..5).prop_map(|v| {
        v.into_iter()
            .map(|(a, b, s)| RankRange::new(a, b, s))
            .collect()
    })
}

/// (count, smallest, largest) of a valid triple's ranks, by arithmetic.
fn span(r: &RankRange) -> (u64, u32, u32) {
    let distance = i64::from(r.last) - i64::from(r.first);
    let count = (distance / r.stride) as u64 + 1;
    let end = (i64::from(r.first) + (count as i64 - 1) * r.stride) as u32;
    (count, r.first.min(end), r.first.max(end))
}

#[derive(Clone, Debug)]
struct Hostile {
    world: u32,
    ranges: Vec<RankRange>,
    alpha: f64,
    strategy: Strategy,
}

fn hostile() -> impl proptest::strategy::Strategy<Value = Hostile> {
    prop_oneof![
        Just(u32::MAX),
        Just(u32::MAX - 1),
        Just(1u32 << 31),
        1u32..10,
        any::<u32>()
    ]
    .prop_flat_map(|world| {
        (
            Just(world),
            hostile_ranges(world),
            prop_oneof![
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(-0.0),
                any::<f64>(),
                0.0f64..=1.0
            ],
            strategies(),
        )
    })
    .prop_map(|(world, ranges, alpha, strategy)| Hostile {
        world,
        ranges,
        alpha,
        strategy,
    })
}

/// Whether building `ranges` under `strategy` needs no list of billions
/// of ranks: a bad triple or more ranks than `bound` (a repeat) is refused
/// first, a single triple is a progression unless a fixed representation
/// other than its stride is asked for; only several triples naming
/// billions of distinct ranks are a legitimately huge list.
fn listable(ranges: &[RankRange], bound: u32, strategy: Strategy) -> bool {
    let mut total = 0u64;
    for r in ranges {
        let away = (i64::from(r.last) - i64::from(r.first)).signum() * r.stride.signum() < 0;
        if r.stride == 0 || away || r.first.max(r.last) >= bound {
            return true;
        }
        total += span(r).0;
    }
    let progression = match (ranges, strategy) {
        ([_], Strategy::Fixed { set, order }) => {
            let falling = ranges[0].stride < 0 && total > 1;
            let wanted = if falling {
                OrderKind::Blocks
            } else {
                OrderKind::Sorted
            };
            set == SetKind::Stride && order == wanted
        }
        ([_], _) => true,
        _ => false,
    };
    progression || total <= 1 << 22 || total > u64::from(bound)
}

/// Checks `map` against the triples by arithmetic, at its ends.
fn ends_agree(map: &GroupMap, ranges: &[RankRange]) -> Result<(), TestCaseError> {
    let total: u64 = ranges.iter().map(|r| span(r).0).sum();
    prop_assert_eq!(u64::from(map.len()), total);
    if let (Some(first), Some(last)) = (ranges.first(), ranges.last()) {
        prop_assert_eq!(map.select(0), Ok(first.first));
        let (count, _, _) = span(last);
        let end = (i64::from(last.first) + (count as i64 - 1) * last.stride) as u32;
        prop_assert_eq!(map.select(map.len() - 1), Ok(end));
        prop_assert_eq!(map.rank(end), Ok(Some(map.len() - 1)));
    }
    Ok(())
}

fn check_hostile(h: Hostile) -> Result<(), TestCaseError> {
    let bad_alpha = !(0.0..=1.0).contains(&h.alpha);
    let hybrid = Strategy::Hybrid { alpha: h.alpha };
    if listable(&h.ranges, h.world, hybrid) {
        match GroupMap::from_ranges(h.world, &h.ranges, hybrid) {
            Err(GroupMapError::BadAlpha { .. }) => prop_assert!(bad_alpha),
            Ok(map) => {
                prop_assert!(!bad_alpha);
                ends_agree(&map, &h.ranges)?;
            }
            Err(_) => prop_assert!(!bad_alpha, "an alpha of {} is checked first", h.alpha),
        }
    }
    if listable(&h.ranges, h.world, h.strategy) {
        match GroupMap::from_ranges(h.world, &h.ranges, h.strategy) {
            Ok(map) => ends_agree(&map, &h.ranges)?,
            Err(GroupMapError::BadAlpha { .. }) => prop_assert!(false, "{:?}", h.strategy),
            Err(_) => {}
        }
    }
    // The same triples over a whole world and over the even ranks of one.
    let world = GroupMap::world_group(h.world);
    let evens = GroupMap::from_ranges(
        h.world,
        &[RankRange::new(0, h.world.saturating_sub(1), 2)],
        Strategy::Auto,
    );
    for group in [Some(world), evens.ok()].into_iter().flatten() {
        if !listable(&h.ranges, group.len(), group.strategy()) {
            continue;
        }
        let _ = group.range_include(&h.ranges);
        // Excluding lists what it keeps (and drops): only for groups of a
        // size a list may have.
        if group.len() < 1 << 22 {
            let _ = group.range_exclude(&h.ranges);
        }
    }
    prop_assert!(
        catena_fuzz::alloc::largest() <= catena_fuzz::alloc::LIMIT,
        "{} B",
        catena_fuzz::alloc::largest()
    );
    Ok(())
}

#[test]
fn hostile_builder_inputs_get_typed_errors_in_small_memory() {
    catena_fuzz::fuzz(
        "group map builders, hostile input",
        hostile(),
        check_hostile,
    );
}
