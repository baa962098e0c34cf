//! alltoall_specific in C (seed 002): one-shot calls with a route callback
//! naming one target per element, and plans (a variant by name, stable
//! order, a capacity kept across calls) whose route callback emits any
//! number of targets or modified copies; blocking and posted forms.

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};

use catena_algorithms::{AlltoallOptions, AlltoallVariant};

use crate::boundary::{
    bytes_arg, bytes_mut_arg, call, comm_arg, element_bytes, out_arg, run, with_instance,
};
use crate::byte_plan::{Exchange, Receive, Route, Targets};
use crate::catena_comm_t;
use crate::handles::Handle;
use crate::instance::Api;
use crate::operation::{AlltoallTarget, Operation};
use crate::requests::{catena_request_t, post};
use crate::status::Failure;

/// A persistent alltoall on one communicator (its receive window and
/// peers' keys kept across calls). Handles are never dereferenced.
pub struct catena_alltoall_plan_t {
    _private: [u8; 0],
}

/// Where a plan's route callback sends the element it was given: valid
/// only during that callback, for `catena_emit_to` / `catena_emit_modified`.
pub struct catena_emit_t {
    _private: [u8; 0],
}

/// Routes one element of an alltoall_specific: the group rank it goes to,
/// or a negative number to drop it.
pub type catena_route_fn =
    Option<unsafe extern "C" fn(element: *const c_void, ctx: *mut c_void) -> c_int>;

/// Routes a whole send buffer at once: writes into `targets[i]` the group
/// rank element `i` of the `count` at `elements` goes to (a negative number
/// drops it); returns 0, or anything else to fail the exchange with
/// `CATENA_ERR_USER` on every member before an element moves. One call per
/// exchange instead of one per element.
pub type catena_route_batch_fn = Option<
    unsafe extern "C" fn(
        elements: *const c_void,
        count: usize,
        targets: *mut i32,
        ctx: *mut c_void,
    ) -> c_int,
>;

/// Reads one piece of what a visiting exchange received: `count` elements
/// at `elements`, valid only during the call (at most 16 KiB at a time,
/// read out of the plan's window, or this member's own where they lie in
/// its staging); returns 0, or anything else to fail the exchange with
/// `CATENA_ERR_USER` on this member (the pieces after it are not visited;
/// the plan stays usable).
pub type catena_visit_fn =
    Option<unsafe extern "C" fn(elements: *const c_void, count: usize, ctx: *mut c_void) -> c_int>;

/// Routes one element of a plan's exchange by calling `catena_emit_to` /
/// `catena_emit_modified` on `emit` once per copy (none drops it); returns
/// 0, or anything else to fail the exchange with `CATENA_ERR_USER` on every
/// member before an element moves.
pub type catena_emit_fn = Option<
    unsafe extern "C" fn(
        element: *const c_void,
        emit: *mut catena_emit_t,
        ctx: *mut c_void,
    ) -> c_int,
>;

/// A route calling the C callback for one target per element.
fn one_target<'a>(
    route: unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int,
    ctx: *mut c_void,
) -> Route<'a> {
    Route::Each(Box::new(move |e, targets| {
        // SAFETY: the caller vouches for `route` and `ctx`; `e` is one whole
        // element.
        let rank = unsafe { route(e.as_ptr().cast(), ctx) };
        // A negative rank drops the element.
        if let Ok(rank) = u32::try_from(rank) {
            targets.to(rank);
        }
    }))
}

/// What `catena_emit_t` points to during a route callback.
struct Emitter<'e> {
    targets: &'e mut dyn Targets,
    elem_size: usize,
}

thread_local! {
    /// The emitter of the route callback running on this thread (null
    /// outside one): a `catena_emit_t` that is not it is refused, never
    /// dereferenced.
    static CURRENT_EMITTER: Cell<*mut c_void> = const { Cell::new(std::ptr::null_mut()) };
}

