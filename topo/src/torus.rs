//! n-dimensional torus and mesh (a wrap flag per dimension), nodes in
//! row-major order (dimension 0 varies slowest), dimension-ordered minimal
//! routes: dimension 0 first, the shorter way round (ties go up).

use crate::{Link, Node, Topology};

/// A torus, mesh or mix of both: an extent and a wrap flag per dimension.
/// The link leaving node n upward along dimension d is numbered
/// `(n * dims().len() + d) * 2`; the downward one is the next number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Torus {
    dims: Vec<u32>,
    wrap: Vec<bool>,
}

impl Torus {
    /// A torus (every dimension wraps) of these extents.
    pub fn new(dims: &[u32]) -> Result<Torus, String> {
        Torus::with_wrap(dims, &vec![true; dims.len()])
    }

    /// A torus, mesh or mix: `wrap[d]` says whether dimension d wraps.
    pub fn with_wrap(dims: &[u32], wrap: &[bool]) -> Result<Torus, String> {
        if dims.is_empty() || dims.len() != wrap.len() {
            return Err(format!(
                "a torus needs one wrap flag per dimension and at least one \
                 dimension; got {} extents and {} flags",
                dims.len(),
                wrap.len()
            ));
        }
        if dims.contains(&0) {
            return Err(format!("torus extents must be at least 1: {dims:?}"));
        }
        let nodes = dims.iter().try_fold(1u64, |n, &d| {
            Some(n * u64::from(d)).filter(|&n| n * 2 * dims.len() as u64 <= u64::from(u32::MAX))
        });
        if nodes.is_none() {
            return Err(format!("a torus of {dims:?} has too many links to number"));
        }
        Ok(Torus {
            dims: dims.to_vec(),
            wrap: wrap.to_vec(),
        })
    }

    /// The most cube-like 3D torus with at least `nodes` nodes.
    pub fn cube_for(nodes: u32) -> Torus {
        let mut dims = [1u32; 3];
        while dims.iter().map(|&d| u64::from(d)).product::<u64>() < u64::from(nodes) {
            let smallest = (0..3).min_by_key(|&i| dims[i]).expect("three dimensions");
            dims[smallest] *= 2;
        }
        Torus::new(&dims).expect("a valid torus")
    }

    /// The extent (nodes along) of each dimension.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// `node`'s coordinate along each dimension (row-major: dimension 0
    /// varies slowest).
    pub fn coordinates(&self, node: Node) -> Vec<u32> {
        let mut rest = node;
        let mut out = vec![0; self.dims.len()];
        for (d, &extent) in self.dims.iter().enumerate().rev() {
            out[d] = rest % extent;
            rest /= extent;
        }
        out
    }

    /// The node at `coordinates` (one per dimension, each below its extent):
    /// the inverse of [`Torus::coordinates`].
    pub fn node(&self, coordinates: &[u32]) -> Node {
        coordinates
            .iter()
            .zip(&self.dims)
            .fold(0, |n, (&c, &extent)| n * extent + c)
    }

    /// Whether `dim` is a ring (true) or a line (a mesh dimension).
    pub fn wraps(&self, dim: usize) -> bool {
        self.wrap[dim]
    }

    /// The link leaving `node` along dimension `dim`, upward or downward.
    pub fn link(&self, node: Node, dim: usize, up: bool) -> Link {
        Link((node * self.dims.len() as u32 + dim as u32) * 2 + u32::from(!up))
    }

    /// The node one hop from `node` along `dim`; `None` past a mesh's edge
    /// or along a dimension of extent 1 (it has no links).
    pub fn step(&self, node: Node, dim: usize, up: bool) -> Option<Node> {
        let extent = self.dims[dim];
        let mut c = self.coordinates(node);
        c[dim] = match (up, self.wrap[dim]) {
            _ if extent == 1 => return None,
            (true, _) if c[dim] + 1 < extent => c[dim] + 1,
            (false, _) if c[dim] > 0 => c[dim] - 1,
            (_, false) => return None,
            (true, true) => 0,
            (false, true) => extent - 1,
        };
        Some(self.node(&c))
    }

