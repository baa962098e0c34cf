//! The launcher as a command: the command line `catena-run` and its alias
//! `catena-bench run` share, so both start a job the same way.

use std::ffi::OsString;
use std::process::ExitCode;

use crate::launch::{launch, LaunchSpec, Placement};

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
    /// The hosts to span (none: this machine only).
    #[command(flatten)]
    pub hosts: HostArgs,
    /// Set NAME to VALUE for every rank (repeat for more; Hydra's -genv).
    #[arg(long = "env", value_name = "NAME=VALUE", value_parser = parse_setting)]
    pub env: Vec<(OsString, OsString)>,
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
    spec.env = args.env;
    args.hosts.apply(&mut spec)?;
    run_job(&spec, who)
}

/// `--hosts A,B,... [--remote-exec CMD] [--bootstrap-address IP]`: a job
/// that spans hosts, started through a proxy on each.
#[derive(clap::Args, Debug, Default)]
pub struct HostArgs {
    /// Run on these hosts.
    #[arg(long, value_delimiter = ',')]
    pub hosts: Vec<String>,
    /// Which ranks each host runs: `cyclic`, rank r on host r mod hosts
    /// (as `mpiexec -hosts`), or `block`, consecutive ranks on each (as
    /// Slurm's block distribution), where the collectives that fold in rank
    /// order take two levels across hosts.
    #[arg(long, value_enum, default_value_t = Placement::Cyclic, requires = "hosts")]
    pub placement: Placement,
    /// The command that runs a command on a host: it is given the host name,
    /// then the command's words, shell-quoted (ssh's convention).
    #[arg(long, default_value = "ssh", requires = "hosts")]
    pub remote_exec: String,
    /// The address the launcher listens on, which every host must reach
    /// (default: what this machine's host name resolves to).
    #[arg(long, requires = "hosts")]
    pub bootstrap_address: Option<std::net::IpAddr>,
    /// Across hosts, forward these of the launcher's variables to every
    /// rank besides the allow-list (Hydra's -genvlist; docs/hosts.md).
    #[arg(long, value_delimiter = ',', requires = "hosts")]
    pub envlist: Vec<OsString>,
}

impl HostArgs {
    /// The same hosts, placed alike, for MPICH's `mpiexec` of `ranks`
    /// ranks (Hydra's ssh launcher run through the remote-exec command's
    /// program; blocks as each host's count of ranks).
    pub fn mpiexec_args(&self, ranks: u32) -> Vec<String> {
        let Some(exec) = self.remote_exec.split_whitespace().next() else {
            return Vec::new();
        };
        if self.hosts.is_empty() {
            return Vec::new();
        }
        vec![
            "-launcher".into(),
            "ssh".into(),
            "-launcher-exec".into(),
            exec.into(),
            "-hosts".into(),
            self.mpiexec_hosts(ranks),
        ]
    }

    /// Hydra's `-hosts` list: the names (one rank each in turn), or each
    /// with its block's count (a host with none left out).
    fn mpiexec_hosts(&self, ranks: u32) -> String {
        let hosts = self.hosts.len() as u32;
        match self.placement {
            Placement::Cyclic => self.hosts.join(","),
            Placement::Block => (0..hosts)
                .zip(&self.hosts)
                .map(|(h, name)| (name, self.placement.ranks_of(h, hosts, ranks).len()))
                .filter(|&(_, count)| count > 0)
                .map(|(name, count)| format!("{name}:{count}"))
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// Makes `spec` span the hosts asked for, if any.
    pub fn apply(&self, spec: &mut LaunchSpec) -> Result<(), Box<dyn std::error::Error>> {
        if self.hosts.is_empty() {
            return Ok(());
        }
        spec.hosts = self.hosts.clone();
        spec.placement = self.placement;
        spec.remote_exec = self
            .remote_exec
            .split_whitespace()
            .map(Into::into)
            .collect();
        if spec.remote_exec.is_empty() {
            return Err("--remote-exec is empty".into());
        }
        spec.bootstrap_address = self.bootstrap_address;
        spec.env_names = self.envlist.clone();
        Ok(())
    }
}

/// `NAME=VALUE` as a variable and its value.
fn parse_setting(setting: &str) -> Result<(OsString, OsString), String> {
    match setting.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.into(), value.into())),
        _ => Err(format!("{setting:?} is not NAME=VALUE")),
    }
}

/// Launches `spec` and returns the launcher's exit code: 0, or the first
/// failed rank's (128 + signal if it was killed), which is also reported.
pub fn run_job(spec: &LaunchSpec, who: &str) -> Outcome {
    let report = launch(spec)?;
    for host in &report.lost_hosts {
        eprintln!("{who}: host {host} was lost: its proxy ended, or stopped answering, before its ranks were reported");
    }
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
