//! catena's C API (`catena.h`, `libcatena.so` / `libcatena.a`): opaque
//! communicator handles, error codes, and blocking calls over the Rust
//! `Comm`. Every function catches panics and checks every pointer and
//! handle; see docs/c-api.md.
#![allow(non_camel_case_types)]

mod handles;
mod instance;
mod ops;
mod status;

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use catena_algorithms::Algorithm;
use catena_fabric::{with_provider, Provider, WithProvider, AUTO};

use handles::Handle;
use instance::{Api, Instance, SplitColor, SplitKey};
use ops::Reduction;
pub use ops::*;
pub use status::*;

/// A communicator. Handles are never dereferenced: a freed or forged one
/// is refused with `CATENA_ERR_HANDLE`.
pub struct catena_comm_t {
    _private: [u8; 0],
}

/// A color that joins no group (the value of MPICH's `MPI_UNDEFINED`); also
/// the group rank of a process that is not a member. The header defines it
/// itself, parenthesized (cbindgen.toml).
pub const CATENA_UNDEFINED: c_int = -32766;

/// The provider `catena_init` starts unless this names one (`shm`, `ofi`,
/// `ucx`; default `auto`: shm on one host, the network across hosts).
const ENV_PROVIDER: &str = "CATENA_PROVIDER";

/// Orders two keys of a split (`key_len` bytes each): negative, zero or
/// positive as `a` sorts before, with or after `b`.
pub type catena_compare_fn =
    Option<unsafe extern "C" fn(a: *const c_void, b: *const c_void, ctx: *mut c_void) -> c_int>;

thread_local! {
    static INSTANCE: RefCell<Option<Box<dyn Api>>> = const { RefCell::new(None) };
}

/// Runs `body` as one C call: its failure (or panic) becomes an error code
/// and this thread's last error.
fn call(body: impl FnOnce() -> Result<(), Failure>) -> c_int {
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
fn with_instance<R>(body: impl FnOnce(&mut dyn Api) -> Result<R, Failure>) -> Result<R, Failure> {
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

fn comm_arg(comm: *const catena_comm_t) -> Result<Handle, Failure> {
    Handle::from_ptr(comm).ok_or_else(|| Failure::arg("the communicator is NULL"))
}

/// # Safety
/// `out` is NULL or valid for a write.
unsafe fn out_arg<'a, T>(out: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: per this function's contract.
    unsafe { out.as_mut() }.ok_or_else(|| Failure::arg(format!("{what} is NULL")))
}

/// # Safety
/// `data` is NULL or valid for `len` bytes of reads.
unsafe fn bytes_arg<'a>(data: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Failure> {
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
unsafe fn bytes_mut_arg<'a>(
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

fn rank_from_c(rank: c_int, what: &str) -> Result<u32, Failure> {
    u32::try_from(rank).map_err(|_| Failure::arg(format!("{what} {rank} is negative")))
}

fn int_to_c(value: u32) -> c_int {
    c_int::try_from(value).unwrap_or(c_int::MAX)
}

/// Starts a provider for the job this process was started into.
struct Start;

impl WithProvider for Start {
    type Output = Result<Box<dyn Api>, Failure>;

    fn run<P: Provider>(self) -> Self::Output {
        Instance::<P>::start()
    }
}

/// Joins the job this process was started into (by `catena-run`, or by
/// `mpiexec` in a build with MPI, also when the program initialized MPI
/// itself) on the provider `CATENA_PROVIDER` names (default `auto`).
/// Once per thread until `catena_finalize`; every other call must come
/// from the same thread.
#[no_mangle]
pub extern "C" fn catena_init() -> c_int {
    call(|| {
        INSTANCE.with(|cell| {
            let mut slot = cell.try_borrow_mut().map_err(|_| {
                Failure::new(CATENA_ERR_STATE, "catena_init from a catena callback")
            })?;
            if slot.is_some() {
                return Err(Failure::new(
                    CATENA_ERR_STATE,
                    "catena is already initialized",
                ));
            }
            let provider = std::env::var(ENV_PROVIDER).unwrap_or_else(|_| AUTO.into());
            *slot = Some(with_provider(&provider, Start)??);
            Ok(())
        })
    })
}

/// Frees every communicator and leaves the job, after every rank called it.
#[no_mangle]
pub extern "C" fn catena_finalize() -> c_int {
    call(|| {
        let instance = INSTANCE.with(|cell| {
            cell.try_borrow_mut()
                .map_err(|_| {
                    Failure::new(CATENA_ERR_STATE, "catena_finalize from a catena callback")
                })?
                .take()
                .ok_or_else(|| {
                    Failure::new(CATENA_ERR_STATE, "catena is not initialized on this thread")
                })
        })?;
        instance.finalize()
    })
}

/// Sets `*flag` to 1 if catena is initialized on this thread, else 0.
///
/// # Safety
/// `flag` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_initialized(flag: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let flag = unsafe { out_arg(flag, "flag") }?;
        *flag = INSTANCE.with(|cell| cell.try_borrow().map_or(1, |i| c_int::from(i.is_some())));
        Ok(())
    })
}

