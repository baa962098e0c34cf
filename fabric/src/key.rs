//! Remote keys: the compact, provider-packed handle a peer needs to put into
//! a window. Keys are plain bytes so algorithms can ship them in messages.

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
