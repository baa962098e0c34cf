//! alltoall_specific on elements whose size C names at run time: plans of
//! byte arrays of the supported sizes, kept with their communicator, and
//! routes over an element's bytes (a callback each, or one for them all).

use std::any::Any;
use std::ffi::{c_int, c_void};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use bytemuck::Pod;
use catena_algorithms::alltoall::Emit;
use catena_algorithms::{AlltoallOptions, AlltoallPlan, Comm, Error};
use catena_fabric::Transport;

/// Where a route sends one element, whatever the element's size.
pub(crate) trait Targets {
    fn to(&mut self, rank: u32);
    /// Sends `copy` (one element's bytes) in the element's place.
    fn modified(&mut self, rank: u32, copy: &[u8]);
}

impl<const N: usize> Targets for Emit<'_, [u8; N]> {
    fn to(&mut self, rank: u32) {
        Emit::to(self, rank);
    }

    fn modified(&mut self, rank: u32, copy: &[u8]) {
        let copy: [u8; N] = copy.try_into().expect("copies are read one element long");
        Emit::modified(self, rank, copy);
    }
}

/// How the elements of one call find their targets.
pub(crate) enum Route<'a> {
    /// A callback per element, over its bytes.
    Each(EachRoute<'a>),
    /// One C callback for the whole send buffer, which fills one target
    /// per element: no call per element, and none through a pointer.
    Batch { route: BatchRoute, ctx: *mut c_void },
}

type EachRoute<'a> = Box<dyn FnMut(&[u8], &mut dyn Targets) + 'a>;
type BatchRoute = unsafe extern "C" fn(*const c_void, usize, *mut i32, *mut c_void) -> c_int;
type VisitFn = unsafe extern "C" fn(*const c_void, usize, *mut c_void) -> c_int;

/// Where the elements of one call go.
pub(crate) enum Receive<'a> {
    /// Room for the capacity's elements.
    Buffer(&'a mut [u8]),
    /// To a C callback, in pieces as they are read out of the plan's window.
    Visit { visit: VisitFn, ctx: *mut c_void },
}

impl Receive<'_> {
    /// The bytes of the buffer (none for a visit).
    pub(crate) fn buffer_len(&self) -> usize {
        match self {
            Receive::Buffer(recv) => recv.len(),
            Receive::Visit { .. } => 0,
        }
    }
}

/// One call's buffers and route, as bytes.
pub(crate) struct Exchange<'a> {
    pub(crate) send: &'a [u8],
    pub(crate) recv: Receive<'a>,
    pub(crate) route: Route<'a>,
}

type Exchanging<'a> = Pin<Box<dyn Future<Output = catena_algorithms::Result<usize>> + 'a>>;

/// An [`AlltoallPlan`] of byte-array elements, their size known at run time.
pub(crate) trait BytePlan {
    fn elem_size(&self) -> usize;
    fn capacity(&self) -> usize;
    fn iexchange<'a>(&'a self, exchange: Exchange<'a>) -> Exchanging<'a>;
}

impl<T: Transport, const N: usize> BytePlan for AlltoallPlan<'_, '_, T, [u8; N]>
where
    [u8; N]: Pod,
{
    fn elem_size(&self) -> usize {
        N
    }

    fn capacity(&self) -> usize {
        AlltoallPlan::capacity(self)
    }

    fn iexchange<'a>(&'a self, x: Exchange<'a>) -> Exchanging<'a> {
        let send: &[[u8; N]] = bytemuck::cast_slice(x.send);
        match (x.route, x.recv) {
            (Route::Each(mut route), Receive::Buffer(recv)) => {
                let recv = bytemuck::cast_slice_mut(recv);
                Box::pin(self.iexchange(send, recv, move |e, emit| route(e, emit)))
            }
            (Route::Batch { route, ctx }, Receive::Buffer(recv)) => {
                let recv = bytemuck::cast_slice_mut(recv);
                Box::pin(self.iexchange_targets(send, recv, batch(route, ctx)))
            }
            (Route::Each(mut route), Receive::Visit { visit, ctx }) => {
                let route = move |e: &[u8; N], emit: &mut Emit<'_, [u8; N]>| route(e, emit);
                Box::pin(self.iexchange_visit(send, route, visiting(visit, ctx)))
            }
            (Route::Batch { route, ctx }, Receive::Visit { visit, ctx: at }) => {
                let targets = batch(route, ctx);
                Box::pin(self.iexchange_targets_visit(send, targets, visiting(visit, at)))
            }
        }
    }
}

