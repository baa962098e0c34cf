//! Several sub-communicators at once (spec §5, "Multiple sub-communicators",
//! after US 9,665,531/532): one chain per group over exactly its members, no
//! physical link used by two groups in either direction, so all run at once.

use std::collections::HashMap;

use super::chain;
use crate::{
    Construction, Edge, Link, Members, MembersError, Node, Schedule, Segment, Topology, Torus, Tree,
};

/// Whole rebuilds tried before giving up. Each after the first builds the
/// group that failed last time first, and shuffles the order in which about
/// half the groups place their members.
const ATTEMPTS: u64 = 40;

/// What a route pays, in hops, for passing through a member of a group
/// still to be chained: the pass takes two of that member's links.
const CROWDING: u32 = 3;

/// What it pays instead when the member would be left with fewer than three
/// free links (a chain needs two at each member, and the routes' fixed
/// dimension order makes some of them useless).
const STARVING: u32 = 30;

/// splitmix64: reproducible shuffles without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// One edge of a chain under construction: the child, the route, its links.
struct Hop {
    child: Node,
    route: Vec<Segment>,
    links: Vec<Link>,
}

/// The links the groups hold, and whose members are still to be chained.
struct Net<'a> {
    torus: &'a Torus,
    /// Per directed link: 0 when free, else the holding group's index + 1.
    owner: Vec<u32>,
    /// Per node: 0, or the index + 1 of the group it is a member of.
    member_of: &'a [u32],
    /// Per group index + 1: its chain is not built yet.
    pending: Vec<bool>,
}

impl Net<'_> {
    /// Group `g` may use `link` when nobody uses it and no other group uses
    /// the same physical link the other way.
    fn usable(&self, link: Link, g: u32) -> bool {
        let back = self.owner[self.torus.reverse(link).0 as usize];
        self.owner[link.0 as usize] == 0 && (back == 0 || back == g)
    }

    /// The physical links at `node` that no group uses either way.
    fn free_links(&self, node: Node) -> u32 {
        let t = self.torus;
        (0..t.dims().len())
            .flat_map(|d| [(d, true), (d, false)])
            .filter(|&(d, up)| {
                t.step(node, d, up).is_some() && {
                    let l = t.link(node, d, up);
                    self.owner[l.0 as usize] == 0 && self.owner[t.reverse(l).0 as usize] == 0
                }
            })
            .count() as u32
    }

    fn set(&mut self, links: &[Link], g: u32) {
        for l in links {
            self.owner[l.0 as usize] = g;
        }
    }

    /// The BG/P route from `a` to `b` (ties either way) over links group `g`
    /// may use that crowds the members of groups still to be chained least,
    /// with what that crowding costs.
    fn hop(&self, a: Node, b: Node, g: u32, rng: &mut Rng) -> Option<(u32, Hop)> {
        let mut routes = routes(self.torus, a, b);
        let k = routes.len();
        routes.rotate_left(rng.next() as usize % k);
        routes
            .into_iter()
            .filter_map(|route| {
                let walk = self.torus.walk(a, &route).expect("a BG/P route");
                if !walk.links.iter().all(|&l| self.usable(l, g)) {
                    return None;
                }
                let crowded = walk
                    .transit
                    .iter()
                    .filter(|&&n| {
                        let h = self.member_of[n as usize];
                        h != 0 && h != g && self.pending[h as usize]
                    })
                    .map(|&n| match self.free_links(n) {
                        0..5 => STARVING,
                        _ => CROWDING,
                    })
                    .sum();
                let hop = Hop {
                    child: b,
                    route,
                    links: walk.links,
                };
                Some((crowded, hop))
            })
            .min_by_key(|(crowded, _)| *crowded)
    }
}

/// Every BG/P-faithful route from `a` to `b`: one minimal segment per
/// dimension in increasing order, a tie either way.
fn routes(torus: &Torus, a: Node, b: Node) -> Vec<Vec<Segment>> {
    let (ca, cb) = (torus.coordinates(a), torus.coordinates(b));
    let mut out = vec![Vec::new()];
    for dim in 0..ca.len() {
        if ca[dim] == cb[dim] {
            continue;
        }
        let half = if torus.wraps(dim) {
            torus.dims()[dim] / 2
        } else {
            u32::MAX
        };
        let ways: Vec<Segment> = [true, false]
            .into_iter()
            .filter_map(|up| {
                let len = torus.distance(dim, ca[dim], cb[dim], up)?;
                (len <= half).then_some(Segment { dim, up, len })
            })
            .collect();
        out = out
            .iter()
            .flat_map(|r| ways.iter().map(move |&s| [&r[..], &[s]].concat()))
            .collect();
    }
    out
}

