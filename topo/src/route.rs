//! Routes on a torus as straight segments, the form BG/P's deterministic
//! routing takes: one segment per dimension, in increasing dimension order,
//! each the short way round (a tie may go either way: software's hint).

use crate::{Link, Node, Torus};

/// `len` hops along `dim`, upward (+) or downward (−).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Segment {
    /// The torus dimension it runs along.
    pub dim: usize,
    /// Towards higher coordinates (wrapping past the top on a ring).
    pub up: bool,
    /// Hops, at least 1 in a valid route.
    pub len: u32,
}

/// What following a route visits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Walk {
    /// The directed links crossed, in order.
    pub links: Vec<Link>,
    /// Nodes passed between the two ends (transit nodes).
    pub transit: Vec<Node>,
    /// The node the route arrives at.
    pub end: Node,
}

/// Why a route is not one BG/P's routing could take.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// A segment's dimension is not below the torus's dimension count.
    #[error("segment {index} goes along dimension {dim}, which the torus does not have")]
    NoSuchDimension {
        /// Position of the segment in the route.
        index: usize,
        /// The dimension it names.
        dim: usize,
    },
    /// A segment of zero hops (BG/P's routes have none).
    #[error("segment {index} is empty")]
    Empty {
        /// Position of the segment in the route.
        index: usize,
    },
    /// A segment steps past the edge of a dimension that does not wrap.
    #[error("segment {index} runs off the mesh along dimension {dim}")]
    OffTheMesh {
        /// Position of the segment in the route.
        index: usize,
        /// The non-wrapping dimension it leaves.
        dim: usize,
    },
    /// A segment goes the long way round a ring: more than half its extent.
    #[error(
        "segment {index} takes {len} hops along dimension {dim} of extent {extent}: not minimal"
    )]
    NotMinimal {
        /// Position of the segment in the route.
        index: usize,
        /// The ring's dimension.
        dim: usize,
        /// The segment's hops.
        len: u32,
        /// The ring's extent (nodes round it).
        extent: u32,
    },
    /// A segment's dimension is not above the previous segment's.
    #[error("segment {index} goes along dimension {dim} after a higher or equal one")]
    OutOfOrder {
        /// Position of the segment in the route.
        index: usize,
        /// Its dimension.
        dim: usize,
    },
}

impl Torus {
    /// The dimension-ordered minimal route between two nodes; ties go up,
    /// as [`crate::Topology::route`] does.
    pub fn minimal_route(&self, from: Node, to: Node) -> Vec<Segment> {
        let (a, b) = (self.coordinates(from), self.coordinates(to));
        (0..self.dims().len())
            .filter_map(|dim| {
                let up = self.distance(dim, a[dim], b[dim], true);
                let down = self.distance(dim, a[dim], b[dim], false);
                let (up, len) = match (up, down) {
                    (Some(u), Some(d)) if d < u => (false, d),
                    (Some(u), _) => (true, u),
                    (None, Some(d)) => (false, d),
                    (None, None) => unreachable!("a mesh is open one way"),
                };
                (len > 0).then_some(Segment { dim, up, len })
            })
            .collect()
    }

    /// Follows `route` from `from`, checking every segment is minimal, non-empty,
    /// in increasing dimension order and on the mesh.
    pub fn walk(&self, from: Node, route: &[Segment]) -> Result<Walk, RouteError> {
        let mut walk = Walk {
            links: Vec::new(),
            transit: Vec::new(),
            end: from,
        };
        let mut last_dim = None;
        for (index, s) in route.iter().enumerate() {
            let Some(&extent) = self.dims().get(s.dim) else {
                return Err(RouteError::NoSuchDimension { index, dim: s.dim });
            };
            if s.len == 0 {
                return Err(RouteError::Empty { index });
            }
            if last_dim.is_some_and(|d| d >= s.dim) {
                return Err(RouteError::OutOfOrder { index, dim: s.dim });
            }
            last_dim = Some(s.dim);
            if self.wraps(s.dim) && s.len > extent / 2 {
                return Err(RouteError::NotMinimal {
                    index,
                    dim: s.dim,
                    len: s.len,
                    extent,
                });
            }
            for _ in 0..s.len {
                if !walk.links.is_empty() {
                    walk.transit.push(walk.end);
                }
                walk.links.push(self.link(walk.end, s.dim, s.up));
                walk.end = self
                    .step(walk.end, s.dim, s.up)
                    .ok_or(RouteError::OffTheMesh { index, dim: s.dim })?;
            }
        }
        Ok(walk)
    }
}

/// The same segments traversed backwards (the reduce direction of a tree
/// edge). Its dimensions run in decreasing order, so only a single-segment
/// route's reversal is itself a route BG/P's hardware would take.
pub fn reversed(route: &[Segment]) -> Vec<Segment> {
    route
        .iter()
        .rev()
        .map(|s| Segment { up: !s.up, ..*s })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Topology;

    #[test]
    fn minimal_routes_match_the_topologys_links() {
        let t = Torus::with_wrap(&[4, 3, 5], &[true, false, true]).unwrap();
        for from in 0..t.nodes() {
            for to in 0..t.nodes() {
                let mut links = Vec::new();
                t.route(from, to, &mut links);
                let walk = t.walk(from, &t.minimal_route(from, to)).unwrap();
                assert_eq!(walk.links, links, "{from} -> {to}");
                assert_eq!(walk.end, to);
            }
        }
    }

    #[test]
    fn bad_routes_are_named() {
        let t = Torus::with_wrap(&[6, 4], &[true, false]).unwrap();
        let seg = |dim, up, len| Segment { dim, up, len };
        assert!(matches!(
            t.walk(0, &[seg(0, true, 4)]),
            Err(RouteError::NotMinimal { .. })
        ));
        assert!(t.walk(0, &[seg(0, false, 3)]).is_ok(), "a tie may go down");
        assert!(matches!(
            t.walk(0, &[seg(1, false, 1)]),
            Err(RouteError::OffTheMesh { .. })
        ));
        assert!(matches!(
            t.walk(0, &[seg(1, true, 1), seg(0, true, 1)]),
            Err(RouteError::OutOfOrder { .. })
        ));
        assert!(matches!(
            t.walk(0, &[seg(0, true, 0)]),
            Err(RouteError::Empty { .. })
        ));
        let walk = t.walk(0, &[seg(0, true, 2), seg(1, true, 1)]).unwrap();
        assert_eq!(walk.transit, vec![t.node(&[1, 0]), t.node(&[2, 0])]);
        assert_eq!(walk.end, t.node(&[2, 1]));
    }

    #[test]
    fn reversing_a_link_twice_is_the_identity() {
        let t = Torus::with_wrap(&[2, 3, 1], &[true, false, true]).unwrap();
        for node in 0..t.nodes() {
            for dim in 0..3 {
                for up in [true, false] {
                    if t.step(node, dim, up).is_some() {
                        let l = t.link(node, dim, up);
                        assert_ne!(t.reverse(l), l);
                        assert_eq!(t.reverse(t.reverse(l)), l);
                    }
                }
            }
        }
    }
}
