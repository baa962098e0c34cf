//! The chain over a random member set (spec §5, case (c)): a Hamiltonian
//! path from the root, row by row in 2D and plane by plane in 3D, whose
//! minimal X-then-Y(-then-Z) routes never share a directed link.

use crate::{
    Construction, Edge, Members, MembersError, Node, Schedule, Segment, Topology, Torus, Tree,
};

/// A member's coordinates along the torus's axes (its dimensions of extent
/// at least 2, at most three), padded with zeros.
type Point = [u32; 3];

/// The torus seen as X, Y, Z: its dimensions of extent ≥ 2 in order (those
/// of extent 1 have no links and are skipped, so [1, a, b] is solved as
/// the 2D torus [a, b]), padded with axes of extent 1. Also a bitmap of
/// the directed links the chain uses so far.
struct Grid<'a> {
    torus: &'a Torus,
    /// The torus dimension of each axis.
    axes: Vec<usize>,
    extent: [u32; 3],
    wraps: [bool; 3],
    used: Vec<bool>,
}

impl<'a> Grid<'a> {
    /// `None` when more than three dimensions have extent ≥ 2.
    fn new(torus: &'a Torus) -> Option<Grid<'a>> {
        let axes: Vec<usize> = (0..torus.dims().len())
            .filter(|&d| torus.dims()[d] > 1)
            .collect();
        if axes.len() > 3 {
            return None;
        }
        let (mut extent, mut wraps) = ([1; 3], [true; 3]);
        for (a, &d) in axes.iter().enumerate() {
            extent[a] = torus.dims()[d];
            wraps[a] = torus.wraps(d);
        }
        Some(Grid {
            torus,
            axes,
            extent,
            wraps,
            used: vec![false; torus.links() as usize],
        })
    }

    fn point(&self, node: Node) -> Point {
        let c = self.torus.coordinates(node);
        let mut p = [0; 3];
        for (a, &d) in self.axes.iter().enumerate() {
            p[a] = c[d];
        }
        p
    }

    fn node(&self, p: Point) -> Node {
        let mut c = vec![0; self.torus.dims().len()];
        for (a, &d) in self.axes.iter().enumerate() {
            c[d] = p[a];
        }
        self.torus.node(&c)
    }

    /// The segment from `a` to `b` along `axis` going up (or down), when
    /// that way is open and minimal; `Some(None)` when `a` = `b`.
    fn segment(&self, axis: usize, a: u32, b: u32, up: bool) -> Option<Option<Segment>> {
        if a == b {
            return Some(None);
        }
        let dim = self.axes[axis];
        match self.torus.distance(dim, a, b, up) {
            Some(len) if !self.wraps[axis] || len <= self.extent[axis] / 2 => {
                Some(Some(Segment { dim, up, len }))
            }
            _ => None,
        }
    }

    /// How many unused links follow one another from `node` along `axis`,
    /// up to `cap`.
    fn free_run(&self, node: Node, axis: usize, up: bool, cap: u32) -> u32 {
        let Some(&dim) = self.axes.get(axis) else {
            return 0;
        };
        let (mut here, mut run) = (node, 0);
        while run < cap {
            let Some(next) = self.torus.step(here, dim, up) else {
                break;
            };
            if self.used[self.torus.link(here, dim, up).0 as usize] {
                break;
            }
            (here, run) = (next, run + 1);
        }
        run
    }

    /// Marks (or clears) the links of `route` from `from`.
    fn mark(&mut self, from: Node, route: &[Segment], used: bool) {
        let walk = self
            .torus
            .walk(from, route)
            .expect("the chain builds BG/P routes");
        for link in walk.links {
            debug_assert!(self.used[link.0 as usize] != used, "a link used twice");
            self.used[link.0 as usize] = used;
        }
    }
}

/// The index of the first of `values` (sorted positions along a line) after
/// the largest cyclic gap, and that gap; 0 on a mesh, whose edge is the gap.
fn after_largest_gap(values: &[u32], extent: u32, wraps: bool) -> (usize, u32) {
    let k = values.len();
    if !wraps || k == 1 {
        return (0, extent);
    }
    let gap = |i: usize| (values[(i + 1) % k] + extent - values[i]) % extent;
    let widest = (0..k)
        .max_by_key(|&i| (gap(i), std::cmp::Reverse(i)))
        .expect("k ≥ 1");
    ((widest + 1) % k, gap(widest))
}

/// The order in which to visit `values` (sorted positions along a line)
/// from index `first`, with the direction of the hop into each: up to the
/// end of the sweep that starts after the largest gap (so every hop is
/// minimal), then back past `first` and down; `down_first` mirrors it.
/// The one jump back may go the shorter way: no other hop uses its range.
fn visit_order(
    values: &[u32],
    extent: u32,
    wraps: bool,
    first: usize,
    down_first: bool,
) -> Vec<(usize, bool)> {
    let k = values.len();
    let start = after_largest_gap(values, extent, wraps).0;
    let at = |i: usize| (start + i) % k;
    let p = (first + k - start) % k;
    let ahead: Vec<usize> = (p + 1..k).map(at).collect();
    let behind: Vec<usize> = (0..p).rev().map(at).collect();
    let (one, two) = if down_first {
        (behind, ahead)
    } else {
        (ahead, behind)
    };
    let mut order = vec![(first, true)];
    order.extend(one.iter().map(|&i| (i, !down_first)));
    order.extend(two.iter().map(|&i| (i, down_first)));
    if let (Some(&last), Some(&next)) = (one.last(), two.first()) {
        let (from, to) = (values[last], values[next]);
        let (up, down) = ((to + extent - from) % extent, (from + extent - to) % extent);
        if wraps && up != down {
            order[one.len() + 1].1 = up < down;
        }
    }
    order
}

/// The ways to visit a row (sorted X positions `xs`) from index `entry`,
/// each a list of (X, direction of the hop into it), the entry first.
fn row_orders(xs: &[u32], entry: usize, extent: u32, wraps: bool) -> Vec<Vec<(u32, bool)>> {
    let m = xs.len();
    let first = (xs[entry], true);
    let (start, gap) = after_largest_gap(xs, extent, wraps);
    if wraps && m > 1 && gap <= extent / 2 {
        // Case 2: every gap is minimal, so go round either way.
        let up = (1..m).map(|i| (xs[(entry + i) % m], true));
        let down = (1..m).map(|i| (xs[(entry + m - i) % m], false));
        return vec![
            std::iter::once(first).chain(up).collect(),
            std::iter::once(first).chain(down).collect(),
        ];
    }
    // Case 1 (and every mesh row): the members lie in an arc shorter than
    // half the ring; sweep to one end, jump back past the entry, sweep on.
    let arc = |i: usize| xs[(start + i) % m];
    let p = (entry + m - start) % m;
    let ahead = (p + 1..m).map(|i| (arc(i), true));
    let behind = (0..p).rev().map(|i| (arc(i), false));
    let mut orders = vec![std::iter::once(first)
        .chain(ahead.clone())
        .chain(behind.clone())
        .collect()];
    if 0 < p && p + 1 < m {
        orders.push(std::iter::once(first).chain(behind).chain(ahead).collect());
    }
    orders
}

/// The in-row hops of `order` in row (y, z) as routes.
fn row_hops(grid: &Grid, order: &[(u32, bool)], y: u32, z: u32) -> Vec<Edge> {
    order
        .windows(2)
        .map(|w| {
            let ((a, _), (b, up)) = (w[0], w[1]);
            let seg = grid.segment(0, a, b, up).expect("in-row hops are minimal");
            let route = seg.into_iter().collect();
            Edge::unicast(grid.node([a, y, z]), grid.node([b, y, z]), route)
        })
        .collect()
}

/// The route from `exit` to `to`: X within the free runs `x_runs` (up,
/// down) from `exit`, then Y and Z, each the way `plan` fixes or else
/// either minimal way, over unused links only.
fn exit_route(
    grid: &Grid,
    exit: Point,
    to: Point,
    plan: [Option<bool>; 3],
    x_runs: [u32; 2],
) -> Option<Vec<Segment>> {
    let mut route = Vec::new();
    let mut at = exit;
    for axis in 0..3 {
        if at[axis] == to[axis] {
            continue;
        }
        let node = grid.node(at);
        let seg = plan[axis]
            .map_or(&[true, false][..], |up| if up { &[true] } else { &[false] })
            .iter()
            .filter_map(|&up| grid.segment(axis, at[axis], to[axis], up).flatten())
            .find(|s| match axis {
                0 => s.len <= x_runs[usize::from(!s.up)],
                _ => grid.free_run(node, axis, s.up, s.len) == s.len,
            })?;
        route.push(seg);
        at[axis] = to[axis];
    }
    Some(route)
}

/// The groups of consecutive `points` (sorted by (z, y, x)) that agree on
/// coordinates `axis..3`: rows (axis 1) or planes (axis 2), as index ranges.
fn runs(points: &[Point], axis: usize) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (i, p) in points.iter().enumerate() {
        match out.last_mut() {
            Some(r) if points[r.start][axis..] == p[axis..] => r.end = i + 1,
            _ => out.push(i..i + 1),
        }
    }
    out
}