/// A route calling the C callback that emits its targets.
fn emitting<'a>(
    route: unsafe extern "C" fn(*const c_void, *mut catena_emit_t, *mut c_void) -> c_int,
    ctx: *mut c_void,
    elem_size: usize,
) -> Route<'a> {
    Route::Each(Box::new(move |e, targets| {
        let mut emitter = Emitter { targets, elem_size };
        let at: *mut Emitter = &mut emitter;
        let outer = CURRENT_EMITTER.replace(at.cast());
        // SAFETY: the caller vouches for `route` and `ctx`; `e` is one whole
        // element; `at` lives until the callback returns.
        let rc = unsafe { route(e.as_ptr().cast(), at.cast(), ctx) };
        CURRENT_EMITTER.set(outer);
        if rc != 0 {
            // Unwinds to the alltoall's guard of user code (without the
            // panic hook's message): `CATENA_ERR_USER` on every member.
            std::panic::resume_unwind(Box::new(format!("the route callback returned {rc}")));
        }
    }))
}

/// Runs `body` on the emitter `emit` names, if it is the running one.
fn with_emitter(
    emit: *mut catena_emit_t,
    body: impl FnOnce(&mut Emitter) -> Result<(), Failure>,
) -> c_int {
    call(|| {
        if emit.is_null() || CURRENT_EMITTER.get() != emit.cast() {
            return Err(Failure::arg(
                "not the emitter of a route callback running now",
            ));
        }
        // SAFETY: `emit` is the live emitter `emitting` made (checked above).
        body(unsafe { &mut *emit.cast::<Emitter>() })
    })
}

fn target_rank(rank: c_int) -> Result<u32, Failure> {
    u32::try_from(rank).map_err(|_| Failure::arg(format!("an element emitted to rank {rank}")))
}

/// Sends the element being routed to group rank `rank` (a rank outside
/// the group fails the exchange with `CATENA_ERR_ARG` on every member).
/// Only from a plan's route callback, on the `emit` it was given.
///
/// # Safety
/// None beyond the above: any other `emit` is refused.
#[no_mangle]
pub unsafe extern "C" fn catena_emit_to(emit: *mut catena_emit_t, rank: c_int) -> c_int {
    with_emitter(emit, |e| {
        e.targets.to(target_rank(rank)?);
        Ok(())
    })
}

/// Sends a copy of one element's size at `copy` to group rank `rank` in
/// the element's place (a modified copy). As `catena_emit_to`.
///
/// # Safety
/// `copy` is valid for the plan's element size.
#[no_mangle]
pub unsafe extern "C" fn catena_emit_modified(
    emit: *mut catena_emit_t,
    rank: c_int,
    copy: *const c_void,
) -> c_int {
    with_emitter(emit, |e| {
        let rank = target_rank(rank)?;
        // SAFETY: per this function's contract.
        let copy = unsafe { bytes_arg(copy, e.elem_size, "copy") }?;
        e.targets.modified(rank, copy);
        Ok(())
    })
}

/// The options a variant name and a stable flag ask for.
///
/// # Safety
/// `variant` is NULL or a NUL-terminated string.
unsafe fn options_arg(variant: *const c_char, stable: c_int) -> Result<AlltoallOptions, Failure> {
    let variant = match variant.is_null() {
        true => AlltoallVariant::Auto,
        // SAFETY: per this function's contract.
        false => unsafe { CStr::from_ptr(variant) }
            .to_str()
            .map_err(|_| Failure::arg("the variant name is not UTF-8"))?
            .parse()?,
    };
    let options = AlltoallOptions::new(variant);
    Ok(if stable != 0 {
        options.stable()
    } else {
        options
    })
}

/// The buffers of one call, checked: `count` elements to send, room for
/// `capacity` to receive.
///
/// # Safety
/// As the C functions' contracts: `send` valid for `count` elements,
/// `recv` for `capacity`, for `'a`.
unsafe fn buffers<'a>(
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    capacity: usize,
    elem_size: usize,
) -> Result<(&'a [u8], &'a mut [u8]), Failure> {
    // SAFETY: per this function's contract.
    unsafe {
        Ok((
            bytes_arg(send, element_bytes(count, elem_size)?, "send")?,
            bytes_mut_arg(recv, element_bytes(capacity, elem_size)?, "recv")?,
        ))
    }
}

