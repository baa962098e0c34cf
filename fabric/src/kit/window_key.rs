//! The sealed header every provider's window key starts with: the
//! provider's tag byte, the owner, the window id and its length, then the
//! provider's own fields, then the seal under the owner's secret (see
//! [`KeySecret`]). Keys are opened here, so every provider refuses a
//! foreign, corrupted or forged key the same way before trusting a field.

use crate::bounds::MAX_WINDOW_BYTES;
use crate::key::{KeySecret, SEAL_BYTES};
use crate::{Error, Rank, RemoteKey, Result};

/// Bytes of the header: tag, owner, id, length.
pub(crate) const HEADER_LEN: usize = 17;

/// What every window key says before the provider's own fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyHeader {
    /// The rank whose window it is.
    pub owner: Rank,
    /// The window's id among its owner's.
    pub id: u32,
    /// The window's length in bytes.
    pub len: usize,
}

/// How many bytes of provider fields follow the header.
#[derive(Clone, Copy)]
pub(crate) enum RestLen {
    Exactly(usize),
    /// A packed handle of the library's own length (UCX's rkeys).
    #[cfg(feature = "ucx")]
    AtLeast(usize),
}

impl RestLen {
    fn admits(self, key_len: usize) -> bool {
        let Some(rest) = key_len.checked_sub(HEADER_LEN + SEAL_BYTES) else {
            return false;
        };
        match self {
            RestLen::Exactly(n) => rest == n,
            #[cfg(feature = "ucx")]
            RestLen::AtLeast(n) => rest >= n,
        }
    }
}

impl KeyHeader {
    /// `tag | owner | id | len | rest`, sealed with the owner's `secret`.
    pub(crate) fn seal(&self, tag: u8, rest: &[u8], secret: &KeySecret) -> Result<RemoteKey> {
        let mut body = Vec::with_capacity(HEADER_LEN + rest.len());
        body.push(tag);
        body.extend_from_slice(&self.owner.to_le_bytes());
        body.extend_from_slice(&self.id.to_le_bytes());
        body.extend_from_slice(&(self.len as u64).to_le_bytes());
        body.extend_from_slice(rest);
        secret.seal(&body)
    }

    /// The header and provider fields of `key`, a key of the provider
    /// tagged `tag` (`what` names such keys in errors: "a shm window key")
    /// meant for a window of `target`, whose published secret is `secret`.
    /// A key of another provider or shape, another rank's key, and a key
    /// whose seal does not match (corrupted or forged) are `InvalidKey`
    /// before any field is trusted.
    pub(crate) fn open<'k>(
        key: &'k RemoteKey,
        tag: u8,
        rest: RestLen,
        target: Rank,
        secret: &KeySecret,
        what: &str,
    ) -> Result<(KeyHeader, &'k [u8])> {
        let b = key.as_bytes();
        if !rest.admits(b.len()) || b[0] != tag {
            return Err(Error::InvalidKey(format!("not {what}: {key:?}")));
        }
        // Read before the seal is checked only to name the mistake.
        let owner = u32_at(b, 1);
        if owner != target {
            return Err(Error::InvalidKey(format!(
                "a key of rank {owner}'s window used for rank {target}"
            )));
        }
        let body = secret.open(key, what)?;
        let len = u64::from_le_bytes(b[9..17].try_into().expect("8 bytes"));
        let header = KeyHeader {
            owner,
            id: u32_at(b, 5),
            len: usize::try_from(len)
                .ok()
                .filter(|&len| len <= MAX_WINDOW_BYTES)
                .ok_or_else(|| Error::InvalidKey(format!("{what}: length {len}")))?,
        };
        Ok((header, &body[HEADER_LEN..]))
    }

    /// The window id `key` claims, unchecked: only to find what was made
    /// through the very same key bytes before.
    #[inline]
    pub(crate) fn peek_id(key: &RemoteKey, tag: u8, rest: RestLen) -> Option<u32> {
        let b = key.as_bytes();
        (rest.admits(b.len()) && b[0] == tag).then(|| u32_at(b, 5))
    }
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
