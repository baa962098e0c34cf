//! Tree constructions: each maps (torus, member set, root) to a checked-by-
//! design [`Schedule`]; [`auto`] recognises the member set's shape and picks
//! the construction that serves it contention-free, or falls back and says so.

mod binomial;
mod chain;
mod disjoint;
mod missing_node;
mod planes;
mod rectangle;

pub use binomial::{binomial, binomial_rounds};
pub use chain::chain;
pub use disjoint::disjoint_chains;
pub use missing_node::{missing_node_colours, missing_node_colours_apply, missing_node_tree};
pub use planes::planes;
pub use rectangle::{colours_apply, rectangle, rectangle_colours};

use crate::{Members, MembersError, Node, Schedule, Topology, Torus};
use missing_node::missing_node;
use planes::member_planes;

/// The shape of a member set, as far as the constructions care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Every node of the torus.
    Full,
    /// Every node but this one.
    MissingNode(Node),
    /// Whole planes along the last dimension (not all of them), given by
    /// their coordinates along it, increasing.
    Planes(Vec<u32>),
    /// Anything else: served by a chain, or the binomial tree.
    Irregular,
}

/// Recognises `members`' shape on `torus`, the first that fits in the
/// order of [`Shape`]'s variants.
pub fn classify(torus: &Torus, members: &Members) -> Shape {
    if members.len() == torus.nodes() as usize {
        Shape::Full
    } else if let Some(m) = missing_node(torus, members) {
        Shape::MissingNode(m)
    } else if let Some(planes) = member_planes(torus, members) {
        Shape::Planes(planes)
    } else {
        Shape::Irregular
    }
}

/// The best schedule for the communicator whose ranks live on `order`'s
/// nodes (rank order): the most colours that stay contention-free for its
/// shape, a chain for irregular sets, and the binomial tree (with the
/// reason in `fallback`) where no construction applies.
pub fn auto(torus: &Torus, order: &[Node], root: Node) -> Result<Schedule, MembersError> {
    let members = Members::new(torus, order.iter().copied())?;
    members.check_root(root)?;
    match classify(torus, &members) {
        Shape::Full if colours_apply(torus) => rectangle_colours(torus, &members, root),
        Shape::Full => rectangle(torus, &members, root),
        Shape::MissingNode(_) if missing_node_colours_apply(torus) => {
            missing_node_colours(torus, &members, root)
        }
        Shape::MissingNode(_) => missing_node_tree(torus, &members, root)
            .or_else(|_| irregular(torus, &members, order, root)),
        Shape::Planes(_) => planes(torus, &members, root),
        Shape::Irregular => irregular(torus, &members, order, root),
    }
}

/// A chain, or the binomial tree saying why not.
fn irregular(
    torus: &Torus,
    members: &Members,
    order: &[Node],
    root: Node,
) -> Result<Schedule, MembersError> {
    match chain(torus, members, root) {
        Err(MembersError::Shape(why)) => {
            let mut schedule = binomial(torus, order, root)?;
            schedule.fallback = Some(why);
            Ok(schedule)
        }
        done => done,
    }
}