/// Where the chain goes after a row: the next row of the plane (Y fixed),
/// or any member of the next plane (Y free, Z fixed).
struct Target<'p> {
    candidates: &'p [Point],
    plan: [Option<bool>; 3],
}

/// Picks the row orientation and next entry with the fewest hops whose
/// exit route uses no used link. Returns (orientation, entry, route).
fn choose_exit(
    grid: &mut Grid,
    orders: &[Vec<(u32, bool)>],
    y: u32,
    z: u32,
    target: &Target,
) -> Option<(usize, Point, Vec<Segment>)> {
    let mut best: Option<(u32, usize, Point, Vec<Segment>)> = None;
    let half = if grid.wraps[0] {
        grid.extent[0] / 2
    } else {
        grid.extent[0]
    };
    for (o, order) in orders.iter().enumerate() {
        let hops = row_hops(grid, order, y, z);
        for e in &hops {
            grid.mark(e.parent, &e.route, true);
        }
        let exit = [order.last().expect("a row has members").0, y, z];
        let node = grid.node(exit);
        let x_runs = [true, false].map(|up| grid.free_run(node, 0, up, half));
        for &to in target.candidates {
            let hops = grid.torus.hops(node, grid.node(to));
            if best.as_ref().is_some_and(|b| b.0 <= hops) {
                continue;
            }
            if let Some(route) = exit_route(grid, exit, to, target.plan, x_runs) {
                best = Some((hops, o, to, route));
            }
        }
        for e in &hops {
            grid.mark(e.parent, &e.route, false);
        }
    }
    best.map(|(_, o, to, route)| (o, to, route))
}

