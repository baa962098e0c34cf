//! Errors of the group algorithms: the transport's, plus what a collective
//! call can get wrong (arguments that differ across processes, user code
//! that panics, payloads that do not decode).

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error(transparent)]
    Transport(#[from] catena_fabric::Error),
    /// Processes of one collective call passed arguments that must agree but
    /// do not (color or key types, algorithm, split or reorder mode, root).
    #[error("processes disagree on {what}")]
    Mismatch { what: String },
    /// A user operation or comparator panicked; its message.
    #[error("user code panicked in {what}: {message}")]
    UserCode { what: &'static str, message: String },
    /// A payload could not be encoded, or a peer's could not be decoded.
    #[error("cannot {action} {what}: {message}")]
    Codec {
        action: &'static str,
        what: &'static str,
        message: String,
    },
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
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
