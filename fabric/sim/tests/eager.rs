//! The eager messaging protocol (`catena_fabric::eager`) on the simulator:
//! the real providers' first contact, credit and rings over simulated puts,
//! with seeded, deterministic delays that reorder puts within the transport
//! contract. Races that real processes hit only by timing happen here on
//! purpose, the same way every run; small ones are explored exhaustively.

mod intruder;

use std::time::Duration;

use catena_testkit::conformance::{self, Check, SUITE};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use catena_fabric::eager::wire::{
    bulk_window_bytes, BULK_CREDIT_SIGNAL, FRAME_HEADER_BYTES, REQUEST_BELL,
};
use catena_fabric::eager::wire::{
    encode_header, slot_at, stamp, SLOT_COUNT, SLOT_FILLED, SLOT_FROM_AT,
};
use catena_fabric::{wait_until, ControlWindows, Error, LocalWindow, Rank, Rma, Transport};
use catena_sim::{Delays, EagerRank, Enumerated, LogGp, Report, Seeded, Sim};
use intruder::Intruder;

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
    let sim = Sim::new(ranks, MODEL).with_delays(delays);
    run_sim(sim, ring, what, body)
}

/// Runs `body` on `sim`'s eager ranks, tracing events; every rank must
/// finish and succeed.
fn run_sim(
    sim: Sim,
    ring: usize,
    what: &str,
    body: impl AsyncFn(&EagerRank<'_>) -> catena_fabric::Result<()>,
) -> Report {
    let sim = sim.with_trace();
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

/// The conformance suite passes with an inbox bound of 0, where one
/// message per peer is let in and the rest only for a receive that waits
/// for its sender: no check relies on more buffering, no receive starves.
#[test]
fn the_suite_passes_with_an_inbox_bound_of_nothing() {
    for ranks in [2, 3, 8] {
        for seed in 0..2 {
            let sim = Sim::new(ranks, MODEL)
                .with_delays(Seeded::new(seed, MAX_DELAY_NS))
                .with_eager_inbox_bytes(0);
            let (results, _) = sim
                .run_eager(RING, async |t| {
                    for check in SUITE {
                        conformance::run(t, check).await?;
                    }
                    Ok(())
                })
                .unwrap_or_else(|e| panic!("{ranks} ranks, seed {seed}: {e}"));
            for (rank, r) in results.into_iter().enumerate() {
                r.unwrap_or_else(|e: Error| panic!("{ranks} ranks, seed {seed}, rank {rank}: {e}"));
            }
        }
    }
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

/// The simulator polls with catena's waker, so that a wait leaves progress
/// to it (as `block_on` does).
#[test]
fn the_simulator_polls_with_catena_s_waker() {
    eager_run(1, RING, 0, async |_| {
        let told = std::future::poll_fn(|cx| Poll::Ready(catena_fabric::polled_by_catena(cx)));
        match told.await {
            true => Ok(()),
            false => Err(Error::Protocol(
                "the simulator's waker is not catena's".into(),
            )),
        }
    });
}

/// A send's future polled again once it finished panics, as an `async
/// fn`'s does, instead of sending its message a second time: after a
/// send that waited for its connection and after one written at once.
#[test]
fn a_finished_send_polled_again_panics() {
    for sends in [1, 2] {
        let run = std::panic::catch_unwind(|| {
            eager_run(2, RING, 0, async |t| {
                if t.rank() == 1 {
                    for _ in 0..sends {
                        t.recv(Some(0), 3, 9, deadline(t)).await?;
                    }
                    return Ok(());
                }
                for _ in 1..sends {
                    t.send(1, 3, 9, b"first", deadline(t)).await?;
                }
                let mut send = std::pin::pin!(t.send(1, 3, 9, b"once", deadline(t)));
                send.as_mut().await?;
                std::future::poll_fn(|cx| send.as_mut().poll(cx)).await
            });
        });
        let panic = run.expect_err("the second poll panics");
        let why = panic.downcast_ref::<&str>().copied().unwrap_or_default();
        assert!(why.contains("polled after it finished"), "{sends}: {why}");
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

/// Lets virtual time pass on `t` while it serves its peers.
async fn nap(t: &EagerRank<'_>, how_long: Duration) {
    let until = t.deadline_in(how_long);
    let napped = wait_until(t, until, "a nap", || Ok(None::<()>)).await;
    assert!(matches!(napped, Err(Error::Timeout { .. })));
}

/// Rank 1 sends `hello` to rank 0 and expects `hello back`: the honest
/// pair a hostile rank must not disturb.
async fn honest_exchange(t: &EagerRank<'_>) -> catena_fabric::Result<()> {
    match t.rank() {
        0 => {
            let got = t.recv(Some(1), 7, 1, deadline(t)).await?;
            if got.data != b"hello" {
                return Err(Error::Protocol(format!("rank 1 sent {:?}", got.data)));
            }
            t.send(1, 7, 1, b"hello back", deadline(t)).await
        }
        1 => {
            t.send(0, 7, 1, b"hello", deadline(t)).await?;
            let got = t.recv(Some(0), 7, 1, deadline(t)).await?;
            if got.data != b"hello back" {
                return Err(Error::Protocol(format!("rank 0 sent {:?}", got.data)));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn is_protocol<T: std::fmt::Debug>(r: &catena_fabric::Result<T>) -> bool {
    matches!(r, Err(Error::Protocol(_)))
}

/// A peer announcing 300 TB in a ring and framing a 300 TB message (the
/// reproducer once aborted the receiver on that allocation) breaks its own
/// connection, both ways, with `Protocol`; messages it sent before still
/// arrive, and the victim keeps talking to an honest rank.
#[test]
fn a_lying_ring_signal_breaks_only_that_connection() {
    const HUGE: u64 = 300 << 40;
    eager_run(3, 256, 0, async |t| match t.rank() {
        0 => {
            honest_exchange(t).await?;
            let first = t.recv(Some(2), 7, 1, deadline(t)).await?;
            assert_eq!(first.data, b"fine");
            let short = t.deadline_in(Duration::from_millis(10));
            let next = t.recv(Some(2), 7, 1, short).await;
            assert!(is_protocol(&next), "{next:?}");
            assert!(is_protocol(&t.send(2, 7, 1, b"x", short).await));
            honest_exchange(t).await
        }
        1 => {
            honest_exchange(t).await?;
            honest_exchange(t).await
        }
        _ => {
            let mut me = Intruder::connect(t, 0, 256, deadline(t)).await?;
            let fine = Intruder::frame(7, 1, b"fine");
            me.stream(&fine)?;
            me.stream(&encode_header(HUGE as usize, 7, 1))
        }
    });
}

/// A frame stamped with another position's stamp, or a header announcing
/// more than a `usize`, are `Protocol` errors on that connection too.
#[test]
fn a_forged_stamp_nor_a_frame_past_memory_passes() {
    for (forged, len) in [(true, 4), (false, usize::MAX)] {
        eager_run(3, 256, 0, async |t| match t.rank() {
            0 => {
                let short = t.deadline_in(Duration::from_millis(10));
                let got = t.recv(Some(2), 7, 1, short).await;
                assert!(is_protocol(&got), "{got:?}");
                honest_exchange(t).await
            }
            1 => honest_exchange(t).await,
            _ => {
                let mut me = Intruder::connect(t, 0, 256, deadline(t)).await?;
                let header = encode_header(len, 7, 1);
                match forged {
                    // The stamp the frame one lap on would have.
                    true => me.stream_stamped(&header, stamp(256)),
                    false => me.stream(&header),
                }
            }
        });
    }
}

/// Requests a hostile rank files in the victim's control window (corrupt,
/// or naming another rank with a window of that rank it knows) change no
/// connection: the named rank then connects and talks as usual.
#[test]
fn forged_connection_requests_change_nothing() {
    eager_run(3, 256, 0, async |t| match t.rank() {
        0 => {
            honest_exchange(t).await?;
            assert_eq!(t.connection_count(), 1);
            Ok(())
        }
        1 => {
            nap(t, Duration::from_millis(1)).await;
            honest_exchange(t).await
        }
        _ => {
            let control = t.control_key(0)?;
            let forgeries: [(u64, Vec<u8>); 4] = [
                (u64::MAX, t.control_key(1)?.as_bytes().to_vec()),
                (1, t.control_key(1)?.as_bytes().to_vec()),
                (0, control.as_bytes().to_vec()),
                (1, vec![0xff; 300]),
            ];
            for (slot, (from, key)) in forgeries.into_iter().enumerate() {
                let at = slot_at(slot);
                let mut body = from.to_le_bytes().to_vec();
                body.extend_from_slice(&(key.len() as u64).to_le_bytes());
                body.extend_from_slice(&key[..key.len().min(200)]);
                let filled = catena_fabric::Signal {
                    offset: at,
                    add: SLOT_FILLED,
                };
                t.put_signal(0, &control, at + SLOT_FROM_AT, &body, filled)?;
                let bell = catena_fabric::Signal {
                    offset: REQUEST_BELL,
                    add: 1,
                };
                t.put_signal(0, &control, REQUEST_BELL, &[], bell)?;
            }
            Ok(())
        }
    });
}

/// Three senders flood a rank that does not receive: it holds at most its
/// inbox bound per sender while their sends wait for credit, then a
/// receive for a message behind the bound gets it at once, and every
/// message arrives in order.
#[test]
fn the_inbox_bound_holds_back_senders_without_losing_messages() {
    const BOUND: usize = 4096;
    const SIZE: usize = 1000;
    const COUNT: usize = 30;
    for seed in 0..4 {
        let sim = Sim::new(4, MODEL)
            .with_delays(Seeded::new(seed, MAX_DELAY_NS))
            .with_eager_inbox_bytes(BOUND);
        let (results, _) = sim
            .run_eager(1024, async |t| {
                let me = t.rank();
                if me != 0 {
                    for i in 0..COUNT {
                        let tag = if i == COUNT - 1 { 2 } else { 1 };
                        let data = conformance::pattern(me, i, SIZE);
                        t.send(0, 3, tag, &data, deadline(t)).await?;
                    }
                    return Ok(());
                }
                // Far longer than the whole flood would take unbounded.
                for _ in 0..10 {
                    nap(t, Duration::from_millis(1)).await;
                    let held = t.inbox_bytes() as usize;
                    let most = 3 * (BOUND + FRAME_HEADER_BYTES + SIZE);
                    if held == 0 || held > most {
                        return Err(Error::Protocol(format!("{held} bytes held, bound {most}")));
                    }
                }
                let last = t.recv(Some(3), 3, 2, deadline(t)).await?;
                assert_eq!(last.data, conformance::pattern(3, COUNT - 1, SIZE));
                for from in 1..4 {
                    let count = if from == 3 { COUNT - 1 } else { COUNT };
                    for i in 0..count {
                        let tag = if i == COUNT - 1 { 2 } else { 1 };
                        let got = t.recv(Some(from), 3, tag, deadline(t)).await?;
                        if got.data != conformance::pattern(from, i, SIZE) {
                            return Err(Error::Protocol(format!("message {i} of {from} wrong")));
                        }
                    }
                }
                assert_eq!(t.inbox_bytes(), 0);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("seed {seed}, rank {rank}: {e}"));
        }
    }
}

/// A receive that takes held messages makes room at once: the sender held
/// back by the bound goes on even though the receiver now waits on someone
/// else (whom that sender must reach first).
#[test]
fn receiving_makes_room_for_a_held_back_sender_at_once() {
    const BOUND: usize = 4096;
    const SIZE: usize = 1000;
    // Five fill the bound (the fifth starts below it), two more wait.
    const COUNT: usize = 7;
    let sim = Sim::new(3, MODEL).with_eager_inbox_bytes(BOUND);
    let (results, _) = sim
        .run_eager(1024, async |t| match t.rank() {
            0 => {
                nap(t, Duration::from_millis(1)).await;
                for i in 0..2 {
                    let got = t.recv(Some(1), 3, 1, deadline(t)).await?;
                    assert_eq!(got.data, conformance::pattern(1, i, SIZE));
                }
                let short = t.deadline_in(Duration::from_millis(100));
                t.recv(Some(2), 3, 2, short).await?;
                for i in 2..COUNT {
                    let got = t.recv(Some(1), 3, 1, deadline(t)).await?;
                    assert_eq!(got.data, conformance::pattern(1, i, SIZE));
                }
                Ok(())
            }
            1 => {
                for i in 0..COUNT {
                    let data = conformance::pattern(1, i, SIZE);
                    t.send(0, 3, 1, &data, deadline(t)).await?;
                }
                t.send(2, 3, 2, b"go", deadline(t)).await
            }
            _ => {
                t.recv(Some(1), 3, 2, deadline(t)).await?;
                t.send(0, 3, 2, b"went", deadline(t)).await
            }
        })
        .unwrap();
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

/// Under any bound, 0 included, one unreceived message per peer gets in:
/// two ranks that each send a message of four rings before receiving the
/// other's (an exchange, as ring collectives do) both finish.
#[test]
fn an_exchange_of_big_messages_passes_an_inbox_bound_of_nothing() {
    let sim = Sim::new(2, MODEL).with_eager_inbox_bytes(0);
    let (results, _) = sim
        .run_eager(1024, async |t| {
            let peer = 1 - t.rank();
            let mine = conformance::pattern(t.rank(), 0, 4096);
            t.send(peer, 3, 1, &mine, deadline(t)).await?;
            let got = t.recv(Some(peer), 3, 1, deadline(t)).await?;
            assert_eq!(got.data, conformance::pattern(peer, 0, 4096));
            Ok(())
        })
        .unwrap();
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e: Error| panic!("rank {rank}: {e}"));
    }
}

// Rendezvous: messages of at least THRESHOLD bytes send their header
// through the ring and their payload through the receiver's bulk ring.

/// Rendezvous from this size on, through bulk rings of an odd size, so
/// that chunks wrap anywhere in them. Payloads of up to a quarter bulk ring
/// wait there until received (none of them in a ring of BULK, many in one
/// of BIG_BULK); larger ones stream into the heap as they land.
const THRESHOLD: usize = 256;
const BULK: usize = 1000;
const BIG_BULK: usize = 4004;

/// A machine of `ranks` eager ranks with small rendezvous sizes and
/// `seed`'s delays.
fn rendezvous_sim(ranks: u32, seed: u64) -> Sim {
    Sim::new(ranks, MODEL)
        .with_delays(Seeded::new(seed, MAX_DELAY_NS))
        .with_eager_rendezvous(THRESHOLD, BULK)
}

/// [`rendezvous_sim`] with bulk rings of `bulk` bytes.
fn bulk_sim(ranks: u32, seed: u64, bulk: usize) -> Sim {
    rendezvous_sim(ranks, seed).with_eager_rendezvous(THRESHOLD, bulk)
}

/// Runs `futures` to completion, polling them in order each round; their
/// results in order.
async fn join_all<T>(futures: Vec<Pin<Box<dyn Future<Output = T> + '_>>>) -> Vec<T> {
    let mut futures: Vec<_> = futures.into_iter().map(Some).collect();
    let mut out: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        for (f, o) in futures.iter_mut().zip(out.iter_mut()) {
            if let Some(future) = f {
                if let Poll::Ready(v) = future.as_mut().poll(cx) {
                    *o = Some(v);
                    *f = None;
                }
            }
        }
        match futures.iter().all(Option::is_none) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    })
    .await;
    out.into_iter().map(|o| o.expect("finished")).collect()
}

/// Sizes on both sides of the threshold and of the bulk ring.
const SIZES: [usize; 12] = [0, 1, 255, 256, 257, 999, 1000, 1001, 4321, 3, 300, 2 * BULK];

/// Inline and rendezvous messages, sent one after another and all at once
/// (their sends joined), through rings smaller and larger than them, their
/// payloads waiting in the bulk ring or streamed: every byte and the order
/// per sender survive any disorder, and only the receivers of rendezvous
/// messages make a bulk window.
#[test]
fn rendezvous_and_inline_messages_keep_bytes_and_order() {
    for (ring, bulk) in [(64, BULK), (256, BULK), (4096, BULK), (256, BIG_BULK)] {
        for seed in 0..6 {
            let sim = bulk_sim(3, seed, bulk);
            let what = format!("ring {ring}, bulk {bulk}, seed {seed}");
            run_sim(sim, ring, &what, async |t| {
                let (size, me) = (t.size(), t.rank());
                let right = (me + 1) % size;
                let left = (me + size - 1) % size;
                let payload =
                    |from: Rank, i: usize| conformance::pattern(from, i, SIZES[i % SIZES.len()]);
                for i in 0..SIZES.len() {
                    t.send(right, 3, 9, &payload(me, i), deadline(t)).await?;
                }
                let all: Vec<Vec<u8>> = (SIZES.len()..3 * SIZES.len())
                    .map(|i| payload(me, i))
                    .collect();
                let sends = all
                    .iter()
                    .map(|data| Box::pin(t.send(right, 3, 9, data, deadline(t))) as Pin<Box<_>>)
                    .collect();
                for sent in join_all(sends).await {
                    sent?;
                }
                for i in 0..3 * SIZES.len() {
                    let got = t.recv(Some(left), 3, 9, deadline(t)).await?;
                    if got.data != payload(left, i) {
                        return Err(Error::Protocol(format!(
                            "message {i} ({} bytes) from rank {left} is wrong",
                            got.data.len()
                        )));
                    }
                }
                if t.bulk_window_count() != 1 || t.connection_count() != 2 {
                    return Err(Error::Protocol(format!(
                        "{} bulk windows over {} connections",
                        t.bulk_window_count(),
                        t.connection_count()
                    )));
                }
                Ok(())
            });
        }
    }
}

/// Two ranks that contact each other at once with rendezvous messages,
/// exhaustively over the first 12 operations' delays: both get the other's
/// messages, over one connection and one bulk window each.
#[test]
fn simultaneous_first_contact_with_rendezvous_messages() {
    const OPERATIONS: u32 = 12;
    for mask in 0..1u64 << OPERATIONS {
        let sim = Sim::new(2, MODEL)
            .with_delays(Enumerated::new(mask, 1_500))
            .with_eager_rendezvous(THRESHOLD, BULK);
        run_sim(sim, 256, &format!("mask {mask:#b}"), async |t| {
            let peer = 1 - t.rank();
            for i in 0..3 {
                let data = conformance::pattern(t.rank(), i, 700 * i + 300);
                t.send(peer, 7, 1, &data, deadline(t)).await?;
            }
            for i in 0..3 {
                let got = t.recv(Some(peer), 7, 1, deadline(t)).await?;
                if got.data != conformance::pattern(peer, i, 700 * i + 300) {
                    return Err(Error::Protocol(format!("message {i} is wrong")));
                }
            }
            match (t.connection_count(), t.bulk_window_count()) {
                (1, 1) => Ok(()),
                counts => Err(Error::Protocol(format!(
                    "{counts:?} connections, bulk windows"
                ))),
            }
        });
    }
}

/// A receiver that holds its inbox bound and does not receive for a while:
/// the rendezvous sender waits for bulk credit (its messages are several
/// bulk rings each), the receiver holds at most the bound and one message,
/// and then gets every message in order.
#[test]
fn a_slow_receiver_holds_back_rendezvous_senders() {
    const BOUND: usize = 2000;
    const SIZE: usize = 3 * BULK + 7;
    const COUNT: usize = 6;
    for seed in 0..4 {
        let sim = rendezvous_sim(2, seed).with_eager_inbox_bytes(BOUND);
        run_sim(sim, 256, &format!("seed {seed}"), async |t| {
            if t.rank() == 0 {
                for i in 0..COUNT {
                    let data = conformance::pattern(0, i, SIZE);
                    t.send(1, 3, 1, &data, deadline(t)).await?;
                }
                return Ok(());
            }
            for _ in 0..5 {
                nap(t, Duration::from_millis(1)).await;
                let held = t.inbox_bytes() as usize;
                let most = BOUND + 2 * (FRAME_HEADER_BYTES + SIZE);
                if held == 0 || held > most {
                    return Err(Error::Protocol(format!("{held} bytes held, bound {most}")));
                }
            }
            for i in 0..COUNT {
                let got = t.recv(Some(0), 3, 1, deadline(t)).await?;
                if got.data != conformance::pattern(0, i, SIZE) {
                    return Err(Error::Protocol(format!("message {i} is wrong")));
                }
            }
            assert_eq!(t.inbox_bytes(), 0);
            Ok(())
        });
    }
}

/// A rendezvous send that times out before the receiver gave it a bulk
/// window, and one dropped after writing part of its payload, both break
/// the stream: the next send fails at once with `Protocol`, and the
/// receiver gets every message before the hole and times out on the one
/// that has it.
#[test]
fn a_failed_or_dropped_rendezvous_send_breaks_the_stream() {
    for dropped in [false, true] {
        let sim = rendezvous_sim(2, 0).with_eager_inbox_bytes(0);
        run_sim(sim, 256, &format!("dropped {dropped}"), async |t| {
            let big = conformance::pattern(0, 2, 5 * BULK);
            if t.rank() == 1 {
                // Do not receive: the bound of 0 lets in only the first
                // message, so the receiver drains nothing more.
                nap(t, Duration::from_millis(5)).await;
                let first = t.recv(Some(0), 3, 1, deadline(t)).await?;
                assert_eq!(first.data, conformance::pattern(0, 1, BULK));
                let short = t.deadline_in(Duration::from_millis(5));
                let hole = t.recv(Some(0), 3, 2, short).await;
                return match hole {
                    Err(Error::Timeout { .. }) => Ok(()),
                    other => Err(Error::Protocol(format!(
                        "the message after a hole: {other:?}"
                    ))),
                };
            }
            // A rendezvous message of its own: the receiver makes its bulk
            // window and takes it in (the one message let in).
            t.send(1, 3, 1, &conformance::pattern(0, 1, BULK), deadline(t))
                .await?;
            if dropped {
                // Writes what credit allows of the payload, then is dropped.
                let mut send = std::pin::pin!(t.send(1, 3, 2, &big, deadline(t)));
                let polled = std::future::poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
                assert!(polled.is_pending(), "5 bulk rings went out in one poll");
            } else {
                let short = t.deadline_in(Duration::from_millis(1));
                let sent = t.send(1, 3, 2, &big, short).await;
                assert!(matches!(sent, Err(Error::Timeout { .. })), "{sent:?}");
            }
            let started = t.now();
            let next = t.send(1, 3, 3, b"after", deadline(t)).await;
            assert!(is_protocol(&next), "{next:?}");
            assert_eq!(t.now(), started, "the send after a broken one waited");
            Ok(())
        });
    }
}

/// A hostile peer that lies in rendezvous frames or about its bulk stream
/// (a 300 TB payload announced as landed, a bulk signal that runs
/// backwards, a frame of no known kind) breaks its own connection, both
/// ways, with `Protocol`; the rendezvous message it sent honestly before
/// still arrives, and the victim keeps talking to an honest rank.
#[test]
fn lies_about_rendezvous_payloads_break_only_that_connection() {
    const HUGE: u64 = 300 << 40;
    for lie in 0..3 {
        let sim = rendezvous_sim(3, 0);
        run_sim(sim, 256, &format!("lie {lie}"), async |t| match t.rank() {
            0 => {
                honest_exchange(t).await?;
                let first = t.recv(Some(2), 7, 1, deadline(t)).await?;
                assert_eq!(first.data, conformance::pattern(2, 0, 600));
                let short = t.deadline_in(Duration::from_millis(10));
                let next = t.recv(Some(2), 7, 1, short).await;
                assert!(is_protocol(&next), "lie {lie}: {next:?}");
                assert!(is_protocol(&t.send(2, 7, 1, b"x", short).await));
                honest_exchange(t).await
            }
            1 => {
                honest_exchange(t).await?;
                honest_exchange(t).await
            }
            _ => {
                let mut me = Intruder::connect(t, 0, 256, deadline(t)).await?;
                let header = Intruder::rendezvous_header(7, 1, 600);
                me.stream(&header)?;
                me.await_bulk_window(deadline(t)).await?;
                me.stream_bulk(&conformance::pattern(2, 0, 600), 600)?;
                let lied = match lie {
                    0 => {
                        let header = Intruder::rendezvous_header(7, 1, HUGE as usize);
                        me.stream(&header)?;
                        me.stream_bulk(&[7; 100], HUGE)
                    }
                    1 => {
                        let header = Intruder::rendezvous_header(7, 1, 50);
                        me.stream(&header)?;
                        // Adds -100: the bulk signal runs backwards.
                        me.stream_bulk(&[7; 10], u64::MAX - 99)
                    }
                    _ => {
                        let mut header = Intruder::rendezvous_header(7, 1, 50);
                        // The kind word, the header's last.
                        header[FRAME_HEADER_BYTES - 4] = 7;
                        me.stream(&header)
                    }
                };
                // Keep the windows the victim writes to until it is done.
                nap(t, Duration::from_millis(20)).await;
                lied
            }
        });
    }
}

/// A hostile peer that answers the victim's rendezvous message with a
/// forged bulk window (a key of its control or connection window, a key
/// longer than keys are, a ring of no bytes or of more than a window
/// holds) or returns bulk credit it was never sent: the victim's send
/// fails at once with `Protocol`, later calls with that peer too, and the
/// victim keeps talking to an honest rank.
#[test]
fn forged_bulk_windows_and_credit_break_only_that_connection() {
    for forgery in 0..6 {
        let sim = rendezvous_sim(3, 0);
        run_sim(sim, 256, &format!("forgery {forgery}"), async |t| {
            match t.rank() {
                0 => {
                    honest_exchange(t).await?;
                    // Wait for the forgery to be in place.
                    let ready = t.recv(Some(2), 7, 2, deadline(t)).await?;
                    assert_eq!(ready.data, b"ready");
                    let started = t.now();
                    let big = conformance::pattern(0, 0, 3 * BULK);
                    let sent = t.send(2, 7, 1, &big, deadline(t)).await;
                    assert!(is_protocol(&sent), "forgery {forgery}: {sent:?}");
                    assert!(t.now().saturating_sub(started) < Duration::from_millis(1));
                    let short = t.deadline_in(Duration::from_millis(1));
                    assert!(is_protocol(&t.recv(Some(2), 7, 1, short).await));
                    honest_exchange(t).await
                }
                1 => {
                    honest_exchange(t).await?;
                    honest_exchange(t).await
                }
                _ => {
                    let me = Intruder::connect(t, 0, 256, deadline(t)).await?;
                    let mine = t.alloc_window(bulk_window_bytes(BULK))?;
                    let key = |k: catena_fabric::RemoteKey| k.as_bytes().to_vec();
                    let (bytes, ring) = match forgery {
                        0 => (key(t.control_key(2)?), BULK as u64),
                        1 => (key(me.window.key()), BULK as u64),
                        2 => (vec![b'S'; 240], BULK as u64),
                        3 => (key(mine.key()), 0),
                        4 => (key(mine.key()), u64::MAX),
                        _ => (key(mine.key()), BULK as u64),
                    };
                    me.reply_bulk(&bytes, bytes.len() as u64, ring)?;
                    if forgery == 5 {
                        me.signal(BULK_CREDIT_SIGNAL, 5 * BULK as u64)?;
                    }
                    let frame = Intruder::frame(7, 2, b"ready");
                    let mut me = me;
                    me.stream(&frame)?;
                    // Keep the windows the victim writes to until it is done.
                    nap(t, Duration::from_millis(20)).await;
                    drop(mine);
                    Ok(())
                }
            }
        });
    }
}

/// Payloads waiting in the bulk ring until received, received in another
/// order than they came (by tag) while more arrive: the ring fills no more
/// than half with them (the oldest go to the heap, so the sender goes on),
/// a streamed payload behind them sends them all to the heap, and every
/// message arrives intact, in order per tag.
#[test]
fn waiting_payloads_are_received_out_of_order_and_spilled() {
    // Resident up to BIG_BULK / 4 = 1001 bytes; message 20 streams.
    const SIZES: [usize; 3] = [300, 1001, 700];
    const COUNT: usize = 24;
    let size = |i: usize| {
        if i == 20 {
            3000
        } else {
            SIZES[i % SIZES.len()]
        }
    };
    for seed in 0..4 {
        let sim = bulk_sim(2, seed, BIG_BULK);
        run_sim(sim, 256, &format!("seed {seed}"), async |t| {
            if t.rank() == 0 {
                for i in 0..COUNT {
                    let data = conformance::pattern(0, i, size(i));
                    t.send(1, 3, (i % 2) as u32, &data, deadline(t)).await?;
                }
                return Ok(());
            }
            nap(t, Duration::from_millis(1)).await;
            for tag in [1, 0] {
                for i in (0..COUNT).filter(|i| i % 2 == tag) {
                    let got = t.recv(Some(0), 3, tag as u32, deadline(t)).await?;
                    if got.data != conformance::pattern(0, i, size(i)) {
                        return Err(Error::Protocol(format!("message {i} is wrong")));
                    }
                }
            }
            assert_eq!(t.inbox_bytes(), 0);
            Ok(())
        });
    }
}

/// Every message goes by rendezvous when the threshold is 0, empty ones
/// included (their payloads, of no bytes, share bulk ring positions):
/// received in turn and out of order by tag, they all arrive, and the
/// bulk ring keeps turning.
#[test]
fn empty_rendezvous_messages_keep_the_bulk_ring_turning() {
    const COUNT: usize = 40;
    let size = |i: usize| if i % 4 < 2 { 0 } else { 20 * (i % 5) };
    for seed in 0..4 {
        let sim = rendezvous_sim(2, seed).with_eager_rendezvous(0, 512);
        run_sim(sim, 256, &format!("seed {seed}"), async |t| {
            if t.rank() == 0 {
                for i in 0..COUNT {
                    let data = conformance::pattern(0, i, size(i));
                    t.send(1, 3, (i % 2) as u32, &data, deadline(t)).await?;
                }
                return Ok(());
            }
            for tag in [1, 0] {
                for i in (0..COUNT).filter(|i| i % 2 == tag) {
                    let got = t.recv(Some(0), 3, tag as u32, deadline(t)).await?;
                    if got.data != conformance::pattern(0, i, size(i)) {
                        return Err(Error::Protocol(format!("message {i} is wrong")));
                    }
                }
            }
            Ok(())
        });
    }
}
