//! Alltoall_specific (seed 002): every element names its own target (or
//! several, or none), and after the call each process holds exactly the
//! elements aimed at it. Variants by name or `Auto`; a plan keeps the
//! receive window and peers' keys across calls. Docs: docs/alltoall.md.
//!
//! ```
//! use catena_algorithms::prelude::*;
//!
//! // Each of 4 ranks holds 0..8 and sends each value v to rank v % 4.
//! let sim = catena_sim::Sim::new(4, catena_sim::LogGp::default());
//! let (got, _) = sim
//!     .run(async |t| {
//!         let world = Comm::world(t);
//!         let send: Vec<u32> = (0..8).collect();
//!         let mut recv = vec![0u32; 8];
//!         let options = AlltoallOptions::new(AlltoallVariant::Put).stable();
//!         let n = world
//!             .ialltoall_specific(&send, &mut recv, options, |v, to| to.to(v % 4))
//!             .await?;
//!         Ok::<_, Error>(recv[..n].to_vec())
//!     })
//!     .unwrap();
//! // Stable: sources in rank order, each in send order.
//! assert_eq!(got[1].as_ref().unwrap(), &[1, 5, 1, 5, 1, 5, 1, 5]);
//! ```

mod alltoallv;
mod in_place;
mod outcome;
mod pull;
mod put;
mod route;
mod sendrecv;
mod sort;
mod sparse;
mod window;

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::marker::PhantomData;
use std::str::FromStr;

use crate::blocking::block_on;
use crate::call::Call;
use bytemuck::Pod;
use catena_fabric::{Blocking, Transport};

use crate::chain::CallTags;
use crate::groupmap::GroupMap;
use crate::scan::allreduce_in;
use crate::{Comm, Error, Result};
pub use route::Emit;
use route::Routed;
pub use sparse::Peers;
use window::{Layout, Receiver};

/// How an alltoall moves the elements; docs/alltoall.md compares them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Variant {
    /// [`Variant::Put`], or [`Variant::PutStable`] where order is asked for.
    #[default]
    Auto,
    /// Counts to every process, then [`Comm::ialltoallv`]: O(P) per process;
    /// stable.
    Alltoallv,
    /// Reservations as `Put`, elements through eager messages (one per
    /// 16 KiB); unstable unless order is asked for.
    Sendrecv,
    /// One `fetch_add` per distinct target, then one `put_signal` per target
    /// straight into its receive window; O(n + k); unstable.
    Put,
    /// `Put` with a chunk header per (source, target), sorted at the target:
    /// stable.
    PutStable,
    /// The seed's: a parallel sort of the copies by (target, source,
    /// position) on the chain (Bitonic over blocks), then `PutStable` of
    /// the sorted blocks; stable, O(log^2 P) block exchanges.
    Sort,
}

impl Variant {
    /// Every variant but `Auto`, for benchmarks and tests.
    pub const ALL: [Variant; 5] = [
        Variant::Alltoallv,
        Variant::Sendrecv,
        Variant::Put,
        Variant::PutStable,
        Variant::Sort,
    ];

    /// The variant's name, as [`Variant::from_str`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Auto => "auto",
            Variant::Alltoallv => "alltoallv",
            Variant::Sendrecv => "sendrecv",
            Variant::Put => "put",
            Variant::PutStable => "put-stable",
            Variant::Sort => "sort",
        }
    }

    /// What `Auto` and an order request make of this variant.
    fn resolve(self, stable: bool) -> Variant {
        match self {
            Variant::Auto | Variant::Put if stable => Variant::PutStable,
            Variant::Auto => Variant::Put,
            other => other,
        }
    }
}

impl FromStr for Variant {
    type Err = Error;

    fn from_str(name: &str) -> Result<Variant> {
        [Variant::Auto]
            .into_iter()
            .chain(Variant::ALL)
            .find(|v| v.name() == name)
            .ok_or_else(|| Error::InvalidArgument(format!("no alltoall variant is named {name:?}")))
    }
}

