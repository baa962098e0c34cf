//! What the launcher and its proxies do for each rank they start: tie its
//! life to theirs, and forward its output line by line with a `[rank]`
//! prefix (or unprefixed, for a proxy's already prefixed output).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use catena_fabric::Rank;

/// Makes the rank `cmd` starts die by SIGKILL when the launcher dies, even
/// by SIGKILL, which leaves the launcher no chance to stop it. The kernel
/// sends the signal when the *thread* that forked the rank exits: `launch`
/// forks every rank from its caller's thread and returns only after it
/// reaped them all, so that thread outlives the ranks in every case. A
/// rank's own children are not covered (the setting is not inherited by
/// `fork`): a wrapper script should `exec` the program.
pub(super) fn die_with_launcher(cmd: &mut Command) {
    let launcher = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs in the forked child and makes only
    // async-signal-safe calls (prctl, getppid, raise), allocating nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The launcher may have died before the setting took effect.
            if libc::getppid() != launcher {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
}

/// libinfinipath (PSM's, which Debian's libfabric loads with its psm
/// provider) installs a SIGSEGV handler when it is loaded that prints a
/// backtrace and exits with status 1, so a rank that crashed would be
/// reported as one that failed: unless the user chose otherwise, ranks
/// run without it (UCX's handler, which remains, re-raises the signal).
const NO_PSM_BACKTRACE: &str = "IPATH_NO_BACKTRACE";

/// Sets the environment that makes a rank's crash reach the launcher as
/// the signal that ended it (see [`NO_PSM_BACKTRACE`]).
pub(super) fn crash_by_signal(cmd: &mut Command) {
    let chosen = cmd.get_envs().any(|(k, _)| k == NO_PSM_BACKTRACE)
        || std::env::var_os(NO_PSM_BACKTRACE).is_some();
    if !chosen {
        cmd.env(NO_PSM_BACKTRACE, "1");
    }
}

/// Where forwarded output goes.
#[derive(Clone)]
pub(super) enum Sink {
    Stdout,
    Stderr,
    Buffer(Arc<Mutex<Vec<u8>>>),
}

/// Copies `stream` line by line to `sink`, each line prefixed with
/// `[rank] ` when a rank is given.
pub(super) fn forward(
    rank: Option<Rank>,
    stream: impl Read + Send + 'static,
    sink: Sink,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new().spawn(move || {
        let mut reader = BufReader::new(stream);
        let mut line = Vec::new();
        while matches!(reader.read_until(b'\n', &mut line), Ok(n) if n > 0) {
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            let mut prefixed = rank.map_or_else(Vec::new, |r| format!("[{r}] ").into_bytes());
            prefixed.append(&mut line);
            let _ = match &sink {
                Sink::Stdout => std::io::stdout().lock().write_all(&prefixed),
                Sink::Stderr => std::io::stderr().lock().write_all(&prefixed),
                Sink::Buffer(buf) => {
                    buf.lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .extend_from_slice(&prefixed);
                    Ok(())
                }
            };
        }
    })
}

/// How long output forwarding may lag behind the ranks' exit.
pub(super) const FORWARD_FLUSH: Duration = Duration::from_secs(2);

/// Gives the output forwarders a moment to flush once the processes they
/// read have exited, then leaves them behind: a rank's orphaned child may
/// hold its pipes open forever.
pub(super) fn flush(forwarders: &[JoinHandle<()>]) {
    let until = Instant::now() + FORWARD_FLUSH;
    while forwarders.iter().any(|f| !f.is_finished()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(2));
    }
}
