//! What `catena_init` starts: a transport of the provider the job runs on
//! and the table of live communicators over it. The C functions reach it
//! through [`Api`], which hides the provider type; [`Instance`] is written
//! once, generically, against `Comm`.

use std::cmp::Ordering;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use catena_algorithms::comm::DEFAULT_TIMEOUT;
use catena_algorithms::{Algorithm, AlltoallOptions, Comm, CreateAlgorithm, GroupMap};
use catena_fabric::{block_on, Provider};

use crate::alltoall::{byte_plan, AlltoallTarget, Exchange, PlanCell};

use crate::catena_comm_t;
use crate::handles::{Handle, Handles};
use crate::ops::Reduction;
use crate::status::{Failure, CATENA_ERR_HANDLE, CATENA_ERR_MISMATCH, CATENA_ERR_STATE};

/// A split's color, as C passes it.
pub(crate) enum SplitColor<'a> {
    /// `CATENA_UNDEFINED`: this process joins no group.
    Undefined,
    Int(i64),
    Bytes(&'a [u8]),
}

/// The user's comparator over two keys' bytes.
pub(crate) type Comparator = dyn Fn(&[u8], &[u8]) -> Ordering;

/// A split's key, as C passes it.
pub(crate) enum SplitKey {
    Int(i64),
    /// Key bytes ordered by the user's comparator (which a posted split
    /// keeps until it is done).
    Compared {
        key: Vec<u8>,
        compare: Box<Comparator>,
    },
}

/// The operations of the C API on a started instance, whatever its
/// provider. Communicators are named by handle.
pub(crate) trait Api {
    fn world(&mut self) -> Handle;
    fn rank(&self, comm: Handle) -> Result<u32, Failure>;
    fn size(&self, comm: Handle) -> Result<u32, Failure>;
    fn world_rank_of(&self, comm: Handle, rank: u32) -> Result<u32, Failure>;
    fn group_rank_of(&self, comm: Handle, world: u32) -> Result<Option<u32>, Failure>;
    fn split(
        &mut self,
        comm: Handle,
        color: SplitColor,
        key: SplitKey,
    ) -> Result<Option<Handle>, Failure>;
    fn set_algorithm(&mut self, comm: Handle, algorithm: Algorithm) -> Result<(), Failure>;
    fn set_timeout(&mut self, comm: Handle, timeout: Duration) -> Result<(), Failure>;
    fn dup(&mut self, comm: Handle) -> Result<Handle, Failure>;
    fn free(&mut self, comm: Handle) -> Result<(), Failure>;
    fn barrier(&self, comm: Handle) -> Result<(), Failure>;
    fn bcast(&self, comm: Handle, buffer: &mut [u8], root: u32) -> Result<(), Failure>;
    /// Into `out` on every member (allreduce) or at `root` only (reduce).
    fn reduce(
        &self,
        comm: Handle,
        send: &[u8],
        out: Option<&mut [u8]>,
        reduction: Reduction,
        root: Option<u32>,
    ) -> Result<(), Failure>;
    /// Every member's `send` in rank order into `out`, at `root` or on all.
    fn gather(
        &self,
        comm: Handle,
        send: &[u8],
        out: Option<&mut [u8]>,
        root: Option<u32>,
    ) -> Result<(), Failure>;
    /// An alltoall_specific (one-shot or a plan's exchange): the count
    /// received.
    fn alltoall(&self, target: AlltoallTarget, exchange: Exchange) -> Result<usize, Failure>;
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
    /// The communicator `group`'s members create from `comm` (`None` for a
    /// caller that is not one).
    fn create_group(
        &mut self,
        comm: Handle,
        group: Handle,
        tag: u32,
    ) -> Result<Option<Handle>, Failure>;
    /// Posts a split; its result goes to `out` when done.
    fn split_post(
        &mut self,
        comm: Handle,
        color: SplitColor,
        key: SplitKey,
        out: *mut *mut catena_comm_t,
    ) -> Result<Handle, Failure>;
    fn dup_post(&mut self, comm: Handle, out: *mut *mut catena_comm_t) -> Result<Handle, Failure>;
    fn create_group_post(
        &mut self,
        comm: Handle,
        group: Handle,
        tag: u32,
        out: *mut *mut catena_comm_t,
    ) -> Result<Handle, Failure>;
    fn barrier_post(&mut self, comm: Handle) -> Result<Handle, Failure>;
    /// The root's `len` bytes at `buffer` (read now) into every member's
    /// `buffer` when done.
    fn bcast_post(
        &mut self,
        comm: Handle,
        buffer: *mut u8,
        len: usize,
        root: u32,
    ) -> Result<Handle, Failure>;
    /// Posts an (all)reduce: into `recv` on every member, or at `root`.
    fn reduce_post(
        &mut self,
        comm: Handle,
        send: &[u8],
        recv: *mut u8,
        reduction: Reduction,
        root: Option<u32>,
    ) -> Result<Handle, Failure>;
    /// Posts an (all)gather of `send` into `recv` (size × its length), on
    /// every member or at `root`.
    fn gather_post(
        &mut self,
        comm: Handle,
        send: &[u8],
        recv: *mut u8,
        root: Option<u32>,
    ) -> Result<Handle, Failure>;
    /// Posts a one-shot alltoall_specific (`plan` `None`) or a plan's
    /// exchange; the count goes to `received` when done.
    fn alltoall_post(
        &mut self,
        target: AlltoallTarget,
        exchange: Exchange<'static>,
        received: *mut usize,
    ) -> Result<Handle, Failure>;
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

