//! What `catena_init` starts: a transport of the provider the job runs on
//! and the table of live communicators over it. The C functions reach it
//! through [`Api`], which hides the provider type; [`Instance`] is written
//! once, generically, against `Comm`.

use std::cmp::Ordering;
use std::time::Duration;

use catena_algorithms::comm::DEFAULT_TIMEOUT;
use catena_algorithms::{Algorithm, Comm, GroupMap};
use catena_fabric::Provider;

use crate::handles::{Handle, Handles};
use crate::ops::Reduction;
use crate::status::{Failure, CATENA_ERR_HANDLE, CATENA_ERR_MISMATCH};

/// A split's color, as C passes it.
pub(crate) enum SplitColor<'a> {
    /// `CATENA_UNDEFINED`: this process joins no group.
    Undefined,
    Int(i64),
    Bytes(&'a [u8]),
}

/// A split's key, as C passes it.
pub(crate) enum SplitKey<'a> {
    Int(i64),
    /// Key bytes ordered by the user's comparator.
    Compared {
        key: &'a [u8],
        compare: &'a dyn Fn(&[u8], &[u8]) -> Ordering,
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
    /// Frees every communicator and group and leaves the job.
    fn finalize(self: Box<Self>) -> Result<(), Failure>;
}

/// A started provider and the communicators over it.
pub(crate) struct Instance<P: Provider + 'static> {
    /// Leaked so communicators may borrow it for `'static`; taken back in
    /// `finalize`, after every communicator is gone.
    transport: &'static P,
    comms: Handles<Comm<'static, P>>,
    groups: Handles<GroupMap>,
    /// The world communicator: one per transport, never freed.
    world: Handle,
}

impl<P: Provider + 'static> Instance<P> {
    pub(crate) fn start() -> Result<Box<dyn Api>, Failure> {
        let transport: &'static P = Box::leak(Box::new(P::from_env()?));
        let mut comms = Handles::default();
        let world = comms.insert(Comm::world(transport));
        Ok(Box::new(Instance {
            transport,
            comms,
            groups: Handles::default(),
            world,
        }))
    }

    fn comm(&self, handle: Handle) -> Result<&Comm<'static, P>, Failure> {
        self.comms
            .get(handle)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live communicator handle"))
    }

    fn keep(&mut self, comm: Option<Comm<'static, P>>) -> Option<Handle> {
        comm.map(|c| self.comms.insert(c))
    }

    /// Replaces the communicator behind `handle` by `change(comm)`.
    fn change(
        &mut self,
        handle: Handle,
        change: impl FnOnce(Comm<'static, P>) -> Comm<'static, P>,
    ) -> Result<(), Failure> {
        self.comms
            .update(handle, change)
            .ok_or_else(|| Failure::new(CATENA_ERR_HANDLE, "not a live communicator handle"))
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
        let comm = self.comm(handle)?;
        // Colors of both kinds travel as bytes, so that an int on one
        // member and bytes on another are a mismatch of values, not a
        // decoding failure.
        let color: Option<Vec<u8>> = match color {
            SplitColor::Undefined => None,
            SplitColor::Int(c) => Some(c.to_le_bytes().to_vec()),
            SplitColor::Bytes(b) => Some(b.to_vec()),
        };
        let new = match key {
            SplitKey::Int(k) => comm.split(color, k)?,
            SplitKey::Compared { key, compare } => {
                // Keys of differing lengths (a member passed another
                // key_len) are ordered by length and never reach the C
                // comparator, which would read past the shorter one.
                let order =
                    |a: &Vec<u8>, b: &Vec<u8>| a.len().cmp(&b.len()).then_with(|| compare(a, b));
                comm.split_by(color, key.to_vec(), order)?
            }
        };
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
        Ok(self.comms.insert(new))
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

    fn finalize(mut self: Box<Self>) -> Result<(), Failure> {
        let timeout = DEFAULT_TIMEOUT;
        drop(self.comms.drain().collect::<Vec<_>>());
        drop(self.groups.drain().collect::<Vec<_>>());
        // SAFETY: leaked in `start`; every communicator borrowing it is
        // dropped above, and `self` is consumed.
        let transport = unsafe { Box::from_raw(std::ptr::from_ref(self.transport).cast_mut()) };
        Ok(transport.finalize(timeout)?)
    }
}

fn mismatch(what: impl Into<String>) -> Failure {
    Failure::new(CATENA_ERR_MISMATCH, what)
}
