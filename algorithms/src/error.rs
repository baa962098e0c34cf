//! Errors of the group algorithms: the transport's, plus what a collective
//! call can get wrong (arguments that differ across processes, user code
//! that panics, payloads that do not decode).

/// What every collective call returns; the error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a collective call failed on this process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed a send, receive or setup step under the call.
    #[error(transparent)]
    Transport(#[from] catena_fabric::Error),
    /// Processes of one collective call passed arguments that must agree but
    /// do not (color or key types, algorithm, split or reorder mode, root).
    #[error("processes disagree on {what}")]
    Mismatch {
        /// Which argument differed, in words.
        what: String,
    },
    /// A user operation or comparator panicked (on this process, or in a
    /// split on another one), or a split's comparator proved not to be a
    /// total order (it answers inconsistently, or differently on different
    /// processes); what happened.
    #[error("user code panicked in {what}: {message}")]
    UserCode {
        /// Which user code panicked (e.g. the reduce operation).
        what: &'static str,
        /// The panic payload if it was a string, else a placeholder.
        message: String,
    },
    /// A payload could not be encoded, or a peer's could not be decoded.
    #[error("cannot {action} {what}: {message}")]
    Codec {
        /// Whether encoding or decoding failed.
        action: &'static str,
        /// The kind of payload (e.g. "a color", "a bcast value").
        what: &'static str,
        /// The codec's error message.
        message: String,
    },
    /// An argument is unusable on this process alone (e.g. a chain rank not
    /// below its size, an unknown split algorithm); carries the explanation.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A group map refused a lookup or could not be built (e.g. a group
    /// rank past its size, a group drawn from another world).
    #[error(transparent)]
    GroupMap(#[from] catena_groupmap::GroupMapError),
    /// An alltoall's route function sent an element to a rank outside the
    /// group; reported alike on every process, before anything moves.
    #[error(
        "group rank {process} routed an element to rank {target}, outside the group of {size}"
    )]
    TargetOutOfRange {
        /// The rank asked for.
        target: u32,
        /// The group's size.
        size: u32,
        /// The group rank whose route function asked for it (the lowest,
        /// if several did).
        process: u32,
    },
    /// An alltoall would deliver more elements to some process than its
    /// receive capacity; every process fails alike before anything moves,
    /// and each learns what it alone needs, to resize and call again.
    #[error(
        "an alltoall's receive capacity is too small on group rank {process}; \
         this process needs {required} and has room for {capacity}"
    )]
    ReceiveOverflow {
        /// Elements this process would receive.
        required: u64,
        /// Elements this process has room for.
        capacity: u64,
        /// The lowest group rank that lacks room.
        process: u32,
    },
    /// A neighbourhood alltoall (a plan with listed sources and targets)
    /// failed because a neighbour's call did: a listed target refused it
    /// (no room, or a fault among its sources) or a source abandoned it.
    #[error("an alltoall neighbour failed: {0}")]
    Neighbourhood(String),
    /// A call went past the rounds (or sub-calls) its tags provide, which
    /// no consistent chain needs; its tags would have been another call's.
    #[error("a collective call reached round {round}; its tags cover {limit}")]
    Rounds {
        /// The round (or number of sub-calls) asked for.
        round: u32,
        /// The rounds (or sub-calls) the call reserved.
        limit: u32,
    },
}

/// Runs user code (an operation, a comparator), turning a panic into
/// `Error::UserCode` so a bad comparator fails the call instead of the process.
pub(crate) fn user_code<R>(what: &'static str, f: impl FnOnce() -> R) -> Result<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string panic".into());
        Error::UserCode { what, message }
    })
}
