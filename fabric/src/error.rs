//! Typed errors of the transport: every failed wait, bad argument or lost peer
//! maps to one variant, so callers can react instead of parsing strings.

use crate::Rank;

/// The result of every fallible transport call; the error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a transport call failed. Non-exhaustive: providers may add causes;
/// match the variants you react to and treat the rest as fatal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A blocking call was made inside an async call that catena's executor
    /// is already running on this thread: it could not return before the
    /// outer call went on, and that may wait for it.
    #[error("a blocking call inside an async call of catena's executor; await its i-form instead")]
    BlockingInAsync,
    /// A wait (receive, send slot, put completion, barrier) passed its deadline
    /// before the awaited event happened.
    #[error("timed out waiting for {what}")]
    Timeout {
        /// What was being waited for, e.g. "a message" or "the barrier".
        what: &'static str,
    },
    /// The bootstrap or provider saw a peer process exit or die; operations
    /// involving it cannot complete.
    #[error("peer rank {rank} is gone (the process exited or was killed)")]
    PeerGone {
        /// The rank that was lost.
        rank: Rank,
    },
    /// A put, read or atomic would touch bytes past the end of its window.
    #[error("access of {len} bytes at offset {offset} is outside a window of {window_len} bytes")]
    OutOfBounds {
        /// Byte offset of the access into the window.
        offset: usize,
        /// Length of the access in bytes.
        len: usize,
        /// Size of the window in bytes.
        window_len: usize,
    },
    /// A window larger than the contract allows was asked for.
    #[error("a window of {len} bytes is larger than the {max} bytes a window may have")]
    WindowTooLarge {
        /// The length asked for, in bytes.
        len: usize,
        /// [`MAX_WINDOW_BYTES`](crate::bounds::MAX_WINDOW_BYTES).
        max: usize,
    },
    /// A signal or atomic targets a word whose offset is not a multiple of 8.
    #[error("offset {offset} of a signal or atomic word is not 8-byte aligned")]
    Misaligned {
        /// The offending byte offset into the window.
        offset: usize,
    },
    /// A message was longer than the buffer a receive gave it; the
    /// message was taken, and nothing written.
    #[error("a {len}-byte message from rank {from} does not fit a {room}-byte receive buffer")]
    Truncated {
        /// The rank that sent it.
        from: Rank,
        /// The message's length in bytes.
        len: usize,
        /// The buffer's length in bytes.
        room: usize,
    },
    /// A call named a rank that is not in `0..size`.
    #[error("rank {rank} does not exist in a job of {size} ranks")]
    InvalidRank {
        /// The rank that was asked for.
        rank: Rank,
        /// The number of ranks in the job.
        size: u32,
    },
    /// A remote key is malformed, belongs to another provider or rank, or no
    /// longer matches the window it names; the text says which.
    #[error("invalid remote key: {0}")]
    InvalidKey(String),
    /// The target window was freed by its owner before (or while) it was
    /// accessed through a remote key.
    #[error("window is no longer exposed by rank {rank} (it was freed)")]
    WindowFreed {
        /// The rank that owned the window.
        rank: Rank,
    },
    /// Host memory was asked of a rank on another host (only the ranks of
    /// one host share memory).
    #[error("rank {rank} does not share this host's memory")]
    NotOnHost {
        /// The rank asked for.
        rank: Rank,
    },
    /// This process's host arena has no room for a region that large
    /// (`CATENA_HOST_ARENA_BYTES` sets its size).
    #[error("the host arena of {arena} bytes has no room for a region of {requested} more bytes (CATENA_HOST_ARENA_BYTES)")]
    ArenaFull {
        /// The bytes asked for.
        requested: u64,
        /// The arena's size.
        arena: u64,
    },
    /// Messaging or window bookkeeping cannot go on: a peer broke the eager
    /// protocol, an earlier send dropped half-way broke the stream, window
    /// ids ran out, or a conformance check failed; the text says which.
    #[error("messaging protocol failure: {0}")]
    Protocol(String),
    /// A call into a fabric library failed (see [`FabricFailure`]).
    #[error(transparent)]
    Fabric(Box<FabricFailure>),
    /// The provider (or libfabric provider, or UCX transport) asked for
    /// cannot run here (see [`Unavailable`]).
    #[error(transparent)]
    Unavailable(Box<Unavailable>),
    /// Starting the job failed: a missing or malformed launcher setting, a
    /// corrupt directory entry, or a failed exchange between ranks.
    #[error("bootstrap failed: {0}")]
    Bootstrap(String),
    /// An OS call (shared memory, files, sockets) failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. the path being opened.
        context: String,
        /// The underlying OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A call into a fabric library that failed: [`Error::Fabric`]'s details,
/// boxed so that every `Result` of the transport stays small (it is
/// returned through every layer of a message's path).
#[derive(Debug, thiserror::Error)]
#[error("{library} {call} failed: {message}")]
pub struct FabricFailure {
    /// The library that failed, e.g. "libfabric" or "UCX".
    pub library: &'static str,
    /// The library function that returned the error.
    pub call: &'static str,
    /// The library's own description of the failure (`fi_strerror`,
    /// `fi_cq_strerror`, `ucs_status_string`).
    pub message: String,
}

/// A provider that cannot run here: [`Error::Unavailable`]'s details,
/// boxed as [`FabricFailure`] is.
#[derive(Debug, thiserror::Error)]
#[error("provider {requested} is unavailable: {why}; available here: {available}")]
pub struct Unavailable {
    /// The provider that was asked for.
    pub requested: String,
    /// Why it cannot run here.
    pub why: String,
    /// What could run here instead (providers or transports), comma-separated.
    pub available: String,
}

impl Error {
    /// An [`Error::Io`] saying what was being done (`context`) when `source`
    /// happened.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every transport call's `Result` is returned through each layer of a
    /// message's path: a variant that grows the error (three `String`s made
    /// it 72 bytes) belongs in a box.
    #[test]
    fn errors_stay_small() {
        assert!(std::mem::size_of::<Error>() <= 32);
        assert!(std::mem::size_of::<Result<()>>() <= 32);
    }
}
