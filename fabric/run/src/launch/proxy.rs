//! A host's proxy in a job that spans hosts (MPICH's `hydra_pmi_proxy` in
//! catena's launcher): started on its host by the remote-exec command, it
//! starts the host's ranks, forwards their output, reports each exit to the
//! launcher, kills its ranks when told to or when the launcher is gone, and
//! at the end removes what dead ranks left in its host's /dev/shm.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::ffi::OsStringExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use super::child::{crash_by_signal, die_with_launcher, flush, forward, Sink};
use super::LOST_CHILD_STATUS;
use catena_fabric::bootstrap::handshake::JobKey;
use catena_fabric::bootstrap::join_launcher;
use catena_fabric::bootstrap::wire::{Frame, Peer, ProxyOrder};
use catena_fabric::config::{
    optional, required, ENV_JOB, ENV_JOB_KEY, ENV_LAUNCHER, ENV_LOCAL_SIZE, ENV_PIN_CORE,
    ENV_PROXY, ENV_PROXY_HOST, ENV_RANK, ENV_SIZE,
};
use catena_fabric::{owned_name, Error, Result};

/// How long a proxy waits for the launcher's order.
const ORDER_TIMEOUT: Duration = Duration::from_secs(60);

/// If this process was started as a host's proxy (`CATENA_PROXY` is set),
/// serves as one and returns the exit code the process should end with;
/// otherwise returns `None` at once. Every program that launches jobs
/// across hosts (the launcher binaries, test binaries) calls this first.
pub fn serve_as_proxy() -> Option<i32> {
    let launcher: SocketAddr = match optional(ENV_PROXY) {
        Ok(Some(at)) => at,
        Ok(None) => return None,
        Err(e) => {
            eprintln!("catena proxy: {e}");
            return Some(1);
        }
    };
    match serve(launcher) {
        Ok(()) => Some(0),
        Err(e) => {
            eprintln!("catena proxy on {}: {e}", host_name());
            Some(1)
        }
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

enum News {
    Kill,
    LauncherGone,
}

fn serve(launcher: SocketAddr) -> Result<()> {
    let job: String = required(ENV_JOB)?;
    let host: u32 = required(ENV_PROXY_HOST)?;
    let key = key_from_stdin()?;
    let mut stream = join_launcher(launcher, &key, Peer::Proxy(host))?;
    let _ = stream.set_read_timeout(Some(ORDER_TIMEOUT));
    let order = match Frame::read(&mut stream)? {
        Some(Frame::Start(order)) => order,
        other => {
            return Err(Error::Bootstrap(format!(
                "expected the launcher's order, got {other:?}"
            )))
        }
    };
    let _ = stream.set_read_timeout(None);
    let (tell, news) = mpsc::channel();
    let mut reader = stream
        .try_clone()
        .map_err(|e| Error::io("cloning the launcher connection", e))?;
    std::thread::spawn(move || loop {
        match Frame::read(&mut reader) {
            Ok(Some(Frame::Kill)) => {
                let _ = tell.send(News::Kill);
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                let _ = tell.send(News::LauncherGone);
                return;
            }
        }
    });

    let mut ranks = start_ranks(&order, &job, &key, launcher)?;
    let mut forwarders = Vec::new();
    for (rank, child) in ranks.iter_mut() {
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        // Without a reader a rank would block once its pipe is full: fail
        // instead (the ranks die with this proxy).
        let no_thread = |e| Error::io("starting an output thread", e);
        forwarders.push(forward(Some(*rank), stdout, Sink::Stdout).map_err(no_thread)?);
        forwarders.push(forward(Some(*rank), stderr, Sink::Stderr).map_err(no_thread)?);
    }
    let pids: Vec<u32> = ranks.iter().map(|(_, c)| c.id()).collect();
    let mut running: Vec<_> = ranks.into_iter().map(Some).collect();
    let mut launcher_gone = false;
    while running.iter().any(Option::is_some) {
        match news.recv_timeout(Duration::from_millis(2)) {
            Ok(News::Kill) => kill_all(&mut running),
            Ok(News::LauncherGone) => {
                launcher_gone = true;
                kill_all(&mut running);
            }
            Err(_) => {}
        }
        for slot in running.iter_mut() {
            let Some((rank, child)) = slot else { continue };
            let status = match child.try_wait() {
                Ok(None) => continue,
                Ok(Some(status)) => status,
                Err(_) => ExitStatus::from_raw(LOST_CHILD_STATUS),
            };
            let rank = *rank;
            *slot = None;
            if !launcher_gone {
                // A lost launcher is noticed by the reader; keep reaping.
                let _ = Frame::Exited {
                    rank,
                    status: status.into_raw(),
                }
                .write(&mut stream);
            }
        }
    }
    flush(&forwarders);
    let leftovers = owned_name::remove_dead_of(|pid| pids.contains(&pid));
    owned_name::remove_dead();
    if launcher_gone {
        return Err(Error::Bootstrap(
            "the launcher is gone; this host's ranks were killed".into(),
        ));
    }
    Frame::ProxyDone {
        leftovers: leftovers as u32,
    }
    .write(&mut stream)
}

/// The job key, the first line of this proxy's standard input (where the
/// launcher writes it, so that no command line shows it), within
/// `ORDER_TIMEOUT`.
fn key_from_stdin() -> Result<JobKey> {
    let mut stdin = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&mut stdin, 1, ORDER_TIMEOUT.as_millis() as i32) };
    if ready != 1 {
        return Err(Error::Bootstrap(format!(
            "no job key on standard input within {ORDER_TIMEOUT:?}"
        )));
    }
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| Error::io("reading the job key from standard input", e))?;
    if line.is_empty() {
        return Err(Error::Bootstrap(
            "no job key on standard input (the launcher writes it there)".into(),
        ));
    }
    JobKey::from_hex(&line)
}

