//! Fuzz target: a hostile rank writes random bytes, signal adds and slot
//! states into a victim's control window and their connection's windows
//! (with the keys it legitimately holds, in `Sim::run_eager`), while an
//! honest rank talks to the victim. The victim must never panic, hang or
//! allocate absurdly; its calls with the hostile rank end in a message, a
//! `Protocol` error or a timeout; and every honest message arrives intact.

mod intruder;

use std::time::Duration;

use catena_fabric::conformance::pattern;
use catena_fabric::eager::wire::{
    slot_at, CONTROL_WINDOW_BYTES, CREDIT_SIGNAL, REPLY_SIGNAL, REQUEST_BELL, RING_AT, RING_SIGNAL,
    SLOT_COUNT, SLOT_FROM_AT,
};
use catena_fabric::{wait_until, Error, Rank, Rma, Transport};
use catena_fuzz::proptest::prelude::*;
use catena_fuzz::proptest::test_runner::TestCaseError;
use catena_sim::{EagerRank, LogGp, Seeded, Sim};
use intruder::Intruder;

#[global_allocator]
static ALLOC: catena_fuzz::alloc::Limited = catena_fuzz::alloc::Limited;

const MODEL: LogGp = LogGp {
    latency_ns: 1_000.0,
    overhead_ns: 100.0,
    gap_ns: 50.0,
    per_byte_ns: 0.5,
};
const VICTIM: Rank = 0;
const HONEST: Rank = 1;
const HOSTILE: Rank = 2;
/// The largest single allocation a case may make (rings and messages here
/// are kilobytes).
const MOST_ALLOCATED: usize = 64 << 20;

/// One write of the hostile rank.
#[derive(Clone, Debug)]
enum Attack {
    /// An honest frame into the ring (ignoring credit).
    Frame { tag: u32, data: Vec<u8> },
    /// A frame header claiming `len` bytes, announced as `announced` landed.
    Header { len: u64, announced: u64 },
    /// Raw bytes anywhere in the victim's connection window.
    Window { offset: usize, bytes: Vec<u8> },
    /// Adds to a signal word of the connection window.
    Signal { word: usize, add: u64 },
    /// A connection request slot, filled with anything.
    Slot {
        slot: usize,
        state_add: u64,
        from: u64,
        key_len: u64,
        key: Vec<u8>,
    },
    /// Raw bytes anywhere in the victim's control window, maybe ringing.
    Control {
        offset: usize,
        bytes: Vec<u8>,
        bell: Option<u64>,
    },
    /// Lets virtual time pass, so the victim drains in between.
    Nap { us: u64 },
}

fn word_value() -> impl Strategy<Value = u64> {
    prop_oneof![
        0u64..600,
        Just(u64::MAX),
        Just(u64::MAX - 15),
        Just(1u64 << 63),
        Just(300u64 << 40),
        any::<u64>(),
    ]
}

fn attack() -> impl Strategy<Value = Attack> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..80);
    prop_oneof![
        3 => (0u32..3, prop::collection::vec(any::<u8>(), 0..300))
            .prop_map(|(tag, data)| Attack::Frame { tag, data }),
        2 => (word_value(), word_value()).prop_map(|(len, announced)| Attack::Header { len, announced }),
        2 => (0usize..RING_AT + 2048, bytes()).prop_map(|(offset, bytes)| Attack::Window { offset, bytes }),
        2 => (prop_oneof![Just(REPLY_SIGNAL), Just(CREDIT_SIGNAL), Just(RING_SIGNAL)], word_value())
            .prop_map(|(word, add)| Attack::Signal { word, add }),
        2 => (0..SLOT_COUNT, prop_oneof![Just(2u64), word_value()], prop_oneof![0u64..4, word_value()],
              prop_oneof![0u64..40, word_value()], prop::collection::vec(any::<u8>(), 0..40))
            .prop_map(|(slot, state_add, from, key_len, key)| Attack::Slot { slot, state_add, from, key_len, key }),
        1 => (0usize..CONTROL_WINDOW_BYTES, bytes(), prop::option::of(word_value()))
            .prop_map(|(offset, bytes, bell)| Attack::Control { offset, bytes, bell }),
        2 => (1u64..200).prop_map(|us| Attack::Nap { us }),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    seed: u64,
    ring: usize,
    inbox: usize,
    /// Sizes of the honest rank's messages.
    honest: Vec<usize>,
    attacks: Vec<Attack>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop_oneof![Just(64usize), Just(256), Just(1024)],
        prop_oneof![Just(0usize), Just(700), Just(1 << 16)],
        prop::collection::vec(0usize..2000, 1..6),
        prop::collection::vec(attack(), 1..16),
    )
        .prop_map(|(seed, ring, inbox, honest, attacks)| Case {
            seed,
            ring,
            inbox,
            honest,
            attacks,
        })
}

fn deadline(t: &EagerRank<'_>) -> catena_fabric::Time {
    t.deadline_in(Duration::from_secs(30))
}

async fn nap(t: &EagerRank<'_>, how_long: Duration) {
    let _ = wait_until(t, t.deadline_in(how_long), "a nap", || Ok(None::<()>)).await;
}

