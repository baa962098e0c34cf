//! Bootstrap from MPI, for binaries started by `mpiexec` (feature `mpi`):
//! rank and size come from `MPI_COMM_WORLD`, provider addresses are
//! exchanged with two allgathers (lengths, then blocks padded to the longest)
//! and barriers are `MPI_Ibarrier` + `MPI_Test`. MPI stays initialized for
//! the life of the bootstrap, so catena coexists with MPI use by the program.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use mpi::collective::{CommunicatorCollectives, Root};
use mpi::environment::Universe;
use mpi::request::Request;
use mpi::topology::{Communicator, SimpleCommunicator};

use super::{BarrierTicket, Bootstrap};
use crate::config::ENV_MPI_JOB;
use crate::job::new_job_id;
use crate::{Error, Rank, Result};

/// Longest job id rank 0 may hand out.
const MAX_JOB_ID: usize = 64;

/// Bootstrap of a rank started by `mpiexec`: identity, the allgather and
/// barriers come from `MPI_COMM_WORLD`; rank 0 hands out the job id.
pub struct MpiBootstrap {
    /// `Some` when catena initialized MPI (and so finalizes it on drop);
    /// `None` when the program had initialized MPI itself.
    _universe: Option<Universe>,
    world: SimpleCommunicator,
    rank: Rank,
    size: u32,
    job: String,
    local_size: u32,
    gathered: Cell<bool>,
    /// The one barrier in flight, with its ticket.
    barrier: RefCell<Option<(u64, Request<'static, ()>)>>,
    barriers_done: Cell<u64>,
}

impl MpiBootstrap {
    /// Initializes MPI unless the program did, and learns the job from it.
    pub fn init() -> Result<MpiBootstrap> {
        let universe = if mpi::environment::is_initialized() {
            None
        } else {
            Some(mpi::initialize().ok_or_else(|| Error::Bootstrap("MPI_Init failed".into()))?)
        };
        let world = SimpleCommunicator::world();
        let (rank, size) = (world.rank() as Rank, world.size() as u32);
        let local_size = world.split_shared(world.rank()).size() as u32;

        let mut job = [0u8; MAX_JOB_ID];
        if rank == 0 {
            let id = std::env::var(ENV_MPI_JOB).unwrap_or_else(|_| new_job_id());
            if id.is_empty()
                || id.len() > MAX_JOB_ID
                || !id.bytes().all(|b| b.is_ascii_alphanumeric())
            {
                return Err(Error::Bootstrap(format!(
                    "{ENV_MPI_JOB}={id:?}: a job id is 1..={MAX_JOB_ID} ASCII letters and digits"
                )));
            }
            job[..id.len()].copy_from_slice(id.as_bytes());
        }
        world.process_at_rank(0).broadcast_into(&mut job[..]);
        let len = job.iter().position(|&b| b == 0).unwrap_or(MAX_JOB_ID);
        let job = String::from_utf8_lossy(&job[..len]).into_owned();

        Ok(MpiBootstrap {
            _universe: universe,
            world,
            rank,
            size,
            job,
            local_size,
            gathered: Cell::new(false),
            barrier: RefCell::new(None),
            barriers_done: Cell::new(0),
        })
    }
}

impl Bootstrap for MpiBootstrap {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn job_id(&self) -> &str {
        &self.job
    }

    fn local_size(&self) -> u32 {
        self.local_size
    }

    /// MPI collectives have no timeout; `mpiexec` ends the job if a rank dies.
    fn allgather(&self, mine: &[u8], _timeout: Duration) -> Result<Vec<Vec<u8>>> {
        if self.gathered.replace(true) {
            return Err(Error::Bootstrap("the address allgather runs once".into()));
        }
        let mut lengths = vec![0u64; self.size as usize];
        self.world
            .all_gather_into(&(mine.len() as u64), &mut lengths[..]);
        let block = lengths.iter().copied().max().unwrap_or(0) as usize;
        let mut padded = mine.to_vec();
        padded.resize(block, 0);
        let mut blocks = vec![0u8; block * self.size as usize];
        self.world.all_gather_into(&padded[..], &mut blocks[..]);
        Ok(lengths
            .iter()
            .enumerate()
            .map(|(rank, &len)| blocks[rank * block..][..len as usize].to_vec())
            .collect())
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        let mut slot = self.barrier.borrow_mut();
        if slot.is_some() {
            return Err(Error::Bootstrap(
                "a barrier started before the previous one completed".into(),
            ));
        }
        let ticket = self.barriers_done.get() + 1;
        *slot = Some((ticket, self.world.immediate_barrier()));
        Ok(BarrierTicket(ticket))
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        if ticket.0 <= self.barriers_done.get() {
            return Ok(true);
        }
        let mut slot = self.barrier.borrow_mut();
        let Some((pending, request)) = slot.take() else {
            return Err(Error::Bootstrap(format!(
                "no barrier {} was started",
                ticket.0
            )));
        };
        match request.test() {
            Ok(_) => {
                self.barriers_done.set(pending);
                Ok(true)
            }
            Err(request) => {
                *slot = Some((pending, request));
                Ok(false)
            }
        }
    }

    fn failed_rank(&self) -> Option<Rank> {
        None
    }
}

impl Drop for MpiBootstrap {
    fn drop(&mut self) {
        // rsmpi panics on dropping an incomplete request, and waiting for a
        // barrier that a failed job never completes would hang: leak it.
        if let Some((_, request)) = self.barrier.get_mut().take() {
            std::mem::forget(request);
        }
    }
}
