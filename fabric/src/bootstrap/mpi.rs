//! Bootstrap from MPI, for binaries started by `mpiexec` (feature `mpi`):
//! rank and size come from `MPI_COMM_WORLD` (or from a communicator the
//! program names, which catena duplicates), entries are exchanged with two
//! allgathers (lengths, then blocks padded to the longest) and barriers are
//! `MPI_Ibarrier` + `MPI_Test`. MPI has no directory to ask, so this is the
//! one bootstrap that holds every rank's entry: O(N) bytes per process,
//! where PMI, PMIx and catena's launcher hold only the peers contacted. MPI stays initialized for
//! the life of the bootstrap, so catena coexists with MPI use by the program.
//! Every wait is bounded, and a rank that leaves before the finalize barrier
//! (a start-up failure, an error, a panic) ends the whole job with
//! `MPI_Abort` when it exits, instead of waiting in `MPI_Finalize` forever.

use std::cell::{Cell, RefCell};
use std::sync::Once;
use std::time::{Duration, Instant};

use mpi::collective::{CommunicatorCollectives, Root};
use mpi::environment::Universe;
use mpi::raw::FromRaw;
use mpi::request::{Request, StaticScope};
use mpi::topology::{Communicator, SimpleCommunicator};

use super::new_job_id;
use super::{BarrierTicket, Bootstrap, Placement};
use crate::config::ENV_MPI_JOB;
use crate::{owned_name, Error, Rank, Result};

/// Longest job id rank 0 may hand out.
const MAX_JOB_ID: usize = 64;
/// How long a rank waits in `init` for rank 0's job id.
const INIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Pause between tests of a pending start-up collective.
const POLL: Duration = Duration::from_millis(1);

/// Bootstrap of a rank started by `mpiexec`: identity, the entries and
/// barriers come from `MPI_COMM_WORLD` (or a duplicate of the program's
/// communicator); its rank 0 hands out the job id.
pub struct MpiBootstrap {
    /// `Some` when catena initialized MPI (and so finalizes it on drop, or
    /// aborts the job if this rank did not reach the finalize barrier);
    /// `None` when the program had initialized MPI itself.
    universe: Option<Universe>,
    /// `MPI_COMM_WORLD`, or the duplicate of the program's communicator.
    world: SimpleCommunicator,
    rank: Rank,
    size: u32,
    job: String,
    placement: Placement,
    /// Every rank's entry, once published.
    entries: RefCell<Vec<Vec<u8>>>,
    /// The one barrier in flight, with its ticket.
    barrier: RefCell<Option<(u64, Request<'static, ()>)>>,
    barriers_done: Cell<u64>,
}

impl MpiBootstrap {
    /// Initializes MPI unless the program did, and learns the job from it.
    /// If catena initialized MPI and this fails, the job is aborted when
    /// this process exits, so that `mpiexec` ends every rank.
    pub fn init() -> Result<MpiBootstrap> {
        // MPI_Initialized stays true after MPI_Finalize, and any MPI call
        // then ends the process inside MPICH: ask first.
        if mpi::environment::is_finalized() {
            return Err(Error::Bootstrap(
                "MPI was finalized in this process; it cannot start again".into(),
            ));
        }
        let universe = if mpi::environment::is_initialized() {
            None
        } else {
            Some(mpi::initialize().ok_or_else(|| Error::Bootstrap("MPI_Init failed".into()))?)
        };
        let world = SimpleCommunicator::world();
        match Self::join(&world) {
            Ok((job, placement)) => Ok(MpiBootstrap {
                universe,
                rank: world.rank() as Rank,
                size: world.size() as u32,
                world,
                job,
                placement,
                entries: RefCell::new(Vec::new()),
                barrier: RefCell::new(None),
                barriers_done: Cell::new(0),
            }),
            Err(e) => {
                if let Some(universe) = universe {
                    abort_job_at_exit(universe, world.rank());
                }
                Err(e)
            }
        }
    }

