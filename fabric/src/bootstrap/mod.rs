//! How a process learns who it is and meets its peers: rank, size, job id,
//! where the ranks run, each rank's published entry (asked for at first
//! contact, never gathered whole), barriers, and job-failure news. One
//! implementation per starter: catena's launcher, PMI-1/2, PMIx, MPI.

pub mod handshake;
mod local;
#[cfg(feature = "mpi")]
mod mpi;
mod pmi;
#[cfg(feature = "pmix")]
mod pmix;
mod tcp;
pub mod wire;

use std::time::Duration;

pub use local::{JobSegment, LocalBootstrap};
#[cfg(feature = "mpi")]
pub use mpi::MpiBootstrap;
pub use pmi::{pmi_available, PmiBootstrap};
#[cfg(feature = "pmix")]
pub use pmix::PmixBootstrap;
/// MPI's communicator handle, as the MPI this build links declares it.
#[cfg(feature = "mpi")]
pub type MpiComm = ::mpi::ffi::MPI_Comm;
use handshake::JobKey;
pub use tcp::join_launcher;
pub use tcp::TcpBootstrap;

use crate::config::{
    optional, required, ENV_BOOTSTRAP, ENV_JOB, ENV_JOB_FD, ENV_JOB_KEY, ENV_LAUNCHER,
    ENV_LOCAL_SIZE, ENV_PIN_CORE, ENV_RANK, ENV_SIZE,
};
use crate::{Error, Rank, Result};

/// What a provider's `Job` needs from whoever started the
/// process: identity, publishing and looking up entries, barriers and
/// failure news.
pub trait Bootstrap {
    /// This process's rank, in `0..size()`.
    fn rank(&self) -> Rank;
    /// The number of ranks in the job.
    fn size(&self) -> u32;
    /// The id shared by every rank of the job.
    fn job_id(&self) -> &str;
    /// Ranks sharing this machine.
    fn local_size(&self) -> u32;
    /// Publishes this rank's entry `mine` and waits until every rank has
    /// published its own (a fence that gathers nothing). Called once, at
    /// start-up, before any lookup or barrier.
    fn publish(&self, mine: &[u8], timeout: Duration) -> Result<Placement>;
    /// The entry `rank` published: asked when this rank first contacts it.
    fn lookup(&self, rank: Rank, timeout: Duration) -> Result<Vec<u8>>;
    /// Arrives at the next barrier without waiting (like `MPI_Ibarrier`);
    /// returns the ticket `barrier_done` tests.
    fn start_barrier(&self) -> Result<BarrierTicket>;
    /// Whether every rank has arrived at the barrier of `ticket`;
    /// `PeerGone` once the job lost a rank.
    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool>;
    /// The first rank the job lost, if it lost one.
    fn failed_rank(&self) -> Option<Rank>;
}

/// Where the job's ranks run, as the starter tells it: O(ranks of this
/// host), never a table of the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// How many hosts the job spans.
    pub hosts: u32,
    /// The ranks on this host, ascending (this rank among them).
    pub local_ranks: Vec<Rank>,
}

/// What every `Bootstrap::lookup` checks first: `Bootstrap` before this
/// rank published (there is nothing to look up yet), `InvalidRank` for a
/// rank outside the job of `size`.
fn lookup_allowed(published: bool, rank: Rank, size: u32) -> Result<()> {
    if !published {
        return Err(Error::Bootstrap(
            "a lookup before the entries are published".into(),
        ));
    }
    if rank >= size {
        return Err(Error::InvalidRank { rank, size });
    }
    Ok(())
}

/// Names one barrier started with `Bootstrap::start_barrier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BarrierTicket(pub u64);

/// Variables by which MPI process managers (MPICH's Hydra, PMIx, Open MPI)
/// tell a process that `mpiexec` started it.
const MPIEXEC_VARS: [&str; 6] = [
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PMI_PORT",
    "PMIX_RANK",
    "OMPI_COMM_WORLD_RANK",
];

/// A fresh job id: random, so it is never reused and cannot be guessed (it
/// names only what libfabric's shm provider puts in /dev/shm).
pub fn new_job_id() -> String {
    format!("j{:016x}", crate::os::random_u64())
}

/// Whether `mpiexec` (rather than catena's launcher) started this process.
pub fn started_by_mpiexec() -> bool {
    std::env::var_os(ENV_JOB).is_none()
        && MPIEXEC_VARS.iter().any(|v| std::env::var_os(v).is_some())
}

/// Which starter each `CATENA_BOOTSTRAP` value names, in the order `auto`
/// tries them.
const STARTERS: &str = "auto, launcher, pmix, pmi, mpi";

