//! The launcher: starts N ranks of a program on this machine, gives them
//! rank/size/job id and a bootstrap segment, pins them when asked, forwards
//! their output with a rank prefix, and if one fails stops the others.
//! Whatever happens, what libfabric left in /dev/shm for ranks that died is
//! removed at the end, and so are such leftovers of any dead catena process
//! (catena's own shared memory has no name). Given hosts, it starts the
//! ranks through a proxy on each host instead ([`serve_as_proxy`]).

mod child;
mod hosts;
mod placement;
mod proxy;
mod server;

use std::ffi::OsString;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use child::{crash_by_signal, die_with_launcher, flush, forward, Sink};
pub use placement::Placement;
pub use proxy::serve_as_proxy;

use catena_fabric::bootstrap::JobSegment;
use catena_fabric::config::{
    ENV_JOB, ENV_JOB_FD, ENV_LOCAL_SIZE, ENV_PIN_CORE, ENV_RANK, ENV_SIZE,
};
use catena_fabric::{owned_name, Error, Rank, Result};

/// Wait status reported for a rank that could not be waited for (exit 255).
const LOST_CHILD_STATUS: i32 = 255 << 8;

/// What to launch and how: the input of [`launch`].
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    /// How many ranks (processes) to start.
    pub ranks: u32,
    /// The executable every rank runs.
    pub program: PathBuf,
    /// Arguments passed to every rank.
    pub args: Vec<OsString>,
    /// Pin rank r to core r mod cores.
    pub pin: bool,
    /// Extra environment for every rank.
    pub env: Vec<(OsString, OsString)>,
    /// Across hosts, the launcher's variables every rank gets besides
    /// those on the allow-list (catena's, libfabric's and UCX's settings,
    /// `PATH`, `LD_LIBRARY_PATH` and a few more; see docs/hosts.md). On
    /// one host ranks get the launcher's whole environment.
    pub env_names: Vec<OsString>,
    /// After a rank fails, how long the others get to notice and exit
    /// before they are killed.
    pub grace: Duration,
    /// Collect the ranks' output into the report instead of printing it.
    pub capture_output: bool,
    /// The hosts to run on; empty runs every rank on this machine.
    pub hosts: Vec<String>,
    /// Which ranks each host runs: by default rank r on host r mod hosts
    /// (as MPICH's `mpiexec -hosts` places them).
    pub placement: Placement,
    /// How to run a command on a host: this program followed by the host
    /// name and the command's words, shell-quoted (`ssh` by default).
    pub remote_exec: Vec<OsString>,
    /// The command that serves as a host's proxy (see [`serve_as_proxy`]):
    /// by default this very executable, without arguments.
    pub proxy_command: Vec<OsString>,
    /// The address the launcher listens on for its proxies and ranks, which
    /// every host must reach: by default, what this machine's host name
    /// resolves to.
    pub bootstrap_address: Option<IpAddr>,
}

impl LaunchSpec {
    /// `ranks` copies of `program` without arguments, unpinned, with a 3 s
    /// grace period, their output forwarded to ours.
    pub fn new(ranks: u32, program: impl Into<PathBuf>) -> LaunchSpec {
        LaunchSpec {
            ranks,
            program: program.into(),
            args: Vec::new(),
            pin: false,
            env: Vec::new(),
            env_names: Vec::new(),
            grace: Duration::from_secs(3),
            capture_output: false,
            hosts: Vec::new(),
            placement: Placement::Cyclic,
            remote_exec: vec!["ssh".into()],
            proxy_command: Vec::new(),
            bootstrap_address: None,
        }
    }
}

/// How a launched job ended.
#[derive(Debug)]
pub struct LaunchReport {
    /// The id the job ran under.
    pub job_id: String,
    /// Each rank's exit status, in rank order.
    pub statuses: Vec<ExitStatus>,
    /// The first rank seen to fail, with its status.
    pub first_failure: Option<(Rank, ExitStatus)>,
    /// Objects in /dev/shm named after the job (libfabric's regions) that
    /// were still there at the end and got removed.
    pub leftover_segments: usize,
    /// Hosts whose proxy ended (or never started) before reporting all its
    /// ranks, or did not report them within 10 s of being told to kill
    /// them: the host, or the way to it, was lost. Its unreported ranks
    /// count as failed with exit status 255.
    pub lost_hosts: Vec<String>,
    /// The ranks' prefixed output, if it was captured.
    pub output: String,
}

impl LaunchReport {
    /// Whether every rank exited successfully.
    pub fn success(&self) -> bool {
        self.first_failure.is_none()
    }

    /// The launcher's own exit code: 0, or the failed rank's code
    /// (128 + signal number if it was killed).
    pub fn exit_code(&self) -> i32 {
        match self.first_failure {
            None => 0,
            Some((_, status)) => status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
        }
    }
}

