//! Cost models: what a message costs in virtual time. The simulator asks the
//! model once per message, when the message is sent; a model may keep state
//! (link occupancy) across messages.

use std::fmt;

use crate::{Rank, Time};

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
    pub latency_ns: f64,
    pub overhead_ns: f64,
    pub gap_ns: f64,
    pub per_byte_ns: f64,
}

impl LogGp {
    /// A BlueGene/P-like machine (the paper's Dawn): 3D torus, about 2.5 µs
    /// MPI latency of which about 1 µs is software overhead per side, and
    /// 375 MB/s per link.
    pub const BGP: LogGp = LogGp {
        latency_ns: 2_500.0,
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
