//! The blocking collectives: barrier, bcast, reduce and allreduce (built-in
//! and user operations), gather and allgather; and the conversions of
//! their C arguments, which their posted forms share.

use std::ffi::{c_int, c_void};

use crate::boundary::{
    bytes_arg, bytes_mut_arg, call, comm_arg, element_bytes, rank_from_c, run, RecvBuffer,
};
use crate::catena_comm_t;
use crate::operation::Operation;
use crate::ops::{catena_user_op_fn, Reduction};
use crate::status::Failure;

/// Returns once every member of `comm` has entered.
#[no_mangle]
pub extern "C" fn catena_barrier(comm: *const catena_comm_t) -> c_int {
    call(|| {
        run(|_| {
            Ok(Operation::Barrier {
                comm: comm_arg(comm)?,
            })
        })
    })
}

/// The root's `bytes` bytes at `buffer` into every member's `buffer`.
///
/// # Safety
/// `buffer` is valid for `bytes` bytes of reads and writes.
#[no_mangle]
pub unsafe extern "C" fn catena_bcast(
    comm: *const catena_comm_t,
    buffer: *mut c_void,
    bytes: usize,
    root: c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { bcast(comm, buffer, bytes, root) }))
}

/// A bcast's operation.
///
/// # Safety
/// `buffer` is valid for `bytes` bytes of reads and writes for `'a`.
pub(crate) unsafe fn bcast<'a>(
    comm: *const catena_comm_t,
    buffer: *mut c_void,
    bytes: usize,
    root: c_int,
) -> Result<Operation<'a>, Failure> {
    Ok(Operation::Bcast {
        // SAFETY: per this function's contract.
        buffer: unsafe { bytes_mut_arg(buffer, bytes, "buffer") }?,
        root: rank_from_c(root, "root")?,
        comm: comm_arg(comm)?,
    })
}

/// An (all)reduce's operation: every member's `count` elements at
/// `sendbuf` reduced into `recvbuf`, on every member (`root` `None`) or at
/// `root` only.
///
/// # Safety
/// `sendbuf` is valid for `count` elements of the reduction for `'a`;
/// `recvbuf` too, where this member receives.
pub(crate) unsafe fn reduce<'a>(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    reduction: Reduction,
    root: Option<c_int>,
) -> Result<Operation<'a>, Failure> {
    let bytes = element_bytes(count, reduction.element_size()?)?;
    Ok(Operation::Reduce {
        // SAFETY: per this function's contract.
        send: unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?,
        root: root.map(|r| rank_from_c(r, "root")).transpose()?,
        comm: comm_arg(comm)?,
        // SAFETY: per this function's contract.
        recv: unsafe { RecvBuffer::new(recvbuf) },
        reduction,
    })
}

/// `recvbuf` = the elementwise `op` of every member's `count` elements of
/// `datatype` at `sendbuf` (in rank order), on every member.
///
/// # Safety
/// `sendbuf` and `recvbuf` are valid for `count` elements of `datatype`.
#[no_mangle]
pub unsafe extern "C" fn catena_allreduce(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
) -> c_int {
    let reduction = Reduction::Builtin { datatype, op };
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { reduce(comm, sendbuf, recvbuf, count, reduction, None) }))
}

/// As `catena_allreduce`, into `recvbuf` at `root` only (ignored elsewhere).
///
/// # Safety
/// As `catena_allreduce` (`recvbuf` at the root only).
#[no_mangle]
pub unsafe extern "C" fn catena_reduce(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
) -> c_int {
    let reduction = Reduction::Builtin { datatype, op };
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { reduce(comm, sendbuf, recvbuf, count, reduction, Some(root)) }))
}

/// `catena_allreduce` with a user operation on elements of `elem_size`
/// bytes (associative; `in` holds lower ranks' part).
///
/// # Safety
/// `sendbuf` and `recvbuf` are valid for `count * elem_size` bytes; `op`
/// may be called with `ctx` on buffers of whole elements.
#[no_mangle]
pub unsafe extern "C" fn catena_allreduce_user(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    elem_size: usize,
    op: catena_user_op_fn,
    ctx: *mut c_void,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|_| unsafe {
            let reduction = Reduction::user(op, ctx, elem_size)?;
            reduce(comm, sendbuf, recvbuf, count, reduction, None)
        })
    })
}

/// `catena_allreduce_user` into `recvbuf` at `root` only.
///
/// # Safety
/// As `catena_allreduce_user` (`recvbuf` at the root only).
#[no_mangle]
pub unsafe extern "C" fn catena_reduce_user(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    elem_size: usize,
    op: catena_user_op_fn,
    ctx: *mut c_void,
    root: c_int,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|_| unsafe {
            let reduction = Reduction::user(op, ctx, elem_size)?;
            reduce(comm, sendbuf, recvbuf, count, reduction, Some(root))
        })
    })
}

/// An (all)gather's operation: every member's `bytes` bytes at `sendbuf`,
/// in rank order, into `recvbuf` (size × `bytes`) at `root` (`None`: on
/// every member).
///
/// # Safety
/// `sendbuf` is valid for `bytes` bytes for `'a`; `recvbuf`, where this
/// member receives, for size × `bytes`.
pub(crate) unsafe fn gather<'a>(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    root: Option<c_int>,
) -> Result<Operation<'a>, Failure> {
    Ok(Operation::Gather {
        // SAFETY: per this function's contract.
        send: unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?,
        root: root.map(|r| rank_from_c(r, "root")).transpose()?,
        comm: comm_arg(comm)?,
        // SAFETY: per this function's contract.
        recv: unsafe { RecvBuffer::new(recvbuf) },
    })
}

/// Every member's `bytes` bytes at `sendbuf`, in rank order, into the
/// root's `recvbuf` (size × `bytes`; ignored elsewhere).
///
/// # Safety
/// `sendbuf` is valid for `bytes` bytes; at the root `recvbuf` for size ×
/// `bytes`.
#[no_mangle]
pub unsafe extern "C" fn catena_gather(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    root: c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { gather(comm, sendbuf, bytes, recvbuf, Some(root)) }))
}

/// `catena_gather` into every member's `recvbuf`.
///
/// # Safety
/// `sendbuf` is valid for `bytes` bytes, `recvbuf` for size × `bytes`.
#[no_mangle]
pub unsafe extern "C" fn catena_allgather(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
) -> c_int {
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { gather(comm, sendbuf, bytes, recvbuf, None) }))
}