/// A call with the hostile rank may give anything typed but a wrong kind
/// of error: a message, a broken connection, a timeout.
fn typed<T>(r: &catena_fabric::Result<T>) -> bool {
    matches!(r, Ok(_) | Err(Error::Protocol(_) | Error::Timeout { .. }))
}

async fn victim(t: &EagerRank<'_>, case: &Case) -> catena_fabric::Result<()> {
    for (i, &len) in case.honest.iter().enumerate() {
        // In between, deal with the hostile rank briefly.
        let short = t.deadline_in(Duration::from_micros(300));
        let got = t.recv(Some(HOSTILE), 7, i as u32 % 3, short).await;
        if !typed(&got) {
            return Err(Error::Protocol(format!("from the hostile rank: {got:?}")));
        }
        let sent = t.send(HOSTILE, 7, 1, &[i as u8; 100], short).await;
        if !typed(&sent) {
            return Err(Error::Protocol(format!("to the hostile rank: {sent:?}")));
        }
        let got = t.recv(Some(HONEST), 7, 1, deadline(t)).await?;
        if got.data != pattern(HONEST, i, len) {
            return Err(Error::Protocol(format!("honest message {i} corrupted")));
        }
        t.send(HONEST, 7, 1, &pattern(VICTIM, i, len), deadline(t))
            .await?;
        let held = t.inbox_bytes();
        if held > 1 << 20 {
            return Err(Error::Protocol(format!("{held} bytes held")));
        }
    }
    Ok(())
}

async fn honest(t: &EagerRank<'_>, case: &Case) -> catena_fabric::Result<()> {
    for (i, &len) in case.honest.iter().enumerate() {
        t.send(VICTIM, 7, 1, &pattern(HONEST, i, len), deadline(t))
            .await?;
        let got = t.recv(Some(VICTIM), 7, 1, deadline(t)).await?;
        if got.data != pattern(VICTIM, i, len) {
            return Err(Error::Protocol(format!("reply {i} corrupted")));
        }
        nap(t, Duration::from_micros(50)).await;
    }
    Ok(())
}

async fn hostile(t: &EagerRank<'_>, case: &Case) -> catena_fabric::Result<()> {
    let mut me = Intruder::connect(t, VICTIM, case.ring, deadline(t)).await?;
    // The honest rank's first contact goes first: overwriting its request
    // slot would only deny it a connection, which nobody can prevent.
    nap(t, Duration::from_micros(100)).await;
    for attack in &case.attacks {
        // Failed puts (out of bounds, say) are the hostile rank's business.
        let _ = match attack {
            Attack::Frame { tag, data } => {
                let frame = Intruder::frame(7, *tag, data);
                me.stream(&frame, frame.len() as u64)
            }
            Attack::Header { len, announced } => {
                let mut header = catena_fabric::eager::wire::encode_header(0, 7, 0);
                header[..8].copy_from_slice(&len.to_le_bytes());
                me.stream(&header, *announced)
            }
            Attack::Window { offset, bytes } => me.put(*offset, bytes),
            Attack::Signal { word, add } => me.signal(*word, *add),
            Attack::Slot {
                slot,
                state_add,
                from,
                key_len,
                key,
            } => {
                let at = slot_at(*slot);
                let mut body = from.to_le_bytes().to_vec();
                body.extend_from_slice(&key_len.to_le_bytes());
                body.extend_from_slice(key);
                me.put_control(at + SLOT_FROM_AT, &body, Some((at, *state_add)))?;
                me.put_control(REQUEST_BELL, &[], Some((REQUEST_BELL, 1)))
            }
            Attack::Control {
                offset,
                bytes,
                bell,
            } => me.put_control(*offset, bytes, bell.map(|add| (REQUEST_BELL, add))),
            Attack::Nap { us } => {
                nap(t, Duration::from_micros(*us)).await;
                Ok(())
            }
        };
    }
    // Keep the window the victim writes to until it is done.
    nap(t, Duration::from_millis(20)).await;
    Ok(())
}

fn check(case: Case) -> Result<(), TestCaseError> {
    let sim = Sim::new(3, MODEL)
        .with_delays(Seeded::new(case.seed, 5_000))
        .with_eager_inbox_bytes(case.inbox);
    let run = sim.run_eager(case.ring, async |t| match t.rank() {
        VICTIM => victim(t, &case).await,
        HONEST => honest(t, &case).await,
        _ => hostile(t, &case).await,
    });
    let (results, _) = run.map_err(|stuck| TestCaseError::fail(format!("{stuck}")))?;
    for (rank, result) in results.into_iter().enumerate() {
        prop_assert!(result.is_ok(), "rank {}: {:?}", rank, result);
    }
    let largest = catena_fuzz::alloc::largest();
    prop_assert!(
        largest <= MOST_ALLOCATED,
        "an allocation of {} bytes",
        largest
    );
    Ok(())
}

#[test]
fn a_hostile_peer_cannot_hurt_the_victim_nor_its_honest_peers() {
    catena_fuzz::fuzz(
        "eager rings and slots fed by a hostile peer",
        cases(),
        check,
    );
}
