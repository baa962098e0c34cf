//! The launcher command line shared by `catena-run` and its alias
//! `catena-bench run`, so both start a job the same way; the benchmarks
//! themselves live in the `catena-bench` binary.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

use std::ffi::OsString;
use std::process::ExitCode;

use catena_fabric::launch::{launch, LaunchSpec};

/// What a command returns: the exit code to leave with, or an error to print.
pub type Outcome = Result<u8, Box<dyn std::error::Error>>;

/// `-n N [--pin] -- PROGRAM ARGS...`: the job to start.
#[derive(clap::Args, Debug)]
pub struct LaunchArgs {
    /// Number of ranks.
    #[arg(short = 'n', long = "ranks", default_value_t = 2)]
    pub ranks: u32,
    /// Pin rank r to core r mod cores.
    #[arg(long)]
    pub pin: bool,
    /// The program and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<OsString>,
}

/// Starts the job `args` describe and waits for it; `who` names the
/// command in messages.
pub fn run(args: LaunchArgs, who: &str) -> Outcome {
    let (program, rest) = args.command.split_first().ok_or("no program to run")?;
    let mut spec = LaunchSpec::new(args.ranks, program);
    spec.args = rest.to_vec();
    spec.pin = args.pin;
    run_job(&spec, who)
}

/// Launches `spec` and returns the launcher's exit code: 0, or the first
/// failed rank's (128 + signal if it was killed), which is also reported.
pub fn run_job(spec: &LaunchSpec, who: &str) -> Outcome {
    let report = launch(spec)?;
    if let Some((rank, status)) = report.first_failure {
        eprintln!("{who}: rank {rank} failed ({status}); the job was stopped");
    }
    Ok(report.exit_code().clamp(0, 255) as u8)
}

/// The process's exit code for `outcome`, printing an error as `who: error`.
pub fn exit_code(outcome: Outcome, who: &str) -> ExitCode {
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("{who}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs this very benchmark's `subcommand` under `mpiexec -n ranks`, as
/// the MPICH side of a comparison: `repetitions` timed calls, figures
/// written to `csv`, and the subcommand's `extra` arguments.
pub fn run_under_mpiexec(
    ranks: u32,
    subcommand: &str,
    repetitions: usize,
    csv: &std::path::Path,
    extra: &[String],
) -> Result<(), Box<dyn std::error::Error>> {
    eprintln!("catena-bench {subcommand}: MPICH under mpiexec -n {ranks} ...");
    let status = std::process::Command::new("mpiexec")
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
