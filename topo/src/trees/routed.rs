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
/// routes from a member reached so far to one not yet reached (each
/// dimension either way round) that pass no other member, no node of
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
                for ups in 0..1u32 << torus.dims().len() {
                    let Some((hops, route)) =
                        free_route(torus, members, &blocked, &used, from, to, ups)
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

/// The route from `from` to `to` dimension after dimension, along
/// dimension `d` upwards if bit `d` of `ups` is set (the short way round a
/// ring, or either way where both are as short): its hops and
/// segments, if it exists and passes no member but `to`, no blocked node
/// and no used link.
fn free_route(
    torus: &Torus,
    members: &Members,
    blocked: &[bool],
    used: &[bool],
    from: Node,
    to: Node,
    ups: u32,
) -> Option<(u32, Vec<Segment>)> {
    let (mut at, target) = (from, torus.coordinates(to));
    let mut route = Vec::new();
    let mut hops = 0;
    for (dim, &want) in target.iter().enumerate() {
        let up = ups >> dim & 1 == 1;
        let len = torus.distance(dim, torus.coordinates(at)[dim], want, up)?;
        // One way round suffices where there is none to go; on a ring,
        // the short way (as the checker's routes are).
        let extent = torus.dims()[dim];
        if len == 0 && up || torus.wraps(dim) && len > extent / 2 {
            return None;
        }
        for _ in 0..len {
            let next = torus.step(at, dim, up)?;
            let busy = used[torus.link(at, dim, up).0 as usize]
                || used[torus.link(next, dim, !up).0 as usize];
            let passes = next != to && (blocked[next as usize] || members.contains(next));
            if busy || passes {
                return None;
            }
            at = next;
        }
        if len > 0 {
            route.push(Segment { dim, up, len });
        }
        hops += len;
    }
    (at == to && hops > 0).then_some((hops, route))
}
