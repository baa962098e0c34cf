//! A provider as a process starts and ends it: the [`Transport`] plus the
//! two lifecycle calls the launcher, `mpiexec` runs, tests and benchmarks
//! need, so that each of them is written once for every provider; and the
//! one place that picks a provider by its name ([`with_provider`]).

use std::time::Duration;

use crate::job::Job;
use crate::{block_on, wait_until, Blocking, Error, Result, Transport};

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

/// The names of the providers this build has: what [`with_provider`]
/// accepts (`ofi` and `ucx` come with the cargo features of those names).
pub const PROVIDERS: &[&str] = &[
    "shm",
    #[cfg(feature = "ofi")]
    "ofi",
    #[cfg(feature = "ucx")]
    "ucx",
];

/// The providers of this build that reach ranks on other hosts.
pub const NETWORK_PROVIDERS: &[&str] = &[
    #[cfg(feature = "ofi")]
    "ofi",
    #[cfg(feature = "ucx")]
    "ucx",
];

/// Code to run on a provider chosen by name at run time. A generic function
/// cannot be passed as a value, so it comes as a type with a generic method.
pub trait WithProvider {
    /// What the code returns.
    type Output;
    /// Runs the code on provider `P`.
    fn run<P: Provider>(self) -> Self::Output;
}

/// The name that asks for [`default_provider`].
pub const AUTO: &str = "auto";

/// The provider a job of this process should run on: `shm` when all its
/// ranks share this host, else `ucx` if this build has it (it uses shared
/// memory inside a host and the network across), else `ofi`. Decided from what the launcher or `mpiexec` put in the
/// environment, so every rank decides alike before any bootstrap.
pub fn default_provider() -> &'static str {
    match (spans_hosts(), NETWORK_PROVIDERS.last()) {
        (true, Some(network)) => network,
        _ => "shm",
    }
}

/// Whether the launcher or `mpiexec` placed this job's ranks on several
/// hosts: fewer ranks on this host than in the job (the same answer on
/// every rank, whatever its host).
pub fn spans_hosts() -> bool {
    spans_hosts_in(|name| std::env::var(name).ok())
}

/// [`spans_hosts`] for an environment given by `lookup`.
fn spans_hosts_in(lookup: impl Fn(&str) -> Option<String>) -> bool {
    let number = |name: &str| lookup(name)?.trim().parse::<u64>().ok();
    let pairs = [
        (crate::config::ENV_LOCAL_SIZE, crate::config::ENV_SIZE),
        // MPICH's Hydra.
        ("MPI_LOCALNRANKS", "PMI_SIZE"),
        // Open MPI.
        ("OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_SIZE"),
    ];
    // Slurm (srun, with PMIx or PMI-2) counts the step's nodes.
    if let Some(nodes) = number("SLURM_STEP_NUM_NODES") {
        return nodes > 1;
    }
    pairs
        .iter()
        .find_map(|(local, all)| Some(number(local)? < number(all)?))
        .unwrap_or(false)
}

/// Runs `task` on the provider called `name` (one of [`PROVIDERS`], or
/// [`AUTO`] for [`default_provider`]). Any other name is
/// `Error::Unavailable`, listing the providers of this build.
pub fn with_provider<W: WithProvider>(name: &str, task: W) -> Result<W::Output> {
    let name = if name == AUTO {
        default_provider()
    } else {
        name
    };
    match name {
        "shm" => Ok(task.run::<crate::shm::ShmTransport>()),
        #[cfg(feature = "ofi")]
        "ofi" => Ok(task.run::<crate::ofi::OfiTransport>()),
        #[cfg(feature = "ucx")]
        "ucx" => Ok(task.run::<crate::ucx::UcxTransport>()),
        _ => Err(Error::Unavailable {
            requested: name.into(),
            why: "this build has no provider of that name (ofi and ucx need \
                  the cargo features of the same name)"
                .into(),
            available: PROVIDERS.join(", "),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Says which provider it ran on.
    struct Name;

    impl WithProvider for Name {
        type Output = &'static str;
        fn run<P: Provider>(self) -> &'static str {
            P::NAME
        }
    }

    #[test]
    fn a_job_spans_hosts_when_its_starter_placed_fewer_ranks_here() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert!(!spans_hosts_in(env(&[])));
        assert!(spans_hosts_in(env(&[("SLURM_STEP_NUM_NODES", "2")])));
        assert!(!spans_hosts_in(env(&[
            ("SLURM_STEP_NUM_NODES", "1"),
            ("PMI_SIZE", "6")
        ])));
        assert!(!spans_hosts_in(env(&[
            ("CATENA_LOCAL_SIZE", "4"),
            ("CATENA_SIZE", "4")
        ])));
        assert!(spans_hosts_in(env(&[
            ("CATENA_LOCAL_SIZE", "2"),
            ("CATENA_SIZE", "4")
        ])));
        assert!(spans_hosts_in(env(&[
            ("MPI_LOCALNRANKS", "3"),
            ("PMI_SIZE", "6")
        ])));
        assert!(!spans_hosts_in(env(&[
            ("MPI_LOCALNRANKS", "6"),
            ("PMI_SIZE", "6")
        ])));
        assert!(spans_hosts_in(env(&[
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2")
        ])));
        // A malformed or half-given pair decides nothing.
        assert!(!spans_hosts_in(env(&[
            ("CATENA_LOCAL_SIZE", "x"),
            ("CATENA_SIZE", "4")
        ])));
        assert!(!spans_hosts_in(env(&[("PMI_SIZE", "4")])));
    }

    #[test]
    fn every_listed_name_runs_on_its_provider() {
        for &name in PROVIDERS {
            assert_eq!(with_provider(name, Name).unwrap(), name);
        }
    }

    #[test]
    fn an_unknown_name_is_unavailable_and_lists_the_providers() {
        for name in ["tcp", "", "SHM", "ofi/shm"] {
            match with_provider(name, Name) {
                Err(Error::Unavailable {
                    requested,
                    available,
                    ..
                }) => {
                    assert_eq!(requested, name);
                    assert_eq!(available, PROVIDERS.join(", "));
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
        let message = with_provider("tcp", Name).unwrap_err().to_string();
        assert!(message.contains("provider tcp is unavailable"), "{message}");
        assert!(message.contains("available here: shm"), "{message}");
    }
}