/// The bootstrap this process was started with, tried in this order:
/// catena's launcher (`CATENA_JOB`), a PMIx server (`PMIX_RANK`, feature
/// `pmix`), a PMI-1/2 process manager (`PMI_FD`, `PMI_PORT`; with the `mpi`
/// feature linked, MPI owns that descriptor and is used instead), MPI
/// (feature `mpi`), else none: a job of one. `CATENA_BOOTSTRAP` names one
/// (`launcher`, `pmix`, `pmi`, `mpi`). A starter seen but not built in is
/// an error naming what was tried. Pins this process to the core the
/// launcher chose, if any.
pub fn from_env() -> Result<Box<dyn Bootstrap>> {
    match optional::<String>(ENV_BOOTSTRAP)?.as_deref() {
        None | Some("auto") => {}
        Some("launcher") => {
            return match LaunchEnv::from_env()? {
                Some(env) => launcher_bootstrap(env),
                None => Err(Error::Bootstrap(format!(
                    "{ENV_BOOTSTRAP}=launcher, but catena's launcher did not start this \
                     ({ENV_JOB} is not set)"
                ))),
            }
        }
        Some("pmix") => return pmix_bootstrap(),
        Some("pmi") => return Ok(Box::new(PmiBootstrap::init()?)),
        Some("mpi") => return mpi_bootstrap(),
        Some(other) => {
            return Err(Error::Bootstrap(format!(
                "{ENV_BOOTSTRAP}={other:?}: one of {STARTERS}"
            )))
        }
    }
    if let Some(env) = LaunchEnv::from_env()? {
        return launcher_bootstrap(env);
    }
    if pmix_started() {
        return pmix_bootstrap();
    }
    if pmi_available() && !cfg!(feature = "mpi") {
        return Ok(Box::new(PmiBootstrap::init()?));
    }
    if started_by_mpiexec() {
        return mpi_bootstrap();
    }
    Ok(Box::new(LocalBootstrap::singleton()?))
}

/// The bootstrap of a rank that catena's launcher started as `env` says.
fn launcher_bootstrap(env: LaunchEnv) -> Result<Box<dyn Bootstrap>> {
    if let Some(core) = env.pin_core {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
    match env.meeting {
        Meeting::Segment(fd) => Ok(Box::new(LocalBootstrap::from_launch_env(&env, fd)?)),
        Meeting::Launcher { at, ref key } => Ok(Box::new(TcpBootstrap::connect(
            at,
            key,
            &env.job,
            env.rank,
            env.size,
            env.local_size,
        )?)),
    }
}

/// The PMIx bootstrap, where this build has one.
fn pmix_bootstrap() -> Result<Box<dyn Bootstrap>> {
    #[cfg(feature = "pmix")]
    return Ok(Box::new(PmixBootstrap::init()?));
    #[cfg(not(feature = "pmix"))]
    return Err(Error::Bootstrap(
        "a PMIx server started this (PMIX_RANK is set), but catena was built without the \
         `pmix` feature; tried: launcher (CATENA_JOB unset), pmix (not built)"
            .into(),
    ));
}

/// Whether a PMIx server started this process (asked in every build, so
/// that one without PMIx can say why it cannot join).
fn pmix_started() -> bool {
    ["PMIX_RANK", "PMIX_NAMESPACE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

/// The MPI bootstrap, where this build has one.
fn mpi_bootstrap() -> Result<Box<dyn Bootstrap>> {
    #[cfg(feature = "mpi")]
    return Ok(Box::new(MpiBootstrap::init()?));
    #[cfg(not(feature = "mpi"))]
    return Err(Error::Bootstrap(
        "started by mpiexec, but catena was built without the `mpi` feature and the \
         process manager gave neither PMIx (PMIX_RANK) nor a PMI descriptor (PMI_FD, \
         PMI_PORT); tried: launcher, pmix, pmi"
            .into(),
    ));
}

/// Where the ranks of a launched job meet for the bootstrap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meeting {
    /// In the job segment inherited at this descriptor (one host).
    Segment(std::os::fd::RawFd),
    /// At the launcher's socket (a job that spans hosts), proving the job
    /// key there.
    Launcher {
        /// The launcher's address.
        at: std::net::SocketAddr,
        /// The job's key.
        key: JobKey,
    },
}

/// What the launcher put in the environment of one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchEnv {
    /// The job id.
    pub job: String,
    /// Where the ranks meet: the job segment, or the launcher's socket.
    pub meeting: Meeting,
    /// This process's rank.
    pub rank: Rank,
    /// The number of ranks in the job.
    pub size: u32,
    /// Ranks sharing this machine.
    pub local_size: u32,
    /// The core to pin this process to, if the launcher was asked to pin.
    pub pin_core: Option<usize>,
}

impl LaunchEnv {
    /// `None` when this process was not started by the launcher.
    pub fn from_env() -> Result<Option<LaunchEnv>> {
        let Ok(job) = std::env::var(ENV_JOB) else {
            return Ok(None);
        };
        let rank: Rank = required(ENV_RANK)?;
        let size: u32 = required(ENV_SIZE)?;
        if size == 0 || rank >= size {
            return Err(Error::Bootstrap(format!(
                "{ENV_RANK}={rank} is not below {ENV_SIZE}={size}"
            )));
        }
        let meeting = match optional::<std::net::SocketAddr>(ENV_LAUNCHER)? {
            Some(at) => Meeting::Launcher {
                at,
                key: JobKey::from_hex(&required::<String>(ENV_JOB_KEY)?)
                    .map_err(|e| Error::Bootstrap(format!("{ENV_JOB_KEY}: {e}")))?,
            },
            None => Meeting::Segment(required(ENV_JOB_FD)?),
        };
        let local_size = optional(ENV_LOCAL_SIZE)?.unwrap_or(size);
        let pin_core = optional(ENV_PIN_CORE)?;
        Ok(Some(LaunchEnv {
            job,
            meeting,
            rank,
            size,
            local_size,
            pin_core,
        }))
    }
}
