//! What `catena_init` starts: a transport of the provider the job runs on,
//! the tables of live communicators, groups, plans and requests over it,
//! and the driving of operations (to completion, or as requests). The C
//! functions reach it through [`Api`], which hides the provider type.

use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use catena_algorithms::comm::DEFAULT_TIMEOUT;
use catena_algorithms::{Algorithm, AlltoallOptions, Comm, GroupMap};
use catena_fabric::Provider;

use crate::boundary::rank_arg;
use crate::byte_plan::PlanCell;
use crate::handles::{Handle, Handles};
use crate::operation::{Boxed, Finished, InPlace, Operation, Running};
use crate::status::{Failure, CATENA_ERR_HANDLE, CATENA_ERR_STATE};

/// The C API's calls on a started instance, whatever its provider.
/// Communicators, groups, plans and requests are named by handle; every
/// collective operation is an [`Operation`], run or posted.
pub(crate) trait Api {
    fn world(&mut self) -> Handle;
    fn rank(&self, comm: Handle) -> Result<u32, Failure>;
    fn size(&self, comm: Handle) -> Result<u32, Failure>;
    fn world_rank_of(&self, comm: Handle, rank: u32) -> Result<u32, Failure>;
    fn group_rank_of(&self, comm: Handle, world: u32) -> Result<Option<u32>, Failure>;
    fn set_algorithm(&mut self, comm: Handle, algorithm: Algorithm) -> Result<(), Failure>;
    fn set_timeout(&mut self, comm: Handle, timeout: Duration) -> Result<(), Failure>;
    fn free(&mut self, comm: Handle) -> Result<(), Failure>;
    /// A plan for repeated alltoalls of `elem_size`-byte elements, receiving
    /// up to `capacity` per call.
    fn alltoall_plan(
        &mut self,
        comm: Handle,
        elem_size: usize,
        capacity: usize,
        options: AlltoallOptions,
    ) -> Result<Handle, Failure>;
    /// A plan's element size and capacity.
    fn plan_shape(&self, plan: Handle) -> Result<(usize, usize), Failure>;
    fn free_plan(&mut self, plan: Handle) -> Result<(), Failure>;
    /// The number of processes in the job (the world of group maps).
    fn world_size(&self) -> u32;
    fn insert_group(&mut self, map: GroupMap) -> Handle;
    fn group(&self, group: Handle) -> Result<&GroupMap, Failure>;
    fn free_group(&mut self, group: Handle) -> Result<(), Failure>;
    /// Runs `operation` to completion on this thread: the blocking form.
    fn run(&mut self, operation: Operation<'_>) -> Result<(), Failure>;
    /// Starts `operation` as a request (its buffers and callbacks valid
    /// until the request is done): the posted form.
    fn post(&mut self, operation: Operation<'static>) -> Result<Handle, Failure>;
    /// Progresses `request`: `Some(outcome)` once it finished (and is
    /// gone); `Err` only for a handle that is not a live request.
    fn test(&mut self, request: Handle) -> Result<Option<Result<(), Failure>>, Failure>;
    fn pending_requests(&self) -> usize;
    /// Frees every communicator and group and leaves the job.
    fn finalize(self: Box<Self>) -> Result<(), Failure>;
}

/// A started provider and the communicators over it.
pub(crate) struct Instance<P: Provider + 'static> {
    /// Leaked so communicators may borrow it for `'static`; taken back in
    /// `finalize`, after every communicator is gone.
    transport: &'static P,
    /// Shared with the requests in flight on them, which keep them alive.
    comms: Handles<Rc<Comm<'static, P>>>,
    requests: Handles<Pending<P>>,
    groups: Handles<GroupMap>,
    /// Alltoall plans, each holding its communicator.
    plans: Handles<Rc<PlanCell>>,
    /// The world communicator: one per transport, never freed.
    world: Handle,
}

impl<P: Provider + 'static> Instance<P> {
    pub(crate) fn start(transport: P) -> Box<dyn Api> {
        let transport: &'static P = Box::leak(Box::new(transport));
        let mut comms = Handles::default();
        let world = comms.insert(Rc::new(Comm::world(transport)));
        Box::new(Instance {
            transport,
            comms,
            requests: Handles::default(),
            groups: Handles::default(),
            plans: Handles::default(),
            world,
        })
    }

