//! Network topology models for catena (torus, mesh, fat-tree), routes, link
//! loads, and contention-free broadcast trees for torus sub-communicators
//! with their checker. Pure computation: no I/O, no transport.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod check;
mod fat_tree;
mod mapping;
mod members;
mod route;
mod schedule;
mod torus;
pub mod trees;

pub use check::{both_ways_load, check, schedule_loads, Checked, ScheduleError};
pub use fat_tree::FatTree;
pub use mapping::RankMap;
pub use members::{Members, MembersError};
pub use route::{reversed, RouteError, Segment, Walk};
pub use schedule::{Construction, Edge, Place, Schedule, Tree};
pub use torus::Torus;

/// A node (a host: ranks live on nodes).
pub type Node = u32;

/// A directed link, numbered densely from 0 to [`Topology::links`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Link(pub u32);

/// A network: nodes, directed links, and one deterministic route between
/// any two nodes.
pub trait Topology {
    /// How many nodes (hosts) it has: they are numbered `0..nodes()`.
    fn nodes(&self) -> u32;
    /// How many directed links it has: they are numbered `0..links()`, so
    /// `Link.0` indexes a load vector of this length.
    fn links(&self) -> u32;
    /// Appends the links of the route from `from` to `to` (none when equal).
    fn route(&self, from: Node, to: Node, out: &mut Vec<Link>);
}

/// How many routes of `pairs` cross each link: index by `Link.0`.
pub fn link_loads(topology: &impl Topology, pairs: &[(Node, Node)]) -> Vec<u32> {
    let mut loads = vec![0; topology.links() as usize];
    let mut route = Vec::new();
    for &(from, to) in pairs {
        route.clear();
        topology.route(from, to, &mut route);
        for link in &route {
            loads[link.0 as usize] += 1;
        }
    }
    loads
}
