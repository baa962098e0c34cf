//! Fuzz target: every key decoder of this build (shm, and ofi and ucx with
//! their features) fed random bytes and mutated real keys must never panic,
//! and may decode a key equal to a real one only from that key's own bytes.

use catena_fabric::fuzz_hooks::{decode_key, providers, sample_key};
use catena_fabric::RemoteKey;
use catena_fuzz::proptest::collection::vec;
use catena_fuzz::proptest::prelude::*;

/// A real key's fields, a mutation of its bytes, and random bytes.
#[derive(Debug, Clone)]
struct Case {
    owner: u32,
    id: u32,
    len: usize,
    secret: [u8; 16],
    extra: Vec<u8>,
    /// (position, xor) pairs applied to the real key's bytes.
    flips: Vec<(usize, u8)>,
    /// Bytes appended to, or cut from, the mutated key.
    tail: Vec<u8>,
    cut: usize,
    random: Vec<u8>,
}

fn cases() -> impl Strategy<Value = Case> {
    (
        (0u32..8, any::<u32>(), 0usize..1 << 40, any::<[u8; 16]>()),
        vec(any::<u8>(), 0..120),
        vec((0usize..256, 1u8..=255), 0..4),
        vec(any::<u8>(), 0..3),
        0usize..3,
        vec(any::<u8>(), 0..240),
    )
        .prop_map(
            |((owner, id, len, secret), extra, flips, tail, cut, random)| Case {
                owner,
                id,
                len,
                secret,
                extra,
                flips,
                tail,
                cut,
                random,
            },
        )
}

#[test]
fn fuzz_key_decoders() {
    catena_fuzz::fuzz("key decoders", cases(), |c| {
        for provider in providers() {
            let Ok(real) = sample_key(provider, c.owner, c.id, c.len, c.secret, &c.extra) else {
                continue; // Fields no key of this provider can hold.
            };
            let original = decode_key(provider, &real, c.owner, c.secret);
            prop_assert!(
                original.is_ok(),
                "{provider}: a real key is refused: {original:?}"
            );
            let original = original.ok();
            let misdirected = decode_key(provider, &real, c.owner ^ 1, c.secret);
            prop_assert!(
                misdirected.is_err(),
                "{provider}: a key used for another rank"
            );
            let mut bytes = real.as_bytes().to_vec();
            for &(at, xor) in &c.flips {
                let at = at % bytes.len();
                bytes[at] ^= xor;
            }
            bytes.extend_from_slice(&c.tail);
            bytes.truncate(bytes.len().saturating_sub(c.cut).max(1));
            for candidate in [bytes, c.random.clone()] {
                let Ok(key) = RemoteKey::from_bytes(&candidate) else {
                    continue;
                };
                for target in [c.owner, c.owner ^ 1] {
                    let decoded = decode_key(provider, &key, target, c.secret);
                    if decoded.as_ref().ok() == original.as_ref() {
                        prop_assert_eq!(
                            &candidate[..],
                            real.as_bytes(),
                            "{}: other bytes decode to the real key",
                            provider
                        );
                    }
                }
            }
        }
        Ok(())
    });
}

/// The mutations the fuzzer relies on are refused on the providers that seal
/// keys: each single flipped byte of a real key (a check that cannot pass by
/// chance, unlike random bytes).
#[test]
fn every_flipped_byte_of_a_sealed_key_is_refused() {
    for provider in providers().into_iter().filter(|&p| p != "shm") {
        let real = sample_key(provider, 3, 7, 4096, [9; 16], &[5; 40]).expect("a key");
        for at in 0..real.as_bytes().len() {
            let mut bytes = real.as_bytes().to_vec();
            bytes[at] ^= 0x01;
            let key = RemoteKey::from_bytes(&bytes).expect("same length");
            let decoded = decode_key(provider, &key, 3, [9; 16]);
            assert!(
                matches!(decoded, Err(catena_fabric::Error::InvalidKey(_))),
                "{provider}: byte {at} flipped gave {decoded:?}"
            );
        }
    }
}
