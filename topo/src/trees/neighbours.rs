//! The construction that cannot pass a failed node: a breadth-first tree
//! over the links between neighbouring members, so no route transits any
//! node at all. `auto` takes it when every other construction would pass a
//! forbidden node.

use std::collections::VecDeque;

use crate::{
    Construction, Edge, Members, MembersError, Node, Schedule, Segment, Topology, Torus, Tree,
};

/// A breadth-first tree from `root` whose every edge is one link between two
/// members. Each link carries one edge one way, so it is contention-free for
/// broadcast and allreduce at once; depth is the fewest member-to-member
/// hops. A `Shape` error names a member that neighbouring members do not
/// connect to the root.
pub fn neighbours(torus: &Torus, members: &Members, root: Node) -> Result<Schedule, MembersError> {
    members.check_root(root)?;
    let mut reached = vec![false; torus.nodes() as usize];
    reached[root as usize] = true;
    let mut tree = Tree {
        root,
        edges: Vec::with_capacity(members.len() - 1),
    };
    let mut queue = VecDeque::from([root]);
    while let Some(parent) = queue.pop_front() {
        for dim in 0..torus.dims().len() {
            for up in [true, false] {
                let Some(child) = torus.step(parent, dim, up) else {
                    continue;
                };
                if members.contains(child) && !reached[child as usize] {
                    reached[child as usize] = true;
                    tree.edges.push(Edge::unicast(
                        parent,
                        child,
                        vec![Segment { dim, up, len: 1 }],
                    ));
                    queue.push_back(child);
                }
            }
        }
    }
    if let Some(&lost) = members.nodes().iter().find(|&&m| !reached[m as usize]) {
        return Err(MembersError::Shape(format!(
            "member {lost} is not linked to the root {root} through neighbouring members"
        )));
    }
    let mut schedule = Schedule::new(Construction::Neighbours, vec![tree]);
    schedule.concurrent_allreduce = true;
    Ok(schedule)
}
