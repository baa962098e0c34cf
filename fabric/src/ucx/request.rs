//! UCP requests this rank waits on: the status-pointer decoding UCX does in
//! macros, a request that is freed exactly once, and the reply of a fetching
//! atomic, which must stay valid until UCX is done writing it even if the
//! waiting future is dropped.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

use catena_ucx_sys as sys;
use sys::ucs_status_t;

use super::context::fabric_error;
use crate::{Error, Rank, Result};

/// What a non-blocking call returned: done at once, or a request in flight.
/// `UCS_PTR_IS_ERR` / `UCS_PTR_STATUS` of `ucs/type/status.h`, in Rust.
pub(crate) fn posted(call: &'static str, ptr: sys::ucs_status_ptr_t) -> Result<Option<Request>> {
    decode(ptr).map_err(|status| fabric_error(call, status))
}

/// [`posted`] for an operation on `target`'s endpoint: a status that says
/// the peer is unreachable is `PeerGone`.
pub(crate) fn posted_to(
    call: &'static str,
    ptr: sys::ucs_status_ptr_t,
    target: Rank,
) -> Result<Option<Request>> {
    decode(ptr).map_err(|status| match peer_failed(status) {
        true => Error::PeerGone { rank: target },
        false => fabric_error(call, status),
    })
}

/// Whether an operation ended with `status` because its peer is unreachable
/// (UCX may not have called the endpoint's error callback yet).
pub(crate) fn peer_failed(status: ucs_status_t) -> bool {
    [
        ucs_status_t::UCS_ERR_ENDPOINT_TIMEOUT,
        ucs_status_t::UCS_ERR_CONNECTION_RESET,
        ucs_status_t::UCS_ERR_UNREACHABLE,
    ]
    .contains(&status)
}

fn decode(ptr: sys::ucs_status_ptr_t) -> std::result::Result<Option<Request>, ucs_status_t> {
    let raw = ptr as usize;
    if raw == 0 {
        return Ok(None);
    }
    // Errors are small negative numbers cast to pointers.
    if raw >= (ucs_status_t::UCS_ERR_LAST.0 as isize) as usize {
        return Err(ucs_status_t(raw as isize as i8));
    }
    Ok(Some(Request(
        NonNull::new(ptr).expect("a non-null, non-error status pointer"),
    )))
}

/// A request UCP returned; freed on drop (UCP releases one still in flight
/// when it completes).
pub(crate) struct Request(NonNull<c_void>);

impl Request {
    /// `None` while in flight, else the final status.
    pub(crate) fn status(&self) -> Option<ucs_status_t> {
        // SAFETY: the request is live until dropped.
        let status = unsafe { sys::ucp_request_check_status(self.0.as_ptr()) };
        (status != ucs_status_t::UCS_INPROGRESS).then_some(status)
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        // SAFETY: a request UCP returned, freed once.
        unsafe { sys::ucp_request_free(self.0.as_ptr()) };
    }
}

const PENDING: i32 = i32::MIN;

/// Where a fetching atomic's old value lands. UCP writes `value` and then
/// runs `reply_done`, possibly on the progress thread: the release store of
/// `state` publishes `value` to the waiting thread.
struct Reply {
    state: AtomicI32,
    value: UnsafeCell<u64>,
}

/// A fetching atomic: its reply buffer, shared with UCP, and its request
/// while in flight. Dropped in flight, it leaks the 16-byte buffer, which
/// UCP may still write.
pub(crate) struct FetchOp {
    reply: NonNull<Reply>,
    request: Option<Request>,
}

impl FetchOp {
    /// Posts an operation through `post(buffer, user_data)`; `operand` is
    /// the initial content of the reply buffer.
    pub(crate) fn post(
        call: &'static str,
        operand: u64,
        post: impl FnOnce(*mut c_void, *mut c_void) -> sys::ucs_status_ptr_t,
    ) -> Result<FetchOp> {
        let reply = Box::new(Reply {
            state: AtomicI32::new(PENDING),
            value: UnsafeCell::new(operand),
        });
        let mut op = FetchOp {
            reply: NonNull::from(Box::leak(reply)),
            request: None,
        };
        // SAFETY: the Reply lives until `op` is dropped (or forever).
        let buffer = unsafe { op.reply.as_ref() }.value.get().cast();
        op.request = posted(call, post(buffer, op.reply.as_ptr().cast()))?;
        Ok(op)
    }

    /// The old value once the operation completed.
    pub(crate) fn poll(&self) -> Option<Result<u64>> {
        // SAFETY: the Reply lives as long as `self`.
        let reply = unsafe { self.reply.as_ref() };
        if self.request.is_some() {
            match reply.state.load(Ordering::Acquire) {
                PENDING => return None,
                s if s != i32::from(ucs_status_t::UCS_OK.0) => {
                    return Some(Err(fabric_error(
                        "ucp_atomic_op_nbx",
                        ucs_status_t(s as i8),
                    )))
                }
                _ => {}
            }
        }
        // SAFETY: UCP wrote the value before completing (the acquire load
        // above, or the immediate return of the call) and writes no more.
        Some(Ok(unsafe { *reply.value.get() }))
    }
}

impl Drop for FetchOp {
    fn drop(&mut self) {
        // SAFETY: the Reply is live until freed below.
        let done = unsafe { self.reply.as_ref() }.state.load(Ordering::Acquire) != PENDING;
        let in_flight = self.request.is_some() && !done;
        self.request = None;
        if !in_flight {
            // SAFETY: made by Box::leak in `post`; UCP no longer uses it.
            drop(unsafe { Box::from_raw(self.reply.as_ptr()) });
        }
    }
}

/// The completion callback of fetching atomics (`user_data` is a `Reply`).
pub(crate) unsafe extern "C" fn reply_done(
    _request: *mut c_void,
    status: ucs_status_t,
    user_data: *mut c_void,
) {
    // SAFETY: user_data is the Reply given with the operation; it is freed
    // only after this callback ran, or never.
    let reply = unsafe { &*user_data.cast::<Reply>() };
    reply.state.store(i32::from(status.0), Ordering::Release);
}
