//! The one core of the collective calls: each operation written once (its
//! checks, the future that runs it, its delivery into the caller's buffers,
//! its mismatch errors), run to completion by a blocking call or posted.

use std::cmp::Ordering;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use catena_algorithms::{AlltoallOptions, Comm, CreateAlgorithm, GroupMap};
use catena_fabric::{block_on, Provider};

use crate::boundary::{element_bytes, rank_arg, RecvBuffer};
use crate::byte_plan::{byte_plan, Exchange, PlanCell};
use crate::catena_comm_t;
use crate::handles::Handle;
use crate::instance::{Api, Instance};
use crate::ops::Reduction;
use crate::status::{Failure, CATENA_ERR_MISMATCH};

/// A collective operation as a C function asked for it: handles, the
/// caller's buffers (for `'a`: the call, or until a posted request is
/// done) and where the result goes.
pub(crate) enum Operation<'a> {
    Split {
        comm: Handle,
        color: SplitColor<'a>,
        key: SplitKey,
        newcomm: &'a mut *mut catena_comm_t,
    },
    Dup {
        comm: Handle,
        newcomm: &'a mut *mut catena_comm_t,
    },
    /// By `group`'s members only; a caller that is not one gets NULL.
    CreateGroup {
        comm: Handle,
        group: Handle,
        tag: u32,
        newcomm: &'a mut *mut catena_comm_t,
    },
    Barrier {
        comm: Handle,
    },
    /// Loads the communicator's group map where it is not held
    /// ([`Comm::igroup_map`]).
    LoadGroupMap {
        comm: Handle,
    },
    /// The root's `buffer` (read when the operation starts) into every
    /// member's.
    Bcast {
        comm: Handle,
        buffer: &'a mut [u8],
        root: u32,
    },
    /// Into `recv` on every member (`root` `None`, allreduce) or at `root`.
    Reduce {
        comm: Handle,
        send: &'a [u8],
        recv: RecvBuffer<'a>,
        reduction: Reduction,
        root: Option<u32>,
    },
    /// Every member's `send` in rank order into `recv` (size × its length),
    /// on every member (`root` `None`, allgather) or at `root`.
    Gather {
        comm: Handle,
        send: &'a [u8],
        recv: RecvBuffer<'a>,
        root: Option<u32>,
    },
    /// An alltoall_specific, one-shot or a plan's exchange: the count
    /// received goes to `received`.
    Alltoall {
        target: AlltoallTarget,
        exchange: Exchange<'a>,
        received: &'a mut usize,
    },
}

/// What an alltoall runs on: a communicator once, or a plan.
pub(crate) enum AlltoallTarget {
    Once {
        comm: Handle,
        elem_size: usize,
        options: AlltoallOptions,
    },
    Plan(Handle),
}

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

/// An operation posted as a request: it writes its results into the
/// caller's buffers itself and leaves a communicator it made to the
/// instance.
pub(crate) type Running<'a, P> =
    Pin<Box<dyn Future<Output = Result<Finished<'a, P>, Failure>> + 'a>>;

/// What becomes of an operation's future once it is made: a blocking call
/// drives it in place, a posted one boxes it as a request. A generic
/// method, so that the blocking form does not pay a box (about 40 ns a
/// split, whose future is some kilobytes) for the posted one's sake.
pub(crate) trait Launch<'a, P: Provider + 'static> {
    type Output;
    fn launch<F>(self, operation: F) -> Self::Output
    where
        F: Future<Output = Result<Finished<'a, P>, Failure>> + 'a;
}

/// A blocking call: the operation driven to completion in place by the
/// transport's executor.
pub(crate) struct InPlace<'t, P>(pub(crate) &'t P);

impl<'a, P: Provider + 'static> Launch<'a, P> for InPlace<'_, P> {
    type Output = Result<Finished<'a, P>, Failure>;
    fn launch<F>(self, operation: F) -> Self::Output
    where
        F: Future<Output = Result<Finished<'a, P>, Failure>> + 'a,
    {
        block_on(self.0, operation)
    }
}

/// Posting: the operation boxed, to be kept as a request.
pub(crate) struct Boxed;

impl<'a, P: Provider + 'static> Launch<'a, P> for Boxed {
    type Output = Running<'a, P>;
    fn launch<F>(self, operation: F) -> Running<'a, P>
    where
        F: Future<Output = Result<Finished<'a, P>, Failure>> + 'a,
    {
        Box::pin(operation)
    }
}

