//! Every group-map representation and strategy against a plain array: select,
//! rank (members, non-members, out of range), iteration, translate, compare,
//! the set operations with MPI's orders and as sets, include/exclude and their
//! range forms, and the errors bad input gets.

use std::collections::HashSet;

use catena_groupmap::{
    Comparison, GroupMap, GroupMapError, OrderKind, RankRange, SetKind, Strategy,
};
use proptest::prelude::*;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        splitmix64(&mut self.0) % n.max(1)
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// The shapes of member sets the representations must all hold.
#[derive(Clone, Copy, Debug)]
enum Shape {
    Random,
    Empty,
    Full,
    Single,
    Stride,
    Ranges,
    Faces,
}

/// The orders a group's members can come in.
#[derive(Clone, Copy, Debug)]
enum Order {
    Sorted,
    Shuffled,
    Reversed,
    FallingRanges,
    ShuffledInsideBlocks,
}

/// A sorted member set of `shape` with up to `size` members in `world`.
fn members(shape: Shape, world: u32, size: u32, rng: &mut Rng) -> Vec<u32> {
    let world64 = u64::from(world);
    match shape {
        Shape::Empty => Vec::new(),
        Shape::Full => (0..world).collect(),
        Shape::Single => vec![rng.below(world64) as u32],
        Shape::Random => {
            let n = u64::from(size).min(world64);
            if n * 2 > world64 {
                // Dense: drop random ranks from the full world.
                let mut all: Vec<u32> = (0..world).collect();
                rng.shuffle(&mut all);
                all.truncate(n as usize);
                all.sort_unstable();
                all
            } else {
                let mut set = HashSet::new();
                while (set.len() as u64) < n {
                    set.insert(rng.below(world64) as u32);
                }
                let mut v: Vec<u32> = set.into_iter().collect();
                v.sort_unstable();
                v
            }
        }
        Shape::Stride => {
            let first = rng.below(world64) as u32;
            let stride = 1 + rng.below(world64 / 4 + 1) as u32;
            let count = rng.below(u64::from(size) + 2) as u32;
            (0..count)
                .map(|k| u64::from(first) + u64::from(k) * u64::from(stride))
                .take_while(|&w| w < world64)
                .map(|w| w as u32)
                .collect()
        }
        Shape::Ranges => {
            let mut cuts: Vec<u32> = (0..2 * (1 + rng.below(20)))
                .map(|_| rng.below(world64 + 1) as u32)
                .collect();
            cuts.sort_unstable();
            cuts.dedup();
            cuts.chunks(2)
                .filter(|c| c.len() == 2)
                .flat_map(|c| c[0]..c[1])
                .collect()
        }
        Shape::Faces => {
            // The world's low bits as a binary hypercube: ranks with bit k = b.
            let bits = 32 - world.leading_zeros() - 1;
            let faces: Vec<(u32, u32)> = (0..1 + rng.below(4))
                .map(|_| {
                    (
                        rng.below(u64::from(bits.max(1))) as u32,
                        rng.below(2) as u32,
                    )
                })
                .collect();
            (0..world)
                .filter(|w| faces.iter().any(|&(k, b)| (w >> k) & 1 == b))
                .collect()
        }
    }
}

/// `members` put in `order`.
fn ordered(mut ranks: Vec<u32>, order: Order, rng: &mut Rng) -> Vec<u32> {
    match order {
        Order::Sorted => {}
        Order::Shuffled => rng.shuffle(&mut ranks),
        Order::Reversed => ranks.reverse(),
        Order::FallingRanges | Order::ShuffledInsideBlocks => {
            let blocks = 1 + rng.below(10) as usize;
            let size = ranks.len().div_ceil(blocks).max(1);
            let mut chunks: Vec<Vec<u32>> = ranks.chunks(size).map(<[u32]>::to_vec).collect();
            if let Order::FallingRanges = order {
                chunks.reverse();
            } else {
                chunks.iter_mut().for_each(|c| rng.shuffle(c));
            }
            ranks = chunks.concat();
        }
    }
    ranks
}

