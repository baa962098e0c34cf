//! Property tests of the torus tree constructions against the checker and
//! the guarantees of the spec (`shared/specs/torus-trees.md`, section 6):
//! random extents 1..13 (tori and meshes), roots, missing nodes, planes.

use catena_topo::trees::{
    auto, auto_avoiding, binomial, binomial_rounds, classify, missing_node_colours,
    missing_node_colours_apply, missing_node_tree, planes, rectangle, rectangle_colours, Shape,
};
use catena_topo::{
    check, Construction, Edge, Members, MembersError, Node, Schedule, ScheduleError, Segment,
    Topology, Torus, Tree,
};
use proptest::prelude::*;

fn torus_strategy(max_dims: usize, wrap_all: bool) -> impl Strategy<Value = Torus> {
    (1..=max_dims)
        .prop_flat_map(move |n| {
            (
                proptest::collection::vec(1u32..=13, n),
                proptest::collection::vec(any::<bool>(), n),
            )
        })
        .prop_filter_map("at most 2200 nodes", move |(dims, wrap)| {
            let wrap: Vec<bool> = wrap.iter().map(|&w| w || wrap_all).collect();
            let t = Torus::with_wrap(&dims, &wrap).ok()?;
            (t.nodes() <= 2200).then_some(t)
        })
}

fn torus3(min: u32) -> impl Strategy<Value = Torus> {
    proptest::collection::vec(min..=13u32, 3).prop_filter_map("at most 2200 nodes", |dims| {
        let t = Torus::new(&dims).ok()?;
        (t.nodes() <= 2200).then_some(t)
    })
}

fn dims_sum(t: &Torus) -> u32 {
    t.dims().iter().map(|d| d - 1).sum()
}

