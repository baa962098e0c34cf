//! Group maps (seed 003) as C sees them: built from a rank list, MPI range
//! triples or a stride, looked up both ways; and the communicator that a
//! group's members alone create from one (seed 004), blocking (its posted
//! form shares the conversion of its arguments).

use std::ffi::c_int;

use catena_algorithms::groupmap::{GroupMap, RankRange, Strategy};

use crate::boundary::{answer, call, comm_arg, int_to_c, out_arg, rank_from_c, run, with_instance};
use crate::handles::Handle;
use crate::operation::Operation;
use crate::status::Failure;
use crate::{catena_comm_t, CATENA_UNDEFINED};

/// A group of world ranks in an order (a compact group map). Handles are
/// never dereferenced.
pub struct catena_group_t {
    _private: [u8; 0],
}

/// Build a group map with the thesis's balance of bytes and lookup time.
pub const CATENA_STRATEGY_AUTO: c_int = 0;
/// Build the smallest group map.
pub const CATENA_STRATEGY_SPACE: c_int = 1;
/// Build the group map with the fastest lookups.
pub const CATENA_STRATEGY_TIME: c_int = 2;

/// `catena_comm_create_group` tags are below this.
pub const CATENA_CREATE_TAGS: c_int = 1 << 24;

fn strategy(code: c_int) -> Result<Strategy, Failure> {
    match code {
        CATENA_STRATEGY_AUTO => Ok(Strategy::Auto),
        CATENA_STRATEGY_SPACE => Ok(Strategy::Space),
        CATENA_STRATEGY_TIME => Ok(Strategy::Time),
        _ => Err(Failure::arg(format!("unknown group map strategy {code}"))),
    }
}

fn group_arg(group: *const catena_group_t) -> Result<Handle, Failure> {
    Handle::from_ptr(group).ok_or_else(|| Failure::arg("the group is NULL"))
}

/// `count` elements at `items` (C's list and its `int` length).
///
/// # Safety
/// `items` is NULL or valid for `count` elements.
unsafe fn list_arg<'a, T>(items: *const T, count: c_int, what: &str) -> Result<&'a [T], Failure> {
    let count =
        usize::try_from(count).map_err(|_| Failure::arg(format!("{what}: a negative count")))?;
    match count {
        0 => Ok(&[]),
        _ if items.is_null() => Err(Failure::arg(format!("{what} is NULL"))),
        // SAFETY: per this function's contract, non-null.
        _ => Ok(unsafe { std::slice::from_raw_parts(items, count) }),
    }
}

/// Stores a new group map built by `build(world size)`.
fn new_group(
    out: *mut *mut catena_group_t,
    build: impl FnOnce(u32) -> Result<GroupMap, Failure>,
) -> Result<(), Failure> {
    // SAFETY: the callers' contract: `out` is NULL or valid for a write.
    let out = unsafe { out_arg(out, "group") }?;
    *out = with_instance(|i| {
        let map = build(i.world_size())?;
        Ok(i.insert_group(map))
    })?
    .to_ptr();
    Ok(())
}

/// The group whose rank g is world rank `ranks[g]` (`count` distinct world
/// ranks of this job).
///
/// # Safety
/// `ranks` is valid for `count` ints; `group` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_from_ranks(
    ranks: *const c_int,
    count: c_int,
    strategy_code: c_int,
    group: *mut *mut catena_group_t,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let ranks = unsafe { list_arg(ranks, count, "the rank list") }?;
        let ranks = ranks
            .iter()
            .map(|&r| rank_from_c(r, "world rank"))
            .collect::<Result<Vec<u32>, _>>()?;
        let strategy = strategy(strategy_code)?;
        new_group(group, |world| {
            Ok(GroupMap::from_ranks(world, &ranks, strategy)?)
        })
    })
}

/// The group of the world ranks that MPI range triples `(first, last,
/// stride)` name, in that order (as `MPI_Group_range_incl`).
///
/// # Safety
/// `ranges` is valid for `count` triples; `group` is NULL or valid for a
/// write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_from_ranges(
    ranges: *const [c_int; 3],
    count: c_int,
    strategy_code: c_int,
    group: *mut *mut catena_group_t,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let triples = unsafe { list_arg(ranges, count, "the range list") }?;
        let ranges = triples
            .iter()
            .map(|&[first, last, stride]| {
                if stride == 0 {
                    return Err(Failure::arg("a range with stride 0"));
                }
                Ok(RankRange::new(
                    rank_from_c(first, "first rank")?,
                    rank_from_c(last, "last rank")?,
                    i64::from(stride),
                ))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let strategy = strategy(strategy_code)?;
        new_group(group, |world| {
            Ok(GroupMap::from_ranges(world, &ranges, strategy)?)
        })
    })
}