/// How a plan moves elements: the variant, and whether the elements from
/// one source keep their order with sources in rank order (the seed's
/// stability).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// The variant (default `Auto`).
    pub variant: Variant,
    /// Deliver in (source rank, send position) order.
    pub stable: bool,
}

impl Options {
    /// `variant`, unstable unless the variant is stable itself.
    pub fn new(variant: Variant) -> Options {
        Options {
            variant,
            stable: false,
        }
    }

    /// These options with delivery in (source rank, send position) order.
    pub fn stable(self) -> Options {
        Options {
            stable: true,
            ..self
        }
    }
}

/// A persistent alltoall for elements of type `E` on one communicator: its
/// receive window (room for `capacity` elements) and the keys of the
/// windows of the peers it has sent to outlive each call, unlike an MPI
/// window made per call. Made locally (no messages); each
/// [`AlltoallPlan::iexchange`] is collective over the communicator.
pub struct AlltoallPlan<'c, 't, T: Transport, E> {
    comm: &'c Comm<'t, T>,
    variant: Variant,
    stable: bool,
    capacity: usize,
    /// The window the one-sided variants need (not `Alltoallv`).
    receiver: Option<Receiver<T::Window>>,
    /// The ranks this plan sends to and receives from, if it was told.
    peers: Option<Peers>,
    /// The last call's copies, grouped by target; its buffers are reused.
    routed: RefCell<Routed<E>>,
    /// Calls made so far: their parity picks the window's words.
    calls: Cell<u64>,
    /// A call failed half-way: the window's words may hold its traffic.
    broken: Cell<bool>,
    /// A target could not copy a run this process offered: runs are put.
    offers_refused: Cell<bool>,
    _element: PhantomData<E>,
}

/// What one call of a plan works with, taken when it is called (so calls
/// made in the same order on every process match).
struct PlanCall {
    /// Tags of the key exchange (or counts) and of the agreement step.
    exchange: CallTags,
    agree: CallTags,
    /// The parity of the plan's call number: which window words it uses.
    parity: usize,
    /// The sort variant's own tags.
    sort: Option<sort::SortTags>,
    deadline: catena_fabric::Time,
}

impl PlanCall {
    fn take<T: Transport>(comm: &Comm<'_, T>, number: u64, variant: Variant) -> PlanCall {
        let chain = comm.chain();
        PlanCall {
            exchange: chain.next_call(),
            agree: chain.next_call(),
            parity: (number % 2) as usize,
            sort: (variant == Variant::Sort).then(|| sort::SortTags::take(chain)),
            deadline: comm.deadline(),
        }
    }
}

impl<'c, 't, T: Transport, E: Pod> AlltoallPlan<'c, 't, T, E> {
    /// A plan on `comm` that receives up to `capacity` elements per call.
    pub fn new(
        comm: &'c Comm<'t, T>,
        capacity: usize,
        options: Options,
    ) -> Result<AlltoallPlan<'c, 't, T, E>> {
        let variant = options.variant.resolve(options.stable);
        let size = std::mem::size_of::<E>();
        if size == 0 {
            // Receivers count bytes and elements by the element's size.
            return Err(Error::InvalidArgument(
                "an alltoall of zero-sized elements: they carry nothing to count".into(),
            ));
        }
        let receiver = match variant {
            Variant::Alltoallv => None,
            // Sendrecv reserves in the window but receives by message.
            Variant::Sendrecv => Some(Receiver::new(
                comm.transport(),
                Layout::new(0, size, comm.size())?,
                capacity,
            )?),
            _ => Some(Receiver::new(
                comm.transport(),
                Layout::new(capacity, size, comm.size())?,
                capacity,
            )?),
        };
        Ok(AlltoallPlan {
            comm,
            variant,
            stable: options.stable
                || matches!(
                    variant,
                    Variant::PutStable | Variant::Alltoallv | Variant::Sort
                ),
            capacity,
            receiver,
            peers: None,
            routed: RefCell::default(),
            calls: Cell::new(0),
            broken: Cell::new(false),
            offers_refused: Cell::new(false),
            _element: PhantomData,
        })
    }