/// Checks `map` answers exactly as the plain array `ranks` (group order) does.
fn agrees(map: &GroupMap, world: u32, ranks: &[u32], rng: &mut Rng) -> Result<(), TestCaseError> {
    let label = map.to_string();
    prop_assert_eq!(map.len() as usize, ranks.len(), "{}", label);
    // The plain array's rank scans: every member's would be O(n^2).
    let rank_every = match map.set_kind() {
        SetKind::Plain => ranks.len() / 2000 + 1,
        _ => 1,
    };
    for (g, &w) in ranks.iter().enumerate() {
        prop_assert_eq!(map.select(g as u32), Ok(w), "select {} in {}", g, label);
        if g % rank_every == 0 || g + 1 == ranks.len() {
            prop_assert_eq!(map.rank(w), Ok(Some(g as u32)), "rank {} in {}", w, label);
        }
    }
    let past = map.select(ranks.len() as u32);
    prop_assert!(
        matches!(past, Err(GroupMapError::GroupRankOutOfRange { .. })),
        "{:?}",
        past
    );
    let outside = map.rank(world);
    prop_assert!(
        matches!(outside, Err(GroupMapError::WorldRankOutOfRange { .. })),
        "{:?}",
        outside
    );
    let set: HashSet<u32> = ranks.iter().copied().collect();
    let probes = [0, world - 1, world / 2]
        .into_iter()
        .chain((0..200).map(|_| rng.below(u64::from(world)) as u32));
    for w in probes.chain(
        ranks
            .iter()
            .flat_map(|&w| [w.wrapping_sub(1), w + 1])
            .take(400),
    ) {
        if w < world && !set.contains(&w) {
            prop_assert_eq!(map.rank(w), Ok(None), "non-member {} in {}", w, label);
        }
    }
    prop_assert!(map.iter().eq(ranks.iter().copied()), "iter of {}", label);
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    prop_assert!(map.members().eq(sorted.into_iter()), "members of {}", label);
    Ok(())
}

fn case() -> impl proptest::strategy::Strategy<Value = (u32, Shape, Order, u32, u64)> {
    let world = prop_oneof![1u32..=64, 65u32..=5000, 5000u32..=(1 << 20), Just(1 << 20)];
    let shape = prop_oneof![
        4 => Just(Shape::Random),
        1 => Just(Shape::Empty),
        1 => Just(Shape::Full),
        1 => Just(Shape::Single),
        2 => Just(Shape::Stride),
        2 => Just(Shape::Ranges),
        1 => Just(Shape::Faces),
    ];
    let order = prop_oneof![
        3 => Just(Order::Sorted),
        2 => Just(Order::Shuffled),
        1 => Just(Order::Reversed),
        1 => Just(Order::FallingRanges),
        1 => Just(Order::ShuffledInsideBlocks),
    ];
    let size = prop_oneof![4 => 0u32..2000, 1 => 0u32..=100_000];
    (world, shape, order, size, any::<u64>())
}

