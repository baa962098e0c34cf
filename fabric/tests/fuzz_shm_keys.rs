//! Fuzzes the shm provider's key checks from a peer: every key that is not
//! one the owner made (random bytes, or a genuine key with a few bytes
//! changed, cut or extended) is `InvalidKey`, and the owner's window stays
//! untouched.

use std::time::Duration;

use catena_fabric::shm::ShmTransport;
use catena_fabric::{block_on, Error, LocalWindow, RemoteKey, Rma, Signal, Transport};
use catena_fuzz::proptest::prelude::*;
use catena_testkit::launch_case;

/// A genuine key mangled: bytes changed at random places, then cut or
/// extended; or bytes that owe nothing to the key.
fn mangled(genuine: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let len = genuine.len();
    prop_oneof![
        (
            prop::collection::vec((0..len, 1..=255u8), 1..4),
            prop::collection::vec(any::<u8>(), 0..3),
            0..=len,
        )
            .prop_map(move |(edits, tail, keep)| {
                let mut key = genuine.clone();
                for (at, flip) in edits {
                    key[at] ^= flip;
                }
                if keep < len && tail.is_empty() {
                    key.truncate(keep.max(1));
                }
                key.extend(tail);
                key
            }),
        prop::collection::vec(any::<u8>(), 1..64),
    ]
}

#[test]
fn fuzz_shm_keys() {
    let Some(report) = launch_case("fuzz_shm_keys", 2, |t: &ShmTransport| {
        block_on(t, async {
            // Rank 1 waits while rank 0 fuzzes, for as long as it is asked
            // to (CATENA_FUZZ_SECONDS, any number of seconds).
            let wait = catena_fuzz::budget().saturating_add(Duration::from_secs(120));
            let deadline = t.deadline_in(wait);
            if t.rank() == 1 {
                let window = t.alloc_window(64)?;
                t.send(0, 9, 1, window.key().as_bytes(), deadline).await?;
                t.recv(Some(0), 9, 2, deadline).await?;
                let mut bytes = [0u8; 64];
                window.read(0, &mut bytes)?;
                assert_eq!(bytes, [0u8; 64], "a mangled key wrote into the window");
                return Ok(());
            }
            let genuine = t.recv(Some(1), 9, 1, deadline).await?.data;
            catena_fuzz::fuzz("shm keys", mangled(genuine.clone()), |key| {
                if key == genuine {
                    return Ok(());
                }
                let Ok(key) = RemoteKey::from_bytes(&key) else {
                    return Ok(());
                };
                let signal = Signal { offset: 0, add: 1 };
                for put in [
                    t.put(1, &key, 0, &[0xAA; 8]),
                    t.put_signal(1, &key, 8, &[0xAA; 8], signal),
                ] {
                    prop_assert!(matches!(put, Err(Error::InvalidKey(_))), "{key:?}: {put:?}");
                }
                Ok(())
            });
            t.send(1, 9, 2, &[], deadline).await
        })
    }) else {
        return;
    };
    eprintln!("{}", report.output);
    assert!(report.success(), "{:?}", report.first_failure);
}