    fn comm(&self, handle: Handle) -> Result<&Rc<Comm<'static, P>>, Failure> {
        self.comms
            .get(handle)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live communicator handle"))
    }

    fn plan(&self, handle: Handle) -> Result<&Rc<PlanCell>, Failure> {
        self.plans
            .get(handle)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live alltoall plan handle"))
    }

    fn keep(&mut self, comm: Option<Comm<'static, P>>) -> Option<Handle> {
        comm.map(|c| self.comms.insert(Rc::new(c)))
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

    /// Starts `future` as a request and polls it once now, so that it
    /// takes its tags in call order, as a collective must.
    fn post(
        &mut self,
        future: impl Future<Output = catena_algorithms::Result<Outcome<P>>> + 'static,
        output: Output,
    ) -> Result<Handle, Failure> {
        let request = self.requests.insert(Pending::new(future, output));
        match self.test(request)? {
            None => Ok(request),
            // Finished at once: its handle is gone, so the caller gets one of
            // a finished request, which its first test reports done.
            Some(outcome) => {
                outcome?;
                Ok(self.requests.insert(Pending::new(
                    std::future::ready(Ok(Outcome::Done)),
                    Output::Nothing,
                )))
            }
        }
    }

    /// Writes a finished request's result where C asked for it.
    fn deliver(
        &mut self,
        result: catena_algorithms::Result<Outcome<P>>,
        output: Output,
    ) -> Result<(), Failure> {
        match (result?, output) {
            (Outcome::Comm(comm), Output::Comm(at)) => {
                let handle = self.keep(comm).map_or(std::ptr::null_mut(), Handle::to_ptr);
                // SAFETY: the caller keeps `at` valid until the request is
                // done (the post's contract).
                unsafe { *at = handle };
            }
            (Outcome::Bytes(bytes), Output::Bytes { at, len }) => {
                if bytes.len() != len {
                    return Err(mismatch(format!(
                        "{} bytes arrived where this process expects {len}",
                        bytes.len()
                    )));
                }
                // SAFETY: as above, `len` bytes at `at`.
                unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, len) };
            }
            (Outcome::Count(n), Output::Count(at)) => {
                // SAFETY: as above.
                unsafe { *at = n };
            }
            _ => {}
        }
        Ok(())
    }
}

/// What a finished request leaves.
pub(crate) enum Outcome<P: Provider + 'static> {
    Done,
    Comm(Option<Comm<'static, P>>),
    Bytes(Vec<u8>),
    Count(usize),
}

/// Where a request's result goes when it finishes: C memory the caller
/// keeps valid until then (as for MPI's nonblocking calls).
pub(crate) enum Output {
    Nothing,
    Comm(*mut *mut crate::catena_comm_t),
    Bytes { at: *mut u8, len: usize },
    Count(*mut usize),
}

