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
