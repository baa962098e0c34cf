//! Cost models: what a message costs in virtual time. The simulator asks the
//! model once per message, when the message is sent; a model may keep state
//! (link occupancy) across messages.

use std::fmt;

use catena_topo::{Link, Node, RouteError, Schedule, Topology, Torus};
use rustc_hash::FxHashMap;

use catena_fabric::{Rank, Time};

/// When a message of `bytes` bytes that leaves `from` at `depart` has fully
/// arrived at `to`, and what sending and receiving cost the processes.
pub trait CostModel {
    /// Fully arrived at the target (no earlier than `depart`).
    fn arrival(&mut self, from: Rank, to: Rank, bytes: usize, depart: Time) -> Time;
    /// CPU time a process spends to send or to receive one message (o).
    fn overhead_ns(&self) -> u64;
    /// Earliest time after a send starts until the same process may start
    /// its next send (LogGP's max(g, k G)).
    fn gap_ns(&self, bytes: usize) -> u64;
}

/// LogGP (Alexandrov et al.): latency L, overhead o, gap g per message and
/// G per byte. A k-byte message whose send starts at s costs the sender o,
/// arrives at s + o + L + k G, and costs the receiver o.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LogGp {
    /// L: wire latency of a message, in nanoseconds.
    pub latency_ns: f64,
    /// o: CPU time a send or receive costs its rank, in nanoseconds.
    pub overhead_ns: f64,
    /// g: least time between two sends of one rank, in nanoseconds.
    pub gap_ns: f64,
    /// G: time per payload byte, in nanoseconds.
    pub per_byte_ns: f64,
}

impl LogGp {
    /// A BlueGene/P-like machine (the paper's Dawn), from the figures the
    /// Blue Gene/P papers give (IBM Blue Gene team, "Overview of the IBM
    /// Blue Gene/P project", IBM J. Res. Dev. 52(1/2), 2008; not checked
    /// against the paper here): about 2.5 µs MPI latency between neighbours
    /// end to end, of which about 1 µs is software overhead on each side, so
    /// o = 1 µs and L = 2.5 − 2 × 1 = 0.5 µs (o + L + o = 2.5 µs one way);
    /// 425 MB/s a link raw, about 375 MB/s of payload.
    pub const BGP: LogGp = LogGp {
        latency_ns: 500.0,
        overhead_ns: 1_000.0,
        gap_ns: 1_000.0,
        per_byte_ns: 1e9 / 375e6,
    };
}

impl Default for LogGp {
    fn default() -> LogGp {
        LogGp::BGP
    }
}

impl fmt::Display for LogGp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LogGP L = {} ns, o = {} ns, g = {} ns, G = {:.3} ns/B",
            self.latency_ns, self.overhead_ns, self.gap_ns, self.per_byte_ns
        )
    }
}

impl CostModel for LogGp {
    fn arrival(&mut self, _from: Rank, _to: Rank, bytes: usize, depart: Time) -> Time {
        let wire = self.latency_ns + bytes as f64 * self.per_byte_ns;
        Time(depart.0 + wire.round() as u64)
    }

    fn overhead_ns(&self) -> u64 {
        self.overhead_ns.round() as u64
    }

    fn gap_ns(&self, bytes: usize) -> u64 {
        self.gap_ns.max(bytes as f64 * self.per_byte_ns).round() as u64
    }
}

/// Messages between nodes follow the topology's route over directed links
/// of finite bandwidth, cut-through: the head advances one hop per
/// `hop_ns`, and each link carries one message at a time, reserved in the
/// order messages are sent, so flows that share a link share its time (two
/// equal flows through one link take twice as long as one). A node injects
/// on all its links at once (a DMA engine, as on BG/P): a sender pays the
/// per-message gap, and only links limit bandwidth. Ranks map to nodes in
/// blocks of `ranks_per_node`; messages within a node cost the `local`
/// LogGP latency and per-byte time.
pub struct Routed<T: Topology> {
    topology: T,
    ranks_per_node: u32,
    /// Time a link takes per byte, in nanoseconds (inverse bandwidth).
    pub link_ns_per_byte: f64,
    /// Latency added per hop (router traversal), in nanoseconds.
    pub hop_ns: f64,
    /// The model of messages between ranks of one node.
    pub local: LogGp,
    busy: Vec<u64>,
    route: Vec<Link>,
    /// Routes software chose between two nodes (BG/P's direction hints).
    pinned: FxHashMap<(Node, Node), Vec<Link>>,
}