/// Caps the member count near the 100,000 so Full and Faces of big
/// worlds stay test-sized.
fn group(world: u32, shape: Shape, order: Order, size: u32, seed: u64) -> (Vec<u32>, Rng) {
    let mut rng = Rng(seed);
    let world_for_shape = if matches!(shape, Shape::Full | Shape::Faces) {
        world.min(100_000)
    } else {
        world
    };
    let ranks = members(shape, world_for_shape, size, &mut rng);
    (ordered(ranks, order, &mut rng), rng)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn every_representation_agrees_with_an_array((world, shape, order, size, seed) in case()) {
        let (ranks, mut rng) = group(world, shape, order, size, seed);
        let sorted = ranks.windows(2).all(|p| p[0] < p[1]);
        for set in SetKind::ALL {
            for order in OrderKind::ALL {
                match GroupMap::from_ranks(world, &ranks, Strategy::Fixed { set, order }) {
                    Ok(map) => {
                        prop_assert_eq!((map.set_kind(), map.order_kind()), (set, order));
                        agrees(&map, world, &ranks, &mut rng)?;
                    }
                    Err(GroupMapError::NotApplicable { .. }) => {
                        // Only these may refuse: a stride for other sets, the BDD
                        // past its budget, the sorted order for a permuted group.
                        // The plain array holds group order: it takes only Sorted.
                        let stride_refused = set == SetKind::Stride;
                        let plain_refused = set == SetKind::Plain && order != OrderKind::Sorted;
                        prop_assert!(
                            stride_refused || plain_refused || set == SetKind::Bdd
                                || (order == OrderKind::Sorted && !sorted && set != SetKind::Plain),
                            "{:?}+{:?} refused {} members", set, order, ranks.len()
                        );
                    }
                    Err(e) => prop_assert!(false, "{:?}+{:?}: {}", set, order, e),
                }
            }
        }
    }

    #[test]
    fn every_strategy_builds_a_correct_map((world, shape, order, size, seed) in case()) {
        let (ranks, mut rng) = group(world, shape, order, size, seed);
        for strategy in [Strategy::Space, Strategy::Time, Strategy::Auto, Strategy::Hybrid { alpha: 0.9 }] {
            let (map, report) = GroupMap::from_ranks_reported(world, &ranks, strategy)?;
            prop_assert_eq!((report.set, report.order), (map.set_kind(), map.order_kind()));
            prop_assert!(!report.reason.is_empty());
            agrees(&map, world, &ranks, &mut rng)?;
        }
    }

    /// Equal groups get one fingerprint whatever their representation (a
    /// plain array, a stride from ranges, any strategy's choice), and a
    /// group with two members swapped or one more member gets another.
    #[test]
    fn fingerprints_follow_the_group_not_its_representation((world, shape, order, size, seed) in case()) {
        let (ranks, _) = group(world, shape, order, size, seed);
        let plain = GroupMap::from_ranks(world, &ranks, Strategy::Fixed { set: SetKind::Plain, order: OrderKind::Sorted })?;
        for strategy in [Strategy::Space, Strategy::Time, Strategy::Auto] {
            let map = GroupMap::from_ranks(world, &ranks, strategy)?;
            prop_assert_eq!(map.fingerprint(), plain.fingerprint());
        }
        if ranks.len() >= 2 {
            let mut swapped = ranks.clone();
            let last = swapped.len() - 1;
            swapped.swap(seed as usize % last, last);
            let other = GroupMap::from_ranks(world, &swapped, Strategy::Auto)?;
            prop_assert_ne!(other.fingerprint(), plain.fingerprint());
        }
        if let Some(extra) = (0..world).find(|w| !ranks.contains(w)) {
            let mut more = ranks.clone();
            more.push(extra);
            let other = GroupMap::from_ranks(world, &more, Strategy::Auto)?;
            prop_assert_ne!(other.fingerprint(), plain.fingerprint());
        }
        let in_world = GroupMap::from_ranks(world + 1, &ranks, Strategy::Auto)?;
        prop_assert_ne!(in_world.fingerprint(), plain.fingerprint());
    }
}

/// MPI's group operations on plain arrays, the reference for the maps'.
mod reference {
    use std::collections::HashSet;

    pub fn union(a: &[u32], b: &[u32]) -> Vec<u32> {
        let in_a: HashSet<u32> = a.iter().copied().collect();
        a.iter()
            .copied()
            .chain(b.iter().copied().filter(|w| !in_a.contains(w)))
            .collect()
    }

    pub fn intersection(a: &[u32], b: &[u32]) -> Vec<u32> {
        let in_b: HashSet<u32> = b.iter().copied().collect();
        a.iter().copied().filter(|w| in_b.contains(w)).collect()
    }

    pub fn difference(a: &[u32], b: &[u32]) -> Vec<u32> {
        let in_b: HashSet<u32> = b.iter().copied().collect();
        a.iter().copied().filter(|w| !in_b.contains(w)).collect()
    }

    pub fn sorted(mut v: Vec<u32>) -> Vec<u32> {
        v.sort_unstable();
        v
    }

    /// MPI_Group_range_incl's ranks, by the standard's formula.
    pub fn range_ranks(ranges: &[(u32, u32, i64)]) -> Vec<u32> {
        let mut out = Vec::new();
        for &(first, last, stride) in ranges {
            let count = (i64::from(last) - i64::from(first)) / stride + 1;
            out.extend((0..count).map(|k| (i64::from(first) + k * stride) as u32));
        }
        out
    }
}

