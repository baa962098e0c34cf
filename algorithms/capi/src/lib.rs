//! catena's C API (`catena.h`, `libcatena.so` / `libcatena.a`): opaque
//! communicator handles, error codes, and blocking calls over the Rust
//! `Comm`. Every function catches panics and checks every pointer and
//! handle; see docs/c-api.md.
#![allow(non_camel_case_types)]

mod alltoall;
mod boundary;
mod collectives;
mod comm;
mod groups;
mod handles;
mod instance;
mod ops;
mod requests;
mod status;

use std::ffi::c_int;

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

/// Starts a provider for the job this process was started into.
struct Start;

impl WithProvider for Start {
    type Output = Result<Box<dyn Api>, Failure>;

    fn run<P: Provider>(self) -> Self::Output {
        Instance::<P>::start()
    }
}

/// Joins the job this process was started into (by `catena-run`, or by
/// `mpiexec` in a build with MPI, also when the program initialized MPI
/// itself) on the provider `CATENA_PROVIDER` names (default `auto`).
/// Once per thread until `catena_finalize`; every other call must come
/// from the same thread.
#[no_mangle]
pub extern "C" fn catena_init() -> c_int {
    call(|| {
        INSTANCE.with(|cell| {
            let mut slot = cell.try_borrow_mut().map_err(|_| {
                Failure::new(CATENA_ERR_STATE, "catena_init from a catena callback")
            })?;
            if slot.is_some() {
                return Err(Failure::new(
                    CATENA_ERR_STATE,
                    "catena is already initialized",
                ));
            }
            let provider = std::env::var(ENV_PROVIDER).unwrap_or_else(|_| AUTO.into());
            *slot = Some(with_provider(&provider, Start)??);
            Ok(())
        })
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
