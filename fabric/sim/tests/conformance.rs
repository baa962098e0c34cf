//! The provider conformance suite on the simulator (every rank in this one
//! process), and the simulator's own promises: LogGP times a hand computes,
//! determinism, and a clear error instead of a hang when ranks deadlock.

use std::time::Duration;

use catena_fabric::{Error, LocalWindow, RemoteKey, Rma, Transport};
use catena_sim::{LogGp, Routed, Sim, SimRank};
use catena_testkit::conformance::{self, Check, SUITE};
use catena_topo::Torus;

const MODEL: LogGp = LogGp {
    latency_ns: 1_000.0,
    overhead_ns: 100.0,
    gap_ns: 50.0,
    per_byte_ns: 0.5,
};

fn suite_on(ranks: u32) {
    suite_on_hosts_of(ranks, 1);
}

fn suite_on_hosts_of(ranks: u32, per_host: u32) {
    let sim = Sim::new(ranks, MODEL).with_ranks_per_host(per_host);
    let (results, report) = sim
        .run(async |t: &SimRank<'_>| {
            for check in SUITE {
                conformance::run(t, check)
                    .await
                    .map_err(|e| format!("rank {}: {check:?}: {e}", t.rank()))?;
            }
            Ok::<(), String>(())
        })
        .expect("every rank finishes");
    for r in results {
        r.unwrap();
    }
    assert!(report.messages > 0 && report.events > 0, "{report:?}");
}

#[test]
fn conformance_suite_on_2() {
    suite_on(2);
}

#[test]
fn conformance_suite_on_3() {
    suite_on(3);
}

#[test]
fn conformance_suite_on_8() {
    suite_on(8);
}

/// Host memory between the ranks of a host, and refused across hosts.
#[test]
fn conformance_suite_on_7_in_hosts_of_3() {
    suite_on_hosts_of(7, 3);
}