    pub(crate) fn comm(&self, handle: Handle) -> Result<&Rc<Comm<'static, P>>, Failure> {
        self.comms
            .get(handle)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live communicator handle"))
    }

    pub(crate) fn plan(&self, handle: Handle) -> Result<&Rc<PlanCell>, Failure> {
        self.plans
            .get(handle)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live alltoall plan handle"))
    }

    /// Replaces the communicator behind `handle` by `change(comm)`; not
    /// while a request in flight uses it.
    fn change(
        &mut self,
        handle: Handle,
        change: impl FnOnce(Comm<'static, P>) -> Comm<'static, P>,
    ) -> Result<(), Failure> {
        if Rc::strong_count(self.comm(handle)?) > 1 {
            return Err(Failure::new(
                CATENA_ERR_STATE,
                "a request in flight uses this communicator",
            ));
        }
        self.comms
            .update(handle, |rc| {
                Rc::new(change(Rc::into_inner(rc).expect("no other owner, checked")))
            })
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live communicator handle"))
    }

    /// Keeps a communicator a finished operation made, its handle (NULL
    /// for none) where the caller asked for it.
    fn finish(&mut self, finished: Finished<'_, P>) {
        if let Finished::Comm { made, at } = finished {
            let made = made.map(|comm| self.comms.insert(comm));
            *at = made.map_or(std::ptr::null_mut(), Handle::to_ptr);
        }
    }
}

/// A posted operation, until a test finds it done.
struct Pending<P: Provider + 'static> {
    running: Running<'static, P>,
    /// Its result, once a test of any request found it finished.
    finished: Option<Result<Finished<'static, P>, Failure>>,
}

impl<P: Provider + 'static> Pending<P> {
    fn new(running: Running<'static, P>) -> Pending<P> {
        Pending {
            running,
            finished: None,
        }
    }

    /// Polls it once unless it is done; whether it is done now.
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.finished.is_none() {
            if let Poll::Ready(result) = self.running.as_mut().poll(cx) {
                self.finished = Some(result);
            }
        }
        self.finished.is_some()
    }
}

