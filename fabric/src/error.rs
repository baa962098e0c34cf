//! Typed errors of the transport: every failed wait, bad argument or lost peer
//! maps to one variant, so callers can react instead of parsing strings.

use crate::Rank;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("timed out waiting for {what}")]
    Timeout { what: &'static str },
    #[error("peer rank {rank} is gone (the process exited or was killed)")]
    PeerGone { rank: Rank },
    #[error("access of {len} bytes at offset {offset} is outside a window of {window_len} bytes")]
    OutOfBounds {
        offset: usize,
        len: usize,
        window_len: usize,
    },
    #[error("offset {offset} of a signal or atomic word is not 8-byte aligned")]
    Misaligned { offset: usize },
    #[error("rank {rank} does not exist in a job of {size} ranks")]
    InvalidRank { rank: Rank, size: u32 },
    #[error("invalid remote key: {0}")]
    InvalidKey(String),
    #[error("window is no longer exposed by rank {rank} (it was freed)")]
    WindowFreed { rank: Rank },
    #[error("messaging protocol failure: {0}")]
    Protocol(String),
    /// A call into a fabric library failed; `message` is the library's own
    /// (`fi_strerror`, `fi_cq_strerror`, `ucs_status_string`).
    #[error("{library} {call} failed: {message}")]
    Fabric {
        library: &'static str,
        call: &'static str,
        message: String,
    },
    /// The provider (or libfabric provider, or UCX transport) asked for
    /// cannot run here.
    #[error("provider {requested} is unavailable: {why}; available here: {available}")]
    Unavailable {
        requested: String,
        why: String,
        available: String,
    },
    #[error("bootstrap failed: {0}")]
    Bootstrap(String),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}