/// The group of `count` world ranks `first`, `first + stride`, ...
///
/// # Safety
/// `group` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_from_stride(
    first: c_int,
    stride: c_int,
    count: c_int,
    strategy_code: c_int,
    group: *mut *mut catena_group_t,
) -> c_int {
    call(|| {
        let count = rank_from_c(count, "count")?;
        if count == 0 {
            return new_group(group, |world| {
                Ok(GroupMap::from_ranks(world, &[], Strategy::Auto)?)
            });
        }
        if stride == 0 {
            return Err(Failure::arg("stride 0"));
        }
        let first = rank_from_c(first, "first rank")?;
        let last = i64::from(first) + i64::from(stride) * i64::from(count - 1);
        let last = u32::try_from(last)
            .map_err(|_| Failure::arg(format!("the stride reaches world rank {last}")))?;
        let range = RankRange::new(first, last, i64::from(stride));
        let strategy = strategy(strategy_code)?;
        new_group(group, |world| {
            Ok(GroupMap::from_ranges(world, &[range], strategy)?)
        })
    })
}

/// Reads one fact of a live group.
fn with_group<R>(
    group: *const catena_group_t,
    read: impl FnOnce(&GroupMap) -> Result<R, Failure>,
) -> Result<R, Failure> {
    with_instance(|i| read(i.group(group_arg(group)?)?))
}

/// The number of ranks in `group`.
///
/// # Safety
/// `size` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_size(
    group: *const catena_group_t,
    size: *mut c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(size, "size", || {
            Ok(int_to_c(with_group(group, |g| Ok(g.len()))?))
        })
    }
}

/// The world rank of `group`'s rank `rank` (select).
///
/// # Safety
/// `world_rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_world_rank(
    group: *const catena_group_t,
    rank: c_int,
    world_rank: *mut c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(world_rank, "world_rank", || {
            let rank = rank_from_c(rank, "rank")?;
            Ok(int_to_c(with_group(group, |g| Ok(g.select(rank)?))?))
        })
    }
}

/// The rank in `group` of world rank `world_rank`, or `CATENA_UNDEFINED`.
///
/// # Safety
/// `rank` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_rank(
    group: *const catena_group_t,
    world_rank: c_int,
    rank: *mut c_int,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe {
        answer(rank, "rank", || {
            let world = rank_from_c(world_rank, "world rank")?;
            Ok(with_group(group, |g| Ok(g.rank(world)?))?.map_or(CATENA_UNDEFINED, int_to_c))
        })
    }
}

/// The bytes `group`'s map takes.
///
/// # Safety
/// `bytes` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_bytes(
    group: *const catena_group_t,
    bytes: *mut usize,
) -> c_int {
    // SAFETY: per this function's contract.
    unsafe { answer(bytes, "bytes", || with_group(group, |g| Ok(g.bytes()))) }
}

/// Frees `*group` and sets it to NULL.
///
/// # Safety
/// `group` is NULL or valid for a read and a write.
#[no_mangle]
pub unsafe extern "C" fn catena_group_free(group: *mut *mut catena_group_t) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let slot = unsafe { out_arg(group, "group") }?;
        with_instance(|i| i.free_group(group_arg(*slot)?))?;
        *slot = std::ptr::null_mut();
        Ok(())
    })
}

/// The communicator of `group`'s members, in its order, made by them alone
/// (`MPI_Comm_create_group`): every member calls it with an equal group and
/// the same `tag` (below `CATENA_CREATE_TAGS`); other processes of `comm`
/// do not call it. A caller that is not a member gets NULL.
///
/// # Safety
/// `newcomm` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_comm_create_group(
    comm: *const catena_comm_t,
    group: *const catena_group_t,
    tag: c_int,
    newcomm: *mut *mut catena_comm_t,
) -> c_int {
    // SAFETY: per this function's contract.
    call(|| run(|_| unsafe { create_group(comm, group, tag, newcomm) }))
}

/// A create_group's operation: the new handle, or NULL for a caller that
/// is not a member, goes to `*newcomm`.
///
/// # Safety
/// `newcomm` is NULL or valid for a write for `'a`.
pub(crate) unsafe fn create_group<'a>(
    comm: *const catena_comm_t,
    group: *const catena_group_t,
    tag: c_int,
    newcomm: *mut *mut catena_comm_t,
) -> Result<Operation<'a>, Failure> {
    Ok(Operation::CreateGroup {
        // SAFETY: per this function's contract.
        newcomm: unsafe { out_arg(newcomm, "newcomm") }?,
        tag: rank_from_c(tag, "tag")?,
        comm: comm_arg(comm)?,
        group: group_arg(group)?,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tag_bound_is_the_algorithms_own() {
        assert_eq!(
            super::CATENA_CREATE_TAGS as u32,
            catena_algorithms::comm::CREATE_TAGS
        );
    }
}