impl<P: Provider + 'static> Api for Instance<P> {
    fn world(&mut self) -> Handle {
        self.world
    }

    fn rank(&self, comm: Handle) -> Result<u32, Failure> {
        Ok(self.comm(comm)?.rank())
    }

    fn size(&self, comm: Handle) -> Result<u32, Failure> {
        Ok(self.comm(comm)?.size())
    }

    fn world_rank_of(&self, comm: Handle, rank: u32) -> Result<u32, Failure> {
        let comm = self.comm(comm)?;
        Ok(comm.world_rank_of(rank_arg(rank, comm.size(), "rank")?)?)
    }

    fn group_rank_of(&self, comm: Handle, world: u32) -> Result<Option<u32>, Failure> {
        let comm = self.comm(comm)?;
        let world = rank_arg(world, self.transport.size(), "world rank")?;
        Ok(comm.group_rank_of(world)?)
    }

    fn set_algorithm(&mut self, comm: Handle, algorithm: Algorithm) -> Result<(), Failure> {
        self.change(comm, |c| c.with_algorithm(algorithm))
    }

    fn set_timeout(&mut self, comm: Handle, timeout: Duration) -> Result<(), Failure> {
        self.change(comm, |c| c.with_timeout(timeout))
    }

    fn free(&mut self, comm: Handle) -> Result<(), Failure> {
        if comm == self.world {
            return Err(Failure::arg("the world communicator cannot be freed"));
        }
        self.comms.remove(comm).map(drop).ok_or_else(|| {
            Failure::new(
                CATENA_ERR_HANDLE,
                "not a live communicator handle (freed twice?)",
            )
        })
    }

    fn alltoall_plan(
        &mut self,
        comm: Handle,
        elem_size: usize,
        capacity: usize,
        options: AlltoallOptions,
    ) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let plan = PlanCell::make(comm, elem_size, capacity, options)?;
        Ok(self.plans.insert(Rc::new(plan)))
    }

    fn plan_shape(&self, plan: Handle) -> Result<(usize, usize), Failure> {
        let plan = self.plan(plan)?.plan();
        Ok((plan.elem_size(), plan.capacity()))
    }

    fn free_plan(&mut self, plan: Handle) -> Result<(), Failure> {
        self.plans.remove(plan).map(drop).ok_or_else(|| {
            Failure::new(
                CATENA_ERR_HANDLE,
                "not a live alltoall plan handle (freed twice?)",
            )
        })
    }

    fn world_size(&self) -> u32 {
        self.transport.size()
    }

    fn insert_group(&mut self, map: GroupMap) -> Handle {
        self.groups.insert(map)
    }

    fn group(&self, group: Handle) -> Result<&GroupMap, Failure> {
        self.groups
            .get(group)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live group handle"))
    }

    fn free_group(&mut self, group: Handle) -> Result<(), Failure> {
        self.groups.remove(group).map(drop).ok_or_else(|| {
            Failure::new(CATENA_ERR_HANDLE, "not a live group handle (freed twice?)")
        })
    }

    // Driven alone by the transport's executor, as Rust's blocking forms
    // are (posted requests progress when tested). No `block_on` nests
    // here: a callback that calls catena is refused at the boundary, which
    // holds this instance.
    fn run(&mut self, operation: Operation<'_>) -> Result<(), Failure> {
        let finished = operation.start(self, InPlace(self.transport))??;
        self.finish(finished);
        Ok(())
    }

    // Polled once now, so that the operation takes its tags in call order,
    // as a collective must.
    fn post(&mut self, operation: Operation<'static>) -> Result<Handle, Failure> {
        let request = self
            .requests
            .insert(Pending::new(operation.start(self, Boxed)?));
        match self.test(request)? {
            None => Ok(request),
            // Finished at once: its handle is gone, so the caller gets one of
            // a finished request, which its first test reports done.
            Some(outcome) => {
                outcome?;
                let done = std::future::ready(Ok(Finished::Done));
                Ok(self.requests.insert(Pending::new(Box::pin(done))))
            }
        }
    }

    // Every pending request is polled, not only the one tested, as MPI's
    // progress rule asks: calls on a communicator in host memory run in
    // call order, so a later request may wait for an earlier one.
    fn test(&mut self, request: Handle) -> Result<Option<Result<(), Failure>>, Failure> {
        if self.requests.get(request).is_none() {
            return Err(Failure::new(CATENA_ERR_HANDLE, "not a live request handle"));
        }
        let mut cx = Context::from_waker(catena_fabric::catena_waker());
        let poll_all = |requests: &mut Handles<Pending<P>>, cx: &mut Context<'_>| {
            for pending in requests.values_mut() {
                pending.poll(cx);
            }
        };
        poll_all(&mut self.requests, &mut cx);
        if !self.requests.get_mut(request).expect("live").poll(&mut cx) {
            self.transport.progress();
            poll_all(&mut self.requests, &mut cx);
        }
        let pending = self.requests.get_mut(request).expect("live");
        let Some(result) = pending.finished.take() else {
            return Ok(None);
        };
        self.requests.remove(request);
        Ok(Some(result.map(|finished| self.finish(finished))))
    }

    fn pending_requests(&self) -> usize {
        self.requests.len()
    }

    fn finalize(mut self: Box<Self>) -> Result<(), Failure> {
        let timeout = DEFAULT_TIMEOUT;
        drop(self.requests.drain().collect::<Vec<_>>());
        drop(self.plans.drain().collect::<Vec<_>>());
        drop(self.comms.drain().collect::<Vec<_>>());
        drop(self.groups.drain().collect::<Vec<_>>());
        // SAFETY: leaked in `start`; every communicator borrowing it is
        // dropped above, and `self` is consumed.
        let transport = unsafe { Box::from_raw(std::ptr::from_ref(self.transport).cast_mut()) };
        Ok(transport.finalize(timeout)?)
    }
}