    /// The variant this plan runs (`Auto` resolved).
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// The most elements one call delivers to this process.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes this plan holds between calls on this process: its window
    /// (provider memory) and its reused buffers (heap).
    pub fn held_bytes(&self) -> usize {
        let window = self.receiver.as_ref().map_or(0, |r| r.layout.len());
        window + self.routed.borrow().held_bytes()
    }

    /// The plan for one call: its routing buffers, held for the whole call
    /// (a concurrent call on the same plan fails here instead of sharing
    /// its window words).
    fn lock(&self) -> Result<std::cell::RefMut<'_, Routed<E>>> {
        self.routed.try_borrow_mut().map_err(|_| {
            Error::InvalidArgument("an alltoall plan serves one call at a time".into())
        })
    }

    /// The receive window, which every variant but `Alltoallv` has.
    fn window(&self) -> &Receiver<T::Window> {
        self.receiver
            .as_ref()
            .expect("the one-sided variants and Sendrecv hold a window")
    }

    /// A receive count read from the window's counter: what peers reserved,
    /// which the agreement bounded by the capacity (a peer that wrote the
    /// word itself is caught here).
    fn received_count(&self, total: u64) -> Result<usize> {
        usize::try_from(total)
            .ok()
            .filter(|&n| n <= self.capacity)
            .ok_or_else(|| Error::Mismatch {
                what: format!("the receive count: {total} elements reserved past the capacity"),
            })
    }

    /// Peers whose window keys this plan holds: at most the distinct
    /// targets it has sent to.
    pub fn known_peers(&self) -> usize {
        self.receiver.as_ref().map_or(0, Receiver::known_peers)
    }

    /// Sends each element of `send` where `route` says (call
    /// [`Emit::to`] once per target; none drops it) and receives, into the
    /// front of `recv`, the elements aimed at this process; yields how many
    /// arrived. Collective over the communicator, in call order. `recv`
    /// must hold the plan's capacity. `route` is called once per element.
    ///
    /// Fails alike on every process, before any element moves, if a route
    /// function panics (`UserCode`), names a rank outside the group
    /// (`TargetOutOfRange`), or some process lacks room
    /// (`ReceiveOverflow`, with each process's own need); `recv` is then
    /// untouched.
    pub fn iexchange<'a>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        route: impl FnMut(&E, &mut Emit<'_, E>) + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        self.start(recv, move |routed, size, rank| {
            routed.route(send, size, rank, route)
        })
    }

    /// [`AlltoallPlan::iexchange`] where each element goes to one rank at
    /// most: `targets` is called once, with `send` and a slice of one
    /// target per element to fill (a negative one drops the element),
    /// instead of a route call per element: the cheapest way where the
    /// targets come from elsewhere in one pass (a C caller's batch route).
    pub fn iexchange_targets<'a>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        targets: impl FnOnce(&[E], &mut [i32]) + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        self.start(recv, move |routed, size, rank| {
            routed.route_targets(send, size, rank, targets)
        })
    }

    /// [`AlltoallPlan::iexchange`] without a receive buffer: `visit` is
    /// called with the elements aimed at this process, in pieces of at
    /// most 16 KiB (unstable order): those from other processes read out
    /// of the plan's window as it goes, this process's own where they lie;
    /// yields how many arrived. Where a buffer would be written whole and
    /// read again, each element is read once, from a piece in cache.
    ///
    /// Needs a `Put` plan that is not stable (`InvalidArgument` on every
    /// process otherwise, before any element moves). Every process makes
    /// the same kind of call: one that finds a run offered for a copy
    /// into a buffer fails with `Mismatch`. A panic in `visit` is
    /// `UserCode` on this process alone: the elements have moved, the
    /// pieces after it are not visited, and the plan stays usable.
    pub fn iexchange_visit<'a>(
        &'a self,
        send: &'a [E],
        route: impl FnMut(&E, &mut Emit<'_, E>) + 'a,
        visit: impl FnMut(&[E]) + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        self.visiting(visit, move |routed, size, rank| {
            routed.route(send, size, rank, route)
        })
    }

    /// [`AlltoallPlan::iexchange_visit`] with one target per element from
    /// one call of `targets`, as [`AlltoallPlan::iexchange_targets`] takes
    /// them (the C API's batch route with a visitor).
    pub fn iexchange_targets_visit<'a>(
        &'a self,
        send: &'a [E],
        targets: impl FnOnce(&[E], &mut [i32]) + 'a,
        visit: impl FnMut(&[E]) + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        self.visiting(visit, move |routed, size, rank| {
            routed.route_targets(send, size, rank, targets)
        })
    }

    /// One visiting exchange whose copies `route` makes, taking its tags
    /// now, in call order.
    fn visiting<'a>(
        &'a self,
        mut visit: impl FnMut(&[E]) + 'a,
        route: impl FnOnce(&mut Routed<E>, u32, u32) -> Result<()> + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        let (call, map) = self.begin();
        async move {
            let map = map.await?;
            self.run(call, map, Landing::Visit(&mut visit), route).await
        }
    }

    /// One exchange whose copies `route` makes (given the group's size and
    /// this process's rank), taking its tags now, in call order.
    fn start<'a>(
        &'a self,
        recv: &'a mut [E],
        route: impl FnOnce(&mut Routed<E>, u32, u32) -> Result<()> + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        let (call, map) = self.begin();
        async move {
            let map = map.await?;
            self.run(call, map, Landing::Buffer(recv), route).await
        }
    }

    /// A call's tags and its map, asked for when it is called.
    fn begin(&self) -> (PlanCall, impl Future<Output = Result<&GroupMap>> + '_) {
        let call = PlanCall::take(self.comm, self.calls.get(), self.variant);
        self.calls.set(self.calls.get() + 1);
        // A split's communicator loads its map by a collective step, which
        // this collective call may take for every member: ask for it now,
        // in call order.
        (call, self.comm.igroup_map())
    }

    // The borrow of `routed` is the plan's lock for the whole call (`lock`).
    #[allow(clippy::await_holding_refcell_ref)]
    async fn run(
        &self,
        call: PlanCall,
        map: &GroupMap,
        landing: Landing<'_, E>,
        route: impl FnOnce(&mut Routed<E>, u32, u32) -> Result<()>,
    ) -> Result<usize> {
        if self.broken.get() {
            return Err(Error::Mismatch {
                what: "an alltoall plan whose earlier call failed half-way".into(),
            });
        }
        let mut routed = self.lock()?;
        let refused = match &landing {
            Landing::Buffer(recv) if recv.len() < self.capacity => Some(format!(
                "a receive buffer of {} elements for a plan of capacity {}",
                recv.len(),
                self.capacity
            )),
            Landing::Visit(_) if self.variant != Variant::Put || self.stable => Some(format!(
                "a visiting exchange on a {} plan (it needs an unstable put plan)",
                if self.stable {
                    "stable"
                } else {
                    self.variant.name()
                }
            )),
            _ => None,
        };
        let local = match refused {
            Some(why) => {
                routed.clear();
                Err(Error::InvalidArgument(why))
            }
            None => route(&mut routed, self.comm.size(), self.comm.rank()),
        };
        let guard = BreakOnDrop(&self.broken);
        let received = match (self.variant, call.sort) {
            (Variant::Alltoallv, _) => {
                let recv = landing.buffer();
                self.alltoallv(&call, map, local, &routed, recv).await
            }
            (Variant::Sendrecv, _) => {
                let recv = landing.buffer();
                self.sendrecv(&call, map, local, &routed, recv).await
            }
            (Variant::Sort, Some(tags)) => {
                let recv = landing.buffer();
                self.sort(&call, tags, map, local, &mut routed, recv).await
            }
            _ => self.put(&call, map, local, &mut routed, landing).await,
        };
        // Errors of the agreement step leave the plan sound.
        if received.is_ok() || is_agreed(&received) {
            std::mem::forget(guard);
        }
        received
    }
}