    /// The same physical link traversed the other way: the link from the
    /// far end back to `node`.
    pub fn reverse(&self, link: Link) -> Link {
        let per_node = self.dims.len() as u32 * 2;
        let node = link.0 / per_node;
        let dim = (link.0 % per_node / 2) as usize;
        let up = link.0 % 2 == 0;
        let far = self.step(node, dim, up).expect("a link has a far end");
        self.link(far, dim, !up)
    }

    /// Hops from coordinate `a` to `b` along `dim` going up (or down), or
    /// `None` when a mesh does not allow that direction.
    pub fn distance(&self, dim: usize, a: u32, b: u32, up: bool) -> Option<u32> {
        let extent = self.dims[dim];
        match (self.wrap[dim], up) {
            (true, true) => Some((b + extent - a) % extent),
            (true, false) => Some((a + extent - b) % extent),
            (false, true) => b.checked_sub(a),
            (false, false) => a.checked_sub(b),
        }
    }

    /// The fewest hops between two nodes.
    pub fn hops(&self, a: Node, b: Node) -> u32 {
        let (ca, cb) = (self.coordinates(a), self.coordinates(b));
        (0..self.dims.len())
            .map(|d| {
                let up = self.distance(d, ca[d], cb[d], true);
                let down = self.distance(d, ca[d], cb[d], false);
                up.into_iter().chain(down).min().expect("one way is open")
            })
            .sum()
    }
}

impl Topology for Torus {
    fn nodes(&self) -> u32 {
        self.dims.iter().product()
    }

    fn links(&self) -> u32 {
        self.nodes() * 2 * self.dims.len() as u32
    }

    fn route(&self, from: Node, to: Node, out: &mut Vec<Link>) {
        let mut here = self.coordinates(from);
        let there = self.coordinates(to);
        for d in 0..self.dims.len() {
            let extent = self.dims[d];
            let up_steps = (there[d] + extent - here[d]) % extent;
            let down_steps = (here[d] + extent - there[d]) % extent;
            let up = if self.wrap[d] {
                up_steps <= down_steps
            } else {
                there[d] >= here[d]
            };
            let steps = if up { up_steps } else { down_steps };
            for _ in 0..steps {
                out.push(self.link(self.node(&here), d, up));
                here[d] = if up {
                    (here[d] + 1) % extent
                } else {
                    (here[d] + extent - 1) % extent
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_loads;

    #[test]
    fn routes_go_dimension_by_dimension_the_short_way() {
        let t = Torus::new(&[4, 4]).unwrap();
        let mut r = Vec::new();
        // (0,0) -> (3,1): dimension 0 down once (wrap), then dimension 1 up once.
        t.route(t.node(&[0, 0]), t.node(&[3, 1]), &mut r);
        assert_eq!(
            r,
            vec![
                t.link(t.node(&[0, 0]), 0, false),
                t.link(t.node(&[3, 0]), 1, true)
            ]
        );
        // A mesh does not wrap: three steps up.
        let m = Torus::with_wrap(&[4, 4], &[false, false]).unwrap();
        r.clear();
        m.route(m.node(&[0, 0]), m.node(&[3, 0]), &mut r);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn every_route_ends_where_it_should() {
        let t = Torus::with_wrap(&[3, 1, 5], &[true, false, true]).unwrap();
        for from in 0..t.nodes() {
            for to in 0..t.nodes() {
                let mut r = Vec::new();
                t.route(from, to, &mut r);
                let hops: u32 = (0..3)
                    .map(|d| {
                        let (a, b) = (t.coordinates(from)[d], t.coordinates(to)[d]);
                        let diff = a.abs_diff(b);
                        diff.min(t.dims()[d] - diff)
                    })
                    .sum();
                assert_eq!(r.len() as u32, hops, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn two_routes_through_one_link_load_it_twice() {
        let t = Torus::new(&[8]).unwrap();
        let loads = link_loads(&t, &[(0, 2), (1, 3)]);
        assert_eq!(loads[t.link(1, 0, true).0 as usize], 2);
        assert_eq!(loads.iter().sum::<u32>(), 4);
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(Torus::new(&[]).is_err());
        assert!(Torus::new(&[4, 0]).is_err());
        assert!(Torus::with_wrap(&[4], &[true, false]).is_err());
        assert!(Torus::new(&[1 << 16, 1 << 16]).is_err());
    }
}