/// The chain through one plane's members (sorted by (y, x)) from `entry`,
/// its rows visited as `visit_order` says, ending with the exit towards
/// `next` (the next plane) when there is one. Returns the next entry.
fn plane_chain(
    grid: &mut Grid,
    in_plane: &[Point],
    mut entry: Point,
    next: Option<&Target>,
    down_first: bool,
    edges: &mut Vec<Edge>,
) -> Result<Point, String> {
    let rows = runs(in_plane, 1);
    let ys: Vec<u32> = rows.iter().map(|r| in_plane[r.start][1]).collect();
    let first_row = ys.binary_search(&entry[1]).expect("the entry's row");
    let row_order = visit_order(&ys, grid.extent[1], grid.wraps[1], first_row, down_first);
    for (j, &(row, _)) in row_order.iter().enumerate() {
        let xs: Vec<u32> = in_plane[rows[row].clone()].iter().map(|p| p[0]).collect();
        let at = xs
            .binary_search(&entry[0])
            .expect("the entry is in its row");
        let orders = row_orders(&xs, at, grid.extent[0], grid.wraps[0]);
        let (y, z) = (entry[1], entry[2]);
        let next_row;
        let target = match (row_order.get(j + 1), next) {
            (Some(&(r, up)), _) => {
                next_row = Target {
                    candidates: &in_plane[rows[r].clone()],
                    plan: [None, Some(up), None],
                };
                &next_row
            }
            (None, Some(next)) => next,
            (None, None) => {
                edges.extend(row_hops(grid, &orders[0], y, z));
                break;
            }
        };
        let (o, to, route) = choose_exit(grid, &orders, y, z, target).ok_or_else(|| {
            format!(
                "every exit from the row of node {} to the next {} crosses a link the chain \
                 already uses",
                grid.node(entry),
                if target.plan[2].is_some() {
                    "plane"
                } else {
                    "row"
                }
            )
        })?;
        let hops = row_hops(grid, &orders[o], y, z);
        let exit = hops.last().map_or(grid.node(entry), |e| e.child);
        for e in hops {
            grid.mark(e.parent, &e.route, true);
            edges.push(e);
        }
        grid.mark(exit, &route, true);
        edges.push(Edge::unicast(exit, grid.node(to), route));
        entry = to;
    }
    Ok(entry)
}