/// Runs the job to completion.
pub fn launch(spec: &LaunchSpec) -> Result<LaunchReport> {
    if spec.ranks == 0 {
        return Err(Error::Bootstrap("a job needs at least one rank".into()));
    }
    if !spec.hosts.is_empty() {
        return hosts::launch_across_hosts(spec);
    }
    let (limit, why) = local_rank_limit();
    if spec.ranks > limit {
        return Err(Error::Bootstrap(format!(
            "{} ranks on one machine: the launcher needs a process and two \
             output threads per rank, and this machine allows {limit} ({why})",
            spec.ranks
        )));
    }
    owned_name::remove_dead();
    let job = catena_fabric::bootstrap::new_job_id();
    let (job_segment, job_fd) = JobSegment::create(spec.ranks)?;
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let mut children: Vec<Option<Child>> = Vec::new();
    // Their names in /dev/shm (libfabric's) are told apart by owner pid.
    let mut pids = Vec::new();
    let mut forwarders = Vec::new();
    let captured = spec
        .capture_output
        .then(|| Arc::new(Mutex::new(Vec::new())));
    for rank in 0..spec.ranks {
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args)
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env(ENV_JOB, &job)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, spec.ranks.to_string())
            .env(ENV_LOCAL_SIZE, spec.ranks.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        share_job_segment(&mut cmd, job_fd.as_raw_fd());
        die_with_launcher(&mut cmd);
        crash_by_signal(&mut cmd);
        if spec.pin && !cores.is_empty() {
            cmd.env(
                ENV_PIN_CORE,
                cores[rank as usize % cores.len()].id.to_string(),
            );
        }
        let started = cmd.spawn().and_then(|mut child| {
            let sinks = match &captured {
                Some(buf) => [Sink::Buffer(buf.clone()), Sink::Buffer(buf.clone())],
                None => [Sink::Stdout, Sink::Stderr],
            };
            let [out, err] = sinks;
            let stdout = child.stdout.take().expect("piped");
            let stderr = child.stderr.take().expect("piped");
            // The child joins the job before its forwarders start, so that
            // it is killed with the others if a thread cannot be made.
            pids.push(child.id());
            children.push(Some(child));
            forwarders.push(forward(Some(rank), stdout, out)?);
            forwarders.push(forward(Some(rank), stderr, err)?);
            Ok(())
        });
        if let Err(e) = started {
            // Out of processes, threads or memory (a job too large for
            // this machine): stop what started, leave nothing behind.
            for child in children.iter_mut().flatten() {
                let _ = child.kill();
                let _ = child.wait();
            }
            drop(job_segment);
            owned_name::remove_dead();
            return Err(Error::io(
                format!("starting rank {rank} of {}", spec.program.display()),
                e,
            ));
        }
    }

    let mut statuses: Vec<Option<ExitStatus>> = vec![None; children.len()];
    let mut first_failure = None;
    let mut kill_at: Option<Instant> = None;
    while statuses.iter().any(Option::is_none) {
        for (rank, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            let status = match child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => status,
                // The child cannot be waited for (it was reaped elsewhere):
                // count it as failed rather than watch it forever.
                Err(_) => ExitStatus::from_raw(LOST_CHILD_STATUS),
            };
            statuses[rank] = Some(status);
            *slot = None;
            if !status.success() && first_failure.is_none() {
                first_failure = Some((rank as Rank, status));
                job_segment.mark_failed(rank as Rank);
                kill_at = Some(Instant::now() + spec.grace);
            }
        }
        if kill_at.is_some_and(|at| Instant::now() >= at) {
            for child in children.iter_mut().flatten() {
                let _ = child.kill();
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    flush(&forwarders);
    drop(job_segment);
    // What libfabric made for ranks that were killed: they are all dead now.
    let leftover_segments = owned_name::remove_dead_of(|pid| pids.contains(&pid));
    owned_name::remove_dead();
    Ok(LaunchReport {
        job_id: job,
        statuses: statuses
            .into_iter()
            .map(|s| s.expect("every rank exited"))
            .collect(),
        first_failure,
        leftover_segments,
        lost_hosts: Vec::new(),
        output: captured
            .map(|buf| {
                String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
            })
            .unwrap_or_default(),
    })
}

/// Lets the rank `cmd` starts inherit the job segment at descriptor `fd`
/// (the launcher's own copy stays close-on-exec, out of other children).
fn share_job_segment(cmd: &mut Command, fd: RawFd) {
    cmd.env(ENV_JOB_FD, fd.to_string());
    // SAFETY: the hook runs in the forked child and makes one
    // async-signal-safe call, allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The most ranks this machine can run under the launcher, and the kernel
/// limit that sets it: each rank is a process with two output-forwarding
/// threads in the launcher (three tasks), and each thread maps about four
/// regions (stack, sigaltstack, their guard pages). Past these a thread's
/// set-up fails inside std, which aborts instead of returning an error.
fn local_rank_limit() -> (u32, &'static str) {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let mut nproc = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the one struct it is given.
    let user_tasks =
        (unsafe { libc::getrlimit(libc::RLIMIT_NPROC, &mut nproc) } == 0).then_some(nproc.rlim_cur);
    [
        (
            read("/proc/sys/kernel/pid_max").map(|n| n / 3),
            "kernel.pid_max",
        ),
        (
            read("/proc/sys/kernel/threads-max").map(|n| n / 3),
            "kernel.threads-max",
        ),
        (
            read("/proc/sys/vm/max_map_count").map(|n| n / 8),
            "vm.max_map_count",
        ),
        (user_tasks.map(|n| n / 3), "ulimit -u"),
    ]
    .into_iter()
    .filter_map(|(limit, why)| Some((u32::try_from(limit?).unwrap_or(u32::MAX), why)))
    .min()
    .unwrap_or((u32::MAX, "no limit found"))
}
