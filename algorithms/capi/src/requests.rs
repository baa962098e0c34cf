//! Nonblocking forms of the creation and collective calls, for a vendor's
//! progress engine: `*_post` starts one (taking its place in call order, as
//! the blocking call would) and returns a request; `catena_request_test`
//! progresses it and says when it is done; `catena_request_wait` blocks.

use std::ffi::{c_int, c_void};

use crate::boundary::{call, comm_arg, out_arg, with_instance};
use crate::collectives::{bcast, gather, reduce};
use crate::comm::{bytes_color, catena_compare_fn, compared, dup, int_color, split};
use crate::groups::create_group;
use crate::handles::Handle;
use crate::instance::Api;
use crate::operation::{Operation, SplitKey};
use crate::ops::{catena_user_op_fn, Reduction};
use crate::status::Failure;
use crate::{catena_comm_t, catena_group_t};

/// A nonblocking operation in flight. Handles are never dereferenced.
pub struct catena_request_t {
    _private: [u8; 0],
}

/// Starts the operation `build` makes of a call's arguments as a request,
/// stored at `request`. The instance is found before the arguments are
/// checked, as by a blocking call.
///
/// # Safety
/// `request` is NULL or valid for a write.
pub(crate) unsafe fn post(
    request: *mut *mut catena_request_t,
    build: impl FnOnce(&dyn Api) -> Result<Operation<'static>, Failure>,
) -> Result<(), Failure> {
    // SAFETY: per this function's contract.
    let out = unsafe { out_arg(request, "request") }?;
    let posted = with_instance(|i| {
        let operation = build(i)?;
        i.post(operation)
    })?;
    *out = posted.to_ptr();
    Ok(())
}

/// `catena_comm_split`, nonblocking: `*newcomm` is written when the
/// request is done.
///
/// # Safety
/// `newcomm` stays valid for a write until the request is done; `request`
/// is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split_post(
    comm: *const catena_comm_t,
    color: i64,
    key: i64,
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            split(comm, int_color(color), SplitKey::Int(key), newcomm)
        })
    })
}

/// `catena_comm_split_bytes`, nonblocking: the color is read at the post.
///
/// # Safety
/// As `catena_comm_split_bytes`, with `newcomm` valid until the request is
/// done; `request` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split_bytes_post(
    comm: *const catena_comm_t,
    color: *const c_void,
    color_len: usize,
    key: i64,
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            let color = bytes_color(color, color_len)?;
            split(comm, color, SplitKey::Int(key), newcomm)
        })
    })
}

/// `catena_comm_split_compare`, nonblocking: the color and key are read at
/// the post; `compare` may be called until the request is done.
///
/// # Safety
/// As `catena_comm_split_compare`, with `compare`, `ctx` and `newcomm`
/// valid until the request is done; `request` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split_compare_post(
    comm: *const catena_comm_t,
    color: *const c_void,
    color_len: usize,
    key: *const c_void,
    key_len: usize,
    compare: catena_compare_fn,
    ctx: *mut c_void,
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            let (color, key) = compared(color, color_len, key, key_len, compare, ctx)?;
            split(comm, color, key, newcomm)
        })
    })
}

/// `catena_comm_dup`, nonblocking.
///
/// # Safety
/// `newcomm` stays valid for a write until the request is done; `request`
/// is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_dup_post(
    comm: *const catena_comm_t,
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe { post(request, |_| dup(comm, newcomm)) })
}

/// `catena_comm_create_group`, nonblocking (members only).
///
/// # Safety
/// As `catena_comm_split_post`.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_create_group_post(
    comm: *const catena_comm_t,
    group: *const catena_group_t,
    tag: c_int,
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe { post(request, |_| create_group(comm, group, tag, newcomm)) })
}

/// `catena_barrier`, nonblocking.
///
/// # Safety
/// `request` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_barrier_post(
    comm: *const catena_comm_t,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract.
    call(|| unsafe {
        post(request, |_| {
            Ok(Operation::Barrier {
                comm: comm_arg(comm)?,
            })
        })
    })
}