/// The whole chain from `root`, planes in `visit_order`. A plane whose exit
/// is blocked is tried again with its rows visited the mirrored way.
fn chain_edges(
    grid: &mut Grid,
    points: &[Point],
    root: Point,
    down_first: bool,
) -> Result<Vec<Edge>, String> {
    let planes = runs(points, 2);
    let zs: Vec<u32> = planes.iter().map(|r| points[r.start][2]).collect();
    let root_plane = zs.binary_search(&root[2]).expect("the root's plane");
    let plane_order = visit_order(&zs, grid.extent[2], grid.wraps[2], root_plane, down_first);
    let mut edges = Vec::with_capacity(points.len() - 1);
    let mut entry = root;
    for (i, &(plane, _)) in plane_order.iter().enumerate() {
        let next = plane_order.get(i + 1).map(|&(p, up)| Target {
            candidates: &points[planes[p].clone()],
            plan: [None, None, Some(up)],
        });
        let in_plane = &points[planes[plane].clone()];
        let before = edges.len();
        let mut result = Err(String::new());
        for rows_down_first in [false, true] {
            result = plane_chain(
                grid,
                in_plane,
                entry,
                next.as_ref(),
                rows_down_first,
                &mut edges,
            );
            if result.is_ok() {
                break;
            }
            for e in edges.drain(before..) {
                grid.mark(e.parent, &e.route, false);
            }
        }
        entry = result?;
    }
    Ok(edges)
}

/// A Hamiltonian chain over `members` from `root` whose routes share no
/// directed link: one colour, |members| − 1 store-and-forward stages, every
/// edge a BG/P route (X, then Y, then Z, each minimal). 1D and 2D tori and
/// meshes always succeed (spec §5's lemma); in 3D a plane's exit can be
/// blocked (seen only with some extent ≤ 3), and tori with more than three
/// dimensions of extent ≥ 2 are not served: both are a
/// [`MembersError::Shape`] naming why. Dimensions of extent 1 are skipped,
/// so the construction is [`Construction::Chain3d`] only when three remain.
/// Allreduce may not run concurrently (a link can be used both ways).
pub fn chain(torus: &Torus, members: &Members, root: Node) -> Result<Schedule, MembersError> {
    members.check_root(root)?;
    if let Some(&node) = members.nodes().last().filter(|&&m| m >= torus.nodes()) {
        return Err(MembersError::Outside {
            node,
            nodes: torus.nodes(),
        });
    }
    let mut grid = Grid::new(torus).ok_or_else(|| {
        MembersError::Shape(format!(
            "the chain serves tori with at most 3 dimensions of extent 2 or more, not {:?}",
            torus.dims()
        ))
    })?;
    let construction = if grid.axes.len() == 3 {
        Construction::Chain3d
    } else {
        Construction::Chain2d
    };
    let mut points: Vec<Point> = members.nodes().iter().map(|&m| grid.point(m)).collect();
    points.sort_unstable_by_key(|p| [p[2], p[1], p[0]]);
    let root_point = grid.point(root);
    let edges = chain_edges(&mut grid, &points, root_point, false).or_else(|why| {
        // Mirror the plane order too before giving up.
        grid.used.fill(false);
        chain_edges(&mut grid, &points, root_point, true).map_err(|_| why)
    });
    match edges {
        Ok(edges) => Ok(Schedule::new(construction, vec![Tree { root, edges }])),
        Err(why) => Err(MembersError::Shape(format!(
            "no contention-free chain over these {} members: {why}",
            members.len()
        ))),
    }
}
