//! The providers this build has, by name, and the one a job runs on when
//! none is named: facts below every provider, so that job start-up can name
//! the alternatives without depending on the providers themselves.

/// The names of the providers this build has: what [`with_provider`](crate::with_provider)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
