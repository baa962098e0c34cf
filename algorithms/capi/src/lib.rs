//! catena's C API (`catena.h`, `libcatena.so` / `libcatena.a`): opaque
//! communicator handles, error codes, and blocking and posted calls over
//! the Rust `Comm`. Every function catches panics and checks every pointer
//! and handle; see docs/c-api.md.
#![allow(non_camel_case_types)]

mod alltoall;
mod boundary;
mod byte_plan;
mod collectives;
mod comm;
mod groups;
mod handles;
mod instance;
mod operation;
mod ops;
mod requests;
mod status;

use std::ffi::{c_int, c_void};

use catena_fabric::bootstrap::Bootstrap;
use catena_fabric::job::Job;
use catena_fabric::{with_provider, Provider, WithProvider, AUTO};

pub use alltoall::*;
use boundary::{call, out_arg, INSTANCE};
pub use collectives::*;
pub use comm::*;
pub use groups::*;
use instance::{Api, Instance};
pub use ops::*;
pub use requests::*;
pub use status::*;

/// The provider `catena_init` starts unless this names one (`shm`, `ofi`,
/// `ucx`; default `auto`: shm on one host, the network across hosts).
const ENV_PROVIDER: &str = "CATENA_PROVIDER";

/// Starts a provider for the job this process was started into, or for
/// the one a bootstrap describes.
struct Start(Option<Box<dyn Bootstrap>>);

impl WithProvider for Start {
    type Output = Result<Box<dyn Api>, Failure>;

    fn run<P: Provider>(self) -> Self::Output {
        let transport = match self.0 {
            None => P::from_env()?,
            Some(bootstrap) => {
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                P::from_job(Job::new(bootstrap, cores))?
            }
        };
        Ok(Instance::start(transport))
    }
}

/// Joins the job this process was started into, asking in this order:
/// `catena-run`, a PMIx server (`srun --mpi=pmix`, Open MPI's `mpirun`; a
/// build with feature `pmix`), a PMI-1/2 process manager (Hydra's
/// `mpiexec`, `srun --mpi=pmi2`), MPI (a build with MPI, also when the
/// program initialized MPI itself); `CATENA_BOOTSTRAP` names one. A job of
/// one when none started it; an error whose `catena_last_error` names what
/// was tried when a starter is seen but not built in. On the provider
/// `CATENA_PROVIDER` names (default `auto`).
/// Once per process, on one thread (`CATENA_ERR_STATE` on another thread,
/// or after `catena_finalize`); every other call must come from that
/// thread.
#[no_mangle]
pub extern "C" fn catena_init() -> c_int {
    call(|| start(|| Ok(None)))
}

/// Joins the job of the processes of the program's MPI communicator at
/// `mpi_comm` (a pointer to an `MPI_Comm`, e.g. `&comm`), ranked as in it,
/// in a program that initialized MPI; catena works on a duplicate of it.
/// Call `catena_finalize` before `MPI_Finalize`. The provider is chosen as
/// by `catena_init`. `CATENA_ERR_UNAVAILABLE` in a build without MPI, for
/// `MPI_COMM_NULL`, an intercommunicator, or MPI not initialized.
///
/// # Safety
/// `mpi_comm` is NULL or points to `MPI_COMM_NULL` or a live communicator
/// handle of the MPI this library was built with (any other is MPI's
/// error, which by default aborts the job).
#[no_mangle]
pub unsafe extern "C" fn catena_init_mpi(mpi_comm: *const c_void) -> c_int {
    call(|| {
        if mpi_comm.is_null() {
            return Err(Failure::arg("mpi_comm is NULL"));
        }
        start(|| {
            #[cfg(feature = "mpi")]
            {
                use catena_fabric::bootstrap::{MpiBootstrap, MpiComm};
                // SAFETY: per this function's contract.
                let comm = unsafe { mpi_comm.cast::<MpiComm>().read_unaligned() };
                // SAFETY: per this function's contract.
                let bootstrap = unsafe { MpiBootstrap::on_comm(comm) }?;
                Ok(Some(Box::new(bootstrap) as Box<dyn Bootstrap>))
            }
            #[cfg(not(feature = "mpi"))]
            Err(Failure::new(
                CATENA_ERR_UNAVAILABLE,
                "this libcatena was built without MPI (cargo feature mpi)",
            ))
        })
    })
}

/// Where the process's one instance is: catena, like MPI, starts once per
/// process (a process is one rank of its job), on one thread.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Life {
    NotStarted,
    On(std::thread::ThreadId),
    Finalized,
}

static LIFE: std::sync::Mutex<Life> = std::sync::Mutex::new(Life::NotStarted);

fn life() -> std::sync::MutexGuard<'static, Life> {
    // Nothing panics while holding it; a poisoned lock still holds a state.
    LIFE.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Starts this thread's instance, on the job `bootstrap` describes (`None`:
/// the one this process was started into).
fn start(
    bootstrap: impl FnOnce() -> Result<Option<Box<dyn Bootstrap>>, Failure>,
) -> Result<(), Failure> {
    INSTANCE.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| Failure::new(CATENA_ERR_STATE, "catena_init from a catena callback"))?;
        if slot.is_some() {
            return Err(Failure::new(
                CATENA_ERR_STATE,
                "catena is already initialized",
            ));
        }
        // Held while starting, so two threads cannot both start one.
        let mut life = life();
        match *life {
            Life::NotStarted => {}
            Life::On(_) => {
                return Err(Failure::new(
                    CATENA_ERR_STATE,
                    "catena is initialized on another thread of this process \
                     (one instance per process; call it from that thread)",
                ))
            }
            Life::Finalized => {
                return Err(Failure::new(
                    CATENA_ERR_STATE,
                    "catena was finalized in this process: like MPI, it starts once per process",
                ))
            }
        }
        let provider = std::env::var(ENV_PROVIDER).unwrap_or_else(|_| AUTO.into());
        *slot = Some(with_provider(&provider, Start(bootstrap()?))??);
        *life = Life::On(std::thread::current().id());
        Ok(())
    })
}

/// Frees every communicator and leaves the job, after every rank called it.
#[no_mangle]
pub extern "C" fn catena_finalize() -> c_int {
    call(|| {
        let pending = boundary::with_instance(|i| Ok(i.pending_requests()))?;
        if pending > 0 {
            return Err(Failure::new(
                CATENA_ERR_STATE,
                format!("{pending} requests are not done (catena_request_wait them first)"),
            ));
        }
        let instance = INSTANCE.with(|cell| {
            cell.try_borrow_mut()
                .map_err(|_| {
                    Failure::new(CATENA_ERR_STATE, "catena_finalize from a catena callback")
                })?
                .take()
                .ok_or_else(|| {
                    Failure::new(CATENA_ERR_STATE, "catena is not initialized on this thread")
                })
        })?;
        *life() = Life::Finalized;
        instance.finalize()
    })
}

/// Sets `*flag` to 1 if catena is initialized on this thread, else 0.
///
/// # Safety
/// `flag` is NULL or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn catena_initialized(flag: *mut c_int) -> c_int {
    call(|| {
        // SAFETY: per this function's contract.
        let flag = unsafe { out_arg(flag, "flag") }?;
        *flag = INSTANCE.with(|cell| cell.try_borrow().map_or(1, |i| c_int::from(i.is_some())));
        Ok(())
    })
}