fn strategy_for(pick: u8) -> Strategy {
    match pick % 4 {
        0 => Strategy::Space,
        1 => Strategy::Time,
        2 => Strategy::Auto,
        _ => Strategy::Fixed {
            set: SetKind::EliasFano,
            order: OrderKind::Packed,
        },
    }
}

fn map_of(world: u32, ranks: &[u32], pick: u8) -> GroupMap {
    let strategy = strategy_for(pick);
    match GroupMap::from_ranks(world, ranks, strategy) {
        Ok(map) => map,
        // A sorted group under the fixed permuted order: let Space choose.
        Err(_) => GroupMap::from_ranks(world, ranks, Strategy::Space).expect("valid ranks"),
    }
}

fn same(map: &GroupMap, ranks: &[u32]) -> Result<(), TestCaseError> {
    prop_assert!(
        map.iter().eq(ranks.iter().copied()),
        "{} is not {:?}",
        map,
        &ranks[..ranks.len().min(20)]
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn group_operations_follow_mpi(
        (world, shape, order, size, seed) in case(),
        (shape_b, order_b, size_b) in (
            prop_oneof![Just(Shape::Random), Just(Shape::Ranges), Just(Shape::Stride), Just(Shape::Empty)],
            prop_oneof![Just(Order::Sorted), Just(Order::Shuffled), Just(Order::FallingRanges)],
            0u32..3000,
        ),
        picks in (any::<u8>(), any::<u8>()),
    ) {
        let (a, mut rng) = group(world, shape, order, size, seed);
        let (b, _) = group(world, shape_b, order_b, size_b, seed ^ 0x5eed);
        let (map_a, map_b) = (map_of(world, &a, picks.0), map_of(world, &b, picks.1));

        same(&map_a.union(&map_b)?, &reference::union(&a, &b))?;
        same(&map_a.intersection(&map_b)?, &reference::intersection(&a, &b))?;
        same(&map_a.difference(&map_b)?, &reference::difference(&a, &b))?;
        same(&map_a.set_union(&map_b)?, &reference::sorted(reference::union(&a, &b)))?;
        same(&map_a.set_intersection(&map_b)?, &reference::sorted(reference::intersection(&a, &b)))?;
        same(&map_a.set_difference(&map_b)?, &reference::sorted(reference::difference(&a, &b)))?;

        // translate_ranks, MPI_UNDEFINED as None.
        let asked: Vec<u32> = (0..a.len().min(500)).map(|_| rng.below(a.len() as u64) as u32).collect();
        let expected: Vec<Option<u32>> =
            asked.iter().map(|&g| b.iter().position(|&w| w == a[g as usize]).map(|p| p as u32)).collect();
        prop_assert_eq!(map_a.translate_ranks(&asked, &map_b)?, expected);

        // compare: identical to itself, similar to a reshuffle, unequal to b unless b has a's members.
        let again = map_of(world, &a, picks.1);
        prop_assert_eq!(map_a.compare(&again), Comparison::Identical);
        let mut shuffled = a.clone();
        rng.shuffle(&mut shuffled);
        let expected = if shuffled == a { Comparison::Identical } else { Comparison::Similar };
        prop_assert_eq!(map_a.compare(&map_of(world, &shuffled, picks.0)), expected);
        let expected = if a == b {
            Comparison::Identical
        } else if reference::sorted(a.clone()) == reference::sorted(b.clone()) {
            Comparison::Similar
        } else {
            Comparison::Unequal
        };
        prop_assert_eq!(map_a.compare(&map_b), expected);

        // include / exclude by group rank.
        let n = a.len() as u32;
        let mut picked: Vec<u32> = (0..n).collect();
        rng.shuffle(&mut picked);
        picked.truncate(rng.below(u64::from(n) + 1) as usize);
        let included: Vec<u32> = picked.iter().map(|&g| a[g as usize]).collect();
        same(&map_a.include(&picked)?, &included)?;
        let dropped: HashSet<u32> = picked.iter().copied().collect();
        let kept: Vec<u32> = (0..n).filter(|g| !dropped.contains(g)).map(|g| a[g as usize]).collect();
        same(&map_a.exclude(&picked)?, &kept)?;

        // Range forms, strides either way, over disjoint stretches of group ranks.
        if n > 0 {
            let mut cuts: Vec<u32> = (0..4).map(|_| rng.below(u64::from(n)) as u32).collect();
            cuts.sort_unstable();
            cuts.dedup();
            let ranges: Vec<(u32, u32, i64)> = cuts
                .iter()
                .enumerate()
                .map(|(k, &c)| {
                    let end = cuts.get(k + 1).map_or(n - 1, |&next| next - 1).max(c);
                    let stride = 1 + rng.below(3) as i64;
                    if k % 2 == 0 { (c, end, stride) } else { (end, c, -stride) }
                })
                .collect();
            let triples: Vec<RankRange> = ranges.iter().map(|&(f, l, s)| RankRange::new(f, l, s)).collect();
            let ranks = reference::range_ranks(&ranges);
            let included: Vec<u32> = ranks.iter().map(|&g| a[g as usize]).collect();
            same(&map_a.range_include(&triples)?, &included)?;
            let dropped: HashSet<u32> = ranks.iter().copied().collect();
            let kept: Vec<u32> = (0..n).filter(|g| !dropped.contains(g)).map(|g| a[g as usize]).collect();
            same(&map_a.range_exclude(&triples)?, &kept)?;
        }
    }

    #[test]
    fn ranges_build_strides_either_way(world in 1u32..=(1 << 20), first in any::<u32>(), last in any::<u32>(), stride in 1i64..5000) {
        let (first, last) = (first % world, last % world);
        let stride = if first <= last { stride } else { -stride };
        let ranks = reference::range_ranks(&[(first, last, stride)]);
        let map = GroupMap::from_ranges(world, &[RankRange::new(first, last, stride)], Strategy::Auto)?;
        prop_assert_eq!(map.set_kind(), SetKind::Stride);
        prop_assert!(map.bytes() <= 256, "a stride took {} B", map.bytes());
        let listed = GroupMap::from_ranks(world, &ranks, Strategy::Fixed { set: SetKind::Plain, order: OrderKind::Sorted })?;
        prop_assert_eq!(map.fingerprint(), listed.fingerprint());
        let mut rng = Rng(u64::from(world));
        agrees(&map, world, &ranks, &mut rng)?;
        // A range of a stride group is a stride again, in O(1).
        let n = map.len();
        let sub = RankRange::new(n - 1, 0, -(1 + i64::from(n % 3)));
        let inner = map.range_include(&[sub])?;
        let expected: Vec<u32> = reference::range_ranks(&[(n - 1, 0, sub.stride)]).iter().map(|&g| ranks[g as usize]).collect();
        prop_assert_eq!(inner.set_kind(), SetKind::Stride);
        agrees(&inner, world, &expected, &mut rng)?;
    }
}

#[test]
fn bad_input_gets_named_errors() {
    let auto = Strategy::Auto;
    assert_eq!(
        GroupMap::from_ranks(10, &[1, 10], auto).unwrap_err(),
        GroupMapError::WorldRankOutOfRange {
            rank: 10,
            world: 10
        }
    );
    assert_eq!(
        GroupMap::from_ranks(10, &[3, 1, 3], auto).unwrap_err(),
        GroupMapError::DuplicateWorldRank { rank: 3 }
    );
    assert!(GroupMap::from_ranks(0, &[], auto).unwrap().is_empty());
    let map = GroupMap::from_ranks(100, &[5, 9, 2, 7], auto).unwrap();
    assert_eq!(
        map.select(4),
        Err(GroupMapError::GroupRankOutOfRange { rank: 4, size: 4 })
    );
    assert_eq!(
        map.rank(100),
        Err(GroupMapError::WorldRankOutOfRange {
            rank: 100,
            world: 100
        })
    );
    assert_eq!(
        map.include(&[0, 4]).unwrap_err(),
        GroupMapError::GroupRankOutOfRange { rank: 4, size: 4 }
    );
    assert_eq!(
        map.include(&[1, 2, 1]).unwrap_err(),
        GroupMapError::DuplicateGroupRank { rank: 1 }
    );
    assert_eq!(
        map.exclude(&[3, 3]).unwrap_err(),
        GroupMapError::DuplicateGroupRank { rank: 3 }
    );
    assert_eq!(
        map.exclude(&[7]).unwrap_err(),
        GroupMapError::GroupRankOutOfRange { rank: 7, size: 4 }
    );
    assert_eq!(
        map.range_include(&[RankRange::new(0, 3, 0)]).unwrap_err(),
        GroupMapError::ZeroStride {
            index: 0,
            first: 0,
            last: 3,
            stride: 0
        }
    );
    assert_eq!(
        map.range_include(&[RankRange::new(0, 1, 1), RankRange::new(3, 1, 1)])
            .unwrap_err(),
        GroupMapError::StrideAwayFromLast {
            index: 1,
            first: 3,
            last: 1,
            stride: 1
        }
    );
    assert_eq!(
        map.range_include(&[RankRange::new(0, 2, 1), RankRange::new(2, 3, 1)])
            .unwrap_err(),
        GroupMapError::DuplicateGroupRank { rank: 2 }
    );
    assert_eq!(
        map.range_exclude(&[RankRange::new(1, 4, 1)]).unwrap_err(),
        GroupMapError::GroupRankOutOfRange { rank: 4, size: 4 }
    );
    assert_eq!(
        GroupMap::from_ranges(50, &[RankRange::new(40, 50, 5)], auto).unwrap_err(),
        GroupMapError::WorldRankOutOfRange {
            rank: 50,
            world: 50
        }
    );
    let other_world = GroupMap::from_ranks(101, &[5], auto).unwrap();
    assert_eq!(
        map.union(&other_world).unwrap_err(),
        GroupMapError::WorldMismatch {
            left: 100,
            right: 101
        }
    );
    assert_eq!(map.compare(&other_world), Comparison::Unequal);
    assert_eq!(
        Strategy::hybrid(1.5).unwrap_err(),
        GroupMapError::BadAlpha { alpha: 1.5 }
    );
    assert!(matches!(
        GroupMap::from_ranks(
            100,
            &[1, 2, 4],
            Strategy::Fixed {
                set: SetKind::Stride,
                order: OrderKind::Sorted
            }
        ),
        Err(GroupMapError::NotApplicable {
            representation: "Stride",
            ..
        })
    ));
    assert!(matches!(
        GroupMap::from_ranks(
            100,
            &[4, 2],
            Strategy::Fixed {
                set: SetKind::Bitmap,
                order: OrderKind::Sorted
            }
        ),
        Err(GroupMapError::NotApplicable {
            representation: "Sorted",
            ..
        })
    ));
    // Messages name the problem.
    let message = GroupMap::from_ranks(10, &[3, 3], auto)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("world rank 3") && message.contains("more than once"),
        "{message}"
    );
}

