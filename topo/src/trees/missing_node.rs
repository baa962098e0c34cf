//! One missing node m (a failed node, or one left out): the one-colour tree
//! from a pseudo-root away from m in every dimension, re-rooted at the
//! user's root (A1), and BG/P's three colours with faces avoiding m (A2).

use super::rectangle::{bgp_colour, face, lines_through};
use crate::{Construction, Members, MembersError, Node, Schedule, Topology, Torus};

/// The one node of the torus that is not a member.
pub(crate) fn missing_node(torus: &Torus, members: &Members) -> Option<Node> {
    if members.len() + 1 != torus.nodes() as usize {
        return None;
    }
    // The first index whose node differs from it: the gap.
    let nodes = members.nodes();
    let gap = nodes.iter().enumerate().position(|(i, &n)| n != i as Node);
    Some(gap.unwrap_or(nodes.len()) as Node)
}

fn check(torus: &Torus, members: &Members, root: Node) -> Result<Node, MembersError> {
    members.check_root(root)?;
    missing_node(torus, members).ok_or_else(|| {
        MembersError::Shape(format!(
            "the missing-node tree needs every node but one as a member; {} of {} are",
            members.len(),
            torus.nodes()
        ))
    })
}

/// The node nearest `root` that differs from `m` in every dimension of
/// extent at least 2 (ties: lowest node).
fn pseudo_root(torus: &Torus, root: Node, m: Node) -> Option<Node> {
    let cm = torus.coordinates(m);
    (0..torus.nodes())
        .filter(|&p| {
            let cp = torus.coordinates(p);
            (0..cp.len()).all(|d| torus.dims()[d] < 2 || cp[d] != cm[d])
        })
        .min_by_key(|&p| (torus.hops(root, p), p))
}

/// The dimension whose lines come last, the only ones that meet m: one that
/// wraps (its line goes round m), else a mesh one where m sits at an end.
fn last_phase(torus: &Torus, m: Node) -> Option<usize> {
    let cm = torus.coordinates(m);
    let open = |d: usize| torus.dims()[d] >= 2;
    (0..cm.len())
        .rev()
        .find(|&d| open(d) && torus.wraps(d))
        .or_else(|| {
            (0..cm.len())
                .rev()
                .find(|&d| open(d) && (cm[d] == 0 || cm[d] == torus.dims()[d] - 1))
        })
}

/// A1: lines from the pseudo-root p dimension after dimension; only the last
/// phase meets m, and that line goes round it in two segments. The tree is
/// then re-rooted at `root`. Every physical link is used at most once, so
/// any root is contention-free and reduce may run with broadcast.
pub fn missing_node_tree(
    torus: &Torus,
    members: &Members,
    root: Node,
) -> Result<Schedule, MembersError> {
    let m = check(torus, members, root)?;
    let last = last_phase(torus, m).ok_or_else(|| {
        MembersError::Shape(
            "on a mesh, a missing node inside every line cuts the line in two".into(),
        )
    })?;
    let p = pseudo_root(torus, root, m).ok_or_else(|| {
        MembersError::Shape("no node differs from the missing one in every dimension".into())
    })?;
    let phases = (0..torus.dims().len()).filter(|&d| d != last).chain([last]);
    let (mut tree, _) = lines_through(torus, p, phases, Some(m));
    tree.reroot(root)?;
    let mut schedule = Schedule::new(Construction::MissingNode, vec![tree]);
    schedule.concurrent_allreduce = true;
    Ok(schedule)
}

/// Whether A2's three colours apply: a 3D torus, wrapping, each extent ≥ 3
/// (a face must avoid both the root's and m's coordinate).
pub fn missing_node_colours_apply(torus: &Torus) -> bool {
    torus.dims().len() == 3 && (0..3).all(|d| torus.wraps(d) && torus.dims()[d] >= 3)
}

/// A2: BG/P's three colours rooted at `root`, each face avoiding the root's
/// and m's coordinate, every line through m replaced by two segments that
/// stop before it.
pub fn missing_node_colours(
    torus: &Torus,
    members: &Members,
    root: Node,
) -> Result<Schedule, MembersError> {
    let m = check(torus, members, root)?;
    if !missing_node_colours_apply(torus) {
        return Err(MembersError::Shape(format!(
            "three colours round a missing node need a 3D torus with every extent at least 3, not {:?}",
            torus.dims()
        )));
    }
    let (r, cm) = (torus.coordinates(root), torus.coordinates(m));
    let colours = (0..3)
        .map(|a| {
            let f = face(torus.dims()[a], &[r[a], cm[a]]).expect("extent at least 3");
            bgp_colour(torus, root, a, f, Some(m))
        })
        .collect();
    Ok(Schedule::new(Construction::MissingNodeColours, colours))
}
