//! libfabric's error reporting turned into catena's: a failed call becomes
//! `Error::Fabric` carrying the library's own text (`fi_strerror`), so users
//! see what the provider said rather than a bare errno.

use std::ffi::CStr;

use catena_ofi_sys as sys;

use crate::{Error, Result};

/// The library's text for a (positive) libfabric error code.
pub(crate) fn strerror(code: i32) -> String {
    // SAFETY: fi_strerror returns a pointer to a static, NUL-terminated string
    // for every code (unknown ones included).
    unsafe { CStr::from_ptr(sys::fi_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

/// `Error::Fabric` for a call that returned the negative code `ret`.
pub(crate) fn fabric_error(call: &'static str, ret: isize) -> Error {
    let code = i32::try_from(ret.unsigned_abs()).unwrap_or(i32::MAX);
    Error::Fabric(Box::new(crate::FabricFailure {
        library: "libfabric",
        call,
        message: format!("{} ({code})", strerror(code)),
    }))
}

/// A libfabric return value: `int` from setup calls, `ssize_t` from data calls.
pub(crate) trait Ret: Copy {
    fn widen(self) -> isize;
}

impl Ret for i32 {
    fn widen(self) -> isize {
        self as isize
    }
}

impl Ret for isize {
    fn widen(self) -> isize {
        self
    }
}

/// `Ok` for a libfabric return of zero or more, `Error::Fabric` otherwise.
pub(crate) fn check(call: &'static str, ret: impl Ret) -> Result<()> {
    let ret = ret.widen();
    if ret < 0 {
        Err(fabric_error(call, ret))
    } else {
        Ok(())
    }
}

/// Whether a posting call returned `-FI_EAGAIN` (queue full: make progress
/// and post again).
pub(crate) fn is_again(ret: isize) -> bool {
    ret == -(sys::FI_EAGAIN as isize)
}
