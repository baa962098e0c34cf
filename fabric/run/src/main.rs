//! `catena-run -n N [--pin] [--hosts A,B] -- PROGRAM ARGS...`: catena's
//! launcher as a binary of its own (`catena-bench run` is the same command);
//! started with `CATENA_PROXY` set, it serves as a host's proxy.

use std::process::ExitCode;

use catena_run::{exit_code, run, LaunchArgs};
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "catena-run",
    version,
    about = "Start N ranks of a program as one catena job, on this machine or across hosts"
)]
struct Cli {
    #[command(flatten)]
    launch: LaunchArgs,
}

fn main() -> ExitCode {
    if let Some(code) = catena_run::launch::serve_as_proxy() {
        return ExitCode::from(code as u8);
    }
    exit_code(run(Cli::parse().launch, "catena-run"), "catena-run")
}
