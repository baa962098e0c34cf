//! `catena-bench`: catena's benchmarks, and the local launcher as `run` (an
//! alias of `catena-run`). A benchmark started from a shell relaunches itself
//! under the launcher with the ranks it needs, so `catena-bench ring -n 8` is
//! one command.

mod alltoall;
mod calibrate;
mod collectives;
mod create_group;
mod groupmap;
mod groups;
mod heap;
mod hierarchy;
mod mcmc;
mod mpich;
#[cfg(any(feature = "ofi", feature = "ucx"))]
mod native;
mod physical;
mod plot;
mod put;
mod relaunch;
mod report;
mod ring;
mod sim;
mod split;
mod tree;

use std::process::ExitCode;

use catena_fabric::bootstrap::LaunchEnv;
use catena_run::launch::LaunchSpec;
use catena_run::{exit_code, run_job, LaunchArgs, Outcome};
use clap::{Parser, Subcommand};

#[global_allocator]
static HEAP: heap::Counting = heap::Counting;

#[derive(Parser)]
#[command(
    name = "catena-bench",
    version,
    about = "catena's launcher and benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start N ranks of PROGRAM on this machine (the same as `catena-run`).
    Run(LaunchArgs),
    /// The split demo: N processes split by host/socket and more; prints the groups.
    Groups(groups::Args),
    /// Put latency and bandwidth between two pinned ranks, per provider, next
    /// to the machine's limits and the fabric libraries' own tools.
    Put(put::Args),
    /// Ring exchange: each rank sends to its right neighbour and waits for its
    /// left one; reports the round time (hand-off cost, also oversubscribed).
    Ring(ring::Args),
    /// Every split algorithm on N processes for the paper's workloads, with
    /// peak temporary memory, beside MPICH's MPI_Comm_split (feature mpi).
    Split(split::Args),
    /// The split algorithms on the simulator, N = 16 .. 1M virtual ranks in
    /// this process: virtual time, traffic, per-rank memory, events/s.
    Sim(sim::Args),
    /// The simulator's cost model fitted to this machine's N = 2 figures,
    /// its error there, and catena against MPICH's algorithms from 16 to
    /// 1M simulated ranks (docs/scaling.md).
    Calibrate(calibrate::Args),
    /// Group-collective creation (seed 004) on N processes: the direct
    /// construction, the seed's recursive merge and MPICH (feature mpi);
    /// `--sim N,...` in the simulator.
    CreateGroup(create_group::Args),
    /// Alltoall_specific (seed 002) on the seed's data sets A, B, C: every
    /// variant on N processes beside MPICH (feature mpi); `--sim N,...`
    /// runs data set C in the simulator.
    Alltoall(alltoall::Args),
    /// catena against MPICH on the same processes in the same run: barrier,
    /// bcast, reduce, allreduce, allgather, gather, scatter (8 B .. 16 MiB),
    /// split, create_group, alltoall_specific (Rust and C API), and the
    /// interposer's MPI_Comm_split; slowest rank's median, ratio, memory.
    Collectives(collectives::Args),
    /// Seed 004's MCMC load-balancing kernel: walker groups that merge
    /// with their right neighbour when idle; makespan against the
    /// unbalanced run and the ideal (`--sim N,...`: in virtual time).
    Mcmc(mcmc::Args),
    /// Two-level (inside each host, then across hosts' leaders) against
    /// flat allreduce and broadcast; meant for jobs across hosts (--hosts).
    Hierarchy(hierarchy::Args),
    /// Group maps (Taheri's classes A-E, Table 6.1): bytes, bound, lookup ns per representation.
    Groupmap(groupmap::Args),
    #[command(subcommand)]
    Tree(tree::TreeCommand),
}