/// A ping-pong of k bytes takes 2 (o + L + k G + o) under LogGP.
#[test]
fn a_ping_pong_takes_what_loggp_says() {
    const BYTES: usize = 1000;
    let sim = Sim::new(2, MODEL);
    let deadline = |t: &SimRank<'_>| t.deadline_in(Duration::from_secs(1));
    let (_, report) = sim
        .run(async |t: &SimRank<'_>| {
            let data = [7u8; BYTES];
            if t.rank() == 0 {
                t.send(1, 1, 1, &data, deadline(t)).await?;
                t.recv(Some(1), 1, 2, deadline(t)).await?;
            } else {
                let m = t.recv(Some(0), 1, 1, deadline(t)).await?;
                t.send(0, 1, 2, &m.data, deadline(t)).await?;
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    let one_way = 100 + 1_000 + BYTES as u64 / 2 + 100;
    assert_eq!(report.completion, Duration::from_nanos(2 * one_way));
    assert_eq!((report.messages, report.bytes), (2, 2 * BYTES as u64));
}

/// Back-to-back sends are spaced by max(g, k G); the last one arrives then.
#[test]
fn sends_queue_behind_the_gap() {
    let sim = Sim::new(2, MODEL);
    let (_, report) = sim
        .run(async |t: &SimRank<'_>| {
            let deadline = t.deadline_in(Duration::from_secs(1));
            if t.rank() == 0 {
                for tag in 0..3 {
                    t.send(1, 1, tag, &[0; 400], deadline).await?;
                }
            } else {
                for tag in 0..3 {
                    t.recv(Some(0), 1, tag, deadline).await?;
                }
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    // Sends start at 0, 200, 400 (kG = 200 > g); the last arrives at
    // 400 + o + L + kG and is received after o more.
    assert_eq!(
        report.completion,
        Duration::from_nanos(400 + 100 + 1_000 + 200 + 100)
    );
}

#[test]
fn runs_are_deterministic() {
    let run = || {
        let sim = Sim::new(8, MODEL);
        sim.run(async |t: &SimRank<'_>| conformance::run(t, Check::AllPairs).await)
            .expect("every rank finishes")
            .1
    };
    let (a, b) = (run(), run());
    assert_eq!(
        (a.completion, a.messages, a.bytes, a.events),
        (b.completion, b.messages, b.bytes, b.events)
    );
}

/// Two ranks that wait for each other time out at their virtual deadline
/// (seconds of virtual time pass in no wall time).
#[test]
fn a_deadlock_times_out_in_virtual_time() {
    let sim = Sim::new(2, MODEL);
    let (results, report) = sim
        .run(async |t: &SimRank<'_>| {
            let deadline = t.deadline_in(Duration::from_secs(30));
            t.recv(Some(1 - t.rank()), 1, 1, deadline).await
        })
        .expect("the waits end at their deadline");
    for r in results {
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    }
    assert!(report.completion >= Duration::from_secs(30));
    assert!(report.wall < Duration::from_secs(5));
}

/// On a 4-node ring, 0 -> 2 and 1 -> 3 share the link 1 -> 2: the second
/// flow waits for the first, so the pair takes twice as long as one flow
/// (by hand: 2 o + 2 hops + T alone; 2 o + 3 hops + 2 T together).
#[test]
fn two_flows_through_one_torus_link_take_twice_as_long() {
    const BYTES: usize = 1 << 20;
    let run = |senders: &'static [u32]| {
        let mut model = Routed::new(Torus::new(&[4]).unwrap(), 1);
        model.link_ns_per_byte = 1.0;
        model.hop_ns = 100.0;
        model.local.overhead_ns = 100.0;
        let sim = Sim::new(4, model);
        sim.run(async |t: &SimRank<'_>| {
            let deadline = t.deadline_in(Duration::from_secs(1));
            if senders.contains(&t.rank()) {
                t.send(t.rank() + 2, 1, 1, &vec![1; BYTES], deadline)
                    .await?;
            } else if t.rank() >= 2 && senders.contains(&(t.rank() - 2)) {
                t.recv(Some(t.rank() - 2), 1, 1, deadline).await?;
            }
            Ok::<(), Error>(())
        })
        .unwrap()
        .1
        .completion
        .as_nanos() as u64
    };
    let transfer = BYTES as u64;
    let alone = run(&[0]);
    assert_eq!(alone, 2 * 100 + 2 * 100 + transfer);
    let together = run(&[0, 1]);
    assert_eq!(together, 2 * 100 + 3 * 100 + 2 * transfer);
    let ratio = together as f64 / alone as f64;
    assert!((1.99..2.01).contains(&ratio), "{ratio}");
}

/// A node injects on all its links at once: sending 1 MiB to both ring
/// neighbours takes one transfer time (plus a gap), not two; a route pinned
/// the long way round takes its extra hops.
#[test]
fn a_node_feeds_its_links_at_once_and_pinned_routes_are_taken() {
    const BYTES: usize = 1 << 20;
    let run = |targets: &'static [u32], pin: bool| {
        let torus = Torus::new(&[4]).unwrap();
        let mut model = Routed::new(torus.clone(), 1);
        model.link_ns_per_byte = 1.0;
        model.hop_ns = 100.0;
        model.local.overhead_ns = 100.0;
        model.local.gap_ns = 100.0;
        if pin {
            // 0 -> 1 the long way: down through 3 and 2.
            let links = (0..3).map(|i| torus.link((4 - i) % 4, 0, false)).collect();
            model.pin_route(0, 1, links);
        }
        let sim = Sim::new(4, model);
        sim.run(async |t: &SimRank<'_>| {
            let deadline = t.deadline_in(Duration::from_secs(1));
            if t.rank() == 0 {
                for &to in targets {
                    t.send(to, 1, 1, &vec![1; BYTES], deadline).await?;
                }
            } else if targets.contains(&t.rank()) {
                t.recv(Some(0), 1, 1, deadline).await?;
            }
            Ok::<(), Error>(())
        })
        .unwrap()
        .1
        .completion
        .as_nanos() as u64
    };
    let transfer = BYTES as u64;
    assert_eq!(run(&[1], false), 2 * 100 + 100 + transfer);
    // The second send starts a gap after the first.
    assert_eq!(run(&[1, 3], false), 100 + 2 * 100 + 100 + transfer);
    assert_eq!(run(&[1], true), 2 * 100 + 3 * 100 + transfer);
}

/// A key forged to claim a longer window than its owner has fails at the
/// origin instead of writing past the window.
#[test]
fn a_key_claiming_a_longer_window_is_refused() {
    let sim = Sim::new(2, MODEL);
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| {
            let window = t.alloc_window(64)?;
            let deadline = t.deadline_in(Duration::from_secs(1));
            let peer = 1 - t.rank();
            t.send(peer, 1, 1, window.key().as_bytes(), deadline)
                .await?;
            let theirs = t.recv(Some(peer), 1, 1, deadline).await?.data;
            // The key's last 8 bytes are the window's length: claim 4096.
            let mut forged = theirs.clone();
            let at = forged.len() - 8;
            forged[at..].copy_from_slice(&4096u64.to_le_bytes());
            let forged = RemoteKey::from_bytes(&forged)?;
            let got = t.put(peer, &forged, 1000, &[7; 8]);
            assert!(matches!(got, Err(Error::InvalidKey(_))), "{got:?}");
            // Both windows stay alive until both have tried.
            t.send(peer, 1, 2, &[], deadline).await?;
            t.recv(Some(peer), 1, 2, deadline).await?;
            drop(window);
            Ok::<(), Error>(())
        })
        .unwrap();
    for r in results {
        r.unwrap();
    }
}
