//! `catena-run -n N [--pin] -- PROGRAM ARGS...`: catena's local launcher as
//! a binary of its own (`catena-bench run` is the same command).

use std::process::ExitCode;

use catena_bench::{exit_code, run, LaunchArgs};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "catena-run",
    version,
    about = "Start N ranks of a program on this machine as one catena job"
)]
struct Cli {
    #[command(flatten)]
    launch: LaunchArgs,
}

fn main() -> ExitCode {
    exit_code(run(Cli::parse().launch, "catena-run"), "catena-run")
}