fn main() -> ExitCode {
    // Before parsing: a proxy is started without the benchmark's arguments.
    if let Some(code) = catena_run::launch::serve_as_proxy() {
        return ExitCode::from(code as u8);
    }
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => catena_run::run(args, "catena-bench run"),
        Command::Put(args) => match LaunchEnv::from_env() {
            _ if catena_fabric::bootstrap::started_by_mpiexec() => put::main(&args),
            Ok(Some(_)) => put::main(&args),
            Ok(None) => put::compare(&args),
            Err(e) => Err(e.into()),
        },
        Command::Split(args) => match LaunchEnv::from_env() {
            #[cfg(feature = "mpi")]
            _ if catena_fabric::bootstrap::started_by_mpiexec() => split::mpi_main(&args),
            Ok(Some(_)) => split::main(&args),
            Ok(None) => split::compare(&args),
            Err(e) => Err(e.into()),
        },
        Command::CreateGroup(args) => match LaunchEnv::from_env() {
            #[cfg(feature = "mpi")]
            _ if catena_fabric::bootstrap::started_by_mpiexec() => create_group::mpi_main(&args),
            Ok(Some(_)) => create_group::main(&args),
            Ok(None) => create_group::compare(&args),
            Err(e) => Err(e.into()),
        },
        Command::Alltoall(args) => match LaunchEnv::from_env() {
            #[cfg(feature = "mpi")]
            _ if catena_fabric::bootstrap::started_by_mpiexec() => alltoall::mpi_main(&args),
            Ok(Some(_)) => alltoall::main(&args),
            Ok(None) => alltoall::compare(&args),
            Err(e) => Err(e.into()),
        },
        Command::Collectives(args) => match LaunchEnv::from_env() {
            #[cfg(feature = "mpi")]
            _ if catena_fabric::bootstrap::started_by_mpiexec() => collectives::mpi_main(&args),
            Ok(Some(_)) => collectives::main(&args),
            Ok(None) => collectives::compare(&args),
            Err(e) => Err(e.into()),
        },
        Command::Mcmc(args) if !args.sim.is_empty() => mcmc::main(&args),
        Command::Mcmc(args) => as_job(&args.job).unwrap_or_else(|| mcmc::main(&args)),
        Command::Sim(args) => sim::main(&args),
        Command::Calibrate(args) => calibrate::main(&args),
        Command::Groupmap(args) => groupmap::main(&args),
        Command::Tree(tree::TreeCommand::Run(args)) => {
            as_job(&args.job).unwrap_or_else(|| tree::main(&tree::TreeCommand::Run(args)))
        }
        Command::Tree(command) => tree::main(&command),
        Command::Groups(args) => as_job(&args.job).unwrap_or_else(|| groups::main(&args)),
        Command::Ring(args) => as_job(&args.job).unwrap_or_else(|| ring::main(&args)),
        Command::Hierarchy(args) => as_job(&args.job).unwrap_or_else(|| hierarchy::main(&args)),
    };
    exit_code(outcome, "catena-bench")
}

/// How many processes a benchmark job runs, and whether they are pinned.
#[derive(clap::Args)]
pub struct JobArgs {
    /// Number of processes.
    #[arg(short = 'n', long = "ranks", default_value_t = 8)]
    pub ranks: u32,
    /// Pin rank r to core r mod cores.
    #[arg(long)]
    pub pin: bool,
    /// The hosts to span (none: this machine only).
    #[command(flatten)]
    pub hosts: catena_run::HostArgs,
}

impl JobArgs {
    /// Outside a job: runs this very command as a job of `ranks` and waits
    /// for it, saying so on stderr (`what` names the benchmark, `detail`
    /// what it runs); fails with the first rank that failed. Yields whether
    /// the job had more processes than cores.
    pub fn launch(&self, what: &str, detail: &str) -> Result<bool, Box<dyn std::error::Error>> {
        let mut spec = LaunchSpec::new(self.ranks, std::env::current_exe()?);
        spec.args = std::env::args_os().skip(1).collect();
        spec.pin = self.pin;
        self.hosts.apply(&mut spec)?;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let oversubscribed = self.ranks as usize > cores;
        let flag = if oversubscribed {
            " (oversubscribed)"
        } else {
            ""
        };
        let across = match self.hosts.hosts.len() {
            0 => String::new(),
            n => format!(" across {n} hosts"),
        };
        eprintln!(
            "catena-bench {what}: {} processes{across} on {cores} cores{flag}{detail} ...",
            self.ranks
        );
        let report = catena_run::launch::launch(&spec)?;
        if !report.lost_hosts.is_empty() {
            return Err(format!("lost hosts: {}", report.lost_hosts.join(", ")).into());
        }
        if let Some((rank, status)) = report.first_failure {
            return Err(format!("rank {rank} failed ({status})").into());
        }
        Ok(oversubscribed)
    }
}

/// Outside a job (not started by the launcher or `mpiexec`), relaunches this
/// very command as the job `job` describes and returns its outcome; inside
/// one, returns `None` so the rank does the work.
fn as_job(job: &JobArgs) -> Option<Outcome> {
    if catena_fabric::bootstrap::started_by_mpiexec() {
        return None;
    }
    match LaunchEnv::from_env() {
        Ok(Some(_)) => None,
        Err(e) => Some(Err(e.into())),
        Ok(None) => Some((|| {
            let mut spec = LaunchSpec::new(job.ranks, std::env::current_exe()?);
            spec.args = std::env::args_os().skip(1).collect();
            spec.pin = job.pin;
            job.hosts.apply(&mut spec)?;
            run_job(&spec, "catena-bench")
        })()),
    }
}
