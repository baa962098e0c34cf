//! catena's launcher: the library that starts N ranks of a program as one
//! job (on this machine, or across hosts through a proxy on each) and
//! waits for them, and the command line `catena-run` and `catena-bench
//! run` share. A crate of its own beside the transport it starts jobs for,
//! so the launcher builds with clap alone and the transport holds no
//! launcher.

#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod cli;
// Forking ranks takes a pre-exec hook, and the proxy polls its standard
// input: the crate's only unsafe code, each with its SAFETY comment.
#[allow(unsafe_code)]
pub mod launch;

pub use cli::{exit_code, run, run_job, HostArgs, LaunchArgs, Outcome};
