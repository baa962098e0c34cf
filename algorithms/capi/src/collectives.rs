//! The blocking collectives: barrier, bcast, reduce and allreduce (built-in
//! and user operations), gather and allgather.

use std::ffi::{c_int, c_void};

use crate::boundary::{
    bytes_arg, bytes_mut_arg, call, comm_arg, element_bytes, rank_from_c, with_instance,
};
use crate::catena_comm_t;
use crate::ops::{catena_user_op_fn, Reduction};
use crate::status::Failure;

/// Returns once every member of `comm` has entered.
#[no_mangle]
pub extern "C" fn catena_barrier(comm: *const catena_comm_t) -> c_int {
    call(|| with_instance(|i| i.barrier(comm_arg(comm)?)))
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
    call(|| {
        // SAFETY: per this function's contract.
        let buffer = unsafe { bytes_mut_arg(buffer, bytes, "buffer") }?;
        let root = rank_from_c(root, "root")?;
        with_instance(|i| i.bcast(comm_arg(comm)?, buffer, root))
    })
}

/// The reduction of every member's `count` elements at `sendbuf` into
/// `recvbuf`, on every member (`root` < 0) or at `root` only.
///
/// # Safety
/// As `catena_allreduce`; `recvbuf` is used at the root only.
unsafe fn reduce_into(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    reduction: Reduction,
    root: Option<c_int>,
) -> Result<(), Failure> {
    let bytes = element_bytes(count, reduction.element_size()?)?;
    // SAFETY: per the callers' contract.
    let send = unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?;
    let root = root.map(|r| rank_from_c(r, "root")).transpose()?;
    with_instance(|i| {
        let comm = comm_arg(comm)?;
        let receives = root.is_none_or(|r| i.rank(comm).is_ok_and(|me| me == r));
        // SAFETY: per the callers' contract.
        let out = match receives {
            true => Some(unsafe { bytes_mut_arg(recvbuf, bytes, "recvbuf") }?),
            false => None,
        };
        i.reduce(comm, send, out, reduction, root)
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
    // SAFETY: per this function's contract.
    call(|| unsafe {
        reduce_into(
            comm,
            sendbuf,
            recvbuf,
            count,
            Reduction::Builtin { datatype, op },
            None,
        )
    })
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
    // SAFETY: per this function's contract.
    call(|| unsafe {
        reduce_into(
            comm,
            sendbuf,
            recvbuf,
            count,
            Reduction::Builtin { datatype, op },
            Some(root),
        )
    })
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
        let reduction = Reduction::user(op, ctx, elem_size)?;
        // SAFETY: per this function's contract.
        unsafe { reduce_into(comm, sendbuf, recvbuf, count, reduction, None) }
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
        let reduction = Reduction::user(op, ctx, elem_size)?;
        // SAFETY: per this function's contract.
        unsafe { reduce_into(comm, sendbuf, recvbuf, count, reduction, Some(root)) }
    })
}

/// Every member's `bytes` bytes at `sendbuf`, in rank order, into `recvbuf`
/// (size × `bytes`) at `root` (`root` < 0: on every member).
///
/// # Safety
/// `sendbuf` is valid for `bytes` bytes; `recvbuf`, where used, for size ×
/// `bytes`.
unsafe fn gather_into(
    comm: *const catena_comm_t,
    sendbuf: *const c_void,
    bytes: usize,
    recvbuf: *mut c_void,
    root: Option<c_int>,
) -> Result<(), Failure> {
    // SAFETY: per the callers' contract.
    let send = unsafe { bytes_arg(sendbuf, bytes, "sendbuf") }?;
    let root = root.map(|r| rank_from_c(r, "root")).transpose()?;
    with_instance(|i| {
        let comm = comm_arg(comm)?;
        let (me, size) = (i.rank(comm)?, i.size(comm)?);
        let out = match root.is_none_or(|r| r == me) {
            true => {
                let total = element_bytes(size as usize, bytes)?;
                // SAFETY: per the callers' contract.
                Some(unsafe { bytes_mut_arg(recvbuf, total, "recvbuf") }?)
            }
            false => None,
        };
        i.gather(comm, send, out, root)
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
    call(|| unsafe { gather_into(comm, sendbuf, bytes, recvbuf, Some(root)) })
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
    call(|| unsafe { gather_into(comm, sendbuf, bytes, recvbuf, None) })
}
