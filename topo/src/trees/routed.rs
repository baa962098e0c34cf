//! The construction of last resort around failed nodes: a tree whose edges
//! may route through non-members that are not forbidden, each physical link
//! carrying one edge at most. `auto_avoiding` takes it where neighbouring
//! members alone do not connect the root to every member.

use crate::{
    Construction, Edge, Members, MembersError, Node, Schedule, Segment, Topology, Torus, Tree,
};

/// The most members it serves: each step weighs every (reached, not yet
/// reached) pair of members, so the work grows as the cube of their count.
const ROUTED_MAX_MEMBERS: usize = 128;

/// A tree from `root` grown one member at a time: of the dimension-ordered
/// minimal routes from a member reached so far to one not yet reached
/// (either way round a ring where both are as short) that pass no other
/// member, no node of
/// `avoid` and no link an edge already takes, the shortest becomes an
/// edge. An edge takes both directions of each link it crosses, so the
/// tree is contention-free for broadcast and allreduce at once. Greedy: it
/// may miss a tree an exhaustive search finds. A `Shape` error names a
/// member it cannot reach, or says the set is too large.
pub fn routed(
    torus: &Torus,
    members: &Members,
    root: Node,
    avoid: &[Node],
) -> Result<Schedule, MembersError> {
    members.check_root(root)?;
    if members.len() > ROUTED_MAX_MEMBERS {
        return Err(MembersError::Shape(format!(
            "routing round forbidden nodes serves at most {ROUTED_MAX_MEMBERS} members, not {}",
            members.len()
        )));
    }
    let mut blocked = vec![false; torus.nodes() as usize];
    for &node in avoid {
        blocked[node as usize] = true;
    }
    let mut reached = vec![root];
    let mut used = vec![false; torus.links() as usize];
    let mut tree = Tree {
        root,
        edges: Vec::with_capacity(members.len() - 1),
    };
    while reached.len() < members.len() {
        let mut best: Option<(u32, Node, Node, Vec<Segment>)> = None;
        for &from in &reached {
            for &to in members.nodes() {
                if reached.contains(&to) {
                    continue;
                }
                let ways = ways(torus, from, to);
                let ties = ways.iter().filter(|w| **w == Way::Either).count();
                for choice in 0..1u64 << ties.min(MAX_TIES) {
                    let Some((hops, route)) =
                        free_route(torus, members, &blocked, &used, from, &ways, choice)
                    else {
                        continue;
                    };
                    if best.as_ref().is_none_or(|b| hops < b.0) {
                        best = Some((hops, from, to, route));
                    }
                }
            }
        }
        let Some((_, from, to, route)) = best else {
            let lost = members.nodes().iter().find(|m| !reached.contains(m));
            return Err(MembersError::Shape(format!(
                "member {} is cut off from the root {root}: every route passes a forbidden \
                 node, another member or a link another edge takes",
                lost.expect("a member is not reached")
            )));
        };
        let mut at = from;
        for s in &route {
            for _ in 0..s.len {
                let next = torus.step(at, s.dim, s.up).expect("a checked route");
                used[torus.link(at, s.dim, s.up).0 as usize] = true;
                used[torus.link(next, s.dim, !s.up).0 as usize] = true;
                at = next;
            }
        }
        reached.push(to);
        tree.edges.push(Edge::unicast(from, to, route));
    }
    let mut schedule = Schedule::new(Construction::Routed, vec![tree]);
    schedule.concurrent_allreduce = true;
    Ok(schedule)
}

/// Which way a minimal route goes along one dimension.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Stay,
    Up(u32),
    Down(u32),
    /// Half way round a ring of even extent: both ways are as short.
    Either,
}

/// Dimensions where both ways round are as short whose choices are tried
/// (the others go up): at most 2^6 routes a pair, however many dimensions.
const MAX_TIES: usize = 6;

/// Each dimension's way from `from` to `to` on a minimal route: the short
/// way round a ring, the only way along a mesh.
fn ways(torus: &Torus, from: Node, to: Node) -> Vec<Way> {
    let (a, b) = (torus.coordinates(from), torus.coordinates(to));
    (0..a.len())
        .map(|dim| {
            let up = torus.distance(dim, a[dim], b[dim], true);
            let down = torus.distance(dim, a[dim], b[dim], false);
            match (up, down) {
                (Some(0), _) | (_, Some(0)) => Way::Stay,
                (Some(u), Some(d)) if u == d => Way::Either,
                (Some(u), Some(d)) if u < d => Way::Up(u),
                (Some(_), Some(d)) => Way::Down(d),
                (Some(u), None) => Way::Up(u),
                (None, Some(d)) => Way::Down(d),
                (None, None) => Way::Stay,
            }
        })
        .collect()
}

/// The dimension-ordered route from `from` along `ways`, the `k`-th
/// dimension where both ways are as short going up if bit `k` of `choice`
/// is set (past [`MAX_TIES`] of them, up): its hops and segments, if it
/// passes no member but its end, no blocked node and no used link.
fn free_route(
    torus: &Torus,
    members: &Members,
    blocked: &[bool],
    used: &[bool],
    from: Node,
    ways: &[Way],
    choice: u64,
) -> Option<(u32, Vec<Segment>)> {
    let mut tie = 0;
    let route: Vec<Segment> = ways
        .iter()
        .enumerate()
        .filter_map(|(dim, &way)| {
            let (up, len) = match way {
                Way::Stay => return None,
                Way::Up(len) => (true, len),
                Way::Down(len) => (false, len),
                Way::Either => {
                    let up = tie >= MAX_TIES || choice >> tie & 1 == 1;
                    tie += 1;
                    (up, torus.dims()[dim] / 2)
                }
            };
            Some(Segment { dim, up, len })
        })
        .collect();
    let hops: u32 = route.iter().map(|s| s.len).sum();
    let (mut at, mut taken) = (from, 0);
    for s in &route {
        for _ in 0..s.len {
            let next = torus.step(at, s.dim, s.up)?;
            let busy = used[torus.link(at, s.dim, s.up).0 as usize]
                || used[torus.link(next, s.dim, !s.up).0 as usize];
            taken += 1;
            // A route passes non-members only: a member ends it.
            let passes = taken < hops && (blocked[next as usize] || members.contains(next));
            if busy || passes {
                return None;
            }
            at = next;
        }
    }
    (hops > 0).then_some((hops, route))
}