    /// The job of the processes of `comm`, a communicator of a program that
    /// initialized MPI itself, ranked as in it. catena works on a
    /// duplicate, so its collectives never meet the program's on `comm`;
    /// the program finalizes catena before MPI.
    ///
    /// # Safety
    /// `comm` is `MPI_COMM_NULL` or a live communicator handle (an invalid
    /// one is MPI's error, which by default aborts the job).
    pub unsafe fn on_comm(comm: mpi::ffi::MPI_Comm) -> Result<MpiBootstrap> {
        if !mpi::environment::is_initialized() || mpi::environment::is_finalized() {
            return Err(Error::Bootstrap(
                "a communicator given before MPI_Init or after MPI_Finalize".into(),
            ));
        }
        // SAFETY: reads MPI's constant.
        if comm == unsafe { mpi::ffi::RSMPI_COMM_NULL } {
            return Err(Error::Bootstrap("the communicator is MPI_COMM_NULL".into()));
        }
        let mut inter = 0;
        // SAFETY: `comm` is live (this function's contract). Under
        // `MPI_ERRORS_RETURN` a bad handle comes back as an error code.
        if unsafe { mpi::ffi::MPI_Comm_test_inter(comm, &mut inter) } != 0 {
            return Err(Error::Bootstrap(
                "MPI_Comm_test_inter failed: not a live communicator".into(),
            ));
        }
        if inter != 0 {
            return Err(Error::Bootstrap(
                "an intercommunicator: catena's job is one group of processes".into(),
            ));
        }
        // SAFETY: as above.
        let mut dup = unsafe { mpi::ffi::RSMPI_COMM_NULL };
        // SAFETY: as above; `dup` is written by MPI.
        let rc = unsafe { mpi::ffi::MPI_Comm_dup(comm, &mut dup) };
        // SAFETY: reads MPI's constant.
        if rc != 0 || dup == unsafe { mpi::ffi::RSMPI_COMM_NULL } {
            return Err(Error::Bootstrap(format!("MPI_Comm_dup failed ({rc})")));
        }
        // SAFETY: the duplicate is a fresh, live handle owned from here.
        let own = unsafe { SimpleCommunicator::from_raw(dup) };
        let (job, placement) = Self::join(&own)?;
        Ok(MpiBootstrap {
            universe: None,
            rank: own.rank() as Rank,
            size: own.size() as u32,
            world: own,
            job,
            placement,
            entries: RefCell::new(Vec::new()),
            barrier: RefCell::new(None),
            barriers_done: Cell::new(0),
        })
    }