/// The communicator of every process of the job (the same handle on each
/// call; it cannot be freed).
///
/// # Safety
/// `comm` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_world(comm: *mut *mut catena_comm_t) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(comm, "comm") }?;
        *out = with_instance(|i| Ok(i.world()))?.to_ptr();
        Ok(())
    })
}

/// This process's rank in `comm`.
///
/// # Safety
/// `rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_rank(comm: *const catena_comm_t, rank: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(rank, "rank") }?;
        *out = int_to_c(with_instance(|i| i.rank(comm_arg(comm)?))?);
        Ok(())
    })
}

/// The number of processes in `comm`.
///
/// # Safety
/// `size` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_size(comm: *const catena_comm_t, size: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(size, "size") }?;
        *out = int_to_c(with_instance(|i| i.size(comm_arg(comm)?))?);
        Ok(())
    })
}

/// The world rank of `comm`'s rank `rank`.
///
/// # Safety
/// `world_rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_world_rank(
    comm: *const catena_comm_t,
    rank: c_int,
    world_rank: *mut c_int,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(world_rank, "world_rank") }?;
        let rank = rank_from_c(rank, "rank")?;
        *out = int_to_c(with_instance(|i| i.world_rank_of(comm_arg(comm)?, rank))?);
        Ok(())
    })
}

/// The rank in `comm` of world rank `world_rank`, or `CATENA_UNDEFINED`.
///
/// # Safety
/// `rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_group_rank(
    comm: *const catena_comm_t,
    world_rank: c_int,
    rank: *mut c_int,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(rank, "rank") }?;
        let world = rank_from_c(world_rank, "world rank")?;
        let found = with_instance(|i| i.group_rank_of(comm_arg(comm)?, world))?;
        *out = found.map_or(CATENA_UNDEFINED, int_to_c);
        Ok(())
    })
}

/// Stores a split's result: the new handle, or NULL for no group.
fn split_into(
    newcomm: *mut *mut catena_comm_t,
    comm: *const catena_comm_t,
    color: SplitColor,
    key: SplitKey,
) -> Result<(), Failure> {
    // SAFETY: the callers' contract: `newcomm` is NULL or valid for a write.
    let out = unsafe { out_arg(newcomm, "newcomm") }?;
    let new = with_instance(|i| i.split(comm_arg(comm)?, color, key))?;
    *out = new.map_or(std::ptr::null_mut(), Handle::to_ptr);
    Ok(())
}

/// `MPI_Comm_split`: members of equal `color` form one communicator, ranked
/// by `key`, ties by rank in `comm`. `CATENA_UNDEFINED` joins none
/// (`*newcomm` is then NULL).
///
/// # Safety
/// `newcomm` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split(
    comm: *const catena_comm_t,
    color: i64,
    key: i64,
    newcomm: *mut *mut catena_comm_t,
) -> c_int {
    call(|| {
        let color = match color {
            c if c == i64::from(CATENA_UNDEFINED) => SplitColor::Undefined,
            c => SplitColor::Int(c),
        };
        split_into(newcomm, comm, color, SplitKey::Int(key))
    })
}

/// A split whose colors are byte strings (`color` NULL: no group).
///
/// # Safety
/// `color` is NULL or valid for `color_len` bytes; `newcomm` is NULL or
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split_bytes(
    comm: *const catena_comm_t,
    color: *const c_void,
    color_len: usize,
    key: i64,
    newcomm: *mut *mut catena_comm_t,
) -> c_int {
    call(|| {
        let color = match color.is_null() {
            true => SplitColor::Undefined,
            // SAFETY: per this function's contract.
            false => SplitColor::Bytes(unsafe { bytes_arg(color, color_len, "color") }?),
        };
        split_into(newcomm, comm, color, SplitKey::Int(key))
    })
}

