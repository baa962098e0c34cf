//! Remote keys: the compact, provider-packed handle a peer needs to put into
//! a window, and the per-rank secret that seals keys against corruption and
//! forgery. Keys are plain bytes so algorithms can ship them in messages.

/// Largest packed key any provider may produce (UCX rkeys are the biggest).
pub(crate) const MAX_KEY_BYTES: usize = 232;

/// Names a window of one rank for one-sided access: its owner ships it to
/// peers, who pass it to [`Rma::put`](crate::Rma::put) and the atomics.
/// At most 232 bytes, opaque outside the provider that packed it.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RemoteKey(Box<[u8]>);

impl RemoteKey {
    /// Wraps a provider's packed key; fails if it is too long to ship.
    pub fn from_bytes(bytes: &[u8]) -> crate::Result<RemoteKey> {
        if bytes.is_empty() || bytes.len() > MAX_KEY_BYTES {
            return Err(crate::Error::InvalidKey(format!(
                "{} bytes (a key has 1..={MAX_KEY_BYTES})",
                bytes.len()
            )));
        }
        Ok(RemoteKey(bytes.into()))
    }

    /// The packed bytes, to ship in a message and rebuild with
    /// [`RemoteKey::from_bytes`].
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for RemoteKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemoteKey(")?;
        for b in self.0.iter() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// Bytes of the integrity tag that ends every sealed key.
pub(crate) const SEAL_BYTES: usize = 8;

/// A rank's secret for sealing the keys of its windows: drawn at random when
/// the rank starts and published with its address, so that every peer can
/// check a key's tag before it trusts anything the key says.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeySecret([u8; KeySecret::BYTES]);

impl KeySecret {
    /// Bytes of a secret as published in the directory.
    pub(crate) const BYTES: usize = 16;

    /// A fresh secret from the kernel's random source.
    pub(crate) fn draw() -> KeySecret {
        let mut bytes = [0u8; KeySecret::BYTES];
        bytes[..8].copy_from_slice(&crate::os::random_u64().to_le_bytes());
        bytes[8..].copy_from_slice(&crate::os::random_u64().to_le_bytes());
        KeySecret(bytes)
    }

    /// The secret a peer published.
    pub(crate) fn from_bytes(bytes: [u8; KeySecret::BYTES]) -> KeySecret {
        KeySecret(bytes)
    }

    /// The bytes to publish.
    pub(crate) fn to_bytes(self) -> [u8; KeySecret::BYTES] {
        self.0
    }

    /// SipHash-2-4 of `body` under this secret.
    fn tag(&self, body: &[u8]) -> [u8; SEAL_BYTES] {
        use std::hash::Hasher;
        let mut hasher = siphasher::sip::SipHasher24::new_with_key(&self.0);
        hasher.write(body);
        hasher.finish().to_le_bytes()
    }

    /// `body` followed by its tag.
    pub(crate) fn seal(&self, body: &[u8]) -> crate::Result<RemoteKey> {
        let mut bytes = body.to_vec();
        bytes.extend_from_slice(&self.tag(body));
        RemoteKey::from_bytes(&bytes)
    }

    /// The body of `key` if its tag is this secret's, else `InvalidKey`: a
    /// corrupted or forged key is refused before any field of it is used.
    pub(crate) fn open<'k>(&self, key: &'k RemoteKey, what: &str) -> crate::Result<&'k [u8]> {
        let bytes = key.as_bytes();
        let refused =
            || crate::Error::InvalidKey(format!("{what}: the tag does not match {key:?}"));
        let split = bytes.len().checked_sub(SEAL_BYTES).ok_or_else(refused)?;
        let (body, tag) = bytes.split_at(split);
        // Every byte is compared, so timing does not say how much matched.
        let diff = self
            .tag(body)
            .iter()
            .zip(tag)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(refused());
        }
        Ok(body)
    }
}

impl std::fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeySecret(..)")
    }
}
