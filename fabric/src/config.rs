//! Every `CATENA_*` environment variable the transport reads, in one place,
//! and how numeric ones are parsed: a malformed value is a typed error
//! naming the variable, never a silent default.

use crate::{Error, Result};

/// Job id the launcher gives its ranks.
pub const ENV_JOB: &str = "CATENA_JOB";
/// This process's rank, from the launcher.
pub const ENV_RANK: &str = "CATENA_RANK";
/// The job's rank count, from the launcher.
pub const ENV_SIZE: &str = "CATENA_SIZE";
/// Ranks the launcher started on this machine (decides spinning vs sleeping).
pub const ENV_LOCAL_SIZE: &str = "CATENA_LOCAL_SIZE";
/// Job id of a job started by `mpiexec` (rank 0 makes one up if unset).
pub const ENV_MPI_JOB: &str = "CATENA_MPI_JOB";
/// Core this rank pins itself to (`--pin`).
pub const ENV_PIN_CORE: &str = "CATENA_PIN_CORE";
/// How long a waiting rank re-polls before it parks, in microseconds.
pub const ENV_SPIN_US: &str = "CATENA_SPIN_US";
/// Size of each per-peer eager message ring, in bytes.
pub const ENV_RING_BYTES: &str = "CATENA_EAGER_RING_BYTES";
/// `off`, `on` or a core number: a thread that drives ofi/ucx progress.
pub const ENV_PROGRESS_THREAD: &str = "CATENA_PROGRESS_THREAD";
/// Names the libfabric provider (`shm`, `tcp;ofi_rxm`, `verbs;ofi_rxm`, ...).
pub const ENV_OFI_PROVIDER: &str = "CATENA_OFI_PROVIDER";
/// Transports for catena's own UCP context only, overriding `UCX_TLS`: under
/// `mpiexec`, MPICH's UCP context in the same process reads `UCX_TLS` too.
pub const ENV_UCX_TLS: &str = "CATENA_UCX_TLS";
/// UCP endpoint error handling: `peer`, `none` or `auto`.
pub const ENV_UCX_ERR_MODE: &str = "CATENA_UCX_ERR_MODE";

/// The value of a numeric setting, if set.
pub fn env_number(name: &str) -> Result<Option<usize>> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Bootstrap(format!("{name}={v:?} is not a number"))),
    }
}

/// The value of a required setting of any parseable type.
pub fn required<T: std::str::FromStr>(name: &str) -> Result<T> {
    let raw = std::env::var(name).map_err(|_| Error::Bootstrap(format!("{name} is not set")))?;
    raw.trim()
        .parse()
        .map_err(|_| Error::Bootstrap(format!("{name}={raw:?} is not a number")))
}

/// The eager ring size `CATENA_EAGER_RING_BYTES` asks for, else `default`.
pub fn ring_bytes(default: usize) -> Result<usize> {
    Ok(env_number(ENV_RING_BYTES)?.unwrap_or(default))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_malformed_number_names_the_variable() {
        // A name no other test sets, so the process environment is ours.
        const NAME: &str = "CATENA_TEST_CONFIG_NUMBER";
        std::env::set_var(NAME, "12x");
        let err = env_number(NAME).unwrap_err().to_string();
        assert!(err.contains(NAME) && err.contains("12x"), "{err}");
        std::env::set_var(NAME, " 42 ");
        assert_eq!(env_number(NAME).unwrap(), Some(42));
        std::env::remove_var(NAME);
        assert_eq!(env_number(NAME).unwrap(), None);
    }
}
