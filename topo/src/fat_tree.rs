//! The k-ary fat-tree of Al-Fares et al.: k pods of k/2 edge and k/2
//! aggregation switches, (k/2)^2 core switches, k^3/4 hosts. Routes go up to
//! the lowest common level and down; the way up is picked by the destination
//! (D-mod-k), so routes are deterministic and spread over the core.

use crate::{Link, Node, Topology};

/// A k-ary fat-tree; its nodes are the k^3/4 hosts (switches are not nodes,
/// only the ends of links), numbered pod by pod, edge switch by edge switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatTree {
    k: u32,
}

impl FatTree {
    /// A fat-tree of `k`-port switches (k even, at least 2).
    pub fn new(k: u32) -> Result<FatTree, String> {
        if k < 2 || k % 2 != 0 || k > 1024 {
            return Err(format!(
                "a k-ary fat-tree needs an even k in 2..=1024, not {k}"
            ));
        }
        Ok(FatTree { k })
    }

    /// The smallest fat-tree with at least `hosts` hosts.
    pub fn for_hosts(hosts: u32) -> FatTree {
        let mut k = 2;
        while u64::from(k).pow(3) / 4 < u64::from(hosts) {
            k += 2;
        }
        FatTree { k }
    }

    fn half(&self) -> u32 {
        self.k / 2
    }

    fn edge_of(&self, host: Node) -> u32 {
        host / self.half()
    }

    fn pod_of(&self, host: Node) -> u32 {
        host / (self.half() * self.half())
    }

    /// Host <-> its edge switch.
    fn host_link(&self, host: Node, up: bool) -> Link {
        Link(host * 2 + u32::from(!up))
    }

    /// Edge switch <-> aggregation switch `agg` (0..k/2) of its pod.
    fn edge_link(&self, edge: u32, agg: u32, up: bool) -> Link {
        let base = self.nodes() * 2;
        Link(base + (edge * self.half() + agg) * 2 + u32::from(!up))
    }

    /// Aggregation switch `agg` of `pod` <-> core switch (agg, port).
    fn core_link(&self, pod: u32, agg: u32, port: u32, up: bool) -> Link {
        let base = self.nodes() * 4;
        let switch = pod * self.half() + agg;
        Link(base + (switch * self.half() + port) * 2 + u32::from(!up))
    }
}

impl Topology for FatTree {
    fn nodes(&self) -> u32 {
        self.k * self.k * self.k / 4
    }

    /// Each level has as many up-links as there are hosts.
    fn links(&self) -> u32 {
        self.nodes() * 6
    }

    fn route(&self, from: Node, to: Node, out: &mut Vec<Link>) {
        if from == to {
            return;
        }
        let agg = to % self.half();
        out.push(self.host_link(from, true));
        if self.edge_of(from) != self.edge_of(to) {
            out.push(self.edge_link(self.edge_of(from), agg, true));
            if self.pod_of(from) != self.pod_of(to) {
                let port = (to / self.half()) % self.half();
                out.push(self.core_link(self.pod_of(from), agg, port, true));
                out.push(self.core_link(self.pod_of(to), agg, port, false));
            }
            out.push(self.edge_link(self.edge_of(to), agg, false));
        }
        out.push(self.host_link(to, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link_loads;

    #[test]
    fn routes_climb_only_as_high_as_needed() {
        let f = FatTree::new(4).unwrap();
        assert_eq!(f.nodes(), 16);
        let hops = |a, b| {
            let mut r = Vec::new();
            f.route(a, b, &mut r);
            r.len()
        };
        assert_eq!(hops(0, 0), 0);
        assert_eq!(hops(0, 1), 2); // same edge switch
        assert_eq!(hops(0, 2), 4); // same pod
        assert_eq!(hops(0, 15), 6); // across the core
    }

    #[test]
    fn links_are_numbered_densely_and_a_permutation_spreads_over_them() {
        let f = FatTree::new(4).unwrap();
        let n = f.nodes();
        // Every host sends to the host half the machine away: a full
        // bisection load, which D-mod-k routing spreads to one route a link.
        let pairs: Vec<(Node, Node)> = (0..n).map(|h| (h, (h + n / 2) % n)).collect();
        let loads = link_loads(&f, &pairs);
        assert_eq!(loads.len() as u32, f.links());
        assert!(loads.iter().all(|&l| l <= 1), "{loads:?}");
    }

    #[test]
    fn bad_shapes_are_refused() {
        assert!(FatTree::new(3).is_err());
        assert!(FatTree::new(0).is_err());
        assert_eq!(FatTree::for_hosts(17).nodes(), 54);
    }
}
