//! Full-torus rectangle broadcast (IBM CCMI `Rectangle.h`, `MCRect.h`): one
//! colour of lines dimension after dimension (Faraj), and BG/P's three
//! directed-edge-disjoint colours, one per primary axis.

use crate::{Construction, Members, MembersError, Node, Schedule, Topology, Torus, Tree};

/// Whether `a` and `b` lie on one line along `dim`.
pub(crate) fn same_line(torus: &Torus, a: Node, b: Node, dim: usize) -> bool {
    let (ca, cb) = (torus.coordinates(a), torus.coordinates(b));
    (0..ca.len()).all(|d| d == dim || ca[d] == cb[d])
}

/// Adds the line broadcast from `from` along `dim` (up round a ring, both
/// ways on a mesh), going round `avoid` if it lies on that line. Returns
/// the nodes it reached.
pub(crate) fn line(
    tree: &mut Tree,
    torus: &Torus,
    from: Node,
    dim: usize,
    up: bool,
    avoid: Option<Node>,
) -> Vec<Node> {
    let before = tree.edges.len();
    match avoid.filter(|&m| same_line(torus, from, m, dim)) {
        Some(m) => tree.line_around(torus, from, dim, m),
        None if torus.wraps(dim) => tree.line(torus, from, dim, up, torus.dims()[dim] - 1),
        None => tree.full_line(torus, from, dim),
    }
    tree.edges[before..].iter().map(|e| e.child).collect()
}

/// Lines from `root` along each of `dims` in turn, every node reached so far
/// sending the next line: a spanning tree of the sub-torus through `root`
/// spanned by `dims`, without `avoid`.
pub(crate) fn lines_through(
    torus: &Torus,
    root: Node,
    dims: impl IntoIterator<Item = usize>,
    avoid: Option<Node>,
) -> (Tree, Vec<Node>) {
    let mut tree = Tree {
        root,
        edges: Vec::new(),
    };
    let mut reached = vec![root];
    for dim in dims {
        for i in 0..reached.len() {
            let new = line(&mut tree, torus, reached[i], dim, true, avoid);
            reached.extend(new);
        }
    }
    (tree, reached)
}

/// One BG/P colour with primary axis `a` and face coordinate `face` (≠ the
/// root's): lines a+, then b+ from the face node, c+ over the face plane,
/// then a− from every face node off the root's a line. Lines through
/// `avoid` go round it.
pub(crate) fn bgp_colour(
    torus: &Torus,
    root: Node,
    a: usize,
    face: u32,
    avoid: Option<Node>,
) -> Tree {
    let (b, c) = ((a + 1) % 3, (a + 2) % 3);
    let mut tree = Tree {
        root,
        edges: Vec::new(),
    };
    line(&mut tree, torus, root, a, true, avoid);
    let mut f = torus.coordinates(root);
    f[a] = face;
    let f = torus.node(&f);
    let mut plane = vec![f];
    plane.extend(line(&mut tree, torus, f, b, true, avoid));
    for i in 0..plane.len() {
        let new = line(&mut tree, torus, plane[i], c, true, avoid);
        plane.extend(new);
    }
    for &node in plane.iter().filter(|&&n| n != f) {
        line(&mut tree, torus, node, a, false, avoid);
    }
    tree
}

/// The face BG/P picks: the highest coordinate not excluded.
pub(crate) fn face(extent: u32, excluded: &[u32]) -> Option<u32> {
    (0..extent).rev().find(|f| !excluded.contains(f))
}

fn check_full(torus: &Torus, members: &Members, root: Node) -> Result<(), MembersError> {
    members.check_root(root)?;
    if members.len() != torus.nodes() as usize {
        return Err(MembersError::Shape(format!(
            "the rectangle broadcast needs every node of the torus as a member; {} of {} are",
            members.len(),
            torus.nodes()
        )));
    }
    Ok(())
}

/// One colour over the whole torus (any dimensions, tori and meshes):
/// contention-free, undirected-disjoint, depth Σ(d_i − 1).
pub fn rectangle(torus: &Torus, members: &Members, root: Node) -> Result<Schedule, MembersError> {
    check_full(torus, members, root)?;
    let (tree, _) = lines_through(torus, root, 0..torus.dims().len(), None);
    let mut schedule = Schedule::new(Construction::Rectangle, vec![tree]);
    schedule.concurrent_allreduce = true;
    Ok(schedule)
}

/// Whether BG/P's three colours apply: a 3D torus, wrapping, each extent ≥ 2.
pub fn colours_apply(torus: &Torus) -> bool {
    torus.dims().len() == 3 && (0..3).all(|d| torus.wraps(d) && torus.dims()[d] >= 2)
}

/// BG/P's three colours over a whole 3D torus, each carrying a third.
pub fn rectangle_colours(
    torus: &Torus,
    members: &Members,
    root: Node,
) -> Result<Schedule, MembersError> {
    check_full(torus, members, root)?;
    if !colours_apply(torus) {
        return Err(MembersError::Shape(format!(
            "three colours need a 3D torus with every extent at least 2, not {:?}",
            torus.dims()
        )));
    }
    let r = torus.coordinates(root);
    let colours = (0..3)
        .map(|a| {
            let f = face(torus.dims()[a], &[r[a]]).expect("extent at least 2");
            bgp_colour(torus, root, a, f, None)
        })
        .collect();
    Ok(Schedule::new(Construction::RectangleColours, colours))
}
