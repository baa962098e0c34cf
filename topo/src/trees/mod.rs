//! Tree constructions: each maps (torus, member set, root) to a checked-by-
//! design [`Schedule`]; [`auto`] recognises the member set's shape and picks
//! the construction that serves it contention-free, or falls back and says so.

mod binomial;
mod chain;
mod disjoint;
mod missing_node;
mod neighbours;
mod planes;
mod rectangle;
mod routed;

pub use binomial::{binomial, binomial_rounds};
pub use chain::chain;
pub use disjoint::disjoint_chains;
pub use missing_node::{missing_node_colours, missing_node_colours_apply, missing_node_tree};
pub use neighbours::neighbours;
pub use planes::planes;
pub use rectangle::{colours_apply, rectangle, rectangle_colours};
pub use routed::routed;

use crate::{check, Members, MembersError, Node, Schedule, ScheduleError, Topology, Torus};
use missing_node::missing_node;
use planes::member_planes;

/// The shape of a member set, as far as the constructions care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Every node of the torus.
    Full,
    /// Every node but this one.
    MissingNode(Node),
    /// Whole planes along one dimension (not all of them).
    Planes {
        /// The dimension the planes are cut along (the spec's Z).
        dim: usize,
        /// The member planes' coordinates along `dim`, increasing.
        planes: Vec<u32>,
    },
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
    } else if let Some((dim, planes)) = member_planes(torus, members) {
        Shape::Planes { dim, planes }
    } else {
        Shape::Irregular
    }
}

/// The best schedule for the communicator whose ranks live on `order`'s
/// nodes (rank order): the most colours that stay contention-free for its
/// shape, a chain for irregular sets, and the binomial tree (with the
/// reason in `fallback`) where no construction applies. A missing node may
/// have failed, so no route passes it unless it cuts the members apart
/// (then `fallback` says so): [`auto_avoiding`] with no forbidden node.
pub fn auto(torus: &Torus, order: &[Node], root: Node) -> Result<Schedule, MembersError> {
    auto_avoiding(torus, order, root, &[])
}

/// [`auto`] for a caller who knows some non-members have failed: no route
/// of the schedule passes a `forbidden` node, nor, where there is a way
/// round it, the missing node of an all-but-one set. Where the chosen
/// construction would, the fallback is the [`neighbours`] tree, else the
/// [`routed`] one (through allowed non-members), with the reason in
/// `fallback`; where neither reaches every member, a `Shape` error says
/// which member is cut off.
pub fn auto_avoiding(
    torus: &Torus,
    order: &[Node],
    root: Node,
    forbidden: &[Node],
) -> Result<Schedule, MembersError> {
    let members = Members::new(torus, order.iter().copied())?;
    members.check_root(root)?;
    let mut avoid = Vec::with_capacity(forbidden.len() + 1);
    for &node in forbidden {
        if node >= torus.nodes() {
            return Err(MembersError::Outside {
                node,
                nodes: torus.nodes(),
            });
        }
        if members.contains(node) {
            return Err(MembersError::ForbiddenMember { node });
        }
        avoid.push(node);
    }
    let shape = classify(torus, &members);
    if let Shape::MissingNode(missing) = shape {
        avoid.push(missing);
    }
    let schedule = match shape {
        Shape::Full if colours_apply(torus) => rectangle_colours(torus, &members, root),
        Shape::Full => rectangle(torus, &members, root),
        Shape::MissingNode(_) if missing_node_colours_apply(torus) => {
            missing_node_colours(torus, &members, root)
        }
        Shape::MissingNode(_) => missing_node_tree(torus, &members, root)
            .or_else(|_| irregular(torus, &members, order, root)),
        Shape::Planes { .. } => planes(torus, &members, root),
        Shape::Irregular => irregular(torus, &members, order, root),
    }?;
    if avoid.is_empty() {
        return Ok(schedule);
    }
    match check(torus, &members, &schedule, &avoid) {
        Ok(_) => Ok(schedule),
        Err(ScheduleError::Forbidden {
            parent,
            child,
            node,
            ..
        }) => match neighbours(torus, &members, root)
            .or_else(|_| routed(torus, &members, root, &avoid))
        {
            Ok(mut detour) => {
                detour.fallback = Some(format!(
                    "{}'s edge {parent} -> {child} would pass forbidden node {node}",
                    schedule.construction
                ));
                Ok(detour)
            }
            // The missing node cuts the members apart: only the caller can
            // say it has failed, so without that it stays on the route.
            Err(cut) if check(torus, &members, &schedule, forbidden).is_ok() => {
                let mut schedule = schedule;
                schedule.fallback = Some(format!("passes the missing node: {cut}"));
                Ok(schedule)
            }
            Err(cut) => Err(MembersError::Shape(format!(
                "no schedule avoids the forbidden nodes: {} would pass node {node}, and {cut}",
                schedule.construction
            ))),
        },
        Err(e) => Err(MembersError::Shape(format!(
            "{} built an invalid schedule: {e}",
            schedule.construction
        ))),
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