impl<T: Topology> Routed<T> {
    /// A machine of `topology` with `ranks_per_node` ranks on each node,
    /// BlueGene/P-like: 425 MB/s links, 100 ns a hop, LogGP's BG/P overheads
    /// and 1 µs within a node.
    pub fn new(topology: T, ranks_per_node: u32) -> Routed<T> {
        let links = topology.links() as usize;
        Routed {
            topology,
            ranks_per_node: ranks_per_node.max(1),
            link_ns_per_byte: 1e9 / 425e6,
            hop_ns: 100.0,
            local: LogGp {
                latency_ns: 1_000.0,
                per_byte_ns: 0.5,
                ..LogGp::BGP
            },
            busy: vec![0; links],
            route: Vec::new(),
            pinned: FxHashMap::default(),
        }
    }

    /// The network the messages are routed through.
    pub fn topology(&self) -> &T {
        &self.topology
    }

    /// Messages from node `from` to node `to` take `links` instead of the
    /// topology's route (a tie broken the other way, a schedule's route).
    pub fn pin_route(&mut self, from: Node, to: Node, links: Vec<Link>) {
        self.pinned.insert((from, to), links);
    }
}

impl Routed<Torus> {
    /// Pins every edge's route of `schedule` (over nodes), and its reversal
    /// for what travels back (reduce partials, credits).
    pub fn pin_schedule(&mut self, schedule: &Schedule) -> Result<(), RouteError> {
        for edge in schedule.colours.iter().flat_map(|tree| &tree.edges) {
            let links = self.topology.walk(edge.parent, &edge.route)?.links;
            let back = links
                .iter()
                .rev()
                .map(|&l| self.topology.reverse(l))
                .collect();
            self.pin_route(edge.parent, edge.child, links);
            self.pin_route(edge.child, edge.parent, back);
        }
        Ok(())
    }
}

impl<T: Topology> fmt::Display for Routed<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes x {} ranks, links {:.0} MB/s, {} ns a hop, o = {} ns",
            self.topology.nodes(),
            self.ranks_per_node,
            1e3 / self.link_ns_per_byte,
            self.hop_ns,
            self.local.overhead_ns
        )
    }
}

impl<T: Topology> CostModel for Routed<T> {
    fn arrival(&mut self, from: Rank, to: Rank, bytes: usize, depart: Time) -> Time {
        let (a, b) = (from / self.ranks_per_node, to / self.ranks_per_node);
        if a == b {
            return self.local.arrival(from, to, bytes, depart);
        }
        let route = match self.pinned.get(&(a, b)) {
            Some(links) => links,
            None => {
                self.route.clear();
                self.topology.route(a, b, &mut self.route);
                &self.route
            }
        };
        let transfer = (bytes as f64 * self.link_ns_per_byte).round() as u64;
        let hop = self.hop_ns.round() as u64;
        let (mut head, mut end) = (depart.0, depart.0);
        for link in route {
            let busy = &mut self.busy[link.0 as usize];
            let start = head.max(*busy);
            end = start + transfer;
            *busy = end;
            head = start + hop;
        }
        Time(end + hop)
    }

    fn overhead_ns(&self) -> u64 {
        self.local.overhead_ns()
    }

    fn gap_ns(&self, _bytes: usize) -> u64 {
        self.local.gap_ns.round() as u64
    }
}

impl<M: CostModel + ?Sized> CostModel for Box<M> {
    fn arrival(&mut self, from: Rank, to: Rank, bytes: usize, depart: Time) -> Time {
        (**self).arrival(from, to, bytes, depart)
    }

    fn overhead_ns(&self) -> u64 {
        (**self).overhead_ns()
    }

    fn gap_ns(&self, bytes: usize) -> u64 {
        (**self).gap_ns(bytes)
    }
}
