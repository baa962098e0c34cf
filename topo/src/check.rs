//! The schedule checker: validates any schedule against its torus and member
//! set (spanning, in-degrees, acyclic, route rules, forbidden transit) and
//! measures what the guarantees are about: link loads and depth.

use crate::route::RouteError;
use crate::{Link, Members, Node, Schedule, Topology, Torus};

/// What is structurally wrong with a schedule.
///
/// `colour` is always an index into [`Schedule::colours`]; `parent` and
/// `child` are the ends of the offending [`Edge`](crate::Edge).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScheduleError {
    /// The schedule has no tree at all.
    #[error("the schedule has no colours")]
    NoColours,
    /// A colour is rooted outside the member set.
    #[error("colour {colour}: the root {root} is not a member")]
    RootNotMember {
        /// The colour's index.
        colour: usize,
        /// Its root.
        root: Node,
    },
    /// Every colour must share colour 0's root; this one does not.
    #[error("colour {colour}: its root {root} differs from colour 0's")]
    RootsDiffer {
        /// The colour's index.
        colour: usize,
        /// Its root.
        root: Node,
    },
    /// An edge's parent or child is not a member.
    #[error("colour {colour}: edge {parent} -> {child} touches a non-member")]
    NonMember {
        /// The colour's index.
        colour: usize,
        /// The sending end.
        parent: Node,
        /// The receiving end.
        child: Node,
    },
    /// A member is entered by other than one edge (the root by none).
    #[error("colour {colour}: node {node} is entered {count} times")]
    InDegree {
        /// The colour's index.
        colour: usize,
        /// The member.
        node: Node,
        /// Edges entering it.
        count: usize,
    },
    /// A member's parent chain never reaches the root: it lies on a cycle.
    #[error("colour {colour}: member {node} is not reached from the root")]
    Unreached {
        /// The colour's index.
        colour: usize,
        /// The member.
        node: Node,
    },
    /// An edge's route is not one BG/P's routing could take.
    #[error("colour {colour}: edge {parent} -> {child}: {error}")]
    Route {
        /// The colour's index.
        colour: usize,
        /// The sending end.
        parent: Node,
        /// The receiving end.
        child: Node,
        /// What is wrong with the route.
        error: RouteError,
    },
    /// An edge's route ends elsewhere than at its child (or the edge is a
    /// self-loop).
    #[error("colour {colour}: edge {parent} -> {child} ends at {end}")]
    WrongEnd {
        /// The colour's index.
        colour: usize,
        /// The sending end.
        parent: Node,
        /// The receiving end.
        child: Node,
        /// Where the route actually ends.
        end: Node,
    },
    /// A deposit edge (line-broadcast hop) spans more than one link.
    #[error("colour {colour}: deposit edge {parent} -> {child} is not a unit hop")]
    LongDeposit {
        /// The colour's index.
        colour: usize,
        /// The sending end.
        parent: Node,
        /// The receiving end.
        child: Node,
    },
    /// An edge's route passes through a forbidden (failed) node.
    #[error("colour {colour}: edge {parent} -> {child} passes through forbidden node {node}")]
    Forbidden {
        /// The colour's index.
        colour: usize,
        /// The sending end.
        parent: Node,
        /// The receiving end.
        child: Node,
        /// The forbidden transit node.
        node: Node,
    },
}

/// The measured properties of a valid schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Checked {
    /// The most (colour, edge) pairs crossing one directed link: ≤ 1 is
    /// contention-free.
    pub max_load: u32,
    /// The most a directed link carries when the reduce (every edge
    /// reversed) runs at once with the broadcast.
    pub allreduce_load: u32,
    /// Physical hops on the deepest root-to-member path of any colour.
    pub depth_hops: u32,
    /// Software store-and-forward stages on the deepest path (edges).
    pub stages: u32,
    /// Directed links carrying any colour.
    pub links_used: u32,
}

impl Checked {
    /// No physical link is used in both directions: reduce and broadcast
    /// may run at once without contention.
    pub fn undirected_disjoint(&self) -> bool {
        self.allreduce_load <= 1
    }
}