/// The nodes within `radius` hops of `center` along every dimension.
fn nearby(torus: &Torus, center: Node, radius: u32) -> Vec<Node> {
    let c = torus.coordinates(center);
    let mut out = vec![Vec::new()];
    for (dim, &extent) in torus.dims().iter().enumerate() {
        let span: Vec<u32> = if torus.wraps(dim) && 2 * radius + 1 >= extent {
            (0..extent).collect()
        } else if torus.wraps(dim) {
            (0..=2 * radius)
                .map(|i| (c[dim] + extent - radius + i) % extent)
                .collect()
        } else {
            (c[dim].saturating_sub(radius)..extent.min(c[dim] + radius + 1)).collect()
        };
        out = out
            .iter()
            .flat_map(|p: &Vec<u32>| span.iter().map(move |&x| [&p[..], &[x]].concat()))
            .collect();
    }
    out.iter().map(|p| torus.node(p)).collect()
}

/// One group's chain under construction: the hop out of every node but
/// the last.
struct Path {
    hops: HashMap<Node, Hop>,
    last: Node,
    group: u32,
}

/// A way to add a member: its cost, where, and the new hops.
struct Insertion {
    cost: u32,
    after: Option<Node>,
    to_v: Hop,
    from_v: Option<Hop>,
}

impl Path {
    /// The cheapest way to add `v`: after the end, or between one of the
    /// chain nodes `near` and its child. Hops first: crowding only adds.
    fn cheapest(
        &mut self,
        net: &mut Net,
        v: Node,
        near: Vec<Node>,
        rng: &mut Rng,
    ) -> Option<Insertion> {
        let torus = net.torus;
        let g = self.group;
        let mut places = vec![(torus.hops(self.last, v), None)];
        for u in near {
            if let Some(h) = self.hops.get(&u) {
                let w = h.child;
                let cost = torus.hops(u, v) + torus.hops(v, w) - torus.hops(u, w);
                places.push((cost, Some(u)));
            }
        }
        places.sort_unstable();
        let mut best: Option<Insertion> = None;
        for (hops, after) in places {
            if best.as_ref().is_some_and(|b| b.cost <= hops) {
                break;
            }
            let found = match after {
                None => net
                    .hop(self.last, v, g, rng)
                    .map(|(crowded, to_v)| (crowded, to_v, None)),
                Some(u) => {
                    // Try v between u and its child without u's old hop.
                    let old = self.hops.remove(&u).expect("a chain node with a child");
                    net.set(&old.links, 0);
                    let found = net.hop(u, v, g, rng).and_then(|(c1, to_v)| {
                        net.set(&to_v.links, g);
                        let from_v = net.hop(v, old.child, g, rng);
                        net.set(&to_v.links, 0);
                        from_v.map(|(c2, from_v)| (c1 + c2, to_v, Some(from_v)))
                    });
                    net.set(&old.links, g);
                    self.hops.insert(u, old);
                    found
                }
            };
            if let Some((crowded, to_v, from_v)) = found {
                let cost = hops + crowded;
                if best.as_ref().is_none_or(|b| cost < b.cost) {
                    best = Some(Insertion {
                        cost,
                        after,
                        to_v,
                        from_v,
                    });
                }
            }
        }
        best
    }

    /// Adds `v` where it costs least, looking at chain nodes further afield
    /// while nothing fits; false if nothing does.
    fn place(&mut self, net: &mut Net, v: Node, rng: &mut Rng) -> bool {
        let torus = net.torus;
        let widest = torus.dims().iter().max().copied().unwrap_or(1);
        let mut radius = 2;
        let best = loop {
            let span = |d: usize| (2 * radius + 1).min(torus.dims()[d]) as usize;
            let volume: usize = (0..torus.dims().len()).map(span).product();
            // Scan the box round v, or the whole chain where that is shorter.
            let whole = volume > self.hops.len() || 2 * radius + 1 >= widest;
            let near = if volume > self.hops.len() {
                self.hops.keys().copied().collect()
            } else {
                nearby(torus, v, radius)
            };
            match self.cheapest(net, v, near, rng) {
                Some(best) => break best,
                None if whole => return false,
                None => radius *= 2,
            }
        };
        let g = self.group;
        match best.after {
            None => {
                net.set(&best.to_v.links, g);
                self.hops.insert(self.last, best.to_v);
                self.last = v;
            }
            Some(u) => {
                let old = self.hops.remove(&u).expect("a chain node with a child");
                net.set(&old.links, 0);
                net.set(&best.to_v.links, g);
                let from_v = best.from_v.expect("an insertion has two hops");
                net.set(&from_v.links, g);
                self.hops.insert(u, best.to_v);
                self.hops.insert(v, from_v);
            }
        }
        true
    }
}