/// What a finished operation leaves to the instance.
pub(crate) enum Finished<'a, P: Provider + 'static> {
    Done,
    /// A communicator made (`None`: this process is not a member), whose
    /// handle goes to `at`.
    Comm {
        made: Option<Rc<Comm<'static, P>>>,
        at: &'a mut *mut catena_comm_t,
    },
}

impl<'a> Operation<'a> {
    /// Checks the arguments on `instance`'s communicators and makes the
    /// future that runs the operation, started by its first poll (which
    /// takes its tags in call order, as a collective must).
    pub(crate) fn start<P: Provider + 'static, L: Launch<'a, P>>(
        self,
        instance: &Instance<P>,
        launch: L,
    ) -> Result<L::Output, Failure> {
        // Shared with the running operation, which keeps it alive if the
        // caller frees its handle meanwhile.
        let shared = |handle| instance.comm(handle).map(Rc::clone);
        match self {
            Operation::Split {
                comm,
                color,
                key,
                newcomm,
            } => Ok(launch.launch(split(shared(comm)?, color, key, newcomm))),
            Operation::Dup { comm, newcomm } => Ok(launch.launch(dup(shared(comm)?, newcomm))),
            Operation::CreateGroup {
                comm,
                group,
                tag,
                newcomm,
            } => {
                let map = instance.group(group)?.clone();
                Ok(launch.launch(create_group(shared(comm)?, map, tag, newcomm)))
            }
            Operation::Barrier { comm } => Ok(launch.launch(barrier(shared(comm)?))),
            Operation::LoadGroupMap { comm } => Ok(launch.launch(load_group_map(shared(comm)?))),
            Operation::Bcast { comm, buffer, root } => {
                Ok(launch.launch(bcast(shared(comm)?, buffer, root)?))
            }
            Operation::Reduce {
                comm,
                send,
                recv,
                reduction,
                root,
            } => Ok(launch.launch(reduce(shared(comm)?, send, recv, reduction, root)?)),
            Operation::Gather {
                comm,
                send,
                recv,
                root,
            } => Ok(launch.launch(gather(shared(comm)?, send, recv, root)?)),
            Operation::Alltoall {
                target:
                    AlltoallTarget::Once {
                        comm,
                        elem_size,
                        options,
                    },
                exchange,
                received,
            } => Ok(launch.launch(alltoall_once(
                shared(comm)?,
                elem_size,
                options,
                exchange,
                received,
            ))),
            Operation::Alltoall {
                target: AlltoallTarget::Plan(plan),
                exchange,
                received,
            } => {
                let plan = Rc::clone(instance.plan(plan)?);
                Ok(launch.launch(plan_exchange(plan, exchange, received)))
            }
        }
    }
}

fn split<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    color: SplitColor,
    key: SplitKey,
    newcomm: &'a mut *mut catena_comm_t,
) -> impl Future<Output = Result<Finished<'a, P>, Failure>> + 'a {
    let color = color_bytes(color);
    async move {
        let made = match key {
            SplitKey::Int(k) => comm.isplit(color, k).await?,
            SplitKey::Compared { key, compare } => {
                comm.isplit_by(color, key, compared_order(compare)).await?
            }
        };
        let made = made.map(Rc::new);
        Ok(Finished::Comm { made, at: newcomm })
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

/// The order of a comparator split's keys. Keys of differing lengths (a
/// member passed another key_len) are ordered by length and never reach
/// the C comparator, which would read past the shorter one.
fn compared_order(compare: Box<Comparator>) -> impl Fn(&Vec<u8>, &Vec<u8>) -> Ordering {
    move |a: &Vec<u8>, b: &Vec<u8>| a.len().cmp(&b.len()).then_with(|| compare(a, b))
}

async fn dup<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    newcomm: &'a mut *mut catena_comm_t,
) -> Result<Finished<'a, P>, Failure> {
    let made = Some(Rc::new(comm.idup().await?));
    Ok(Finished::Comm { made, at: newcomm })
}

async fn create_group<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    map: GroupMap,
    tag: u32,
    newcomm: &'a mut *mut catena_comm_t,
) -> Result<Finished<'a, P>, Failure> {
    let made = comm
        .icreate_group(map, tag, CreateAlgorithm::Direct)
        .await?
        .map(Rc::new);
    Ok(Finished::Comm { made, at: newcomm })
}

async fn barrier<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
) -> Result<Finished<'a, P>, Failure> {
    comm.ibarrier().await?;
    Ok(Finished::Done)
}

async fn load_group_map<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
) -> Result<Finished<'a, P>, Failure> {
    comm.igroup_map().await?;
    Ok(Finished::Done)
}

