//! Fuzz target: a hostile rank writes random bytes, signal adds and slot
//! states into a victim's control window and their connection's windows,
//! rendezvous frames and bulk bytes into the victim's bulk window, and
//! forged bulk windows and credit for the victim's rendezvous messages to
//! it (with the keys it legitimately holds, in `Sim::run_eager`), while an
//! honest rank talks to the victim. The victim must never panic, hang or
//! allocate absurdly; its calls with the hostile rank end in a message, a
//! `Protocol` error or a timeout; and every honest message arrives intact.

mod intruder;

use std::time::Duration;

use catena_fabric::eager::wire::{
    bulk_window_bytes, slot_at, BULK_CREDIT_SIGNAL, BULK_REPLY_SIGNAL, BULK_RING_AT, BULK_SIGNAL,
    CONTROL_WINDOW_BYTES, CREDIT_SIGNAL, REPLY_SIGNAL, REQUEST_BELL, RING_AT, SLOT_COUNT,
    SLOT_FROM_AT,
};
use catena_fabric::{wait_until, Error, LocalWindow, Rank, Rma, Signal, Transport};
use catena_fuzz::proptest::prelude::*;
use catena_fuzz::proptest::test_runner::TestCaseError;
use catena_sim::{EagerRank, LogGp, Seeded, Sim};
use catena_testkit::conformance::pattern;
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
    /// A frame header claiming `len` bytes, its stamp word added `stamp`.
    Header { len: u64, stamp: u64 },
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
    /// An honest rendezvous frame, its payload into the bulk stream
    /// (ignoring credit).
    Rendezvous { tag: u32, data: Vec<u8> },
    /// A rendezvous frame header claiming `len` bytes, and `announced` bulk
    /// bytes landed.
    RendezvousHeader { len: u64, announced: u64 },
    /// Raw bytes anywhere in the victim's bulk window (once it made one).
    BulkWindow { offset: usize, bytes: Vec<u8> },
    /// Adds to the victim's bulk signal (once it made a bulk window).
    BulkSignal { add: u64 },
    /// A bulk window reply for the victim's rendezvous messages to us: a
    /// real window of ours or any bytes, any announced key length and ring.
    BulkReply {
        genuine: bool,
        key: Vec<u8>,
        key_len: u64,
        ring: u64,
    },
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
        2 => (word_value(), prop_oneof![Just(0u64), 1u64..2000, word_value()]).prop_map(|(len, stamp)| Attack::Header { len, stamp }),
        2 => (0usize..RING_AT + 2048, bytes()).prop_map(|(offset, bytes)| Attack::Window { offset, bytes }),
        2 => (prop_oneof![Just(REPLY_SIGNAL), Just(CREDIT_SIGNAL), Just(RING_AT),
                          Just(BULK_CREDIT_SIGNAL), Just(BULK_REPLY_SIGNAL)], word_value())
            .prop_map(|(word, add)| Attack::Signal { word, add }),
        2 => (0u32..3, prop::collection::vec(any::<u8>(), 0..1500))
            .prop_map(|(tag, data)| Attack::Rendezvous { tag, data }),
        1 => (word_value(), word_value()).prop_map(|(len, announced)| Attack::RendezvousHeader { len, announced }),
        1 => (0usize..BULK_RING_AT + 2048, bytes()).prop_map(|(offset, bytes)| Attack::BulkWindow { offset, bytes }),
        1 => word_value().prop_map(|add| Attack::BulkSignal { add }),
        1 => (any::<bool>(), prop::collection::vec(any::<u8>(), 0..40), prop_oneof![0u64..40, word_value()],
              prop_oneof![Just(1000u64), 0u64..2000, word_value()])
            .prop_map(|(genuine, key, key_len, ring)| Attack::BulkReply { genuine, key, key_len, ring }),
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
    /// Rendezvous from this size (the victim's 100-byte messages to the
    /// hostile rank go by rendezvous at 64), through bulk rings of `bulk`.
    rendezvous: usize,
    bulk: usize,
    /// Sizes of the honest rank's messages.
    honest: Vec<usize>,
    attacks: Vec<Attack>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        any::<u64>(),
        prop_oneof![Just(64usize), Just(256), Just(1024)],
        prop_oneof![Just(0usize), Just(700), Just(1 << 16)],
        (
            prop_oneof![Just(64usize), Just(700), Just(usize::MAX)],
            prop_oneof![Just(100usize), Just(1000)],
        ),
        prop::collection::vec(0usize..2000, 1..6),
        prop::collection::vec(attack(), 1..16),
    )
        .prop_map(
            |(seed, ring, inbox, (rendezvous, bulk), honest, attacks)| Case {
                seed,
                ring,
                inbox,
                rendezvous,
                bulk,
                honest,
                attacks,
            },
        )
}

