//! The eager messaging protocol (`catena_fabric::eager`) on the simulator:
//! the real providers' first contact, credit and rings over simulated puts,
//! with seeded, deterministic delays that reorder puts within the transport
//! contract. Races that real processes hit only by timing happen here on
//! purpose, the same way every run; small ones are explored exhaustively.

use std::time::Duration;

use catena_fabric::conformance::{self, Check, SUITE};
use catena_fabric::eager::wire::SLOT_COUNT;
use catena_fabric::{Error, Rank, Rma, Transport};
use catena_sim::{Delays, EagerRank, Enumerated, LogGp, Report, Seeded, Sim};

const MODEL: LogGp = LogGp {
    latency_ns: 1_000.0,
    overhead_ns: 100.0,
    gap_ns: 50.0,
    per_byte_ns: 0.5,
};
/// Delays up to ten latencies: puts overtake each other freely.
const MAX_DELAY_NS: u64 = 10_000;
const RING: usize = 64 * 1024;

fn deadline(t: &EagerRank<'_>) -> catena_fabric::Time {
    t.deadline_in(Duration::from_secs(60))
}

/// Runs `body` on `ranks` eager ranks with `seed`'s delays; every rank must
/// finish and succeed.
fn eager_run(
    ranks: u32,
    ring: usize,
    seed: u64,
    body: impl AsyncFn(&EagerRank<'_>) -> catena_fabric::Result<()>,
) -> Report {
    let delays = Seeded::new(seed, MAX_DELAY_NS);
    run_with(ranks, ring, delays, &format!("seed {seed}"), body)
}

/// Runs `body` on `ranks` eager ranks with `delays` (named `what` in
/// failures), tracing events; every rank must finish and succeed.
fn run_with(
    ranks: u32,
    ring: usize,
    delays: impl Delays + 'static,
    what: &str,
    body: impl AsyncFn(&EagerRank<'_>) -> catena_fabric::Result<()>,
) -> Report {
    let sim = Sim::new(ranks, MODEL).with_delays(delays).with_trace();
    let (results, report) = sim
        .run_eager(ring, body)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    for (rank, r) in results.into_iter().enumerate() {
        if let Err(e) = r {
            panic!("{what}, rank {rank}: {e}");
        }
    }
    report
}

/// The conformance suite passes over eager messaging, whatever the disorder.
#[test]
fn the_suite_passes_over_eager_messaging() {
    for ranks in [2, 3, 8] {
        for seed in 0..4 {
            let report = eager_run(ranks, RING, seed, async |t| {
                for check in SUITE {
                    conformance::run(t, check).await?;
                }
                Ok(())
            });
            assert!(report.delayed_operations > 0);
        }
    }
}

/// A first contact that times out while every request slot is held leaves
/// no trace; a send dropped half-way breaks its stream at once.
#[test]
fn first_contact_retry_and_dropped_sends() {
    for seed in 0..4 {
        eager_run(3, RING, seed, async |t| {
            conformance::run(t, Check::FirstContactRetry).await
        });
    }
    // Rank 1 naps 2 s of wall time in this check (for real processes).
    eager_run(2, RING, 0, async |t| {
        conformance::run(t, Check::DroppedSendBreaksTheStream).await
    });
}

/// The same seed gives the same event trace; another seed another one.
#[test]
fn the_same_seed_gives_the_same_trace() {
    let run = |seed| {
        eager_run(4, 256, seed, async |t| {
            conformance::run(t, Check::AllPairs).await
        })
    };
    let (a, b, c) = (run(11), run(11), run(12));
    assert!(!a.trace.is_empty());
    assert_eq!(a.trace, b.trace);
    assert_eq!(
        (a.completion, a.events, a.messages),
        (b.completion, b.events, b.messages)
    );
    assert_ne!(a.trace, c.trace);
}

/// What two ranks that contact each other at once must end with: each
/// got the other's messages, in order, over one connection each.
async fn contact_each_other(t: &EagerRank<'_>) -> catena_fabric::Result<()> {
    let peer = 1 - t.rank();
    for i in 0..3u8 {
        t.send(peer, 7, 1, &[t.rank() as u8, i], deadline(t))
            .await?;
    }
    for i in 0..3u8 {
        let got = t.recv(Some(peer), 7, 1, deadline(t)).await?;
        if got.data != [peer as u8, i] {
            return Err(Error::Protocol(format!("message {i} was {:?}", got.data)));
        }
    }
    if t.connection_count() != 1 {
        return Err(Error::Protocol(format!(
            "{} connections to one peer",
            t.connection_count()
        )));
    }
    Ok(())
}

/// Simultaneous first contact, exhaustively: every way of delaying any of
/// the first 12 puts and atomics (request slots, keys, bells, replies, the
/// first ring writes), at three delay lengths around the latency.
#[test]
fn simultaneous_first_contact_in_every_order() {
    const OPERATIONS: u32 = 12;
    let mut distinct = std::collections::HashSet::new();
    for delay in [300, 1_500, 6_000] {
        for mask in 0..1u64 << OPERATIONS {
            let delays = Enumerated::new(mask, delay);
            let what = format!("mask {mask:#b}, delay {delay}");
            let report = run_with(2, RING, delays, &what, contact_each_other);
            assert!(report.delayed_operations >= u64::from(OPERATIONS));
            distinct.insert(report.trace);
        }
    }
    // The disorders really differ (not one schedule 12288 times).
    assert!(distinct.len() > 1000, "{} distinct traces", distinct.len());
}

/// Many messages through rings far smaller than them: credit comes back in
/// pieces, frames wrap around the ring's end, and every byte and the order
/// per sender survive any disorder.
#[test]
fn full_rings_keep_bytes_and_order() {
    for ring in [64, 100, 4096] {
        for seed in 0..8 {
            eager_run(3, ring, seed, async |t| {
                let (size, me) = (t.size(), t.rank());
                let right = (me + 1) % size;
                let left = (me + size - 1) % size;
                for i in 0..10 {
                    let data = conformance::pattern(me, i, 37 * i + 5 * ring);
                    t.send(right, 3, 9, &data, deadline(t)).await?;
                }
                for i in 0..10 {
                    let got = t.recv(Some(left), 3, 9, deadline(t)).await?;
                    if got.data != conformance::pattern(left, i, 37 * i + 5 * ring) {
                        return Err(Error::Protocol(format!(
                            "ring {ring}: message {i} from rank {left} is wrong"
                        )));
                    }
                }
                Ok(())
            });
        }
    }
}

/// More ranks contact one at once than it has request slots (ranks r and
/// r + 32 race for the same first slot): every message arrives, over one
/// connection per peer. (Slots all held is `first_contact_retry`'s case.)
#[test]
fn more_first_contacts_than_request_slots() {
    let ranks = SLOT_COUNT as u32 + 9;
    for seed in 0..4 {
        eager_run(ranks, 256, seed, async |t| {
            if t.rank() == 0 {
                let mut seen = vec![false; t.size() as usize];
                for _ in 1..t.size() {
                    let got = t.recv(None, 5, 5, deadline(t)).await?;
                    seen[got.source as usize] = got.data == got.source.to_le_bytes();
                }
                if seen[1..].iter().any(|&ok| !ok) {
                    return Err(Error::Protocol("a first contact was lost".into()));
                }
                if t.connection_count() != t.size() as usize - 1 {
                    return Err(Error::Protocol("connections were duplicated".into()));
                }
            } else {
                let me: Rank = t.rank();
                t.send(0, 5, 5, &me.to_le_bytes(), deadline(t)).await?;
            }
            Ok(())
        });
    }
}
