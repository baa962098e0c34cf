//! The boundary every C call crosses: this thread's instance, panics and
//! failures turned into error codes, and the checks of C's pointers, sizes
//! and ranks before Rust trusts them.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::catena_comm_t;
use crate::handles::Handle;
use crate::instance::Api;
use crate::operation::Operation;
use crate::status::{self, Failure, CATENA_ERR_INTERNAL, CATENA_ERR_STATE, CATENA_SUCCESS};

thread_local! {
    pub(crate) static INSTANCE: RefCell<Option<Box<dyn Api>>> = const { RefCell::new(None) };
}

/// Runs `body` as one C call: its failure (or panic) becomes an error code
/// and this thread's last error.
pub(crate) fn call(body: impl FnOnce() -> Result<(), Failure>) -> c_int {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => CATENA_SUCCESS,
        Ok(Err(failure)) => status::record(failure),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            status::record(Failure::new(
                CATENA_ERR_INTERNAL,
                format!("catena bug: {message}"),
            ))
        }
    }
}

/// `body` on this thread's instance.
pub(crate) fn with_instance<R>(
    body: impl FnOnce(&mut dyn Api) -> Result<R, Failure>,
) -> Result<R, Failure> {
    INSTANCE.with(|cell| {
        let mut instance = cell.try_borrow_mut().map_err(|_| {
            Failure::new(
                CATENA_ERR_STATE,
                "catena was called from one of its own callbacks",
            )
        })?;
        let instance = instance.as_mut().ok_or_else(|| {
            Failure::new(
                CATENA_ERR_STATE,
                "catena is not initialized on this thread (catena_init)",
            )
        })?;
        body(instance.as_mut())
    })
}

/// Runs the operation `build` makes of a call's arguments to completion on
/// this thread's instance: a blocking call. The instance is found first, so
/// a call from a callback is `CATENA_ERR_STATE` whatever its arguments.
pub(crate) fn run<'a>(
    build: impl FnOnce(&dyn Api) -> Result<Operation<'a>, Failure>,
) -> Result<(), Failure> {
    with_instance(|i| {
        let operation = build(i)?;
        i.run(operation)
    })
}

pub(crate) fn comm_arg(comm: *const catena_comm_t) -> Result<Handle, Failure> {
    Handle::from_ptr(comm).ok_or_else(|| Failure::arg("the communicator is NULL"))
}

/// Runs `query` as one C call and stores its answer at `out`.
///
/// # Safety
/// `out` is NULL or valid for a write.
pub(crate) unsafe fn answer<T>(
    out: *mut T,
    what: &str,
    query: impl FnOnce() -> Result<T, Failure>,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(out, what) }?;
        *out = query()?;
        Ok(())
    })
}

/// # Safety
/// `out` is NULL or valid for a write.
pub(crate) unsafe fn out_arg<'a, T>(out: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: per this function's contract.
    unsafe { out.as_mut() }.ok_or_else(|| Failure::arg(format!("{what} is NULL")))
}

/// # Safety
/// `data` is NULL or valid for `len` bytes of reads.
pub(crate) unsafe fn bytes_arg<'a>(
    data: *const c_void,
    len: usize,
    what: &str,
) -> Result<&'a [u8], Failure> {
    if len == 0 {
        return Ok(&[]);
    }
    if data.is_null() || len > isize::MAX as usize {
        return Err(Failure::arg(format!("{what}: NULL or {len} bytes")));
    }
    // SAFETY: per this function's contract, checked non-null above.
    Ok(unsafe { std::slice::from_raw_parts(data.cast(), len) })
}

/// # Safety
/// `data` is NULL or valid for `len` bytes of writes.
pub(crate) unsafe fn bytes_mut_arg<'a>(
    data: *mut c_void,
    len: usize,
    what: &str,
) -> Result<&'a mut [u8], Failure> {
    if len == 0 {
        return Ok(&mut []);
    }
    if data.is_null() || len > isize::MAX as usize {
        return Err(Failure::arg(format!("{what}: NULL or {len} bytes")));
    }
    // SAFETY: per this function's contract, checked non-null above.
    Ok(unsafe { std::slice::from_raw_parts_mut(data.cast(), len) })
}

/// A receive buffer as C passed it, checked once the operation knows its
/// length and whether this member receives at all (elsewhere it may be
/// NULL, as MPI's non-root buffers may).
pub(crate) struct RecvBuffer<'a> {
    data: *mut c_void,
    writable: PhantomData<&'a mut [u8]>,
}

impl<'a> RecvBuffer<'a> {
    /// # Safety
    /// `data` is NULL or valid for writes, for `'a`, of as many bytes as
    /// [`RecvBuffer::take`] is asked for (where this member receives).
    pub(crate) unsafe fn new(data: *mut c_void) -> RecvBuffer<'a> {
        RecvBuffer {
            data,
            writable: PhantomData,
        }
    }

    /// The buffer as `len` bytes, where this member receives.
    pub(crate) fn take(self, len: usize) -> Result<&'a mut [u8], Failure> {
        // SAFETY: per `new`'s contract.
        unsafe { bytes_mut_arg(self.data, len, "recvbuf") }
    }
}

pub(crate) fn rank_from_c(rank: c_int, what: &str) -> Result<u32, Failure> {
    u32::try_from(rank).map_err(|_| Failure::arg(format!("{what} {rank} is negative")))
}

/// `rank`, checked to be below `size` (a rank of a communicator, or of the
/// world).
pub(crate) fn rank_arg(rank: u32, size: u32, what: &str) -> Result<u32, Failure> {
    if rank < size {
        Ok(rank)
    } else {
        Err(Failure::arg(format!(
            "{what} {rank} is not below the size {size}"
        )))
    }
}

pub(crate) fn int_to_c(value: u32) -> c_int {
    c_int::try_from(value).unwrap_or(c_int::MAX)
}

/// Byte counts of `count` elements of `size` bytes, checked.
pub(crate) fn element_bytes(count: usize, size: usize) -> Result<usize, Failure> {
    count
        .checked_mul(size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| Failure::arg(format!("{count} elements of {size} bytes")))
}