/// The targets of a whole send buffer from the C batch callback.
fn batch<const N: usize>(
    route: BatchRoute,
    ctx: *mut c_void,
) -> impl FnOnce(&[[u8; N]], &mut [i32]) {
    move |send, targets| {
        // SAFETY: the caller vouches for `route` and `ctx`; `send` is the
        // whole send buffer and `targets` holds one i32 per element.
        let rc = unsafe { route(send.as_ptr().cast(), send.len(), targets.as_mut_ptr(), ctx) };
        if rc != 0 {
            // Unwinds to the alltoall's guard of user code:
            // `CATENA_ERR_USER` on every member.
            let why = format!("the batch route callback returned {rc}");
            std::panic::resume_unwind(Box::new(why));
        }
    }
}

/// A visitor calling the C callback with each piece.
fn visiting<const N: usize>(visit: VisitFn, ctx: *mut c_void) -> impl FnMut(&[[u8; N]]) {
    move |piece| {
        // SAFETY: the caller vouches for `visit` and `ctx`; `piece` is
        // whole elements, valid during the call.
        let rc = unsafe { visit(piece.as_ptr().cast(), piece.len(), ctx) };
        if rc != 0 {
            // Unwinds to the visit's guard of user code: `CATENA_ERR_USER`
            // on this member.
            let why = format!("the visit callback returned {rc}");
            std::panic::resume_unwind(Box::new(why));
        }
    }
}

/// A plan on `comm` for elements of `size` bytes: a byte array of one of
/// these sizes (Rust's alltoall moves `Pod` values of a size known when
/// compiled).
pub(crate) fn byte_plan<'c, T: Transport>(
    comm: &'c Comm<'static, T>,
    size: usize,
    capacity: usize,
    options: AlltoallOptions,
) -> catena_algorithms::Result<Box<dyn BytePlan + 'c>> {
    macro_rules! sized {
        ($($n:literal)*) => {
            match size {
                $($n => Ok(Box::new(comm.alltoall_plan::<[u8; $n]>(capacity, options)?)),)*
                _ => Err(Error::InvalidArgument(format!(
                    "alltoall_specific elements of {size} bytes; sizes are {}",
                    [$($n),*].map(|n: usize| n.to_string()).join(", ")
                ))),
            }
        };
    }
    sized!(1 2 4 8 12 16 24 32 48 64 96 128 256)
}

type PlanOf<'c> = Box<dyn BytePlan + 'c>;

self_cell::self_cell!(
    /// A plan and the communicator it runs on, which it keeps alive (a
    /// request in flight on the plan keeps both).
    pub(crate) struct PlanCell {
        owner: Rc<dyn Any>,
        #[covariant]
        dependent: PlanOf,
    }
);

impl PlanCell {
    /// A plan on `comm` (a `Comm<'static, T>`).
    pub(crate) fn make<T: Transport + 'static>(
        comm: Rc<Comm<'static, T>>,
        size: usize,
        capacity: usize,
        options: AlltoallOptions,
    ) -> catena_algorithms::Result<PlanCell> {
        PlanCell::try_new(comm, |owner| {
            let comm = owner
                .downcast_ref::<Comm<'static, T>>()
                .expect("made from a communicator of this transport");
            byte_plan(comm, size, capacity, options)
        })
    }

    pub(crate) fn plan(&self) -> &dyn BytePlan {
        self.borrow_dependent().as_ref()
    }
}
