//! Nonblocking forms of the creation and collective calls, for a vendor's
//! progress engine: `*_post` starts one (taking its place in call order, as
//! the blocking call would) and returns a request; `catena_request_test`
//! progresses it and says when it is done; `catena_request_wait` blocks.

use std::ffi::{c_int, c_void};

use crate::boundary::{
    bytes_arg, bytes_mut_arg, call, comm_arg, element_bytes, out_arg, rank_from_c, with_instance,
};
use crate::comm::{bytes_color, catena_compare_fn, compared};
use crate::handles::Handle;
use crate::instance::{SplitColor, SplitKey};
use crate::ops::{catena_user_op_fn, Reduction};
use crate::status::Failure;
use crate::{catena_comm_t, catena_group_t, CATENA_UNDEFINED};

/// A nonblocking operation in flight. Handles are never dereferenced.
pub struct catena_request_t {
    _private: [u8; 0],
}

/// Stores the request `post` made.
pub(crate) fn post_into(
    request: *mut *mut catena_request_t,
    post: impl FnOnce(&mut dyn crate::instance::Api) -> Result<Handle, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the callers' contract: `request` is NULL or valid for a write.
    let out = unsafe { out_arg(request, "request") }?;
    *out = with_instance(post)?.to_ptr();
    Ok(())
}

/// Posts a call whose result, a communicator, goes to `*newcomm`.
fn post_comm(
    newcomm: *mut *mut catena_comm_t,
    request: *mut *mut catena_request_t,
    post: impl FnOnce(&mut dyn crate::instance::Api) -> Result<Handle, Failure>,
) -> Result<(), Failure> {
    if newcomm.is_null() {
        return Err(Failure::arg("newcomm is NULL"));
    }
    post_into(request, post)
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
    call(|| {
        let color = match color {
            c if c == i64::from(CATENA_UNDEFINED) => SplitColor::Undefined,
            c => SplitColor::Int(c),
        };
        post_comm(newcomm, request, |i| {
            i.split_post(comm_arg(comm)?, color, SplitKey::Int(key), newcomm)
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
    call(|| {
        // SAFETY: per this function's contract.
        let color = unsafe { bytes_color(color, color_len) }?;
        post_comm(newcomm, request, |i| {
            i.split_post(comm_arg(comm)?, color, SplitKey::Int(key), newcomm)
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
    call(|| {
        // SAFETY: per this function's contract.
        let (color, key) = unsafe { compared(color, color_len, key, key_len, compare, ctx) }?;
        post_comm(newcomm, request, |i| {
            i.split_post(comm_arg(comm)?, color, key, newcomm)
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
    call(|| post_comm(newcomm, request, |i| i.dup_post(comm_arg(comm)?, newcomm)))
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
    call(|| {
        let tag = rank_from_c(tag, "tag")?;
        let group = Handle::from_ptr(group).ok_or_else(|| Failure::arg("the group is NULL"))?;
        post_comm(newcomm, request, |i| {
            i.create_group_post(comm_arg(comm)?, group, tag, newcomm)
        })
    })
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
    call(|| post_into(request, |i| i.barrier_post(comm_arg(comm)?)))
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
    call(|| {
        // SAFETY: per this function's contract.
        let buffer = unsafe { bytes_mut_arg(buffer, bytes, "buffer") }?;
        let root = rank_from_c(root, "root")?;
        post_into(request, |i| {
            i.bcast_post(comm_arg(comm)?, buffer.as_mut_ptr(), bytes, root)
        })
    })
}

/// Posts an (all)reduce: `sendbuf` read now, `recvbuf` (every member, or
/// the root) written when done.
///
/// # Safety
/// `sendbuf` is valid for the elements now, `recvbuf` until done.
unsafe fn reduce_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    reduction: Reduction,
    root: Option<c_int>,
    request: *mut *mut catena_request_t,
) -> Result<(), Failure> {
    let bytes = element_bytes(count, reduction.element_size()?)?;
    // SAFETY: per the callers' contract.
    let send = unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?;
    let root = root.map(|r| rank_from_c(r, "root")).transpose()?;
    post_into(request, |i| {
        let comm = comm_arg(comm)?;
        let receives = root.is_none_or(|r| i.rank(comm).is_ok_and(|me| me == r));
        let recv = match receives {
            // SAFETY: per the callers' contract.
            true => unsafe { bytes_mut_arg(recvbuf, bytes, "recvbuf") }?.as_mut_ptr(),
            false => std::ptr::null_mut(),
        };
        i.reduce_post(comm, send, recv, reduction, root)
    })
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
    // SAFETY: per this function's contract.
    call(|| unsafe { reduce_post(comm, sendbuf, recvbuf, count, reduction, None, request) })
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
    // SAFETY: per this function's contract.
    call(|| unsafe {
        reduce_post(
            comm,
            sendbuf,
            recvbuf,
            count,
            reduction,
            Some(root),
            request,
        )
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
    call(|| {
        let reduction = Reduction::user(op, ctx, elem_size)?;
        // SAFETY: per this function's contract.
        unsafe { reduce_post(comm, sendbuf, recvbuf, count, reduction, None, request) }
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
    call(|| {
        let reduction = Reduction::user(op, ctx, elem_size)?;
        // SAFETY: per this function's contract.
        unsafe {
            reduce_post(
                comm,
                sendbuf,
                recvbuf,
                count,
                reduction,
                Some(root),
                request,
            )
        }
    })
}

/// Posts an (all)gather: `sendbuf` read now, `recvbuf` (size × `bytes`, on
/// every member or at the root) written when done.
///
/// # Safety
/// `sendbuf` is valid for `bytes` bytes now, `recvbuf` until done.
unsafe fn gather_post(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    root: Option<c_int>,
    request: *mut *mut catena_request_t,
) -> Result<(), Failure> {
    // SAFETY: per the callers' contract.
    let send = unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?;
    let root = root.map(|r| rank_from_c(r, "root")).transpose()?;
    post_into(request, |i| {
        let comm = comm_arg(comm)?;
        let (me, size) = (i.rank(comm)?, i.size(comm)?);
        let recv = match root.is_none_or(|r| r == me) {
            true => {
                let total = element_bytes(size as usize, bytes)?;
                // SAFETY: per the callers' contract.
                unsafe { bytes_mut_arg(recvbuf, total, "recvbuf") }?.as_mut_ptr()
            }
            false => std::ptr::null_mut(),
        };
        i.gather_post(comm, send, recv, root)
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
    // SAFETY: per this function's contract.
    call(|| unsafe { gather_post(comm, sendbuf, bytes, recvbuf, Some(root), request) })
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
    // SAFETY: per this function's contract.
    call(|| unsafe { gather_post(comm, sendbuf, bytes, recvbuf, None, request) })
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