/// A split with byte-string colors (`color` NULL: no group) and keys of
/// `key_len` bytes ordered by `compare` (which must be a total order, the
/// same on every member; every member passes the same `key_len`).
///
/// # Safety
/// `color` and `key` are NULL or valid for their lengths; `compare` may be
/// called with any two members' keys and `ctx`; `newcomm` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_split_compare(
    comm: *const catena_comm_t,
    color: *const c_void,
    color_len: usize,
    key: *const c_void,
    key_len: usize,
    compare: catena_compare_fn,
    ctx: *mut c_void,
    newcomm: *mut *mut catena_comm_t,
) -> c_int {
    call(|| {
        let compare = compare.ok_or_else(|| Failure::arg("the comparator is NULL"))?;
        let color = match color.is_null() {
            true => SplitColor::Undefined,
            // SAFETY: per this function's contract.
            false => SplitColor::Bytes(unsafe { bytes_arg(color, color_len, "color") }?),
        };
        // SAFETY: per this function's contract.
        let key = unsafe { bytes_arg(key, key_len, "key") }?;
        // SAFETY: both keys are `key_len` bytes (`instance` orders keys of
        // other lengths without calling it); the user vouches for `compare`.
        let order = |a: &[u8], b: &[u8]| {
            unsafe { compare(a.as_ptr().cast(), b.as_ptr().cast(), ctx) }.cmp(&0)
        };
        split_into(
            newcomm,
            comm,
            color,
            SplitKey::Compared {
                key,
                compare: &order,
            },
        )
    })
}

/// Chooses `comm`'s split algorithm by name (`Auto`, `AllgatherGroup`,
/// `GatherScatter`, `Cheng<M>`, `Bitonic`, `Radix`, `Hash`, `Hash64`;
/// any case); communicators made from it inherit it.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_set_algorithm(
    comm: *mut catena_comm_t,
    name: *const c_char,
) -> c_int {
    call(|| {
        if name.is_null() {
            return Err(Failure::arg("the algorithm name is NULL"));
        }
        // SAFETY: per this function's contract.
        let name = unsafe { CStr::from_ptr(name) }
            .to_str()
            .map_err(|_| Failure::arg("the algorithm name is not UTF-8"))?;
        let algorithm: Algorithm = name.parse()?;
        with_instance(|i| i.set_algorithm(comm_arg(comm)?, algorithm))
    })
}

/// Sets how long each call on `comm` may take before it fails with
/// `CATENA_ERR_TIMEOUT` (default 60 s); inherited by communicators made
/// from it.
#[no_mangle]
pub extern "C" fn catena_comm_set_timeout(comm: *mut catena_comm_t, seconds: f64) -> c_int {
    call(|| {
        let timeout = Duration::try_from_secs_f64(seconds)
            .ok()
            .filter(|t| !t.is_zero())
            .ok_or_else(|| Failure::arg(format!("a timeout of {seconds} s")))?;
        with_instance(|i| i.set_timeout(comm_arg(comm)?, timeout))
    })
}

/// A new communicator with `comm`'s members and ranks, and its own context.
///
/// # Safety
/// `newcomm` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_dup(
    comm: *const catena_comm_t,
    newcomm: *mut *mut catena_comm_t,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(newcomm, "newcomm") }?;
        *out = with_instance(|i| i.dup(comm_arg(comm)?))?.to_ptr();
        Ok(())
    })
}

/// Frees `*comm` and sets it to NULL. Freeing NULL, a freed handle or the
/// world is an error, not a crash.
///
/// # Safety
/// `comm` is NULL or valid for a read and a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_free(comm: *mut *mut catena_comm_t) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let slot = unsafe { out_arg(comm, "comm") }?;
        with_instance(|i| i.free(comm_arg(*slot)?))?;
        *slot = std::ptr::null_mut();
        Ok(())
    })
}

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

/// Byte counts of `count` elements of `size` bytes, checked.
fn element_bytes(count: usize, size: usize) -> Result<usize, Failure> {
    count
        .checked_mul(size)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| Failure::arg(format!("{count} elements of {size} bytes")))
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

fn user_reduction(
    op: catena_user_op_fn,
    ctx: *mut c_void,
    size: usize,
) -> Result<Reduction, Failure> {
    let op = op.ok_or_else(|| Failure::arg("the user operation is NULL"))?;
    Ok(Reduction::User { op, ctx, size })
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
        let reduction = user_reduction(op, ctx, elem_size)?;
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
        let reduction = user_reduction(op, ctx, elem_size)?;
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