/// `MPI_Alltoall_specific` (seed 002): each of this member's `count`
/// elements of `elem_size` bytes (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96,
/// 128 or 256) goes to the group rank `route` names; the elements sent to
/// this member land in `recv` (room for `capacity`), their number in
/// `*received`. Too little room anywhere is `CATENA_ERR_TRUNCATE` on every
/// member (the last error names what this one needs); a target outside the
/// group is `CATENA_ERR_ARG` on every member; nothing moves in either case.
/// The `auto` variant, unordered; plans choose.
///
/// # Safety
/// `send` is valid for `count` elements, `recv` for `capacity`; `route`
/// may be called with each element and `ctx`; `received` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_specific(
    comm: *const catena_comm_t,
    send: *const c_void,
    count: usize,
    elem_size: usize,
    route: catena_route_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    capacity: usize,
    received: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|_| unsafe {
            once(
                comm, send, count, elem_size, route, ctx, recv, capacity, received,
            )
        })
    })
}

/// `catena_alltoall_specific`, nonblocking: `route` runs while the request
/// progresses; `*received` is written when it is done.
///
/// # Safety
/// As `catena_alltoall_specific`, until the request is done; `request` is
/// NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_specific_post(
    comm: *const catena_comm_t,
    send: *const c_void,
    count: usize,
    elem_size: usize,
    route: catena_route_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    capacity: usize,
    received: *mut usize,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |_| {
            once(
                comm, send, count, elem_size, route, ctx, recv, capacity, received,
            )
        })
    })
}

/// A one-shot alltoall_specific's operation.
///
/// # Safety
/// As `catena_alltoall_specific`'s contract, for `'a`.
#[allow(clippy::too_many_arguments)]
unsafe fn once<'a>(
    comm: *const catena_comm_t,
    send: *const c_void,
    count: usize,
    elem_size: usize,
    route: catena_route_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    capacity: usize,
    received: *mut usize,
) -> Result<Operation<'a>, Failure> {
    // SAFETY: per this function's contract.
    let received = unsafe { out_arg(received, "received") }?;
    let route = route.ok_or_else(|| Failure::arg("the route function is NULL"))?;
    // SAFETY: per this function's contract.
    let (send, recv) = unsafe { buffers(send, count, recv, capacity, elem_size) }?;
    let target = AlltoallTarget::Once {
        comm: comm_arg(comm)?,
        elem_size,
        options: AlltoallOptions::default(),
    };
    let route = one_target(route, ctx);
    Ok(Operation::Alltoall {
        target,
        exchange: Exchange {
            send,
            recv: Receive::Buffer(recv),
            route,
        },
        received,
    })
}

/// Makes a plan on `comm` for repeated alltoalls of `elem_size`-byte
/// elements (the sizes of `catena_alltoall_specific`), receiving up to
/// `capacity` per call, by the variant named `variant` (`auto`,
/// `alltoallv`, `sendrecv`, `put`, `put-stable`, `sort`; NULL: `auto`);
/// `stable` nonzero delivers in (source rank, send position) order. Local:
/// no messages.
///
/// # Safety
/// `variant` is NULL or a NUL-terminated string; `plan` is NULL or valid
/// for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_create(
    comm: *const catena_comm_t,
    elem_size: usize,
    capacity: usize,
    variant: *const c_char,
    stable: c_int,
    plan: *mut *mut catena_alltoall_plan_t,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let out = unsafe { out_arg(plan, "plan") }?;
        // SAFETY: per this function's contract.
        let options = unsafe { options_arg(variant, stable) }?;
        let made =
            with_instance(|i| i.alltoall_plan(comm_arg(comm)?, elem_size, capacity, options))?;
        *out = made.to_ptr();
        Ok(())
    })
}

fn plan_arg(plan: *const catena_alltoall_plan_t) -> Result<Handle, Failure> {
    Handle::from_ptr(plan).ok_or_else(|| Failure::arg("the plan is NULL"))
}

/// The plan's buffers for one call, checked against its shape, with the
/// route `route` makes for its element size.
///
/// # Safety
/// `send` is valid for `count` elements of the plan's size, `recv` for its
/// capacity, until the exchange is done.
unsafe fn plan_args<'a>(
    instance: &dyn Api,
    plan: Handle,
    send: *const c_void,
    count: usize,
    recv: *mut c_void,
    route: impl FnOnce(usize) -> Route<'a>,
) -> Result<Exchange<'a>, Failure> {
    let (elem_size, capacity) = instance.plan_shape(plan)?;
    // SAFETY: per the caller's contract.
    let (send, recv) = unsafe { buffers(send, count, recv, capacity, elem_size) }?;
    Ok(Exchange {
        send,
        recv: Receive::Buffer(recv),
        route: route(elem_size),
    })
}