#[test]
fn strategies_choose_as_the_thesis_says() {
    // A random sparse set: Space takes a near-bound coding; a stride is O(1) for all.
    let world = 1 << 20;
    let mut rng = Rng(7);
    let ranks = members(Shape::Random, world, 50_000, &mut rng);
    let (space, report) = GroupMap::from_ranks_reported(world, &ranks, Strategy::Space).unwrap();
    assert!(
        report
            .sets
            .iter()
            .all(|m| m.bytes >= space.bytes() - std::mem::size_of::<GroupMap>()),
        "{report:?}"
    );
    assert!(report.reason.contains("fewest bytes"), "{}", report.reason);
    let (time, report) = GroupMap::from_ranks_reported(world, &ranks, Strategy::Time).unwrap();
    assert!(
        report.sets.iter().all(|m| m.lookup_ns.is_some()),
        "{report:?}"
    );
    assert!(time.bytes() >= space.bytes());
    let evens: Vec<u32> = (0..world).step_by(2).collect();
    for strategy in [Strategy::Space, Strategy::Time, Strategy::Auto] {
        let map = GroupMap::from_ranks(world, &evens, strategy).unwrap();
        assert_eq!(
            (map.set_kind(), map.order_kind()),
            (SetKind::Stride, OrderKind::Sorted)
        );
        assert!(map.bytes() <= 128);
    }
    // The world in falling order is a stride and one falling block.
    let falling: Vec<u32> = (0..1000).rev().collect();
    let map = GroupMap::from_ranks(1000, &falling, Strategy::Space).unwrap();
    assert_eq!(
        (map.set_kind(), map.order_kind()),
        (SetKind::Stride, OrderKind::Blocks)
    );
    assert!(map.bytes() <= 256, "{map}");
}

