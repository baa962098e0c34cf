//! What the benchmarks share to start jobs of themselves: the providers
//! `--provider` accepts, and a run of this very benchmark under `mpiexec`
//! as the MPICH side of a comparison.

#[cfg(feature = "mpi")]
use catena_run::HostArgs;

/// What `--provider` accepts: `auto` (shm on one host, a network provider
/// across hosts; see `catena_fabric::default_provider`) or a provider of
/// this build.
pub fn provider_names() -> Vec<&'static str> {
    std::iter::once(catena_fabric::AUTO)
        .chain(catena_fabric::PROVIDERS.iter().copied())
        .collect()
}

/// Runs this very benchmark's `subcommand` under `mpiexec -n ranks`, as
/// the MPICH side of a comparison: `repetitions` timed calls, figures
/// written to `csv`, and the subcommand's `extra` arguments.
#[cfg(feature = "mpi")]
pub fn run_under_mpiexec(
    ranks: u32,
    hosts: &HostArgs,
    subcommand: &str,
    repetitions: usize,
    csv: &std::path::Path,
    extra: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    eprintln!("catena-bench {subcommand}: MPICH under mpiexec -n {ranks} ...");
    let status = std::process::Command::new("mpiexec")
        .args(hosts.mpiexec_args(ranks))
        .arg("-n")
        .arg(ranks.to_string())
        .arg(std::env::current_exe()?)
        .args([
            subcommand,
            "--repetitions",
            &repetitions.to_string(),
            "--csv",
        ])
        .arg(csv)
        .args(extra)
        .status()
        .map_err(|e| format!("starting mpiexec (is MPICH installed?): {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("mpiexec failed: {status}").into()),
    }
}