/// The plan's send buffer and visitor for one visiting call, with the
/// route `route` makes for its element size.
///
/// # Safety
/// `send` is valid for `count` elements of the plan's size until the
/// exchange is done.
unsafe fn plan_visit_args<'a>(
    instance: &dyn Api,
    plan: Handle,
    send: *const c_void,
    count: usize,
    (visit, ctx): (catena_visit_fn, *mut c_void),
    route: impl FnOnce(usize) -> Route<'a>,
) -> Result<Exchange<'a>, Failure> {
    let (elem_size, _) = instance.plan_shape(plan)?;
    let visit = visit.ok_or_else(|| Failure::arg("the visit function is NULL"))?;
    // SAFETY: per the caller's contract.
    let send = unsafe { bytes_arg(send, element_bytes(count, elem_size)?, "send") }?;
    Ok(Exchange {
        send,
        recv: Receive::Visit { visit, ctx },
        route: route(elem_size),
    })
}

/// One exchange of `plan`, of the buffers and route `args` makes for it;
/// the count that arrived goes to `*received`.
///
/// # Safety
/// `received` is NULL or valid for a write for `'a`; `args` makes buffers
/// valid for `'a`.
unsafe fn plan_exchange<'a>(
    plan: *const catena_alltoall_plan_t,
    received: *mut usize,
    args: impl FnOnce(Handle) -> Result<Exchange<'a>, Failure>,
) -> Result<Operation<'a>, Failure> {
    // SAFETY: per this function's contract.
    let received = unsafe { out_arg(received, "received") }?;
    let plan = plan_arg(plan)?;
    Ok(Operation::Alltoall {
        exchange: args(plan)?,
        target: AlltoallTarget::Plan(plan),
        received,
    })
}

/// The NULL check of a route argument.
fn route_arg<F>(route: Option<F>) -> Result<F, Failure> {
    route.ok_or_else(|| Failure::arg("the route function is NULL"))
}