fn kill_all(running: &mut [Option<(u32, Child)>]) {
    for (_, child) in running.iter_mut().flatten() {
        let _ = child.kill();
    }
}

/// Starts the ranks `order` gives this host; on a failure kills those
/// that started.
fn start_ranks(
    order: &ProxyOrder,
    job: &str,
    key: &JobKey,
    launcher: SocketAddr,
) -> Result<Vec<(u32, Child)>> {
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let program = OsString::from_vec(order.program.clone());
    let mut started: Vec<(u32, Child)> = Vec::new();
    for (local, &rank) in order.ranks.iter().enumerate() {
        let mut cmd = Command::new(&program);
        cmd.args(order.args.iter().map(|a| OsString::from_vec(a.clone())))
            .envs(
                order
                    .env
                    .iter()
                    .map(|(k, v)| (OsString::from_vec(k.clone()), OsString::from_vec(v.clone()))),
            )
            .env_remove(ENV_PROXY)
            .env_remove(ENV_PROXY_HOST)
            .env(ENV_JOB, job)
            .env(ENV_RANK, rank.to_string())
            .env(ENV_SIZE, order.size.to_string())
            .env(ENV_LOCAL_SIZE, order.ranks.len().to_string())
            .env(ENV_LAUNCHER, launcher.to_string())
            .env(ENV_JOB_KEY, key.to_hex())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if order.pin && !cores.is_empty() {
            cmd.env(ENV_PIN_CORE, cores[local % cores.len()].id.to_string());
        }
        die_with_launcher(&mut cmd);
        crash_by_signal(&mut cmd);
        match cmd.spawn() {
            Ok(child) => started.push((rank, child)),
            Err(e) => {
                for (_, child) in started.iter_mut() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(Error::io(
                    format!("starting rank {rank} of {}", program.to_string_lossy()),
                    e,
                ));
            }
        }
    }
    Ok(started)
}
