//! alltoall_specific through catena's C API as a C program calls it: the
//! `extern "C"` functions of `catena-capi` (`libcatena`), started with
//! `catena_init_mpi` on the program's `MPI_COMM_WORLD`, a plan of the
//! default variant and an `extern "C"` route callback that emits each
//! element's target, so every element costs what it costs a C caller (a
//! call through a function pointer and one to `catena_emit_to`).

use std::ffi::{c_int, c_void, CStr};
use std::ptr;

use catena::{
    catena_alltoall_plan_create, catena_alltoall_plan_exchange, catena_alltoall_plan_free,
    catena_alltoall_plan_t, catena_comm_t, catena_comm_world, catena_emit_t, catena_emit_to,
    catena_finalize, catena_init_mpi, catena_last_error, catena_strerror, CATENA_SUCCESS,
};
use mpi::raw::AsRaw;

use super::reference::Mpi;
use super::rows::{check_exchange, mpich_exchange_side};
use super::sample::{measure, Budget, FnSide, Harness, Result};
use super::Figure;
use crate::alltoall::data::Set;
use crate::alltoall::{capacity, set_bytes};

/// `Ok` for `CATENA_SUCCESS`, else the code's text and the last error.
fn check(rc: c_int) -> Result<()> {
    if rc == CATENA_SUCCESS {
        return Ok(());
    }
    // SAFETY: both return NUL-terminated strings, valid until the next
    // failing call on this thread.
    let (what, last) = unsafe {
        (
            CStr::from_ptr(catena_strerror(rc)),
            CStr::from_ptr(catena_last_error()),
        )
    };
    Err(format!("{} ({})", what.to_string_lossy(), last.to_string_lossy()).into())
}

/// The route a C program would write: the element's target, a u32 at the
/// offset `ctx` carries.
unsafe extern "C" fn route(
    element: *const c_void,
    emit: *mut catena_emit_t,
    ctx: *mut c_void,
) -> c_int {
    let at = ctx as usize;
    // SAFETY: the plan passes one element of its size, whose target is the
    // u32 at `at` (the data set's layout).
    let target = unsafe { element.cast::<u8>().add(at).cast::<u32>().read_unaligned() };
    // SAFETY: `emit` is the plan's, valid during this callback.
    unsafe { catena_emit_to(emit, target as c_int) }
}

/// Starts catena's C API on `mpi`'s processes, measures every data set in
/// `sets`, and finalizes it.
pub(crate) fn rows(
    h: &dyn Harness,
    budget: Budget,
    mpi: &Mpi,
    sets: &[Set],
    elements: usize,
) -> Result<Vec<Figure>> {
    let raw = mpi.as_raw();
    // SAFETY: `raw` is MPI_COMM_WORLD of the MPI this library was built with.
    check(unsafe { catena_init_mpi(ptr::from_ref(&raw).cast()) })?;
    let figures = (|| {
        let mut comm = ptr::null_mut();
        // SAFETY: `comm` is valid for a write.
        check(unsafe { catena_comm_world(&mut comm) })?;
        sets.iter()
            .map(|&set| row(h, budget, mpi, comm, set, elements))
            .collect::<Result<Vec<_>>>()
    })();
    let finalized = check(catena_finalize());
    let figures = figures?;
    finalized?;
    Ok(figures)
}

fn row(
    h: &dyn Harness,
    budget: Budget,
    mpi: &Mpi,
    comm: *mut catena_comm_t,
    set: Set,
    elements: usize,
) -> Result<Figure> {
    let size = mpi::traits::Communicator::size(mpi) as u32;
    let (send, layout) = set_bytes(set, elements, h.rank(), size);
    let (element, at) = layout;
    let count = send.len() / element;
    let room = capacity(count);
    let mut plan: *mut catena_alltoall_plan_t = ptr::null_mut();
    // SAFETY: NULL names the default variant; `plan` is valid for a write.
    check(unsafe { catena_alltoall_plan_create(comm, element, room, ptr::null(), 0, &mut plan) })?;
    let mut catena = FnSide {
        state: (vec![0u8; room * element], 0usize),
        call: |(recv, got): &mut (Vec<u8>, usize)| {
            // SAFETY: `send` holds `count` elements, `recv` the plan's
            // capacity; the route reads one element at a time.
            check(unsafe {
                catena_alltoall_plan_exchange(
                    plan,
                    send.as_ptr().cast(),
                    count,
                    Some(route),
                    at as *mut c_void,
                    recv.as_mut_ptr().cast(),
                    got,
                )
            })
        },
        check: |(recv, got): &mut (Vec<u8>, usize), h: &dyn Harness| {
            check_exchange(h, &send, &recv[..*got * element], layout)
        },
    };
    let mut mpich = mpich_exchange_side(mpi, &send, layout, room);
    let measured = measure(h, budget, &mut catena, Some(&mut mpich));
    // SAFETY: `plan` is valid for a read and a write.
    let freed = check(unsafe { catena_alltoall_plan_free(&mut plan) });
    let figure = Figure::new("alltoall (C API)", set.name(), measured?, h)?;
    freed?;
    Ok(figure)
}