/// One exchange of `plan` (collective over its communicator, in call
/// order): `route` emits each of the `count` elements at `send` to any
/// number of group ranks, as is or modified; the elements sent here land
/// in `recv` (room for the plan's capacity), their number in `*received`.
/// Errors as `catena_alltoall_specific`'s; a route returning nonzero is
/// `CATENA_ERR_USER` on every member, before anything moves.
///
/// # Safety
/// `send` is valid for `count` elements, `recv` for the plan's capacity;
/// `route` may be called with each element and `ctx`; `received` is NULL
/// or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_exchange(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_emit_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    received: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|instance| unsafe {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_args(instance, plan, send, count, recv, |size| {
                    emitting(route, ctx, size)
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange`, nonblocking: `route` runs while the
/// request progresses; `*received` is written when it is done. One
/// exchange of a plan at a time (another fails with `CATENA_ERR_ARG`).
///
/// # Safety
/// As `catena_alltoall_plan_exchange`, until the request is done;
/// `request` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_post(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_emit_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    received: *mut usize,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |instance| {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_args(instance, plan, send, count, recv, |size| {
                    emitting(route, ctx, size)
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange` with one target per element, all of
/// them from one call of `route` over the whole send buffer (not one call
/// per element): for elements that each go to one rank, the cheapest way.
///
/// # Safety
/// `send` is valid for `count` elements, `recv` for the plan's capacity;
/// `route` may be called once with `send`, `count`, a buffer of `count`
/// `int32_t` and `ctx`; `received` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_batch(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_route_batch_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    received: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|instance| unsafe {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_args(instance, plan, send, count, recv, |_| Route::Batch {
                    route,
                    ctx,
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange_batch`, nonblocking: `route` runs while
/// the request progresses; `*received` is written when it is done.
///
/// # Safety
/// As `catena_alltoall_plan_exchange_batch`, until the request is done;
/// `request` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_batch_post(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_route_batch_fn,
    ctx: *mut c_void,
    recv: *mut c_void,
    received: *mut usize,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |instance| {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_args(instance, plan, send, count, recv, |_| Route::Batch {
                    route,
                    ctx,
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange` without a receive buffer: `visit` is
/// called with `visit_ctx` and the elements sent to this member, in pieces
/// (unordered; see `catena_visit_fn`), instead of their being
/// copied into a buffer; their number goes to `*received`. Needs a plan of
/// the `put` (or `auto`) variant that is not stable (`CATENA_ERR_ARG` on
/// every member otherwise, before anything moves); every member calls a
/// visiting exchange (one that meets runs a member offered to an ordinary
/// exchange fails with `CATENA_ERR_MISMATCH`). A visit returning nonzero is
/// `CATENA_ERR_USER` on this member alone.
///
/// # Safety
/// `send` is valid for `count` elements; `route` may be called with each
/// element and `ctx`, `visit` with pieces and `visit_ctx`; `received` is
/// NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_visit(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_emit_fn,
    ctx: *mut c_void,
    visit: catena_visit_fn,
    visit_ctx: *mut c_void,
    received: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|instance| unsafe {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_visit_args(instance, plan, send, count, (visit, visit_ctx), |size| {
                    emitting(route, ctx, size)
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange_visit`, nonblocking: `route` and `visit`
/// run while the request progresses; `*received` is written when it is
/// done.
///
/// # Safety
/// As `catena_alltoall_plan_exchange_visit`, until the request is done;
/// `request` is NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_visit_post(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_emit_fn,
    ctx: *mut c_void,
    visit: catena_visit_fn,
    visit_ctx: *mut c_void,
    received: *mut usize,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |instance| {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_visit_args(instance, plan, send, count, (visit, visit_ctx), |size| {
                    emitting(route, ctx, size)
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange_visit` routed as
/// `catena_alltoall_plan_exchange_batch` is: one call of `route` fills one
/// target per element.
///
/// # Safety
/// `send` is valid for `count` elements; `route` may be called once with
/// `send`, `count`, a buffer of `count` `int32_t` and `ctx`, `visit` with
/// pieces and `visit_ctx`; `received` is NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_batch_visit(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_route_batch_fn,
    ctx: *mut c_void,
    visit: catena_visit_fn,
    visit_ctx: *mut c_void,
    received: *mut usize,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        run(|instance| unsafe {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_visit_args(instance, plan, send, count, (visit, visit_ctx), |_| {
                    Route::Batch { route, ctx }
                })
            })
        })
    })
}

/// `catena_alltoall_plan_exchange_batch_visit`, nonblocking: `route` and
/// `visit` run while the request progresses; `*received` is written when
/// it is done.
///
/// # Safety
/// As `catena_alltoall_plan_exchange_batch_visit`, until the request is
/// done; `request` is NULL or valid for a write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn catena_alltoall_plan_exchange_batch_visit_post(
    plan: *const catena_alltoall_plan_t,
    send: *const c_void,
    count: usize,
    route: catena_route_batch_fn,
    ctx: *mut c_void,
    visit: catena_visit_fn,
    visit_ctx: *mut c_void,
    received: *mut usize,
    request: *mut *mut catena_request_t,
) -> c_int {
    // SAFETY: per this function's contract, until the request is done.
    call(|| unsafe {
        post(request, |instance| {
            plan_exchange(plan, received, |plan| {
                let route = route_arg(route)?;
                plan_visit_args(instance, plan, send, count, (visit, visit_ctx), |_| {
                    Route::Batch { route, ctx }
                })
            })
        })
    })
}

/// Frees `*plan` and sets it to NULL (an exchange in flight keeps it until
/// done).
///
/// # Safety
/// `plan` is NULL or valid for reads and writes.
#[no_mangle]
pub unsafe extern "C" fn catena_alltoall_plan_free(
    plan: *mut *mut catena_alltoall_plan_t,
) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let slot = unsafe { out_arg(plan, "plan") }?;
        with_instance(|i| i.free_plan(plan_arg(*slot)?))?;
        *slot = std::ptr::null_mut();
        Ok(())
    })
}
