//! Communicators: the world, ranks and their translation, splits of every
//! kind (integer and byte-string colors, integer and user-ordered keys),
//! the split algorithm and timeout, dup and free; and the conversions of
//! the creation calls' C arguments, which their posted forms share.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::time::Duration;

use catena_algorithms::Algorithm;

use crate::boundary::{
    answer, bytes_arg, call, comm_arg, int_to_c, out_arg, rank_from_c, run, with_instance,
};
use crate::operation::{Operation, SplitColor, SplitKey};
use crate::status::Failure;

/// A communicator. Handles are never dereferenced: a freed or forged one
/// is refused with `CATENA_ERR_HANDLE`.
pub struct catena_comm_t {
    _private: [u8; 0],
}

/// A color that joins no group (the value of MPICH's `MPI_UNDEFINED`); also
/// the group rank of a process that is not a member. The header defines it
/// itself, parenthesized (cbindgen.toml).
pub const CATENA_UNDEFINED: c_int = -32766;

/// Orders two keys of a split (`key_len` bytes each): negative, zero or
/// positive as `a` sorts before, with or after `b`.
pub type catena_compare_fn =
    Option<unsafe extern "C" fn(a: *const c_void, b: *const c_void, ctx: *mut c_void) -> c_int>;

/// The communicator of every process of the job (the same handle on each
/// call; it cannot be freed).
///
/// # Safety
/// `comm` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_world(comm: *mut *mut catena_comm_t) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(comm, "comm", || {
            Ok(with_instance(|i| Ok(i.world()))?.to_ptr())
        })
    }
}

/// This process's rank in `comm`.
///
/// # Safety
/// `rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_rank(comm: *const catena_comm_t, rank: *mut c_int) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(rank, "rank", || {
            Ok(int_to_c(with_instance(|i| i.rank(comm_arg(comm)?))?))
        })
    }
}

/// The number of processes in `comm`.
///
/// # Safety
/// `size` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_size(comm: *const catena_comm_t, size: *mut c_int) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(size, "size", || {
            Ok(int_to_c(with_instance(|i| i.size(comm_arg(comm)?))?))
        })
    }
}

/// Loads `comm`'s group map, in which `catena_comm_world_rank` and
/// `catena_comm_group_rank` look ranks up: on a communicator made by split
/// or dup outside host memory (across hosts) a collective over `comm`,
/// every member calling it at the same point of its calls; at once where
/// the map is held already (the world's, a created group's, one made on
/// one host). Before it, those lookups fail with `CATENA_ERR_ARG`.
#[no_mangle]
pub extern "C" fn catena_comm_load_group_map(comm: *const catena_comm_t) -> c_int {
    call(|| {
        run(|_| {
            Ok(Operation::LoadGroupMap {
                comm: comm_arg(comm)?,
            })
        })
    })
}

/// The world rank of `comm`'s rank `rank`: a local lookup in its group map
/// (see `catena_comm_load_group_map`).
///
/// # Safety
/// `world_rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_world_rank(
    comm: *const catena_comm_t,
    rank: c_int,
    world_rank: *mut c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(world_rank, "world_rank", || {
            let rank = rank_from_c(rank, "rank")?;
            Ok(int_to_c(with_instance(|i| {
                i.world_rank_of(comm_arg(comm)?, rank)
            })?))
        })
    }
}

/// The rank in `comm` of world rank `world_rank`, or `CATENA_UNDEFINED`: a
/// local lookup, as `catena_comm_world_rank`.
///
/// # Safety
/// `rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_group_rank(
    comm: *const catena_comm_t,
    world_rank: c_int,
    rank: *mut c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(rank, "rank", || {
            let world = rank_from_c(world_rank, "world rank")?;
            let found = with_instance(|i| i.group_rank_of(comm_arg(comm)?, world))?;
            Ok(found.map_or(CATENA_UNDEFINED, int_to_c))
        })
    }
}

/// A split's operation: the new handle, or NULL for no group, goes to
/// `*newcomm`.
///
/// # Safety
/// `newcomm` is NULL or valid for a write for `'a`.
pub(crate) unsafe fn split<'a>(
    comm: *const catena_comm_t,
    color: SplitColor<'a>,
    key: SplitKey,
    newcomm: *mut *mut catena_comm_t,
) -> Result<Operation<'a>, Failure> {
    Ok(Operation::Split {
        // SAFETY: per this function's contract.
        newcomm: unsafe { out_arg(newcomm, "newcomm") }?,
        comm: comm_arg(comm)?,
        color,
        key,
    })
}

/// An integer color (`CATENA_UNDEFINED`: no group).
pub(crate) fn int_color<'a>(color: i64) -> SplitColor<'a> {
    match color {
        c if c == i64::from(CATENA_UNDEFINED) => SplitColor::Undefined,
        c => SplitColor::Int(c),
    }
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
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { split(comm, int_color(color), SplitKey::Int(key), newcomm) }))
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
        // SAFETY: per this function's contract.
        run(|_| unsafe {
            let color = bytes_color(color, color_len)?;
            split(comm, color, SplitKey::Int(key), newcomm)
        })
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
        // SAFETY: per this function's contract.
        run(|_| unsafe {
            let (color, key) = compared(color, color_len, key, key_len, compare, ctx)?;
            split(comm, color, key, newcomm)
        })
    })
}

/// A byte-string color (NULL: no group).
///
/// # Safety
/// `color` is NULL or valid for `color_len` bytes.
pub(crate) unsafe fn bytes_color<'a>(
    color: *const c_void,
    color_len: usize,
) -> Result<SplitColor<'a>, Failure> {
    Ok(match color.is_null() {
        true => SplitColor::Undefined,
        // SAFETY: per this function's contract.
        false => SplitColor::Bytes(unsafe { bytes_arg(color, color_len, "color") }?),
    })
}

/// The color and the comparator-ordered key of `catena_comm_split_compare`.
///
/// # Safety
/// As `catena_comm_split_compare`'s contract; `compare` and `ctx` for as
/// long as the split runs.
pub(crate) unsafe fn compared<'a>(
    color: *const c_void,
    color_len: usize,
    key: *const c_void,
    key_len: usize,
    compare: catena_compare_fn,
    ctx: *mut c_void,
) -> Result<(SplitColor<'a>, SplitKey), Failure> {
    let compare = compare.ok_or_else(|| Failure::arg("the comparator is NULL"))?;
    // SAFETY: per this function's contract.
    let color = unsafe { bytes_color(color, color_len) }?;
    // SAFETY: per this function's contract.
    let key = unsafe { bytes_arg(key, key_len, "key") }?.to_vec();
    let compare = Box::new(move |a: &[u8], b: &[u8]| {
        // SAFETY: the caller vouches for `compare` and `ctx`; keys reach
        // it only in pairs of equal lengths (see `operation::compared_order`).
        unsafe { compare(a.as_ptr().cast(), b.as_ptr().cast(), ctx) }.cmp(&0)
    });
    Ok((color, SplitKey::Compared { key, compare }))
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
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { dup(comm, newcomm) }))
}

/// A dup's operation: the new handle goes to `*newcomm`.
///
/// # Safety
/// `newcomm` is NULL or valid for a write for `'a`.
pub(crate) unsafe fn dup<'a>(
    comm: *const catena_comm_t,
    newcomm: *mut *mut catena_comm_t,
) -> Result<Operation<'a>, Failure> {
    Ok(Operation::Dup {
        // SAFETY: per this function's contract.
        newcomm: unsafe { out_arg(newcomm, "newcomm") }?,
        comm: comm_arg(comm)?,
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