#[test]
fn space_estimates_match_what_building_takes() {
    let world = 1 << 20;
    let mut rng = Rng(11);
    for (shape, size) in [
        (Shape::Random, 300),
        (Shape::Random, 40_000),
        (Shape::Random, 900_000),
        (Shape::Ranges, 0),
    ] {
        for order in [Order::Sorted, Order::Shuffled, Order::FallingRanges] {
            let ranks = ordered(members(shape, world, size, &mut rng), order, &mut rng);
            let (_, report) =
                GroupMap::from_ranks_reported(world, &ranks, Strategy::Space).unwrap();
            let fixed = std::mem::size_of::<GroupMap>();
            let sorted = ranks.windows(2).all(|p| p[0] < p[1]);
            for m in &report.sets {
                // The plain array takes the identity; other sets of a
                // permuted group a permutation.
                let order = match (m.kind, sorted) {
                    (SetKind::Plain, _) | (_, true) => OrderKind::Sorted,
                    _ => OrderKind::Packed,
                };
                let built =
                    GroupMap::from_ranks(world, &ranks, Strategy::Fixed { set: m.kind, order })
                        .unwrap();
                let order_bytes = report
                    .orders
                    .iter()
                    .find(|o| o.kind == order)
                    .unwrap()
                    .bytes;
                let set_bytes = built.bytes() - fixed - order_bytes;
                let error = (m.bytes as f64 - set_bytes as f64).abs() / set_bytes.max(1) as f64;
                assert!(
                    error < 0.05,
                    "{:?} estimated {} B, built {} B ({:?}, {} members)",
                    m.kind,
                    m.bytes,
                    set_bytes,
                    shape,
                    ranks.len()
                );
            }
            for o in &report.orders {
                // A permuted group's identity goes with the plain array only.
                let set = match (o.kind, report.set) {
                    (OrderKind::Sorted, _) if !sorted => SetKind::Plain,
                    (_, SetKind::Plain) => SetKind::Packed,
                    (_, chosen) => chosen,
                };
                let built =
                    GroupMap::from_ranks(world, &ranks, Strategy::Fixed { set, order: o.kind })
                        .unwrap();
                let set_bytes = report.sets.iter().find(|m| m.kind == set).unwrap().bytes;
                let order_bytes = built.bytes() - fixed - set_bytes;
                let error = (o.bytes as f64 - order_bytes as f64).abs() / order_bytes.max(1) as f64;
                assert!(
                    error < 0.05,
                    "{:?} estimated {} B, built {} B",
                    o.kind,
                    o.bytes,
                    order_bytes
                );
            }
        }
    }
}

