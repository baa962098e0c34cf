//! The launcher for a job that spans hosts: listens on a TCP socket, starts
//! a proxy on each host through the remote-exec command (`ssh`, or any
//! command taking the host and the command's words), and serves the ranks'
//! bootstrap (published entries and lookups of them, barriers, failure
//! news) from there.
//! A rank or a whole host that dies stops the job as on one machine.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, ToSocketAddrs};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::child::{die_with_launcher, flush, forward, Sink, FORWARD_FLUSH};
use super::server::{Event, Server};
use super::{LaunchReport, LaunchSpec, LOST_CHILD_STATUS};
use catena_fabric::bootstrap::handshake::JobKey;
use catena_fabric::bootstrap::wire::{Frame, Peer, ProxyOrder};
use catena_fabric::config::{ENV_JOB, ENV_JOB_FD, ENV_JOB_KEY, ENV_PROXY, ENV_PROXY_HOST};
use catena_fabric::{Error, Rank, Result};

/// How long a host's proxy may take to connect, and a connection to say
/// who it is.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a proxy told to kill its ranks may take to report them gone
/// before its host counts as lost (a stopped or stuck proxy).
const KILL_TIMEOUT: Duration = Duration::from_secs(10);

/// What the launcher knows of one host.
struct Host {
    name: String,
    ranks: Vec<Rank>,
    /// The remote-exec process that runs the proxy.
    exec: Option<Child>,
    exec_status: Option<ExitStatus>,
    /// Its proxy proved the job key and got its order.
    joined: bool,
    /// Its proxy reported that all its ranks are gone.
    done: bool,
    /// Its proxy is gone without saying so (or never came).
    lost: bool,
}