/// Where a call's elements go: copied into the caller's buffer, or read
/// out of the window in pieces for a visitor (`iexchange_visit`, `Put`
/// only).
enum Landing<'r, E> {
    Buffer(&'r mut [E]),
    Visit(&'r mut dyn FnMut(&[E])),
}

impl<'r, E> Landing<'r, E> {
    /// The buffer of a variant that copies out. A visiting call of such a
    /// variant was refused on every process, which fails in its agreement
    /// before a buffer is touched: an empty one stands in.
    fn buffer(self) -> &'r mut [E] {
        match self {
            Landing::Buffer(recv) => recv,
            Landing::Visit(_) => &mut [],
        }
    }
}

/// Whether a call failed in the agreement step (every process alike,
/// nothing moved), so the plan stays usable.
fn is_agreed<R>(result: &Result<R>) -> bool {
    matches!(
        result,
        Err(Error::UserCode { .. }
            | Error::TargetOutOfRange { .. }
            | Error::InvalidArgument(_)
            | Error::ReceiveOverflow { .. })
    )
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Alltoall_specific in place: sends the elements of `data` where
    /// `route` says and leaves in `data` those received (unstable order),
    /// with bounded extra memory: blocks of at most the plan's capacity
    /// leave per round, each target takes at most its capacity per round
    /// and the rest waits for the next, until every process is done (at
    /// most 256 rounds). Needs a `Put` plan without neighbour lists. `data`
    /// grows only where more arrives than leaves. Errors are those of
    /// [`AlltoallPlan::iexchange`] except `ReceiveOverflow` (what does not
    /// fit waits); on an error, elements already moved stay moved and
    /// `data`'s contents are unspecified.
    pub fn iexchange_in_place<'a>(
        &'a self,
        data: &'a mut Vec<E>,
        route: impl FnMut(&E, &mut Emit<'_, E>) + 'a,
    ) -> impl Future<Output = Result<()>> + 'a {
        let calls = self.comm.chain().reserve(2 * in_place::ROUNDS);
        let first = self.calls.get();
        self.calls.set(first + 2);
        let deadline = self.comm.deadline();
        let map = self.comm.igroup_map();
        async move {
            if self.broken.get() {
                return Err(Error::Mismatch {
                    what: "an alltoall plan whose earlier call failed half-way".into(),
                });
            }
            let map = map.await?;
            let guard = BreakOnDrop(&self.broken);
            let result = self
                .in_place(calls, first, deadline, map, data, route)
                .await;
            if result.is_ok() || is_agreed(&result) {
                std::mem::forget(guard);
            }
            result
        }
    }
}

