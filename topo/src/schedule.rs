//! A broadcast schedule: k colours, each an arborescence over the members
//! rooted at the root and carrying 1/k of the message. Each tree edge is a
//! routed unicast or one unit hop of a line broadcast (BG/P's deposit bit).

use std::fmt;

use crate::route::{reversed, Segment};
use crate::{MembersError, Node, Torus};

/// Parent sends to child along `route`. A `deposit` edge is one hop of a
/// line broadcast: a single unit segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The sending node.
    pub parent: Node,
    /// The receiving node.
    pub child: Node,
    /// The links the data follows from parent to child.
    pub route: Vec<Segment>,
    /// One unit hop of a line broadcast (BG/P's deposit bit) rather than a
    /// routed unicast: `route` is then a single one-hop segment.
    pub deposit: bool,
}

impl Edge {
    /// A point-to-point send along `route` (not a deposit hop).
    pub fn unicast(parent: Node, child: Node, route: Vec<Segment>) -> Edge {
        Edge {
            parent,
            child,
            route,
            deposit: false,
        }
    }

    /// A deposit hop: one link along `dim` from `parent` to its neighbour
    /// `child`.
    pub fn hop(parent: Node, child: Node, dim: usize, up: bool) -> Edge {
        Edge {
            parent,
            child,
            route: vec![Segment { dim, up, len: 1 }],
            deposit: true,
        }
    }

    /// The same link path, child to parent.
    pub fn reversed(&self) -> Edge {
        Edge {
            parent: self.child,
            child: self.parent,
            route: reversed(&self.route),
            deposit: self.deposit,
        }
    }
}

/// One colour. Edges are listed in the order parents send them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tree {
    /// The node the data starts from.
    pub root: Node,
    /// Every member but the root is the child of exactly one edge.
    pub edges: Vec<Edge>,
}

impl Tree {
    // The line builders serve the constructions, which call them only with
    // lines that fit the torus; a schedule of one's own is built from
    // `Edge::hop` and `Edge::unicast` and validated by `check`.

    /// A tree of deposit hops: a line broadcast from `from` along `dim`,
    /// `hops` unit hops up (or down).
    pub(crate) fn line(&mut self, torus: &Torus, from: Node, dim: usize, up: bool, hops: u32) {
        let mut here = from;
        for _ in 0..hops {
            let next = torus
                .step(here, dim, up)
                .expect("a line stays on the torus");
            self.edges.push(Edge::hop(here, next, dim, up));
            here = next;
        }
    }

    /// Every other node of `from`'s line along `dim`: up round a ring, both
    /// ways on a mesh. Deposit hops only.
    pub(crate) fn full_line(&mut self, torus: &Torus, from: Node, dim: usize) {
        let extent = torus.dims()[dim];
        let at = torus.coordinates(from)[dim];
        if torus.wraps(dim) {
            self.line(torus, from, dim, true, extent - 1);
        } else {
            self.line(torus, from, dim, true, extent - 1 - at);
            self.line(torus, from, dim, false, at);
        }
    }

    /// Every other node of `from`'s line along `dim` except `avoid` (on that
    /// line): two opposite segments that stop before it.
    pub(crate) fn line_around(&mut self, torus: &Torus, from: Node, dim: usize, avoid: Node) {
        for up in [true, false] {
            let mut here = from;
            while let Some(next) = torus
                .step(here, dim, up)
                .filter(|&n| n != avoid && n != from)
            {
                self.edges.push(Edge::hop(here, next, dim, up));
                here = next;
            }
        }
    }

    /// Re-roots at `new_root` by reversing the edges on the path from the
    /// current root to it; refused (tree unchanged) when no such path exists.
    pub fn reroot(&mut self, new_root: Node) -> Result<(), MembersError> {
        // Find the whole path first: a reversed edge enters its old parent.
        let mut path = Vec::new();
        let mut at = new_root;
        while at != self.root {
            let entering = self.edges.iter().position(|e| e.child == at);
            // More steps than edges: a cycle that never reaches the root.
            let Some(i) = entering.filter(|_| path.len() < self.edges.len()) else {
                return Err(MembersError::RootNotMember { root: new_root });
            };
            path.push(i);
            at = self.edges[i].parent;
        }
        for i in path {
            self.edges[i] = self.edges[i].reversed();
        }
        self.root = new_root;
        Ok(())
    }
}

/// Which construction produced a schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Construction {
    /// Full torus, one colour: lines dimension after dimension.
    Rectangle,
    /// Full 3D torus, three directed-edge-disjoint colours (BG/P).
    RectangleColours,
    /// One missing node, one colour from a pseudo-root (A1).
    MissingNode,
    /// One missing node, three colours with faces avoiding it (A2).
    MissingNodeColours,
    /// A subset of whole planes along one dimension.
    Planes,
    /// A Hamiltonian chain over a random 2D member set.
    Chain2d,
    /// The chain, plane by plane, over a random 3D member set.
    Chain3d,
    /// One of several sub-communicators' pairwise link-disjoint chains.
    DisjointChain,
    /// The binomial tree over communicator ranks (the baseline).
    Binomial,
    /// A breadth-first tree over links between neighbouring members: no
    /// route transits a node, so none passes a forbidden one.
    Neighbours,
    /// A tree grown member by member along free paths through allowed
    /// non-members, each link carrying one edge at most.
    Routed,
}

impl fmt::Display for Construction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// The parent and children of one node in one colour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Place {
    /// Where the node receives from; `None` at the root (or off the tree).
    pub parent: Option<Node>,
    /// Where it sends, in the order it sends.
    pub children: Vec<Node>,
}

/// A broadcast (or, edges reversed, reduce) over a member set: one tree per
/// colour, all rooted at the same node, the message split evenly among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Which construction built it.
    pub construction: Construction,
    /// The trees, one per colour; each carries 1/k of the message, k being
    /// their number.
    pub colours: Vec<Tree>,
    /// Reduce and broadcast may run at once: no link is used both ways.
    pub concurrent_allreduce: bool,
    /// Why a contention-free construction could not serve the member set,
    /// when this schedule is the fallback.
    pub fallback: Option<String>,
}

impl Schedule {
    /// A schedule of `colours`, claiming no concurrent allreduce and no
    /// fallback (the constructions set those).
    pub fn new(construction: Construction, colours: Vec<Tree>) -> Schedule {
        Schedule {
            construction,
            colours,
            concurrent_allreduce: false,
            fallback: None,
        }
    }

    /// Colour 0's root (`None` without colours).
    pub fn root(&self) -> Option<Node> {
        self.colours.first().map(|tree| tree.root)
    }

    /// `node`'s place in every colour (O(edges): done once per schedule).
    pub fn places(&self, node: Node) -> Vec<Place> {
        self.colours
            .iter()
            .map(|tree| Place {
                parent: tree
                    .edges
                    .iter()
                    .find(|e| e.child == node)
                    .map(|e| e.parent),
                children: tree
                    .edges
                    .iter()
                    .filter(|e| e.parent == node)
                    .map(|e| e.child)
                    .collect(),
            })
            .collect()
    }
}
