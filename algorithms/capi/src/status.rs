//! The error codes every C function returns, their texts, and the last
//! error's full message (per thread, as `errno` is).

use std::cell::RefCell;
use std::ffi::{c_char, c_int, CStr, CString};

use catena_algorithms::{Error, GroupMapError};
use catena_fabric::Error as FabricError;

/// The call succeeded.
pub const CATENA_SUCCESS: c_int = 0;
/// An argument is unusable: a NULL pointer, a size out of range, an unknown
/// name, a rank outside the communicator.
pub const CATENA_ERR_ARG: c_int = 1;
/// A handle that is not a live one of this library: freed, forged, or from
/// before the last `catena_finalize`.
pub const CATENA_ERR_HANDLE: c_int = 2;
/// catena is not initialized (on this thread), or already is.
pub const CATENA_ERR_STATE: c_int = 3;
/// A member did not take part in time.
pub const CATENA_ERR_TIMEOUT: c_int = 4;
/// A member's process is gone.
pub const CATENA_ERR_PEER_GONE: c_int = 5;
/// Members passed arguments that must agree but do not (sizes, roots,
/// color or key kinds).
pub const CATENA_ERR_MISMATCH: c_int = 6;
/// A user callback misbehaved (a comparator that is not a total order).
pub const CATENA_ERR_USER: c_int = 7;
/// No provider could start (see the last error for what is available).
pub const CATENA_ERR_UNAVAILABLE: c_int = 8;
/// The transport or a peer failed in another way.
pub const CATENA_ERR_TRANSPORT: c_int = 9;
/// A bug in catena (a caught panic); the message says where.
pub const CATENA_ERR_INTERNAL: c_int = 10;
/// A receive buffer is too small (on some member; every member is told).
pub const CATENA_ERR_TRUNCATE: c_int = 11;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// A failed call: its code and message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub code: c_int,
    pub message: String,
}

impl Failure {
    pub(crate) fn new(code: c_int, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub(crate) fn arg(message: impl Into<String>) -> Failure {
        Failure::new(CATENA_ERR_ARG, message)
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        let code = match &e {
            Error::Transport(t) => fabric_code(t),
            Error::Mismatch { .. } => CATENA_ERR_MISMATCH,
            Error::UserCode { .. } => CATENA_ERR_USER,
            Error::ReceiveOverflow { .. } => CATENA_ERR_TRUNCATE,
            _ => CATENA_ERR_ARG,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<GroupMapError> for Failure {
    fn from(e: GroupMapError) -> Failure {
        Failure::arg(e.to_string())
    }
}

impl From<FabricError> for Failure {
    fn from(e: FabricError) -> Failure {
        Failure::new(fabric_code(&e), e.to_string())
    }
}

fn fabric_code(e: &FabricError) -> c_int {
    match e {
        FabricError::Timeout { .. } => CATENA_ERR_TIMEOUT,
        FabricError::PeerGone { .. } => CATENA_ERR_PEER_GONE,
        FabricError::Unavailable(_) | FabricError::Bootstrap(_) => CATENA_ERR_UNAVAILABLE,
        FabricError::InvalidRank { .. } => CATENA_ERR_ARG,
        _ => CATENA_ERR_TRANSPORT,
    }
}

/// Records `failure` as this thread's last error; returns its code.
pub(crate) fn record(failure: Failure) -> c_int {
    // A message with a NUL in it is cut there rather than lost.
    let text = failure.message.split('\0').next().unwrap_or_default();
    let text = CString::new(text).unwrap_or_default();
    LAST_ERROR.with(|last| *last.borrow_mut() = text);
    failure.code
}

/// The text of an error code (a static string).
#[no_mangle]
pub extern "C" fn catena_strerror(code: c_int) -> *const c_char {
    let text: &'static CStr = match code {
        CATENA_SUCCESS => c"success",
        CATENA_ERR_ARG => c"invalid argument",
        CATENA_ERR_HANDLE => c"invalid handle",
        CATENA_ERR_STATE => c"catena is not initialized, or already is",
        CATENA_ERR_TIMEOUT => c"timed out",
        CATENA_ERR_PEER_GONE => c"a peer process is gone",
        CATENA_ERR_MISMATCH => c"processes passed arguments that disagree",
        CATENA_ERR_USER => c"a user callback misbehaved",
        CATENA_ERR_UNAVAILABLE => c"no provider could start",
        CATENA_ERR_TRANSPORT => c"transport failure",
        CATENA_ERR_INTERNAL => c"internal error",
        CATENA_ERR_TRUNCATE => c"a receive buffer is too small",
        _ => c"unknown error code",
    };
    text.as_ptr()
}

/// The full message of the last error on this thread ("" if none), valid
/// until the next failing call on this thread.
#[no_mangle]
pub extern "C" fn catena_last_error() -> *const c_char {
    LAST_ERROR.with(|last| last.borrow().as_ptr())
}
