//! The node set of a sub-communicator, validated against its torus: sorted,
//! without duplicates, inside the topology, not empty.

use crate::{Node, Topology, Torus};

/// Why a member set or root cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MembersError {
    /// The member list has no node.
    #[error("a sub-communicator needs at least one member")]
    Empty,
    /// A node appears more than once in the member list.
    #[error("node {node} is listed twice")]
    Duplicate {
        /// The repeated node.
        node: Node,
    },
    /// A member is not a node of the torus.
    #[error("node {node} is outside the topology of {nodes} nodes")]
    Outside {
        /// The out-of-range node.
        node: Node,
        /// The torus's node count: valid nodes are `0..nodes`.
        nodes: u32,
    },
    /// The root is not a member, or (from [`Tree::reroot`](crate::Tree::reroot))
    /// no path of the tree leads to it.
    #[error("the root, node {root}, is not a member")]
    RootNotMember {
        /// The requested root.
        root: Node,
    },
    /// A node the caller marked forbidden (failed) is also listed as a member.
    #[error("node {node} is both a member and forbidden")]
    ForbiddenMember {
        /// The node listed twice over.
        node: Node,
    },
    /// A construction cannot serve this member set or torus; the text says
    /// what it needs and what it got (a fallback records it).
    #[error("{0}")]
    Shape(String),
}

/// A validated, sorted set of member nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Members {
    nodes: Vec<Node>,
}

impl Members {
    /// Validates `nodes` (any order) against `torus`: each inside it, none
    /// twice, at least one.
    pub fn new(
        torus: &Torus,
        nodes: impl IntoIterator<Item = Node>,
    ) -> Result<Members, MembersError> {
        let mut nodes: Vec<Node> = nodes.into_iter().collect();
        let total = torus.nodes();
        if let Some(&node) = nodes.iter().find(|&&n| n >= total) {
            return Err(MembersError::Outside { node, nodes: total });
        }
        nodes.sort_unstable();
        if let Some(pair) = nodes.windows(2).find(|w| w[0] == w[1]) {
            return Err(MembersError::Duplicate { node: pair[0] });
        }
        if nodes.is_empty() {
            return Err(MembersError::Empty);
        }
        Ok(Members { nodes })
    }

    /// Every node of the torus.
    pub fn all(torus: &Torus) -> Members {
        Members {
            nodes: (0..torus.nodes()).collect(),
        }
    }

    /// Whether `node` is a member (a binary search).
    pub fn contains(&self, node: Node) -> bool {
        self.nodes.binary_search(&node).is_ok()
    }

    /// How many members there are.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Always false: a validated set has a member (kept beside `len`).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// In increasing node order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// `Ok` when `root` is a member.
    pub fn check_root(&self, root: Node) -> Result<(), MembersError> {
        if self.contains(root) {
            Ok(())
        } else {
            Err(MembersError::RootNotMember { root })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_member_sets_are_named() {
        let t = Torus::new(&[2, 2]).unwrap();
        assert_eq!(Members::new(&t, []), Err(MembersError::Empty));
        assert_eq!(
            Members::new(&t, [1, 3, 1]),
            Err(MembersError::Duplicate { node: 1 })
        );
        assert_eq!(
            Members::new(&t, [0, 4]),
            Err(MembersError::Outside { node: 4, nodes: 4 })
        );
        let m = Members::new(&t, [3, 0]).unwrap();
        assert_eq!(m.nodes(), &[0, 3]);
        assert_eq!(
            m.check_root(1),
            Err(MembersError::RootNotMember { root: 1 })
        );
    }
}