fn bcast<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    buffer: &'a mut [u8],
    root: u32,
) -> Result<impl Future<Output = Result<Finished<'a, P>, Failure>> + 'a, Failure> {
    let root = rank_arg(root, comm.size(), "root")?;
    let value = (comm.rank() == root).then(|| buffer.to_vec());
    Ok(async move {
        let got: Vec<u8> = comm.ibcast(root, value).await?;
        deliver("bcast", &got, buffer)?;
        Ok(Finished::Done)
    })
}

fn reduce<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    send: &[u8],
    recv: RecvBuffer<'a>,
    reduction: Reduction,
    root: Option<u32>,
) -> Result<impl Future<Output = Result<Finished<'a, P>, Failure>> + 'a, Failure> {
    let root = root.map(|r| rank_arg(r, comm.size(), "root")).transpose()?;
    let recv = match root.is_none_or(|r| r == comm.rank()) {
        true => Some(recv.take(send.len())?),
        false => None,
    };
    let mine = Some(send.to_vec());
    Ok(async move {
        let op = |a: &Option<Vec<u8>>, b: &Option<Vec<u8>>| reduction.combine(a, b);
        let reduced = match (root, reduction.commutative()) {
            (Some(root), _) => comm.ireduce(root, mine, op).await?,
            (None, true) => Some(comm.iallreduce_commutative(mine, op).await?),
            (None, false) => Some(comm.iallreduce(mine, op).await?),
        };
        // A reduce's other members: nothing arrives here.
        let (Some(reduced), Some(recv)) = (reduced, recv) else {
            return Ok(Finished::Done);
        };
        // The value is poisoned (`None`) once two members' lengths differ,
        // so every member learns it.
        let bytes =
            reduced.ok_or_else(|| mismatch("reduce: members passed buffers of different sizes"))?;
        deliver("reduce", &bytes, recv)?;
        Ok(Finished::Done)
    })
}

fn gather<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    send: &[u8],
    recv: RecvBuffer<'a>,
    root: Option<u32>,
) -> Result<impl Future<Output = Result<Finished<'a, P>, Failure>> + 'a, Failure> {
    let root = root.map(|r| rank_arg(r, comm.size(), "root")).transpose()?;
    let recv = match root.is_none_or(|r| r == comm.rank()) {
        true => Some(recv.take(element_bytes(comm.size() as usize, send.len())?)?),
        false => None,
    };
    let mine = send.to_vec();
    Ok(async move {
        let gathered = match root {
            Some(root) => comm.igather(root, &mine).await?,
            None => Some(comm.iallgather(&mine).await?),
        };
        // A gather's other members: nothing arrives here.
        let (Some(parts), Some(recv)) = (gathered, recv) else {
            return Ok(Finished::Done);
        };
        if parts.iter().any(|part| part.len() != mine.len()) {
            return Err(mismatch("gather: members sent different sizes"));
        }
        deliver("gather", &parts.concat(), recv)?;
        Ok(Finished::Done)
    })
}

fn alltoall_once<'a, P: Provider + 'static>(
    comm: Rc<Comm<'static, P>>,
    elem_size: usize,
    options: AlltoallOptions,
    exchange: Exchange<'a>,
    received: &'a mut usize,
) -> impl Future<Output = Result<Finished<'a, P>, Failure>> + 'a {
    let capacity = exchange.recv.buffer_len() / elem_size.max(1);
    async move {
        let plan = byte_plan(&comm, elem_size, capacity, options)?;
        *received = plan.iexchange(exchange).await?;
        Ok(Finished::Done)
    }
}

async fn plan_exchange<'a, P: Provider + 'static>(
    plan: Rc<PlanCell>,
    exchange: Exchange<'a>,
    received: &'a mut usize,
) -> Result<Finished<'a, P>, Failure> {
    *received = plan.plan().iexchange(exchange).await?;
    Ok(Finished::Done)
}

/// Copies what arrived into the caller's buffer, which must be its size:
/// a member that passed another size learns it here.
fn deliver(what: &str, arrived: &[u8], into: &mut [u8]) -> Result<(), Failure> {
    if arrived.len() != into.len() {
        return Err(mismatch(format!(
            "{what}: {} bytes arrived where this process expects {}",
            arrived.len(),
            into.len()
        )));
    }
    into.copy_from_slice(arrived);
    Ok(())
}

fn mismatch(what: impl Into<String>) -> Failure {
    Failure::new(CATENA_ERR_MISMATCH, what)
}
