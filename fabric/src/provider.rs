//! A provider as a process starts and ends it: the [`Transport`] plus the
//! two lifecycle calls the launcher, `mpiexec` runs, tests and benchmarks
//! need, so that each of them is written once for every provider.

use std::time::Duration;

use crate::job::Job;
use crate::{block_on, wait_until, Blocking, Result, Transport};

/// A transport a process can be started on by name, with its start-up and
/// orderly shutdown; the launcher, tests and benchmarks are generic over it.
pub trait Provider: Transport + Blocking + Sized + 'static {
    /// The name users choose it by (`shm`, `ofi`, `ucx`).
    const NAME: &'static str;
    /// Joins the job `job` describes (its bootstrap already made),
    /// configured by the provider's `CATENA_*` variables.
    fn from_job(job: Job) -> Result<Self>;
    /// The job it joined: identity, placement and the directory of the
    /// peers it contacted.
    fn job(&self) -> &Job;
    /// Joins the job this process was started into (see [`Job::from_env`]).
    fn from_env() -> Result<Self> {
        Self::from_job(Job::from_env()?)
    }
    /// Waits until every rank finalized, so that no peer still puts into
    /// windows this rank is about to free; serves peers meanwhile, as
    /// `MPI_Finalize` does.
    fn finalize(self, timeout: Duration) -> Result<()>;
}

/// `Provider::finalize` for a transport whose job is `job`.
pub fn finalize_barrier<T: Blocking>(transport: &T, job: &Job, timeout: Duration) -> Result<()> {
    let ticket = job.start_finalize()?;
    let deadline = transport.deadline_in(timeout);
    block_on(
        transport,
        wait_until(transport, deadline, "the finalize barrier", || {
            Ok(job.finalize_done(ticket)?.then_some(()))
        }),
    )
}