/// Group `g`'s chain over `order` (the root first), members placed in that
/// order (or shuffled); one that fits nowhere yet waits until the chain has
/// grown.
fn group_chain(
    net: &mut Net,
    order: &[Node],
    g: u32,
    shuffle: bool,
    rng: &mut Rng,
) -> Result<HashMap<Node, Hop>, String> {
    let mut path = Path {
        hops: HashMap::with_capacity(order.len()),
        last: order[0],
        group: g,
    };
    let mut waiting = order[1..].to_vec();
    if shuffle {
        for i in (1..waiting.len()).rev() {
            let j = rng.next() as usize % (i + 1);
            waiting.swap(i, j);
        }
    }
    while !waiting.is_empty() {
        let before = waiting.len();
        waiting.retain(|&v| !path.place(net, v, rng));
        if waiting.len() == before {
            return Err(format!(
                "group {} could not reach member {} over links the other groups leave free",
                g - 1,
                waiting[0]
            ));
        }
    }
    net.pending[g as usize] = false;
    Ok(path.hops)
}

/// The members of a group in the order its chain visits them (the root
/// first): the single-group chain's order where it exists, else by hops
/// from the root. Nearby members come close together either way.
fn visit_order(torus: &Torus, members: &Members, root: Node) -> Vec<Node> {
    match chain(torus, members, root) {
        Ok(s) => std::iter::once(root)
            .chain(s.colours[0].edges.iter().map(|e| e.child))
            .collect(),
        Err(_) => {
            let mut order = members.nodes().to_vec();
            order.sort_by_key(|&m| (m != root, torus.hops(root, m), m));
            order
        }
    }
}

/// Pairwise link-disjoint chains for several sub-communicators, one per
/// `(members, root)` group, in the order given: each a Hamiltonian path
/// over exactly its members from its root with BG/P routes, and no
/// physical link used by two groups in either direction. Each group's
/// chain is contention-free on its own. Member sets must be disjoint. The
/// search is greedy, group after group, each member inserted where it adds
/// the fewest hops over links the earlier groups left free while sparing
/// the later groups' members; retried with the group that got stuck first.
/// When it finds nothing, a [`MembersError::Shape`] says which got stuck.
pub fn disjoint_chains(
    torus: &Torus,
    groups: &[(Members, Node)],
) -> Result<Vec<Schedule>, MembersError> {
    let mut member_of = vec![0u32; torus.nodes() as usize];
    for (g, (members, root)) in groups.iter().enumerate() {
        members.check_root(*root)?;
        for &m in members.nodes() {
            let Some(slot) = member_of.get_mut(m as usize) else {
                return Err(MembersError::Outside {
                    node: m,
                    nodes: torus.nodes(),
                });
            };
            if *slot != 0 {
                return Err(MembersError::Shape(format!(
                    "the groups must be disjoint: node {m} is in groups {} and {g}",
                    *slot - 1
                )));
            }
            *slot = g as u32 + 1;
        }
    }
    let orders: Vec<Vec<Node>> = groups
        .iter()
        .map(|(members, root)| visit_order(torus, members, *root))
        .collect();
    let mut sequence: Vec<usize> = (0..groups.len()).collect();
    let mut why = String::new();
    for attempt in 0..ATTEMPTS {
        let mut rng = Rng(attempt);
        let mut net = Net {
            torus,
            owner: vec![0; torus.links() as usize],
            member_of: &member_of,
            pending: vec![true; groups.len() + 1],
        };
        let mut chains: Vec<HashMap<Node, Hop>> =
            (0..groups.len()).map(|_| HashMap::new()).collect();
        let failed = sequence.iter().position(|&g| {
            let shuffle = attempt > 0 && rng.next() % 2 == 1;
            match group_chain(&mut net, &orders[g], g as u32 + 1, shuffle, &mut rng) {
                Ok(hops) => {
                    chains[g] = hops;
                    false
                }
                Err(e) => {
                    why = e;
                    true
                }
            }
        });
        let Some(at) = failed else {
            return Ok(groups
                .iter()
                .zip(chains)
                .map(|((_, root), mut hops)| {
                    let mut edges = Vec::with_capacity(hops.len());
                    let mut at = *root;
                    while let Some(hop) = hops.remove(&at) {
                        edges.push(Edge::unicast(at, hop.child, hop.route));
                        at = hop.child;
                    }
                    let tree = Tree { root: *root, edges };
                    Schedule::new(Construction::DisjointChain, vec![tree])
                })
                .collect());
        };
        let g = sequence.remove(at);
        sequence.insert(0, g);
    }
    Err(MembersError::Shape(format!(
        "no pairwise link-disjoint chains found in {ATTEMPTS} attempts; the last: {why}"
    )))
}