/// Bytes of the plain packed array a map replaces: the map's fixed part,
/// the boxed array's header and ceil(log2 world) bits a member, in words.
fn plain_packed_bytes(world: u32, len: u32) -> usize {
    let bits = u64::from(world.max(2) - 1).ilog2() as usize + 1;
    std::mem::size_of::<GroupMap>() + 40 + (len as usize * bits).div_ceil(64) * 8
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Space and Auto never pick a map larger than the plain packed array,
    /// sorted or permuted, and Auto picks the same on every build.
    #[test]
    fn space_and_auto_never_exceed_the_plain_array(
        world_bits in 7u32..=22,
        density in 0.0001f64..=0.99,
        permuted in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let world = 1u32 << world_bits;
        let size = ((f64::from(world) * density) as u32).clamp(1, world);
        let mut rng = Rng(seed);
        let mut ranks = members(Shape::Random, world, size, &mut rng);
        if permuted {
            rng.shuffle(&mut ranks);
        }
        let plain = plain_packed_bytes(world, ranks.len() as u32);
        for strategy in [Strategy::Space, Strategy::Auto] {
            let map = GroupMap::from_ranks(world, &ranks, strategy).unwrap();
            prop_assert!(map.bytes() <= plain, "{strategy}: {map} > {plain} B");
        }
        let kinds = |map: GroupMap| (map.set_kind(), map.order_kind(), map.bytes());
        let first = GroupMap::from_ranks(world, &ranks, Strategy::Auto).unwrap();
        let again = GroupMap::from_ranks(world, &ranks, Strategy::Auto).unwrap();
        prop_assert_eq!(kinds(first), kinds(again));
    }
}