/// Every member but `m`.
fn all_but(t: &Torus, m: Node) -> Members {
    Members::new(t, (0..t.nodes()).filter(|&n| n != m)).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn full_torus_one_colour(t in torus_strategy(4, false), r in any::<u32>()) {
        let members = Members::all(&t);
        let root = r % t.nodes();
        let s = rectangle(&t, &members, root).unwrap();
        let c = check(&t, &members, &s, &[]).unwrap();
        prop_assert!(c.max_load <= 1);
        prop_assert!(c.undirected_disjoint() && s.concurrent_allreduce);
        prop_assert!(c.depth_hops <= dims_sum(&t), "{c:?}");
    }

    #[test]
    fn full_torus_three_colours(t in torus3(2), r in any::<u32>()) {
        let members = Members::all(&t);
        let root = r % t.nodes();
        let s = rectangle_colours(&t, &members, root).unwrap();
        let c = check(&t, &members, &s, &[]).unwrap();
        prop_assert_eq!(c.max_load, 1);
        let d = t.dims();
        let bound = (0..3).map(|a| 2 * (d[a] - 1) + (d[(a + 1) % 3] - 1) + (d[(a + 2) % 3] - 1)).max().unwrap();
        prop_assert!(c.depth_hops <= bound);
    }

    #[test]
    fn missing_node_one_colour_any_root(
        t in torus_strategy(3, false).prop_filter("two nodes at least", |t| t.nodes() >= 2),
        m in any::<u32>(),
        r in any::<u32>(),
    ) {
        let m = m % t.nodes();
        let members = all_but(&t, m);
        // The pseudo-root needs a node differing from m in every dimension.
        let root = members.nodes()[r as usize % members.len()];
        match missing_node_tree(&t, &members, root) {
            Ok(s) => {
                let c = check(&t, &members, &s, &[m]).unwrap();
                prop_assert!(c.max_load <= 1, "{c:?}");
                prop_assert!(c.allreduce_load <= 1, "{c:?}");
                prop_assert!(s.concurrent_allreduce);
                // Re-rooting anywhere keeps the guarantees.
                for other in members.nodes().iter().step_by(members.len() / 7 + 1) {
                    let mut tree = s.colours[0].clone();
                    tree.reroot(*other).unwrap();
                    let moved = Schedule::new(Construction::MissingNode, vec![tree]);
                    let c = check(&t, &members, &moved, &[m]).unwrap();
                    prop_assert!(c.allreduce_load <= 1);
                }
            }
            Err(MembersError::Shape(_)) => {
                // Only a mesh with m inside every line it could go round.
                prop_assert!((0..t.dims().len()).all(|d| t.dims()[d] < 2 || !t.wraps(d)));
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }

    #[test]
    fn missing_node_three_colours(t in torus3(3), m in any::<u32>(), r in any::<u32>()) {
        prop_assert!(missing_node_colours_apply(&t));
        let m = m % t.nodes();
        let members = all_but(&t, m);
        let root = members.nodes()[r as usize % members.len()];
        let s = missing_node_colours(&t, &members, root).unwrap();
        let c = check(&t, &members, &s, &[m]).unwrap();
        prop_assert_eq!(c.max_load, 1);
    }

    #[test]
    fn planes_subset_along_any_dimension(
        t in torus_strategy(4, false),
        dim in any::<usize>(),
        planes_mask in any::<u64>(),
        r in any::<u32>(),
    ) {
        let z = dim % t.dims().len();
        let dz = t.dims()[z];
        let mut zs: Vec<u32> = (0..dz).filter(|&p| planes_mask >> p & 1 == 1).collect();
        if zs.is_empty() {
            zs.push(planes_mask as u32 % dz);
        }
        let order: Vec<Node> = (0..t.nodes()).filter(|&n| zs.contains(&t.coordinates(n)[z])).collect();
        let members = Members::new(&t, order.iter().copied()).unwrap();
        let root = members.nodes()[r as usize % members.len()];
        let s = planes(&t, &members, root).unwrap();
        let c = check(&t, &members, &s, &[]).unwrap();
        prop_assert!(c.max_load <= 1, "{c:?}");
        prop_assert!(c.allreduce_load <= 1, "{c:?}");
        let in_plane: u32 = (0..t.dims().len()).filter(|&d| d != z).map(|d| t.dims()[d] - 1).sum();
        let z_span = if t.wraps(z) {
            let k = zs.len();
            let widest = (0..k).map(|i| (zs[(i + 1) % k] + dz - zs[i] - 1) % dz + 1).max().unwrap();
            dz - widest
        } else {
            zs[zs.len() - 1] - zs[0]
        };
        prop_assert!(c.depth_hops <= in_plane + z_span, "{c:?} {zs:?}");
        // `auto` picks the plane tree for every proper subset of planes
        // (all but one node is the missing-node shape, which comes first).
        if order.len() + 1 < t.nodes() as usize {
            prop_assert_eq!(
                classify(&t, &members),
                Shape::Planes { dim: z, planes: zs.clone() }
            );
            prop_assert_eq!(auto(&t, &order, root).unwrap().construction, Construction::Planes);
        }
    }

    #[test]
    fn binomial_and_auto_serve_any_member_set(
        t in torus_strategy(3, false),
        seed in any::<u64>(),
        density in 1u64..=100,
    ) {
        let mut x = seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let mut order: Vec<Node> = (0..t.nodes()).filter(|_| next() % 100 < density).collect();
        if order.is_empty() {
            order.push((next() % u64::from(t.nodes())) as Node);
        }
        for i in (1..order.len()).rev() {
            order.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let members = Members::new(&t, order.iter().copied()).unwrap();
        let root = order[(next() % order.len() as u64) as usize];
        let b = binomial(&t, &order, root).unwrap();
        let c = check(&t, &members, &b, &[]).unwrap();
        prop_assert!(c.stages <= 64 - (order.len() as u64).leading_zeros());
        let s = auto(&t, &order, root).unwrap();
        let c = check(&t, &members, &s, &[]).unwrap();
        if s.fallback.is_none() {
            prop_assert!(c.max_load <= 1, "{:?} {c:?}", s.construction);
        }
        if s.concurrent_allreduce {
            prop_assert!(c.allreduce_load <= 1);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Random members, some of the other nodes failed: whatever `auto`
    /// returns passes none of them, or it says why it cannot.
    #[test]
    fn no_auto_schedule_passes_a_forbidden_node(
        t in torus_strategy(3, false),
        seed in any::<u64>(),
        density in 1u64..=100,
        failed in 0u64..=100,
    ) {
        let mut x = seed | 1;
        let mut next = || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x };
        let mut order: Vec<Node> = (0..t.nodes()).filter(|_| next() % 100 < density).collect();
        if order.is_empty() {
            order.push((next() % u64::from(t.nodes())) as Node);
        }
        let forbidden: Vec<Node> =
            (0..t.nodes()).filter(|n| !order.contains(n) && next() % 100 < failed).collect();
        for i in (1..order.len()).rev() {
            order.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let members = Members::new(&t, order.iter().copied()).unwrap();
        let root = order[(next() % order.len() as u64) as usize];
        match auto_avoiding(&t, &order, root, &forbidden) {
            Ok(s) => {
                let c = check(&t, &members, &s, &forbidden);
                prop_assert!(c.is_ok(), "{:?}: {c:?}", s.construction);
            }
            Err(MembersError::Shape(why)) => prop_assert!(!forbidden.is_empty(), "{why}"),
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}

/// Every single missing node of meshes and tori, 2D and 3D: `auto` never
/// routes through it (it may have failed). On a mesh the chain fallback
/// used to: 5x5, node 12, edge 7 -> 17.
#[test]
fn a_missing_node_is_never_passed() {
    let shapes: [(&[u32], &[bool]); 9] = [
        (&[5, 5], &[false, false]),
        (&[4, 4], &[false, false]),
        (&[3, 6], &[false, true]),
        (&[5, 5], &[true, true]),
        (&[2, 7], &[false, false]),
        (&[4, 4, 4], &[false, false, false]),
        (&[3, 4, 5], &[true, false, true]),
        (&[4, 4, 4], &[true, true, true]),
        (&[7], &[false]),
    ];
    let mut detours = 0;
    for (dims, wrap) in shapes {
        let t = Torus::with_wrap(dims, wrap).unwrap();
        for missing in 0..t.nodes() {
            let order: Vec<Node> = (0..t.nodes()).filter(|&n| n != missing).collect();
            let members = Members::new(&t, order.iter().copied()).unwrap();
            for root in [order[0], order[order.len() / 2], order[order.len() - 1]] {
                match auto(&t, &order, root) {
                    // Only a line cut in two has no way round, and says so.
                    Ok(s) if dims.len() == 1 && s.fallback.is_some() => {}
                    Ok(s) => {
                        detours += usize::from(s.construction == Construction::Neighbours);
                        if let Err(e) = check(&t, &members, &s, &[missing]) {
                            panic!("{dims:?} {wrap:?} missing {missing} root {root}: {e}");
                        }
                    }
                    Err(e) => panic!("{e}"),
                }
                // Once the caller says the node failed, a cut line is an error.
                if let Err(e) = auto_avoiding(&t, &order, root, &[missing]) {
                    assert!(
                        matches!(e, MembersError::Shape(_)) && dims.len() == 1,
                        "{e}"
                    );
                }
            }
        }
    }
    assert!(detours > 0, "the mesh cases need the neighbours tree");
    let mesh = Torus::with_wrap(&[5, 5], &[false, false]).unwrap();
    let order: Vec<Node> = (0..25).filter(|&n| n != 12).collect();
    let s = auto(&mesh, &order, 0).unwrap();
    assert_eq!(s.construction, Construction::Neighbours);
    assert!(s.fallback.unwrap().contains("forbidden node 12"));
    assert_eq!(
        auto_avoiding(&mesh, &order, 0, &[3]),
        Err(MembersError::ForbiddenMember { node: 3 })
    );
    assert_eq!(
        auto_avoiding(&mesh, &order, 0, &[25]),
        Err(MembersError::Outside {
            node: 25,
            nodes: 25
        })
    );
}

#[test]
fn auto_recognises_each_shape() {
    let t = Torus::new(&[4, 4, 4]).unwrap();
    let all: Vec<Node> = (0..t.nodes()).collect();
    assert_eq!(classify(&t, &Members::all(&t)), Shape::Full);
    assert_eq!(
        auto(&t, &all, 5).unwrap().construction,
        Construction::RectangleColours
    );
    let but: Vec<Node> = all.iter().copied().filter(|&n| n != 9).collect();
    assert_eq!(classify(&t, &all_but(&t, 9)), Shape::MissingNode(9));
    assert_eq!(
        auto(&t, &but, 5).unwrap().construction,
        Construction::MissingNodeColours
    );
    let half: Vec<Node> = all
        .iter()
        .copied()
        .filter(|&n| t.coordinates(n)[2] % 2 == 0)
        .collect();
    assert_eq!(
        classify(&t, &Members::new(&t, half.clone()).unwrap()),
        Shape::Planes {
            dim: 2,
            planes: vec![0, 2]
        }
    );
    assert_eq!(
        auto(&t, &half, 0).unwrap().construction,
        Construction::Planes
    );
    let mesh = Torus::with_wrap(&[4, 4], &[false, true]).unwrap();
    let all: Vec<Node> = (0..mesh.nodes()).collect();
    assert_eq!(
        auto(&mesh, &all, 3).unwrap().construction,
        Construction::Rectangle
    );
}

#[test]
fn bad_input_is_refused_by_name() {
    let t = Torus::new(&[3, 3]).unwrap();
    assert_eq!(auto(&t, &[], 0), Err(MembersError::Empty));
    assert_eq!(
        auto(&t, &[1, 2, 1], 1),
        Err(MembersError::Duplicate { node: 1 })
    );
    assert_eq!(
        auto(&t, &[1, 9], 1),
        Err(MembersError::Outside { node: 9, nodes: 9 })
    );
    assert_eq!(
        auto(&t, &[1, 2], 0),
        Err(MembersError::RootNotMember { root: 0 })
    );
    let some = Members::new(&t, [0, 1, 2]).unwrap();
    assert!(matches!(
        rectangle(&t, &some, 0),
        Err(MembersError::Shape(_))
    ));
    assert!(matches!(
        missing_node_tree(&t, &some, 0),
        Err(MembersError::Shape(_))
    ));
}

/// The spec's model figures: 256 random members of an 8x8x8 torus give
/// binomial round loads like [1,1,1,1,2,2,3,3]; sorted order is worse.
#[test]
fn binomial_rounds_contend_on_a_random_communicator() {
    let t = Torus::new(&[8, 8, 8]).unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut nodes: Vec<Node> = (0..512).collect();
    for i in (1..512).rev() {
        nodes.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    nodes.truncate(256);
    let rounds = binomial_rounds(&t, &nodes, nodes[0]).unwrap();
    assert_eq!(rounds.len(), 8);
    let max_loads: Vec<u32> = rounds
        .iter()
        .map(|edges| {
            let pairs: Vec<(Node, Node)> = edges.iter().map(|e| (e.parent, e.child)).collect();
            catena_topo::link_loads(&t, &pairs)
                .into_iter()
                .max()
                .unwrap()
        })
        .collect();
    assert!(max_loads[..4].iter().all(|&l| l <= 2), "{max_loads:?}");
    assert!(max_loads[6..].iter().all(|&l| l >= 2), "{max_loads:?}");
}

/// Each structural rule of the checker catches its violation.
#[test]
fn the_checker_names_each_violation() {
    let t = Torus::new(&[4, 4]).unwrap();
    let members = Members::all(&t);
    let good = rectangle(&t, &members, 0).unwrap();
    check(&t, &members, &good, &[]).unwrap();
    let with = |f: &dyn Fn(&mut Tree)| {
        let mut s = good.clone();
        f(&mut s.colours[0]);
        check(&t, &members, &s, &[])
    };
    // Re-rooting at a node the tree does not reach is refused.
    let mut tree = good.colours[0].clone();
    assert!(tree.reroot(99).is_err());
    assert_eq!(tree, good.colours[0]);
    // A member entered twice.
    let dup = good.colours[0].edges[0].clone();
    assert!(matches!(
        with(&|tr| tr.edges.push(dup.clone())),
        Err(ScheduleError::InDegree { .. })
    ));
    // A member never entered.
    assert!(matches!(
        with(&|tr| {
            tr.edges.pop();
        }),
        Err(ScheduleError::InDegree { .. })
    ));
    // A route that ends elsewhere.
    assert!(matches!(
        with(&|tr| tr.edges[0].route[0].up = !tr.edges[0].route[0].up),
        Err(ScheduleError::WrongEnd { .. })
    ));
    // A cycle cut off from the root: 1 -> 2 -> 3 -> (through 0) -> 1.
    let cycle = Schedule::new(
        Construction::Rectangle,
        vec![Tree {
            root: 0,
            edges: vec![
                Edge::hop(1, 2, 1, true),
                Edge::hop(2, 3, 1, true),
                Edge::unicast(
                    3,
                    1,
                    vec![Segment {
                        dim: 1,
                        up: true,
                        len: 2,
                    }],
                ),
            ],
        }],
    );
    let three = Members::new(&t, [0, 1, 2, 3]).unwrap();
    let r = check(&t, &three, &cycle, &[]);
    assert!(matches!(r, Err(ScheduleError::Unreached { .. })), "{r:?}");
    // A long deposit, a non-minimal segment, a forbidden transit.
    let long = Schedule::new(
        Construction::Binomial,
        vec![Tree {
            root: 0,
            edges: vec![Edge {
                parent: 0,
                child: 2,
                route: vec![Segment {
                    dim: 1,
                    up: true,
                    len: 2,
                }],
                deposit: true,
            }],
        }],
    );
    let pair = Members::new(&t, [0, 2]).unwrap();
    assert!(matches!(
        check(&t, &pair, &long, &[]),
        Err(ScheduleError::LongDeposit { .. })
    ));
    let mut unicast = long.clone();
    unicast.colours[0].edges[0].deposit = false;
    check(&t, &pair, &unicast, &[]).unwrap();
    assert!(matches!(
        check(&t, &pair, &unicast, &[1]),
        Err(ScheduleError::Forbidden { node: 1, .. })
    ));
    let mut far = unicast.clone();
    far.colours[0].edges[0].route[0].len = 6;
    assert!(check(&t, &pair, &far, &[]).is_err());
}

/// A member set no construction serves (irregular members of a 4D torus)
/// gets the binomial tree, which says why.
#[test]
fn auto_falls_back_and_says_why() {
    let t = Torus::new(&[3, 3, 3, 3]).unwrap();
    let order: Vec<Node> = (0..t.nodes()).filter(|n| n % 5 != 1).collect();
    let s = auto(&t, &order, order[3]).unwrap();
    assert_eq!(s.construction, Construction::Binomial);
    let why = s.fallback.clone().expect("a reason");
    assert!(!why.is_empty());
    let members = Members::new(&t, order.iter().copied()).unwrap();
    check(&t, &members, &s, &[]).unwrap();
}

/// Where neighbouring members do not connect the root to every member
/// without passing a forbidden node, the fallback routes through allowed
/// non-members (issue 33's reproducer: 11 -> 5 via 2, 11 -> 19 via 20).
#[test]
fn the_fallback_routes_through_allowed_non_members() {
    let t = Torus::new(&[3, 3, 3]).unwrap();
    let order = [11, 22, 19, 8, 5, 9, 4];
    let forbidden = [21, 18, 12, 10, 17, 7, 13, 3, 1, 24];
    let s = auto_avoiding(&t, &order, 11, &forbidden).unwrap();
    assert_eq!(s.construction, Construction::Routed, "{s:?}");
    assert!(s.fallback.is_some());
    let members = Members::new(&t, order.iter().copied()).unwrap();
    let checked = check(&t, &members, &s, &forbidden).unwrap();
    assert_eq!((checked.max_load, checked.allreduce_load), (1, 1));
    // The same with 40 more dimensions of extent 1 (the same node
    // numbers): the routes tried per pair do not grow with the dimensions.
    let mut dims = vec![3, 3, 3];
    dims.extend([1; 40]);
    let t = Torus::new(&dims).unwrap();
    let s = auto_avoiding(&t, &order, 11, &forbidden).unwrap();
    assert_eq!(s.construction, Construction::Routed, "{s:?}");
    let members = Members::new(&t, order.iter().copied()).unwrap();
    check(&t, &members, &s, &forbidden).unwrap();
}

proptest! {
    /// On random member and forbidden sets, whatever `auto_avoiding` gives
    /// passes no forbidden node and, where it routed through non-members,
    /// loads no link twice, broadcast and reduce at once.
    #[test]
    fn routed_fallbacks_avoid_the_forbidden_nodes(
        seed in any::<u64>(),
        members in 2usize..12,
        forbidden in 1usize..12,
    ) {
        let t = Torus::new(&[3, 3, 3]).unwrap();
        let mut nodes: Vec<Node> = (0..t.nodes()).collect();
        let mut state = seed | 1;
        for i in (1..nodes.len()).rev() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            nodes.swap(i, (state % (i as u64 + 1)) as usize);
        }
        let order = &nodes[..members];
        let avoid = &nodes[members..members + forbidden];
        let set = Members::new(&t, order.iter().copied()).unwrap();
        if let Ok(s) = auto_avoiding(&t, order, order[0], avoid) {
            let checked = check(&t, &set, &s, avoid);
            prop_assert!(checked.is_ok(), "{order:?} avoiding {avoid:?}: {checked:?}");
            if s.construction == Construction::Routed {
                let checked = checked.unwrap();
                prop_assert_eq!((checked.max_load, checked.allreduce_load), (1, 1));
            }
        }
    }
}