/// `catena_bcast`, nonblocking: the root's buffer is read at the post,
/// every member's written when the request is done.
///
/// # Safety
/// `buffer` stays valid for `bytes` bytes until the request is done.
#[no_mangle]
pub unsafe extern "C" fn catena_bcast_post(
    comm: *const catena_comm_t,
    buffer: *mut c_void,
    bytes: usize,
    root: c_int,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe { post(request, |_| bcast(comm, buffer, bytes, root)) })
}

/// `catena_allreduce`, nonblocking.
///
/// # Safety
/// `sendbuf` is valid for `count` elements of `datatype` at the post,
/// `recvbuf` until the request is done.
#[no_mangle]
pub unsafe extern "C" fn catena_allreduce_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    request: *mut *mut catena_request_t,
) -> c_int {
    let reduction = Reduction::Builtin { datatype, op };
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            reduce(comm, sendbuf, recvbuf, count, reduction, None)
        })
    })
}

/// `catena_reduce`, nonblocking (`recvbuf` at the root only).
///
/// # Safety
/// As `catena_allreduce_post`.
#[no_mangle]
pub unsafe extern "C" fn catena_reduce_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    request: *mut *mut catena_request_t,
) -> c_int {
    let reduction = Reduction::Builtin { datatype, op };
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            reduce(comm, sendbuf, recvbuf, count, reduction, Some(root))
        })
    })
}

/// `catena_allreduce_user`, nonblocking.
///
/// # Safety
/// As `catena_allreduce_post`, for `count * elem_size` bytes; `op` may be
/// called with `ctx` until the request is done.
#[no_mangle]
pub unsafe extern "C" fn catena_allreduce_user_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    elem_size: usize,
    op: catena_user_op_fn,
    ctx: *mut c_void,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            let reduction = Reduction::user(op, ctx, elem_size)?;
            reduce(comm, sendbuf, recvbuf, count, reduction, None)
        })
    })
}

/// `catena_reduce_user`, nonblocking (`recvbuf` at the root only).
///
/// # Safety
/// As `catena_allreduce_user_post`.
#[no_mangle]
pub unsafe extern "C" fn catena_reduce_user_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    elem_size: usize,
    op: catena_user_op_fn,
    ctx: *mut c_void,
    root: c_int,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            let reduction = Reduction::user(op, ctx, elem_size)?;
            reduce(comm, sendbuf, recvbuf, count, reduction, Some(root))
        })
    })
}

/// `catena_gather`, nonblocking.
///
/// # Safety
/// As `catena_gather`; `recvbuf` until the request is done.
#[no_mangle]
pub unsafe extern "C" fn catena_gather_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    root: c_int,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            gather(comm, sendbuf, bytes, recvbuf, Some(root))
        })
    })
}

/// `catena_allgather`, nonblocking.
///
/// # Safety
/// As `catena_allgather`; `recvbuf` until the request is done.
#[no_mangle]
pub unsafe extern "C" fn catena_allgather_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe { post(request, |_| gather(comm, sendbuf, bytes, recvbuf, None)) })
}

/// Progresses `*request`; `*done` is 1 once it is done, and then the
/// request is freed and `*request` set to NULL. The operation's failure is
/// returned by the test that finds it done.
///
/// # Safety
/// `request` and `done` are NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn catena_request_test(
    request: *mut *mut catena_request_t,
    done: *mut c_int,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let (slot, done) = unsafe { (out_arg(request, "request")?, out_arg(done, "done")?) };
        let handle = Handle::from_ptr(*slot).ok_or_else(|| Failure::arg("the request is NULL"))?;
        *done = 0;
        let Some(outcome) = with_instance(|i| i.test(handle))? else {
            return Ok(());
        };
        // Done, successfully or not: the request is gone.
        *slot = std::ptr::null_mut();
        *done = 1;
        outcome
    })
}

/// Blocks until `*request` is done; frees it and sets `*request` to NULL.
///
/// # Safety
/// `request` is NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn catena_request_wait(request: *mut *mut catena_request_t) -> c_int {
    let mut done: c_int = 0;
    loop {
        // SAFETY: per this function's contract.
        let rc = unsafe { catena_request_test(request, &mut done) };
        if rc != crate::CATENA_SUCCESS || done != 0 {
            return rc;
        }
        std::thread::yield_now();
    }
}
