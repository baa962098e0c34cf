//! Narrow entry points into the crate-private key decoders of every provider
//! built in, for the fuzz target `tests/fuzz_keys.rs`. Not an API: hidden
//! from the docs and free to change.

use crate::key::KeySecret;
use crate::{Rank, RemoteKey, Result};

/// The providers whose key decoders this build has.
pub fn providers() -> Vec<&'static str> {
    let mut names = vec!["shm"];
    if cfg!(feature = "ofi") {
        names.push("ofi");
    }
    if cfg!(feature = "ucx") {
        names.push("ucx");
    }
    names
}

/// A key of `provider` as its owner `owner` would make it, sealed with
/// `secret` where the provider seals keys; `extra` fills the fields a
/// provider takes from its library (base, memory key, packed rkey).
pub fn sample_key(
    provider: &str,
    owner: Rank,
    id: u32,
    len: usize,
    secret: [u8; 16],
    extra: &[u8],
) -> Result<RemoteKey> {
    let secret = KeySecret::from_bytes(secret);
    match provider {
        "shm" => Ok(crate::shm::window::ShmKey {
            owner,
            id,
            len,
            fd: word(extra, 0) as i32,
        }
        .encode(&secret)),
        #[cfg(feature = "ofi")]
        "ofi" => crate::ofi::OfiKey {
            owner,
            id,
            len,
            addr: word(extra, 0),
            mr_key: word(extra, 8),
        }
        .encode(&secret),
        #[cfg(feature = "ucx")]
        "ucx" => crate::ucx::window::UcxKey {
            owner,
            id,
            len,
            // Half the address space, so that base + len never wraps.
            base: word(extra, 0) >> 1,
            rkey: extra.get(8..).filter(|r| !r.is_empty()).unwrap_or(&[0]),
        }
        .encode(&secret),
        _ => Err(crate::Error::InvalidKey(format!("no provider {provider}"))),
    }
}

/// The little-endian u64 at `at` of `extra`, zero-filled past its end.
fn word(extra: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    for (i, b) in w.iter_mut().enumerate() {
        *b = extra.get(at + i).copied().unwrap_or(0);
    }
    u64::from_le_bytes(w)
}

/// Decodes `key` as `provider` does for a put to `target`, whose published
/// secret is `secret`; the decoded fields as text.
pub fn decode_key(
    provider: &str,
    key: &RemoteKey,
    target: Rank,
    secret: [u8; 16],
) -> Result<String> {
    let secret = KeySecret::from_bytes(secret);
    match provider {
        "shm" => crate::shm::window::ShmKey::decode(key, target, &secret).map(|k| format!("{k:?}")),
        #[cfg(feature = "ofi")]
        "ofi" => crate::ofi::OfiKey::decode(key, target, &secret).map(|k| format!("{k:?}")),
        #[cfg(feature = "ucx")]
        "ucx" => crate::ucx::window::UcxKey::decode(key, target, &secret).map(|k| format!("{k:?}")),
        _ => Err(crate::Error::InvalidKey(format!("no provider {provider}"))),
    }
}