/// Runs `spec` on `spec.hosts` and waits for it to end.
pub(super) fn launch_across_hosts(spec: &LaunchSpec) -> Result<LaunchReport> {
    let size = spec.ranks;
    let job = catena_fabric::bootstrap::new_job_id();
    let key = JobKey::generate();
    let ip = match spec.bootstrap_address {
        Some(ip) => ip,
        None => own_address()?,
    };
    let listener = TcpListener::bind((ip, 0))
        .map_err(|e| Error::io(format!("listening for the job's hosts on {ip}"), e))?;
    let address = listener
        .local_addr()
        .map_err(|e| Error::io("the launcher's socket address", e))?;
    let mut server = Server::new(listener, key.clone(), size, spec.hosts.len() as u32)?;

    let captured = spec
        .capture_output
        .then(|| Arc::new(Mutex::new(Vec::new())));
    let mut hosts: Vec<Host> = spec
        .hosts
        .iter()
        .enumerate()
        .map(|(h, name)| Host {
            name: name.clone(),
            ranks: spec
                .placement
                .ranks_of(h as u32, spec.hosts.len() as u32, size),
            exec: None,
            exec_status: None,
            joined: false,
            done: false,
            lost: false,
        })
        .collect();
    let mut forwarders = Vec::new();
    for h in 0..hosts.len() {
        let mut cmd = remote_command(spec, &hosts[h].name, h as u32, &job, address)?;
        die_with_launcher(&mut cmd);
        let started = cmd.spawn().and_then(|mut child| {
            // The key goes down the remote-exec command's standard input,
            // never on a command line; a command that died early makes its
            // host lost below.
            if let Some(mut stdin) = child.stdin.take() {
                let _ = writeln!(stdin, "{}", key.to_hex());
            }
            let (out, err) = match &captured {
                Some(buf) => (Sink::Buffer(buf.clone()), Sink::Buffer(buf.clone())),
                None => (Sink::Stdout, Sink::Stderr),
            };
            let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
            // Joins the hosts before its forwarders start, so that it is
            // killed with the others if a thread cannot be made.
            hosts[h].exec = Some(child);
            forwarders.push(forward(None, stdout.expect("piped"), out)?);
            forwarders.push(forward(None, stderr.expect("piped"), err)?);
            Ok(())
        });
        match started {
            Ok(()) => {}
            Err(e) => {
                for child in hosts.iter_mut().filter_map(|h| h.exec.as_mut()) {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(Error::io(
                    format!(
                        "starting {} for host {}",
                        spec.remote_exec[0].to_string_lossy(),
                        spec.hosts[h]
                    ),
                    e,
                ));
            }
        }
    }

    let mut job_state = JobState::new(size, spec.grace);
    let outcome = job_state.run(spec, &mut hosts, &mut server);
    let lost_hosts = hosts
        .iter()
        .filter(|h| h.lost)
        .map(|h| h.name.clone())
        .collect();
    drop(server);
    // The remote-exec commands end with their proxies; one that lingers
    // (a stuck connection) is killed after the flush period.
    let linger_until = Instant::now() + FORWARD_FLUSH;
    for host in hosts.iter_mut() {
        if let Some(child) = host.exec.as_mut() {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < linger_until {
                std::thread::sleep(Duration::from_millis(2));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
    flush(&forwarders);
    outcome?;
    let output = captured
        .map(|buf| {
            String::from_utf8_lossy(&buf.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
        })
        .unwrap_or_default();
    Ok(job_state.report(job, output, lost_hosts))
}

/// The address this machine's host name resolves to (what remote hosts
/// reach it by), IPv4 first.
fn own_address() -> Result<IpAddr> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = name.trim();
    let found: Vec<IpAddr> = (name, 0)
        .to_socket_addrs()
        .map(|a| a.map(|a| a.ip()).collect())
        .unwrap_or_default();
    found
        .iter()
        .find(|ip| ip.is_ipv4())
        .or(found.first())
        .copied()
        .ok_or_else(|| {
            Error::Bootstrap(format!(
                "this machine's host name {name:?} resolves to no address; \
                 give the launcher one to listen on (--bootstrap-address)"
            ))
        })
}

/// `remote_exec HOST env CATENA_PROXY=... PROXY-COMMAND...`, every word of
/// the remote command shell-quoted (ssh hands the remote shell one line).
fn remote_command(
    spec: &LaunchSpec,
    host: &str,
    index: u32,
    job: &str,
    launcher: SocketAddr,
) -> Result<Command> {
    let (exec, exec_args) = spec
        .remote_exec
        .split_first()
        .ok_or_else(|| Error::Bootstrap("no remote-exec command to reach the hosts".into()))?;
    let proxy = if spec.proxy_command.is_empty() {
        vec![std::env::current_exe()
            .map_err(|e| Error::io("this program's path, to start it as a proxy", e))?
            .into_os_string()]
    } else {
        spec.proxy_command.clone()
    };
    let mut words: Vec<OsString> = vec![
        "env".into(),
        format!("{ENV_PROXY}={launcher}").into(),
        format!("{ENV_PROXY_HOST}={index}").into(),
        format!("{ENV_JOB}={job}").into(),
    ];
    words.extend(proxy);
    let mut cmd = Command::new(exec);
    cmd.args(exec_args)
        .arg(host)
        .args(words.iter().map(|w| shell_quote(w.as_bytes())))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Ok(cmd)
}

/// Variables of the launcher's environment every rank gets on its host
/// (ssh passes none): catena's and its providers' settings, and what a
/// program needs to run and find its libraries. Others only when named
/// (`LaunchSpec::env_names`, as Hydra's `-genvlist`): a secret the
/// launcher holds does not travel.
const FORWARDED_PREFIXES: [&str; 5] = ["CATENA_", "FI_", "UCX_", "OMP_", "RUST_"];
const FORWARDED: [&str; 5] = ["PATH", "LD_LIBRARY_PATH", "LANG", "TZ", "TMPDIR"];

/// The environment every rank gets: the launcher's variables on the
/// allow-list or named in the spec, then the spec's own settings. The
/// launcher's settings that describe its own process stay behind.
fn forwarded_env(spec: &LaunchSpec) -> Vec<(Vec<u8>, Vec<u8>)> {
    let own = [ENV_PROXY, ENV_PROXY_HOST, ENV_JOB_FD, ENV_JOB_KEY];
    let allowed = |k: &std::ffi::OsStr| {
        let k = k.as_bytes();
        FORWARDED.iter().any(|f| k == f.as_bytes())
            || FORWARDED_PREFIXES
                .iter()
                .any(|p| k.starts_with(p.as_bytes()))
            || spec.env_names.iter().any(|n| k == n.as_bytes())
    };
    std::env::vars_os()
        .filter(|(k, _)| allowed(k) && !own.iter().any(|o| k == o))
        .chain(spec.env.iter().cloned())
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect()
}

/// `word` as one word of a POSIX shell command line.
fn shell_quote(word: &[u8]) -> OsString {
    use std::os::unix::ffi::OsStringExt;
    let safe = |b: &u8| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(b);
    if !word.is_empty() && word.iter().all(safe) {
        return OsString::from_vec(word.to_vec());
    }
    let mut quoted = vec![b'\''];
    for &b in word {
        if b == b'\'' {
            quoted.extend_from_slice(b"'\\''");
        } else {
            quoted.push(b);
        }
    }
    quoted.push(b'\'');
    OsString::from_vec(quoted)
}

/// The launcher's view of the ranks: their connections, their published
/// entries (the job's directory, which ranks ask one entry at a time),
/// barriers and exits.
struct JobState {
    size: u32,
    published: Vec<Option<Vec<u8>>>,
    published_count: u32,
    /// Barriers each rank arrived at, and how many ranks arrived at each.
    arrivals: Vec<u64>,
    arrived: BTreeMap<u64, u32>,
    released: u64,
    statuses: Vec<Option<ExitStatus>>,
    first_failure: Option<(Rank, ExitStatus)>,
    kill_at: Option<Instant>,
    /// How long ranks get to exit after the first failure.
    grace: Duration,
    leftovers: usize,
}

impl JobState {
    fn new(size: u32, grace: Duration) -> JobState {
        JobState {
            size,
            published: vec![None; size as usize],
            published_count: 0,
            arrivals: vec![0; size as usize],
            arrived: BTreeMap::new(),
            released: 0,
            statuses: vec![None; size as usize],
            first_failure: None,
            kill_at: None,
            grace,
            leftovers: 0,
        }
    }

    /// Serves the job until every host is done or lost.
    fn run(&mut self, spec: &LaunchSpec, hosts: &mut [Host], server: &mut Server) -> Result<()> {
        let started = Instant::now();
        let mut killed_at: Option<Instant> = None;
        let mut events = Vec::new();
        while hosts.iter().any(|h| !h.done && !h.lost) {
            server.poll(Duration::from_millis(2), &mut events);
            for event in events.drain(..) {
                self.handle(event, spec, hosts, server);
            }
            for host in hosts.iter_mut() {
                if host.exec_status.is_none() {
                    if let Some(Ok(Some(status))) = host.exec.as_mut().map(Child::try_wait) {
                        host.exec_status = Some(status);
                    }
                }
                // Its proxy never came: the host cannot be reached.
                let never_came = !host.joined
                    && !host.done
                    && (host.exec_status.is_some() || started.elapsed() > START_TIMEOUT);
                if never_came && !host.lost {
                    host.lost = true;
                    if let Some(child) = host.exec.as_mut() {
                        let _ = child.kill();
                    }
                    let ranks = host.ranks.clone();
                    self.lose_ranks(&ranks, server);
                }
            }
            if killed_at.is_none() && self.kill_at.is_some_and(|at| Instant::now() >= at) {
                killed_at = Some(Instant::now());
                for (h, _) in hosts.iter().enumerate().filter(|(_, h)| h.joined) {
                    server.send(Peer::Proxy(h as u32), &Frame::Kill);
                }
            }
            // A proxy that does not obey (stopped, stuck) must not hold the
            // job: its host is lost, and its remote-exec command killed.
            if killed_at.is_some_and(|at| at.elapsed() > KILL_TIMEOUT) {
                for host in hosts.iter_mut().filter(|h| !h.done && !h.lost) {
                    host.lost = true;
                    if let Some(child) = host.exec.as_mut() {
                        let _ = child.kill();
                    }
                    let ranks = host.ranks.clone();
                    self.lose_ranks(&ranks, server);
                }
            }
        }
        Ok(())
    }

    fn handle(&mut self, event: Event, spec: &LaunchSpec, hosts: &mut [Host], server: &mut Server) {
        match event {
            Event::Joined(Peer::Proxy(h)) => {
                let host = &mut hosts[h as usize];
                if host.lost {
                    // Too late: its ranks already count as failed.
                    server.send(Peer::Proxy(h), &Frame::Kill);
                    return;
                }
                let order = ProxyOrder {
                    program: spec.program.as_os_str().as_bytes().to_vec(),
                    args: spec.args.iter().map(|a| a.as_bytes().to_vec()).collect(),
                    env: forwarded_env(spec),
                    size: self.size,
                    ranks: host.ranks.clone(),
                    pin: spec.pin,
                };
                host.joined = server.send(Peer::Proxy(h), &Frame::Start(order));
                if self.kill_at.is_some() {
                    server.send(Peer::Proxy(h), &Frame::Kill);
                }
            }
            Event::Joined(Peer::Rank(r)) => {
                if let Some((failed, _)) = self.first_failure {
                    server.send(Peer::Rank(r), &Frame::Failed(failed));
                }
            }
            Event::Frame(Peer::Rank(r), Frame::Publish(mine)) => {
                let slot = &mut self.published[r as usize];
                if slot.is_some() {
                    return;
                }
                *slot = Some(mine);
                self.published_count += 1;
                if self.published_count == self.size {
                    for host in hosts.iter() {
                        let fenced = Frame::Fenced {
                            hosts: hosts.len() as u32,
                            local: host.ranks.clone(),
                        };
                        for &rank in &host.ranks {
                            server.send(Peer::Rank(rank), &fenced);
                        }
                    }
                }
            }
            Event::Frame(Peer::Rank(r), Frame::Lookup(rank)) => {
                // Before the fence, or for a rank that is not in the job,
                // the answer is empty: the asker reports it.
                let entry = match self.published_count == self.size {
                    true => self.published.get(rank as usize).cloned().flatten(),
                    false => None,
                };
                server.send(
                    Peer::Rank(r),
                    &Frame::Entry(rank, entry.unwrap_or_default()),
                );
            }
            Event::Frame(Peer::Rank(r), Frame::Arrive) => {
                let barrier = &mut self.arrivals[r as usize];
                *barrier += 1;
                *self.arrived.entry(*barrier).or_default() += 1;
                let before = self.released;
                while self.arrived.get(&(self.released + 1)) == Some(&self.size) {
                    self.arrived.remove(&(self.released + 1));
                    self.released += 1;
                }
                if self.released > before {
                    server.send_to_ranks(&Frame::Released(self.released));
                }
            }
            Event::Frame(Peer::Proxy(h), Frame::Exited { rank, status }) => {
                if hosts[h as usize].ranks.contains(&rank) {
                    self.exited(rank, ExitStatus::from_raw(status), server);
                }
            }
            Event::Frame(Peer::Proxy(h), Frame::ProxyDone { leftovers }) => {
                let host = &mut hosts[h as usize];
                host.done = true;
                self.leftovers += leftovers as usize;
                let ranks = host.ranks.clone();
                self.lose_ranks(&ranks, server);
            }
            Event::Left(Peer::Proxy(h)) => {
                let host = &mut hosts[h as usize];
                if !host.done && !host.lost {
                    host.lost = true;
                    let ranks = host.ranks.clone();
                    self.lose_ranks(&ranks, server);
                }
            }
            Event::Left(Peer::Rank(_)) => {}
            // Anything else from a peer is out of protocol: ignored.
            Event::Frame(..) => {}
        }
    }

    /// Records `rank`'s exit; the first failure stops the job.
    fn exited(&mut self, rank: Rank, status: ExitStatus, server: &mut Server) {
        if self.statuses[rank as usize].is_some() {
            return;
        }
        self.statuses[rank as usize] = Some(status);
        if !status.success() && self.first_failure.is_none() {
            self.first_failure = Some((rank, status));
            server.send_to_ranks(&Frame::Failed(rank));
            self.kill_at = Some(Instant::now() + self.grace);
        }
    }

    /// The ranks of a host that is done or lost without reporting them.
    fn lose_ranks(&mut self, ranks: &[Rank], server: &mut Server) {
        for &rank in ranks {
            self.exited(rank, ExitStatus::from_raw(LOST_CHILD_STATUS), server);
        }
    }

    fn report(self, job_id: String, output: String, lost_hosts: Vec<String>) -> LaunchReport {
        LaunchReport {
            job_id,
            statuses: self
                .statuses
                .into_iter()
                .map(|s| s.unwrap_or(ExitStatus::from_raw(LOST_CHILD_STATUS)))
                .collect(),
            first_failure: self.first_failure,
            leftover_segments: self.leftovers,
            lost_hosts,
            output,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        let q = |w: &str| shell_quote(w.as_bytes()).into_string().unwrap();
        assert_eq!(q("plain/path-1.x"), "plain/path-1.x");
        assert_eq!(q(""), "''");
        assert_eq!(q("a b"), "'a b'");
        assert_eq!(q("it's"), "'it'\\''s'");
        assert_eq!(q("tcp;ofi_rxm"), "'tcp;ofi_rxm'");
        assert_eq!(q("$HOME`x`"), "'$HOME`x`'");
    }
}