/// Validates `schedule` as a broadcast over `members`; `forbidden` nodes
/// (failed ones) must not even be passed through.
pub fn check(
    torus: &Torus,
    members: &Members,
    schedule: &Schedule,
    forbidden: &[Node],
) -> Result<Checked, ScheduleError> {
    let Some(first) = schedule.colours.first() else {
        return Err(ScheduleError::NoColours);
    };
    let mut loads = vec![0u32; torus.links() as usize];
    let mut depth = (0, 0);
    for (colour, tree) in schedule.colours.iter().enumerate() {
        if tree.root != first.root {
            return Err(ScheduleError::RootsDiffer {
                colour,
                root: tree.root,
            });
        }
        if !members.contains(tree.root) {
            return Err(ScheduleError::RootNotMember {
                colour,
                root: tree.root,
            });
        }
        // Index members densely; in-degree and reach per member.
        let index = |node: Node| members.nodes().binary_search(&node).ok();
        let mut parent_edge: Vec<Option<usize>> = vec![None; members.len()];
        let mut in_degree = vec![0usize; members.len()];
        let mut hops_of_edge = Vec::with_capacity(tree.edges.len());
        for (i, e) in tree.edges.iter().enumerate() {
            let (Some(_), Some(c)) = (index(e.parent), index(e.child)) else {
                return Err(ScheduleError::NonMember {
                    colour,
                    parent: e.parent,
                    child: e.child,
                });
            };
            in_degree[c] += 1;
            parent_edge[c] = Some(i);
            let walk = torus
                .walk(e.parent, &e.route)
                .map_err(|error| ScheduleError::Route {
                    colour,
                    parent: e.parent,
                    child: e.child,
                    error,
                })?;
            if walk.end != e.child || e.parent == e.child {
                return Err(ScheduleError::WrongEnd {
                    colour,
                    parent: e.parent,
                    child: e.child,
                    end: walk.end,
                });
            }
            if e.deposit && walk.links.len() != 1 {
                return Err(ScheduleError::LongDeposit {
                    colour,
                    parent: e.parent,
                    child: e.child,
                });
            }
            if let Some(&node) = walk.transit.iter().find(|n| forbidden.contains(n)) {
                return Err(ScheduleError::Forbidden {
                    colour,
                    parent: e.parent,
                    child: e.child,
                    node,
                });
            }
            for link in &walk.links {
                loads[link.0 as usize] += 1;
            }
            hops_of_edge.push(walk.links.len() as u32);
        }
        for (i, &node) in members.nodes().iter().enumerate() {
            let expected = usize::from(node != tree.root);
            if in_degree[i] != expected {
                return Err(ScheduleError::InDegree {
                    colour,
                    node,
                    count: in_degree[i],
                });
            }
        }
        // Every member's path to the root, memoised: a path that runs longer
        // than the member count has a cycle, so the member is unreached.
        let mut memo: Vec<Option<(u32, u32)>> = vec![None; members.len()];
        memo[index(tree.root).expect("the root is a member")] = Some((0, 0));
        for start in 0..members.len() {
            let mut path = Vec::new();
            let mut at = start;
            while memo[at].is_none() {
                if path.len() > members.len() {
                    return Err(ScheduleError::Unreached {
                        colour,
                        node: members.nodes()[start],
                    });
                }
                path.push(at);
                let e = parent_edge[at].expect("in-degree 1 off the root");
                at = index(tree.edges[e].parent).expect("checked a member");
            }
            let (mut hops, mut stages) = memo[at].expect("ends on a known node");
            for &node in path.iter().rev() {
                let e = parent_edge[node].expect("in-degree 1 off the root");
                hops += hops_of_edge[e];
                stages += 1;
                memo[node] = Some((hops, stages));
            }
        }
        for &(hops, stages) in memo.iter().flatten() {
            depth = (depth.0.max(hops), depth.1.max(stages));
        }
    }
    Ok(Checked {
        max_load: loads.iter().copied().max().unwrap_or(0),
        allreduce_load: both_ways_load(torus, &loads),
        depth_hops: depth.0,
        stages: depth.1,
        links_used: loads.iter().filter(|&&l| l > 0).count() as u32,
    })
}

/// The most a directed link carries when every route also runs reversed
/// (reduce beside broadcast): `loads` indexed by `Link.0`.
pub fn both_ways_load(torus: &Torus, loads: &[u32]) -> u32 {
    (0..loads.len())
        .filter(|&l| loads[l] > 0)
        .map(|l| loads[l] + loads[torus.reverse(Link(l as u32)).0 as usize])
        .max()
        .unwrap_or(0)
}

/// The link loads of every colour together, indexed by `Link.0`.
pub fn schedule_loads(torus: &Torus, schedule: &Schedule) -> Result<Vec<u32>, RouteError> {
    let mut loads = vec![0u32; torus.links() as usize];
    for tree in &schedule.colours {
        for e in &tree.edges {
            for link in torus.walk(e.parent, &e.route)?.links {
                loads[link.0 as usize] += 1;
            }
        }
    }
    Ok(loads)
}
