//! A subset of whole planes along any one dimension (the spec's Z, which it
//! picks without loss of generality): the rectangle broadcast inside the
//! root's plane, then per column straight unicast segments along that
//! dimension between consecutive member planes, skipping the largest gap so
//! every hop is minimal. Non-member planes are passed through, never written.

use super::rectangle::lines_through;
use crate::{Construction, Edge, Members, MembersError, Node, Schedule, Segment, Topology, Torus};

/// The dimension whose whole planes the members are, and the member planes'
/// coordinates along it, increasing. A proper subset of the nodes is whole
/// planes along at most one dimension (S = A x Y x Z = X x Y x B forces
/// A = X), so the first that fits is the only one.
pub(crate) fn member_planes(torus: &Torus, members: &Members) -> Option<(usize, Vec<u32>)> {
    (0..torus.dims().len()).find_map(|dim| planes_along(torus, members, dim).map(|p| (dim, p)))
}

/// The member planes along `dim` when the members are exactly whole planes
/// along it.
fn planes_along(torus: &Torus, members: &Members, dim: usize) -> Option<Vec<u32>> {
    let mut planes: Vec<u32> = members
        .nodes()
        .iter()
        .map(|&n| torus.coordinates(n)[dim])
        .collect();
    planes.sort_unstable();
    planes.dedup();
    // Members are distinct nodes, so as many as the planes hold means whole planes.
    let plane_size = (torus.nodes() / torus.dims()[dim]) as usize;
    (members.len() == planes.len() * plane_size).then_some(planes)
}

/// The member plane after `z` going up (or down), cyclically on a torus.
/// `planes` is sorted.
fn next_plane(planes: &[u32], z: u32, up: bool) -> Option<u32> {
    let i = planes.binary_search(&z).expect("z is a member plane");
    match up {
        true => planes.get(i + 1).copied(),
        false => i.checked_sub(1).map(|j| planes[j]),
    }
}

/// Where the + chain and the − chain from the root's plane stop: on a
/// torus, at the two ends of the largest cyclic gap, which no hop crosses.
fn chain_ends(torus: &Torus, z: usize, planes: &[u32]) -> (u32, u32) {
    let (first, last) = (planes[0], *planes.last().expect("a member plane"));
    if !torus.wraps(z) {
        return (last, first);
    }
    let extent = torus.dims()[z];
    // Gap i runs from planes[i] up to the next member plane (cyclically).
    let k = planes.len();
    let gap = |i: usize| (planes[(i + 1) % k] + extent - planes[i] - 1) % extent + 1;
    let widest = (0..k)
        .max_by_key(|&i| (gap(i), std::cmp::Reverse(i)))
        .expect("k ≥ 1");
    (planes[widest], planes[(widest + 1) % k])
}

/// Rectangle in the root's plane, chains along the planes' dimension z
/// between member planes. Contention-free and undirected-disjoint; depth the
/// sum of (d − 1) over the other dimensions + (d_z − widest gap).
pub fn planes(torus: &Torus, members: &Members, root: Node) -> Result<Schedule, MembersError> {
    members.check_root(root)?;
    let (z, planes) = member_planes(torus, members).ok_or_else(|| {
        MembersError::Shape(
            "the plane tree needs the members to be whole planes along one dimension".into(),
        )
    })?;
    let rz = torus.coordinates(root)[z];
    let in_plane = (0..torus.dims().len()).filter(|&d| d != z);
    let (mut tree, column_heads) = lines_through(torus, root, in_plane, None);
    let (up_end, down_end) = chain_ends(torus, z, &planes);
    let wraps = torus.wraps(z);
    for &head in &column_heads {
        for (up, end) in [(true, up_end), (false, down_end)] {
            let mut here = (head, rz);
            while here.1 != end {
                let next = match (next_plane(&planes, here.1, up), wraps) {
                    (Some(p), _) => p,
                    (None, true) if up => planes[0],
                    (None, true) => *planes.last().expect("a member plane"),
                    (None, false) => break,
                };
                let len = torus
                    .distance(z, here.1, next, up)
                    .expect("member planes lie that way");
                let mut c = torus.coordinates(here.0);
                c[z] = next;
                let child = torus.node(&c);
                let route = vec![Segment { dim: z, up, len }];
                tree.edges.push(Edge::unicast(here.0, child, route));
                here = (child, next);
            }
        }
    }
    let mut schedule = Schedule::new(Construction::Planes, vec![tree]);
    schedule.concurrent_allreduce = true;
    Ok(schedule)
}