/// Marks a plan broken unless forgotten.
struct BreakOnDrop<'a>(&'a Cell<bool>);

impl Drop for BreakOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

/// The blocking form.
impl<T: Transport + Blocking, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// See [`AlltoallPlan::iexchange_in_place`].
    pub fn exchange_in_place(
        &self,
        data: &mut Vec<E>,
        route: impl FnMut(&E, &mut Emit<'_, E>),
    ) -> Result<()> {
        block_on(self.comm.transport(), || {
            self.iexchange_in_place(data, route)
        })
    }

    /// See [`AlltoallPlan::iexchange`].
    pub fn exchange(
        &self,
        send: &[E],
        recv: &mut [E],
        route: impl FnMut(&E, &mut Emit<'_, E>),
    ) -> Result<usize> {
        block_on(self.comm.transport(), || self.iexchange(send, recv, route))
    }

    /// See [`AlltoallPlan::iexchange_visit`].
    pub fn exchange_visit(
        &self,
        send: &[E],
        route: impl FnMut(&E, &mut Emit<'_, E>),
        visit: impl FnMut(&[E]),
    ) -> Result<usize> {
        block_on(self.comm.transport(), || {
            self.iexchange_visit(send, route, visit)
        })
    }

    /// See [`AlltoallPlan::iexchange_targets_visit`].
    pub fn exchange_targets_visit(
        &self,
        send: &[E],
        targets: impl FnOnce(&[E], &mut [i32]),
        visit: impl FnMut(&[E]),
    ) -> Result<usize> {
        block_on(self.comm.transport(), || {
            self.iexchange_targets_visit(send, targets, visit)
        })
    }

    /// See [`AlltoallPlan::iexchange_targets`].
    pub fn exchange_targets(
        &self,
        send: &[E],
        recv: &mut [E],
        targets: impl FnOnce(&[E], &mut [i32]),
    ) -> Result<usize> {
        block_on(self.comm.transport(), || {
            self.iexchange_targets(send, recv, targets)
        })
    }
}

impl<'t, T: Transport> Comm<'t, T> {
    /// A plan for repeated alltoalls of `E` on this communicator, receiving
    /// up to `capacity` elements per call ([`AlltoallPlan::new`]).
    pub fn alltoall_plan<E: Pod>(
        &self,
        capacity: usize,
        options: Options,
    ) -> Result<AlltoallPlan<'_, 't, T, E>> {
        AlltoallPlan::new(self, capacity, options)
    }

    /// A plan that sends only to `peers.targets` and receives only from
    /// `peers.sources` (a neighbourhood alltoall: no step reaches every
    /// process, errors reach the neighbourhood; docs/alltoall.md). Put
    /// variants only. Collective: one allreduce checks that every edge is
    /// listed at both ends (`Mismatch` on every process otherwise).
    pub fn ialltoall_plan_among<E: Pod>(
        &self,
        capacity: usize,
        options: Options,
        peers: Peers,
    ) -> impl Future<Output = Result<AlltoallPlan<'_, 't, T, E>>> + '_ {
        let (tags, deadline) = (self.chain().next_call(), self.deadline());
        async move {
            let peers = peers.checked(self.size());
            let balance = peers
                .as_ref()
                .map_or((i64::MIN, 0), |p| p.balance(self.rank()));
            let sum = |a: &(i64, u64), b: &(i64, u64)| (a.0.saturating_add(b.0), a.1 ^ b.1);
            let t = self.transport();
            let total =
                allreduce_in(Call::new(t, self.chain(), tags, deadline), balance, sum).await?;
            let peers = peers?;
            if total != (0, 0) {
                return Err(Error::Mismatch {
                    what: "alltoall neighbours: some process lists an edge its other end does \
                           not (or a list was refused)"
                        .into(),
                });
            }
            let mut plan = AlltoallPlan::new(self, capacity, options)?;
            if !matches!(plan.variant, Variant::Put | Variant::PutStable) {
                return Err(Error::InvalidArgument(format!(
                    "a neighbourhood plan runs the put variants, not {}",
                    plan.variant.name()
                )));
            }
            plan.peers = Some(peers);
            Ok(plan)
        }
    }

    /// One alltoall_specific (MPI_Alltoall_specific): a plan of capacity
    /// `recv.len()` used once; see [`AlltoallPlan::iexchange`].
    pub fn ialltoall_specific<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        options: Options,
        route: impl FnMut(&E, &mut Emit<'_, E>) + 'a,
    ) -> impl Future<Output = Result<usize>> + 'a {
        let plan = AlltoallPlan::new(self, recv.len(), options);
        // The call's tags are taken now, as the plan's own call would.
        let variant = plan.as_ref().map_or(Variant::Auto, |p| p.variant);
        let (call, map) = (PlanCall::take(self, 0, variant), self.igroup_map());
        async move {
            let (plan, map) = (plan?, map.await?);
            let route = |routed: &mut Routed<E>, size, rank| routed.route(send, size, rank, route);
            plan.run(call, map, Landing::Buffer(recv), route).await
        }
    }
}

/// The blocking forms.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::ialltoall_plan_among`].
    pub fn alltoall_plan_among<E: Pod>(
        &self,
        capacity: usize,
        options: Options,
        peers: Peers,
    ) -> Result<AlltoallPlan<'_, 't, T, E>> {
        block_on(self.transport(), || {
            self.ialltoall_plan_among(capacity, options, peers)
        })
    }

    /// See [`Comm::ialltoall_specific`].
    pub fn alltoall_specific<E: Pod>(
        &self,
        send: &[E],
        recv: &mut [E],
        options: Options,
        route: impl FnMut(&E, &mut Emit<'_, E>),
    ) -> Result<usize> {
        block_on(self.transport(), || {
            self.ialltoall_specific(send, recv, options, route)
        })
    }
}