fn deadline(t: &EagerRank<'_>) -> catena_fabric::Time {
    t.deadline_in(Duration::from_secs(30))
}

/// Waits briefly for the victim's bulk window (it makes one on our first
/// rendezvous frame, if it gets that far).
async fn bulk_window(t: &EagerRank<'_>, me: &mut Intruder<'_, '_>) {
    if me.victim_bulk.is_none() {
        let short = t.deadline_in(Duration::from_micros(200));
        let _ = me.await_bulk_window(short).await;
    }
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
    // A bulk window of ours, for the genuine replies.
    let mine = t.alloc_window(bulk_window_bytes(case.bulk))?;
    // The honest rank's first contact goes first: overwriting its request
    // slot would only deny it a connection, which nobody can prevent.
    nap(t, Duration::from_micros(100)).await;
    for attack in &case.attacks {
        // Failed puts (out of bounds, say) are the hostile rank's business.
        let _ = match attack {
            Attack::Frame { tag, data } => {
                let frame = Intruder::frame(7, *tag, data);
                me.stream(&frame)
            }
            Attack::Header { len, stamp } => {
                let header = catena_fabric::eager::wire::encode_header(*len as usize, 7, 0);
                me.stream_stamped(&header, *stamp)
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
            Attack::Rendezvous { tag, data } => {
                let header = Intruder::rendezvous_header(7, *tag, data.len());
                let streamed = me.stream(&header);
                bulk_window(t, &mut me).await;
                match me.victim_bulk {
                    Some(_) => streamed.and_then(|()| me.stream_bulk(data, data.len() as u64)),
                    None => streamed,
                }
            }
            Attack::RendezvousHeader { len, announced } => {
                let header = Intruder::rendezvous_header(7, 0, *len as usize);
                let streamed = me.stream(&header);
                bulk_window(t, &mut me).await;
                match me.victim_bulk {
                    Some(_) => streamed.and_then(|()| me.stream_bulk(&[], *announced)),
                    None => streamed,
                }
            }
            Attack::BulkWindow { offset, bytes } => match &me.victim_bulk {
                Some((key, _)) if !bytes.is_empty() => t.put(VICTIM, key, *offset, bytes),
                _ => Ok(()),
            },
            Attack::BulkSignal { add } => match &me.victim_bulk {
                Some((key, _)) => {
                    let add = Signal {
                        offset: BULK_SIGNAL,
                        add: *add,
                    };
                    t.put_signal(VICTIM, key, BULK_SIGNAL, &[], add)
                }
                None => Ok(()),
            },
            Attack::BulkReply {
                genuine,
                key,
                key_len,
                ring,
            } => {
                let genuine_key = mine.key();
                let key = match genuine {
                    true => genuine_key.as_bytes(),
                    false => key,
                };
                me.reply_bulk(key, *key_len, *ring)
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
        .with_eager_inbox_bytes(case.inbox)
        .with_eager_rendezvous(case.rendezvous, case.bulk);
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