    /// The job id (from rank 0) and where the ranks run (this machine's
    /// ranks by a shared-memory split, the hosts by counting its leaders).
    fn join(world: &SimpleCommunicator) -> Result<(String, Placement)> {
        // mpiexec has no cleanup of its own for what killed ranks left.
        owned_name::remove_dead();
        let local = world.split_shared(world.rank());
        let ranks = (
            vec![world.rank() as Rank],
            vec![0 as Rank; local.size() as usize],
        );
        let what = "the MPI gather of this host's ranks";
        let (_, local_ranks) = bounded(ranks, INIT_TIMEOUT, what, |(mine, all)| {
            local.immediate_all_gather_into(StaticScope, &mine[..], &mut all[..])
        })?;
        let leaders = (u32::from(local.rank() == 0), 0u32);
        let what = "the MPI count of hosts";
        let (_, hosts) = bounded(leaders, INIT_TIMEOUT, what, |(leader, hosts)| {
            world.immediate_all_reduce_into(
                StaticScope,
                &*leader,
                hosts,
                mpi::collective::SystemOperation::sum(),
            )
        })?;
        let placement = Placement { hosts, local_ranks };
        let mut job = vec![0u8; MAX_JOB_ID];
        if world.rank() == 0 {
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
        let root = world.process_at_rank(0);
        let job = bounded(job, INIT_TIMEOUT, "the MPI job id broadcast", |job| {
            root.immediate_broadcast_into(StaticScope, &mut job[..])
        })?;
        let len = job.iter().position(|&b| b == 0).unwrap_or(MAX_JOB_ID);
        Ok((String::from_utf8_lossy(&job[..len]).into_owned(), placement))
    }
}

/// Runs the nonblocking collective `start` begins on `buffers` until it
/// completes, testing it until `timeout`; returns the buffers. They live on
/// the heap, leaked while MPI owns them: a collective abandoned at its
/// deadline stays pending in MPI, and must never write into freed memory.
fn bounded<B: 'static, D: ?Sized + 'static>(
    buffers: B,
    timeout: Duration,
    what: &'static str,
    start: impl FnOnce(&'static mut B) -> Request<'static, D, StaticScope>,
) -> Result<B> {
    let raw = Box::into_raw(Box::new(buffers));
    // SAFETY: `raw` is a fresh, leaked box; MPI is its only user until the
    // request completes, and it is reclaimed only after that.
    let mut request = start(unsafe { &mut *raw });
    let deadline = Instant::now() + timeout;
    loop {
        match request.test() {
            Ok(_) => break,
            Err(pending) if Instant::now() < deadline => {
                request = pending;
                std::thread::sleep(POLL);
            }
            Err(pending) => {
                // rsmpi panics on dropping an incomplete request.
                std::mem::forget(pending);
                return Err(Error::Timeout { what });
            }
        }
    }
    // SAFETY: the collective completed, so MPI no longer touches the box,
    // and the reference handed to `start` went with the request.
    Ok(*unsafe { Box::from_raw(raw) })
}

/// Makes this process end the whole MPI job with `MPI_Abort` when it exits
/// (after the program had its say, e.g. printed the error that stopped
/// it), instead of `MPI_Finalize`, which would wait for ranks that wait for
/// this one: `mpiexec` then kills every rank and exits non-zero.
fn abort_job_at_exit(universe: Universe, rank: i32) {
    std::mem::forget(universe);
    eprintln!(
        "catena: rank {rank} left the MPI job before its finalize barrier; \
         the job is aborted (MPI_Abort) when this process exits"
    );
    static REGISTER: Once = Once::new();
    REGISTER.call_once(|| {
        // SAFETY: registers a plain extern "C" function; failure (no room
        // for handlers) leaves mpiexec to notice the exit without finalize.
        unsafe { libc::atexit(abort_job) };
    });
}

/// How long the error a rank printed gets to travel through `mpiexec`'s
/// output forwarding before `MPI_Abort` tears the job down (and the pipes
/// with it).
const ABORT_FLUSH: Duration = Duration::from_millis(300);

extern "C" fn abort_job() {
    std::thread::sleep(ABORT_FLUSH);
    SimpleCommunicator::world().abort(1);
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
        self.placement.local_ranks.len() as u32
    }

    fn publish(&self, mine: &[u8], timeout: Duration) -> Result<Placement> {
        if !self.entries.borrow().is_empty() {
            return Err(Error::Bootstrap("the entry is published once".into()));
        }
        let deadline = Instant::now() + timeout;
        let what = "the MPI entry allgather";
        let world = &self.world;
        let lengths = (vec![mine.len() as u64], vec![0u64; self.size as usize]);
        let (_, lengths) = bounded(lengths, timeout, what, |(mine, all)| {
            world.immediate_all_gather_into(StaticScope, &mine[..], &mut all[..])
        })?;
        let block = lengths.iter().copied().max().unwrap_or(0) as usize;
        let mut padded = mine.to_vec();
        padded.resize(block, 0);
        let blocks = (padded, vec![0u8; block * self.size as usize]);
        let left = deadline.saturating_duration_since(Instant::now());
        let (_, blocks) = bounded(blocks, left, what, |(mine, all)| {
            world.immediate_all_gather_into(StaticScope, &mine[..], &mut all[..])
        })?;
        *self.entries.borrow_mut() = lengths
            .iter()
            .enumerate()
            .map(|(rank, &len)| blocks[rank * block..][..len as usize].to_vec())
            .collect();
        Ok(self.placement.clone())
    }

    fn lookup(&self, rank: Rank, _timeout: Duration) -> Result<Vec<u8>> {
        let entries = self.entries.borrow();
        super::lookup_allowed(!entries.is_empty(), rank, self.size)?;
        Ok(entries[rank as usize].clone())
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
        let barrier_pending = self.barrier.get_mut().take().is_some_and(|in_flight| {
            std::mem::forget(in_flight);
            true
        });
        if mpi::environment::is_finalized() {
            // A duplicate made by `on_comm` cannot be freed after
            // MPI_Finalize; the world handle stands in (never freed).
            std::mem::forget(std::mem::replace(
                &mut self.world,
                SimpleCommunicator::world(),
            ));
        }
        let finalized = self.barriers_done.get() > 0 && !barrier_pending;
        if let Some(universe) = self.universe.take() {
            if !finalized {
                abort_job_at_exit(universe, self.rank as i32);
            }
        }
    }
}