pub(crate) struct Pending<P: Provider + 'static> {
    future: Pin<Box<dyn Future<Output = catena_algorithms::Result<Outcome<P>>>>>,
    output: Output,
    /// Its result, once a test of any request found it finished.
    done: Option<catena_algorithms::Result<Outcome<P>>>,
}

impl<P: Provider + 'static> Pending<P> {
    fn new(
        future: impl Future<Output = catena_algorithms::Result<Outcome<P>>> + 'static,
        output: Output,
    ) -> Pending<P> {
        Pending {
            future: Box::pin(future),
            output,
            done: None,
        }
    }

    /// Polls it once unless it is done; whether it is done now.
    fn poll(&mut self, cx: &mut Context<'_>) -> bool {
        if self.done.is_none() {
            if let Poll::Ready(result) = self.future.as_mut().poll(cx) {
                self.done = Some(result);
            }
        }
        self.done.is_some()
    }
}

fn rank_arg(rank: u32, size: u32, what: &str) -> Result<u32, Failure> {
    if rank < size {
        Ok(rank)
    } else {
        Err(Failure::arg(format!(
            "{what} {rank} is not below the size {size}"
        )))
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

    fn split(
        &mut self,
        handle: Handle,
        color: SplitColor,
        key: SplitKey,
    ) -> Result<Option<Handle>, Failure> {
        let color = color_bytes(color);
        let comm = self.comm(handle)?;
        // Waited for in place: the split's future (about 6 KB) is not
        // boxed, as a posted split's must be.
        let new = match key {
            SplitKey::Int(k) => comm.split(color, k),
            SplitKey::Compared { key, compare } => {
                comm.split_by(color, key, compared_order(compare))
            }
        }?;
        Ok(self.keep(new))
    }

    fn set_algorithm(&mut self, comm: Handle, algorithm: Algorithm) -> Result<(), Failure> {
        self.change(comm, |c| c.with_algorithm(algorithm))
    }

    fn set_timeout(&mut self, comm: Handle, timeout: Duration) -> Result<(), Failure> {
        self.change(comm, |c| c.with_timeout(timeout))
    }

    fn dup(&mut self, comm: Handle) -> Result<Handle, Failure> {
        let new = self.comm(comm)?.dup()?;
        Ok(self.comms.insert(Rc::new(new)))
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

    fn barrier(&self, comm: Handle) -> Result<(), Failure> {
        Ok(self.comm(comm)?.barrier()?)
    }

    fn bcast(&self, comm: Handle, buffer: &mut [u8], root: u32) -> Result<(), Failure> {
        let comm = self.comm(comm)?;
        let root = rank_arg(root, comm.size(), "root")?;
        let value = (comm.rank() == root).then(|| buffer.to_vec());
        let got: Vec<u8> = comm.bcast(root, value)?;
        if got.len() != buffer.len() {
            return Err(mismatch(format!(
                "bcast size: the root sent {} bytes, this process expects {}",
                got.len(),
                buffer.len()
            )));
        }
        buffer.copy_from_slice(&got);
        Ok(())
    }

    fn reduce(
        &self,
        comm: Handle,
        send: &[u8],
        out: Option<&mut [u8]>,
        reduction: Reduction,
        root: Option<u32>,
    ) -> Result<(), Failure> {
        let comm = self.comm(comm)?;
        let x = Some(send.to_vec());
        let op = |a: &Option<Vec<u8>>, b: &Option<Vec<u8>>| reduction.combine(a, b);
        let result = match root {
            Some(root) => comm.reduce(rank_arg(root, comm.size(), "root")?, x, op)?,
            None => Some(comm.allreduce(x, op)?),
        };
        match (result, out) {
            (Some(Some(bytes)), Some(out)) if bytes.len() == out.len() => {
                out.copy_from_slice(&bytes);
                Ok(())
            }
            (Some(_), _) => Err(mismatch(
                "reduce: members passed buffers of different sizes",
            )),
            (None, _) => Ok(()),
        }
    }

    fn gather(
        &self,
        comm: Handle,
        send: &[u8],
        out: Option<&mut [u8]>,
        root: Option<u32>,
    ) -> Result<(), Failure> {
        let comm = self.comm(comm)?;
        let x = send.to_vec();
        let all = match root {
            Some(root) => comm.gather(rank_arg(root, comm.size(), "root")?, &x)?,
            None => Some(comm.allgather(&x)?),
        };
        let (Some(all), Some(out)) = (all, out) else {
            return Ok(());
        };
        if all.iter().any(|part| part.len() != send.len()) {
            return Err(mismatch("gather: members sent different sizes"));
        }
        for (chunk, part) in out.chunks_exact_mut(send.len().max(1)).zip(&all) {
            chunk[..part.len()].copy_from_slice(part);
        }
        Ok(())
    }

    fn alltoall(&self, target: AlltoallTarget, exchange: Exchange) -> Result<usize, Failure> {
        let received = match target {
            AlltoallTarget::Once {
                comm,
                elem_size,
                options,
            } => {
                let capacity = exchange.recv.len() / elem_size.max(1);
                let plan = byte_plan(self.comm(comm)?, elem_size, capacity, options)?;
                block_on(self.transport, plan.iexchange(exchange))
            }
            AlltoallTarget::Plan(plan) => {
                block_on(self.transport, self.plan(plan)?.plan().iexchange(exchange))
            }
        };
        Ok(received?)
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

    fn create_group(
        &mut self,
        comm: Handle,
        group: Handle,
        tag: u32,
    ) -> Result<Option<Handle>, Failure> {
        let map = self.group(group)?.clone();
        let new = self.comm(comm)?.create_group(map, tag)?;
        Ok(self.keep(new))
    }

    fn split_post(
        &mut self,
        comm: Handle,
        color: SplitColor,
        key: SplitKey,
        out: *mut *mut catena_comm_t,
    ) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let color = color_bytes(color);
        let future = async move { Ok(Outcome::Comm(split(&comm, color, key).await?)) };
        self.post(future, Output::Comm(out))
    }

    fn dup_post(&mut self, comm: Handle, out: *mut *mut catena_comm_t) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let future = async move { Ok(Outcome::Comm(Some(comm.idup().await?))) };
        self.post(future, Output::Comm(out))
    }

    fn create_group_post(
        &mut self,
        comm: Handle,
        group: Handle,
        tag: u32,
        out: *mut *mut catena_comm_t,
    ) -> Result<Handle, Failure> {
        let map = self.group(group)?.clone();
        let comm = Rc::clone(self.comm(comm)?);
        let future = async move {
            let new = comm
                .icreate_group(map, tag, CreateAlgorithm::Direct)
                .await?;
            Ok(Outcome::Comm(new))
        };
        self.post(future, Output::Comm(out))
    }

    fn barrier_post(&mut self, comm: Handle) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let future = async move {
            comm.ibarrier().await?;
            Ok(Outcome::Done)
        };
        self.post(future, Output::Nothing)
    }

    fn bcast_post(
        &mut self,
        comm: Handle,
        buffer: *mut u8,
        len: usize,
        root: u32,
    ) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let root = rank_arg(root, comm.size(), "root")?;
        // SAFETY: the caller's buffer is valid for `len` bytes (the C
        // function's contract); the root's is read now, at the post.
        let value = (comm.rank() == root)
            .then(|| unsafe { std::slice::from_raw_parts(buffer, len) }.to_vec());
        let future = async move { Ok(Outcome::Bytes(comm.ibcast(root, value).await?)) };
        self.post(future, Output::Bytes { at: buffer, len })
    }

    fn reduce_post(
        &mut self,
        comm: Handle,
        send: &[u8],
        recv: *mut u8,
        reduction: Reduction,
        root: Option<u32>,
    ) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let root = root.map(|r| rank_arg(r, comm.size(), "root")).transpose()?;
        let output = match root.is_none_or(|r| r == comm.rank()) {
            true => Output::Bytes {
                at: recv,
                len: send.len(),
            },
            false => Output::Nothing,
        };
        let x = Some(send.to_vec());
        let future = async move {
            let op = |a: &Option<Vec<u8>>, b: &Option<Vec<u8>>| reduction.combine(a, b);
            let result = match root {
                Some(root) => comm.ireduce(root, x, op).await?,
                None => Some(comm.iallreduce(x, op).await?),
            };
            match result {
                None => Ok(Outcome::Done),
                Some(Some(bytes)) => Ok(Outcome::Bytes(bytes)),
                Some(None) => Err(catena_algorithms::Error::Mismatch {
                    what: "reduce buffer sizes".into(),
                }),
            }
        };
        self.post(future, output)
    }

    fn gather_post(
        &mut self,
        comm: Handle,
        send: &[u8],
        recv: *mut u8,
        root: Option<u32>,
    ) -> Result<Handle, Failure> {
        let comm = Rc::clone(self.comm(comm)?);
        let root = root.map(|r| rank_arg(r, comm.size(), "root")).transpose()?;
        let output = match root.is_none_or(|r| r == comm.rank()) {
            true => Output::Bytes {
                at: recv,
                len: send.len() * comm.size() as usize,
            },
            false => Output::Nothing,
        };
        let x = send.to_vec();
        let future = async move {
            let all = match root {
                Some(root) => comm.igather(root, &x).await?,
                None => Some(comm.iallgather(&x).await?),
            };
            let Some(parts) = all else {
                return Ok(Outcome::Done);
            };
            if parts.iter().any(|part| part.len() != x.len()) {
                return Err(catena_algorithms::Error::Mismatch {
                    what: "gather sizes".into(),
                });
            }
            Ok(Outcome::Bytes(parts.concat()))
        };
        self.post(future, output)
    }

    fn alltoall_post(
        &mut self,
        target: AlltoallTarget,
        exchange: Exchange<'static>,
        received: *mut usize,
    ) -> Result<Handle, Failure> {
        let output = Output::Count(received);
        match target {
            AlltoallTarget::Once {
                comm,
                elem_size,
                options,
            } => {
                let comm = Rc::clone(self.comm(comm)?);
                let capacity = exchange.recv.len() / elem_size.max(1);
                let future = async move {
                    let plan = byte_plan(&comm, elem_size, capacity, options)?;
                    Ok(Outcome::Count(plan.iexchange(exchange).await?))
                };
                self.post(future, output)
            }
            AlltoallTarget::Plan(plan) => {
                let plan = Rc::clone(self.plan(plan)?);
                let future =
                    async move { Ok(Outcome::Count(plan.plan().iexchange(exchange).await?)) };
                self.post(future, output)
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
        let mut cx = Context::from_waker(Waker::noop());
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
        let Some(result) = pending.done.take() else {
            return Ok(None);
        };
        let output = self
            .requests
            .remove(request)
            .expect("live, found above")
            .output;
        Ok(Some(self.deliver(result, output)))
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

/// Colors of both kinds travel as bytes, so that an int on one member and
/// bytes on another are a mismatch of values, not a decoding failure.
fn color_bytes(color: SplitColor) -> Option<Vec<u8>> {
    match color {
        SplitColor::Undefined => None,
        SplitColor::Int(c) => Some(c.to_le_bytes().to_vec()),
        SplitColor::Bytes(b) => Some(b.to_vec()),
    }
}

/// A split in progress: the new communicator, if this process joins one.
type Splitting<'a, P> =
    Pin<Box<dyn Future<Output = catena_algorithms::Result<Option<Comm<'static, P>>>> + 'a>>;

/// A split of `comm` by `color` and `key` (started when called, so it
/// takes its tags in call order).
fn split<'a, P: Provider>(
    comm: &'a Comm<'static, P>,
    color: Option<Vec<u8>>,
    key: SplitKey,
) -> Splitting<'a, P> {
    match key {
        SplitKey::Int(k) => Box::pin(comm.isplit(color, k)),
        SplitKey::Compared { key, compare } => {
            Box::pin(comm.isplit_by(color, key, compared_order(compare)))
        }
    }
}

/// The order of a comparator split's keys. Keys of differing lengths (a
/// member passed another key_len) are ordered by length and never reach
/// the C comparator, which would read past the shorter one.
fn compared_order(compare: Box<Comparator>) -> impl Fn(&Vec<u8>, &Vec<u8>) -> Ordering {
    move |a: &Vec<u8>, b: &Vec<u8>| a.len().cmp(&b.len()).then_with(|| compare(a, b))
}

fn mismatch(what: impl Into<String>) -> Failure {
    Failure::new(CATENA_ERR_MISMATCH, what)
}