/// log2 C(world, n) bits, plus log2 n! for a permuted group, in bytes: the
/// least any encoding of an arbitrary n-member map of `world` needs.
fn bound_bytes(world: u32, n: u32, permuted: bool) -> f64 {
    let choose: f64 = (0..n)
        .map(|k| (f64::from(world - k) / f64::from(k + 1)).log2())
        .sum();
    let order: f64 = match permuted {
        true => (2..=n).map(|k| f64::from(k).log2()).sum(),
        false => 0.0,
    };
    (choose + order) / 8.0
}

/// Small groups: within 1.3x of the bound plus a constant 320 B, the map
/// itself (64 B) and 256 B for a representation's headers and indexes
/// (vers' Elias-Fano takes about 230 B at any size), which no
/// representation can shed.
#[test]
fn small_groups_stay_near_the_bound_plus_the_fixed_part() {
    let world = 1 << 20;
    let fixed = (std::mem::size_of::<GroupMap>() + 256) as f64;
    let mut rng = Rng(89);
    for n in [1u32, 2, 5, 9, 33, 89, 109, 200, 1000] {
        for permuted in [false, true] {
            for _ in 0..5 {
                let mut ranks = members(Shape::Random, world, n, &mut rng);
                if permuted {
                    rng.shuffle(&mut ranks);
                }
                let map = GroupMap::from_ranks(world, &ranks, Strategy::Space).unwrap();
                let bound = bound_bytes(world, ranks.len() as u32, permuted);
                assert!(
                    map.bytes() as f64 <= 1.3 * bound + fixed,
                    "{n} members, permuted {permuted}: {map} over 1.3 x {bound:.0} B + {fixed} B"
                );
            }
        }
    }
}

/// `n` ranks of `world` (`n <= world`) in up to four runs, sorted.
fn runs_of(world: u32, n: u32, rng: &mut Rng) -> Vec<u32> {
    let mut set = std::collections::BTreeSet::new();
    let runs = 1 + rng.below(4) as u32;
    while (set.len() as u32) < n {
        let first = rng.below(u64::from(world)) as u32;
        let len = n.div_ceil(runs).min(n - set.len() as u32);
        set.extend((first..world).take(len as usize));
    }
    set.into_iter().take(n as usize).collect()
}

/// The map is 64 bytes and holds small plain arrays inside them: from 10
/// members up (where a `Vec<u32>`'s 24 + 4n reaches 64), Space and Auto
/// take no more than the vector in worlds of up to 65,536 ranks, and in any
/// world at most 40 B more (the map's 64 against the vector's 24), sorted
/// or permuted, random or in runs.
#[test]
fn small_maps_are_no_larger_than_a_vec_from_ten_members() {
    assert_eq!(std::mem::size_of::<GroupMap>(), 64);
    let mut rng = Rng(15);
    for world in [16u32, 100, 2048, 65_536, 65_537, 1 << 20, u32::MAX] {
        for n in (1..=80).filter(|&n| n <= world) {
            for clustered in [false, true] {
                for permuted in [false, true] {
                    let mut ranks = if clustered {
                        runs_of(world, n, &mut rng)
                    } else {
                        members(Shape::Random, world, n, &mut rng)
                    };
                    if permuted {
                        rng.shuffle(&mut ranks);
                    }
                    let vec = 24 + 4 * ranks.len();
                    for strategy in [Strategy::Space, Strategy::Auto] {
                        let map = GroupMap::from_ranks(world, &ranks, strategy).unwrap();
                        let bytes = map.bytes();
                        assert!(bytes <= vec + 40, "{map}: over {vec} + 40 B");
                        if ranks.len() >= 10 && world <= 65_536 {
                            assert!(bytes <= vec, "{strategy:?}, {map}: over a Vec's {vec} B");
                        }
                    }
                }
            }
        }
    }
}
