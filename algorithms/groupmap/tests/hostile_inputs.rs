//! Builders and operations fed hostile sizes (ranges over the whole 32-bit
//! world, strides near `i64::MAX`, alphas that are not numbers) answer
//! with typed errors or the right group, in memory proportional to their
//! input, never a panic or an absurd allocation.

use catena_groupmap::{GroupMap, GroupMapError, OrderKind, RankRange, SetKind, Strategy};

#[global_allocator]
static ALLOC: catena_fuzz::alloc::Limited = catena_fuzz::alloc::Limited;

const WORLD: u32 = u32::MAX;

fn full() -> RankRange {
    RankRange::new(0, WORLD - 1, 1)
}

#[test]
fn a_single_rank_range_of_a_stride_may_have_any_stride() {
    let evens = GroupMap::from_ranges(100, &[RankRange::new(0, 98, 2)], Strategy::Auto).unwrap();
    for stride in [i64::MAX, i64::MIN, 3, -7] {
        for first in [0, 10, 49] {
            let one = evens
                .range_include(&[RankRange::new(first, first, stride)])
                .unwrap();
            assert_eq!(
                one.iter().collect::<Vec<_>>(),
                [2 * first],
                "stride {stride}"
            );
        }
    }
    let down = evens.range_include(&[RankRange::new(49, 0, -49)]).unwrap();
    assert_eq!(down.iter().collect::<Vec<_>>(), [98, 0]);
}

#[test]
fn every_builder_checks_alpha() {
    let one = [RankRange::new(0, 8, 2)];
    for alpha in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1.5, -0.1] {
        let strategy = Strategy::Hybrid { alpha };
        let bad =
            |r: Result<GroupMap, GroupMapError>| matches!(r, Err(GroupMapError::BadAlpha { .. }));
        assert!(bad(GroupMap::from_ranges(10, &one, strategy)), "{alpha}");
        assert!(bad(GroupMap::from_ranges(10, &[], strategy)), "{alpha}");
        assert!(bad(GroupMap::from_ranks(10, &[1, 3], strategy)), "{alpha}");
        assert!(
            bad(GroupMap::from_ranks(10, &[2, 4, 6], strategy)),
            "{alpha}"
        );
    }
}

#[test]
fn overlapping_ranges_over_the_whole_world_are_duplicates_found_without_listing() {
    let dup = |r: Result<GroupMap, GroupMapError>| match r {
        Err(GroupMapError::DuplicateWorldRank { rank }) => rank,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        dup(GroupMap::from_ranges(
            WORLD,
            &[full(), full()],
            Strategy::Auto
        )),
        0
    );
    let evens = RankRange::new(0, WORLD - 1, 2);
    let odds_down = RankRange::new(WORLD - 2, 1, -2);
    // WORLD - 1 = 2 (mod 3): down to 2, shared first with the evens.
    let threes = RankRange::new(WORLD - 1, 0, -3);
    assert_eq!(
        dup(GroupMap::from_ranges(
            WORLD,
            &[evens, odds_down, threes],
            Strategy::Space
        )),
        2
    );
    let late = RankRange::new(WORLD - 5, WORLD - 5, 1);
    assert_eq!(
        dup(GroupMap::from_ranges(
            WORLD,
            &[full(), late],
            Strategy::Time
        )),
        WORLD - 5
    );

    // The same through a group of the whole world: include and exclude.
    let world = GroupMap::world_group(WORLD);
    let dup_group = |r: Result<GroupMap, GroupMapError>| match r {
        Err(GroupMapError::DuplicateGroupRank { rank }) => rank,
        other => panic!("{other:?}"),
    };
    assert_eq!(dup_group(world.range_include(&[full(), full()])), 0);
    assert_eq!(dup_group(world.range_exclude(&[full(), late, full()])), 0);
    assert!(
        catena_fuzz::alloc::largest() < 1 << 20,
        "{} B",
        catena_fuzz::alloc::largest()
    );
}

#[test]
fn fixed_representations_of_sparse_huge_spans_are_refused() {
    let far_apart = [0, WORLD - 1];
    for set in [SetKind::Bitmap, SetKind::Complement, SetKind::Indexed] {
        let strategy = Strategy::Fixed {
            set,
            order: OrderKind::Sorted,
        };
        let refused = GroupMap::from_ranks(WORLD, &far_apart, strategy);
        assert!(
            matches!(refused, Err(GroupMapError::NotApplicable { .. })),
            "{set}: {:?}",
            refused.map(|map| map.to_string())
        );
    }
    // The strategies that choose build something small.
    for strategy in [Strategy::Space, Strategy::Time, Strategy::Auto] {
        let map = GroupMap::from_ranks(WORLD, &far_apart, strategy).unwrap();
        assert_eq!(map.iter().collect::<Vec<_>>(), far_apart);
    }
    assert!(
        catena_fuzz::alloc::largest() < 1 << 26,
        "{} B",
        catena_fuzz::alloc::largest()
    );
}

/// Operations on the whole world of 2^32 - 1 ranks whose results are a
/// few spans (one rank excluded, halves joined and cut) never list the
/// members: each takes memory of its result, checked by lookups.
#[test]
fn operations_on_the_whole_world_take_memory_of_their_result() {
    let world = GroupMap::world_group(WORLD);
    let check = |map: &GroupMap, len: u32, members: &[(u32, Option<u32>)]| {
        assert_eq!(map.len(), len, "{map}");
        for &(w, g) in members {
            assert_eq!(map.rank(w).unwrap(), g, "rank of {w} in {map}");
            if let Some(g) = g {
                assert_eq!(map.select(g).unwrap(), w, "select of {g} in {map}");
            }
        }
        assert!(map.bytes() < 256, "{map}: {} B", map.bytes());
    };
    let last = WORLD - 1;
    check(
        &world.exclude(&[5]).unwrap(),
        WORLD - 1,
        &[
            (4, Some(4)),
            (5, None),
            (6, Some(5)),
            (last, Some(last - 1)),
        ],
    );
    let cut = [RankRange::new(20, 10, -1), RankRange::new(last, last, 1)];
    check(
        &world.range_exclude(&cut).unwrap(),
        WORLD - 12,
        &[(9, Some(9)), (15, None), (21, Some(10)), (last, None)],
    );
    let low = GroupMap::from_ranges(WORLD, &[RankRange::new(0, WORLD / 2, 1)], Strategy::Auto)
        .unwrap()
        .exclude(&[7])
        .unwrap();
    let high = GroupMap::from_ranges(
        WORLD,
        &[RankRange::new(WORLD / 2 + 1, last, 1)],
        Strategy::Space,
    )
    .unwrap();
    check(
        &low.union(&high).unwrap(),
        WORLD - 1,
        &[(7, None), (last, Some(last - 1))],
    );
    check(
        &world.difference(&low).unwrap(),
        WORLD - low.len(),
        &[(7, Some(0)), (8, None)],
    );
    check(
        &world.intersection(&low).unwrap(),
        low.len(),
        &[(7, None), (last, None)],
    );
    check(
        &low.set_union(&high).unwrap(),
        WORLD - 1,
        &[(6, Some(6)), (8, Some(7))],
    );
    check(
        &world
            .range_include(&[RankRange::new(0, 9, 1), RankRange::new(100, last, 1)])
            .unwrap(),
        WORLD - 90,
        &[(9, Some(9)), (50, None), (100, Some(10))],
    );
    assert!(
        catena_fuzz::alloc::largest() < 1 << 20,
        "{} B",
        catena_fuzz::alloc::largest()
    );
}
