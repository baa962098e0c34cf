//! The bootstrap of a rank that a PMI-1 process manager started (MPICH's
//! Hydra `mpiexec`) without MPI: the simple PMI wire protocol, spoken on the
//! descriptor the launcher gives (`PMI_FD`). Each rank puts its address in
//! the job's key-value space, a PMI barrier publishes them, and barriers are
//! PMI barriers. Every wait is bounded; a reply that does not parse, or
//! says `rc` is not 0, is a typed `Bootstrap` error naming it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{BarrierTicket, Bootstrap};
use crate::config::{optional, required};
use crate::{Error, Rank, Result};

/// The descriptor Hydra (and Slurm's PMI) hands each rank.
const ENV_PMI_FD: &str = "PMI_FD";
/// Where a PMI server listens instead (`host:port`).
const ENV_PMI_PORT: &str = "PMI_PORT";
const ENV_PMI_RANK: &str = "PMI_RANK";
/// Which process of the job this is, with `PMI_PORT`.
const ENV_PMI_ID: &str = "PMI_ID";
const ENV_PMI_SIZE: &str = "PMI_SIZE";
/// Hydra's count of the ranks on this host.
const ENV_LOCAL_RANKS: &str = "MPI_LOCALNRANKS";

/// How long each step of the start-up may take.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest reply line accepted.
const MAX_LINE: usize = 64 << 10;

/// Whether a PMI-1 process manager started this process.
pub fn pmi_available() -> bool {
    std::env::var_os(ENV_PMI_FD).is_some() || std::env::var_os(ENV_PMI_PORT).is_some()
}

/// Bootstrap of a rank started by a PMI-1 process manager.
pub struct PmiBootstrap {
    rank: Rank,
    size: u32,
    local_size: u32,
    job: String,
    kvsname: String,
    vallen_max: usize,
    wire: Mutex<Wire>,
    gathered: AtomicBool,
    barriers_started: AtomicU64,
}

/// The PMI connection and what was read of it.
struct Wire {
    stream: File,
    fd: RawFd,
    inbox: Vec<u8>,
    /// `barrier_out` replies received.
    barriers_out: u64,
}

/// One reply: its attributes (`cmd` among them).
type Reply = HashMap<String, String>;

impl PmiBootstrap {
    /// Joins the job on the descriptor in `PMI_FD`, or at the server's
    /// port in `PMI_PORT` (Hydra's `-pmi-port`).
    pub fn init() -> Result<PmiBootstrap> {
        let deadline = Instant::now() + INIT_TIMEOUT;
        let (mut wire, told) = match optional::<RawFd>(ENV_PMI_FD)? {
            Some(fd) => (Wire::on_descriptor(fd)?, None),
            None => match optional::<String>(ENV_PMI_PORT)? {
                Some(port) => Wire::at_port(&port, required(ENV_PMI_ID)?, deadline)?,
                None => {
                    return Err(Error::Bootstrap(format!(
                        "neither {ENV_PMI_FD} nor {ENV_PMI_PORT} is set: no PMI process \
                         manager started this"
                    )))
                }
            },
        };
        wire.call(
            "cmd=init pmi_version=1 pmi_subversion=1",
            "response_to_init",
            deadline,
        )?;
        let maxes = wire.call("cmd=get_maxes", "maxes", deadline)?;
        let vallen_max: usize = number(&maxes, "vallen_max")?;
        let kvsname = wire
            .call("cmd=get_my_kvsname", "my_kvsname", deadline)?
            .remove("kvsname")
            .ok_or_else(|| malformed("my_kvsname without a kvsname"))?;
        let (rank, size): (Rank, u32) = match told {
            Some(told) => told,
            None => (required(ENV_PMI_RANK)?, required(ENV_PMI_SIZE)?),
        };
        if size == 0 || rank >= size {
            return Err(Error::Bootstrap(format!(
                "{ENV_PMI_RANK}={rank} is not below {ENV_PMI_SIZE}={size}"
            )));
        }
        let local_size = optional(ENV_LOCAL_RANKS)?.unwrap_or(size).clamp(1, size);
        // A job id is 1..=64 letters and digits: the key-value space's name,
        // which the process manager made unique, without the rest.
        let job: String = kvsname
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(63)
            .collect();
        Ok(PmiBootstrap {
            rank,
            size,
            local_size,
            job: format!("p{job}"),
            kvsname,
            vallen_max,
            wire: Mutex::new(wire),
            gathered: AtomicBool::new(false),
            barriers_started: AtomicU64::new(0),
        })
    }

    fn wire(&self) -> std::sync::MutexGuard<'_, Wire> {
        self.wire.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(&self, wire: &mut Wire, key: &str, value: &str, deadline: Instant) -> Result<()> {
        let line = format!("cmd=put kvsname={} key={key} value={value}", self.kvsname);
        wire.call(&line, "put_result", deadline).map(drop)
    }

    fn get(&self, wire: &mut Wire, key: &str, deadline: Instant) -> Result<String> {
        let line = format!("cmd=get kvsname={} key={key}", self.kvsname);
        wire.call(&line, "get_result", deadline)?
            .remove("value")
            .ok_or_else(|| malformed(&format!("the value of {key} is missing")))
    }

    /// Waits for the barrier out of `ticket` until `deadline`.
    fn wait_barrier(&self, ticket: BarrierTicket, deadline: Instant) -> Result<()> {
        let mut wire = self.wire();
        while wire.barriers_out < ticket.0 {
            let reply = wire.recv(deadline)?;
            if reply.get("cmd").map(String::as_str) != Some("barrier_out") {
                return Err(malformed("a reply other than barrier_out during a barrier"));
            }
            wire.barriers_out += 1;
        }
        Ok(())
    }
}

/// Keys of one rank's address: its count of chunks, then each chunk.
fn chunk_key(rank: Rank, chunk: Option<usize>) -> String {
    match chunk {
        None => format!("catena-{rank}-n"),
        Some(i) => format!("catena-{rank}-{i}"),
    }
}

impl Wire {
    fn on_descriptor(fd: RawFd) -> Result<Wire> {
        if fd < 0 {
            return Err(Error::Bootstrap(format!(
                "{ENV_PMI_FD}={fd} is no descriptor"
            )));
        }
        // SAFETY: the process manager opened `fd` for this process to speak
        // PMI on, and nothing else in it does (an MPI library would; with
        // one linked, the MPI bootstrap is used instead).
        let stream = unsafe { File::from_raw_fd(fd) };
        Ok(Wire {
            stream,
            fd,
            inbox: Vec::new(),
            barriers_out: 0,
        })
    }

    /// Connects to the server at `port` (`host:port`) as process `id` of
    /// the job (`PMI_ID`); the server's answer tells its rank and size.
    fn at_port(port: &str, id: u32, deadline: Instant) -> Result<(Wire, Option<(Rank, u32)>)> {
        let at = port
            .to_socket_addrs()
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| Error::Bootstrap(format!("{ENV_PMI_PORT}={port:?} names no address")))?;
        let stream = TcpStream::connect_timeout(&at, INIT_TIMEOUT)
            .map_err(|e| Error::io(format!("connecting to the PMI server at {port}"), e))?;
        let _ = stream.set_nodelay(true);
        let fd = stream.into_raw_fd();
        // SAFETY: the descriptor was just taken from its socket.
        let stream = unsafe { File::from_raw_fd(fd) };
        let mut wire = Wire {
            stream,
            fd,
            inbox: Vec::new(),
            barriers_out: 0,
        };
        wire.call(&format!("cmd=initack pmiid={id}"), "initack", deadline)?;
        let (mut rank, mut size) = (None, None);
        while rank.is_none() || size.is_none() {
            let told = wire.recv(deadline)?;
            if told.get("cmd").map(String::as_str) != Some("set") {
                return Err(malformed(&format!(
                    "{told:?} where the server sets rank and size"
                )));
            }
            rank = rank.or(told.get("rank").and_then(|r| r.parse().ok()));
            size = size.or(told.get("size").and_then(|s| s.parse().ok()));
        }
        Ok((wire, rank.zip(size)))
    }

    fn send(&mut self, line: &str) -> Result<()> {
        self.stream
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| Error::io("writing to the PMI process manager", e))
    }

    /// `line`, then its reply `cmd=expected`, which must say `rc=0` where it
    /// says anything. Barrier outs arriving meanwhile are counted.
    fn call(&mut self, line: &str, expected: &str, deadline: Instant) -> Result<Reply> {
        self.send(line)?;
        loop {
            let reply = self.recv(deadline)?;
            match reply.get("cmd").map(String::as_str) {
                Some("barrier_out") => self.barriers_out += 1,
                // What a port's server sets beyond rank and size (debug).
                Some("set") => {}
                Some(cmd) if cmd == expected => {
                    return match reply.get("rc").map(String::as_str) {
                        None | Some("0") => Ok(reply),
                        Some(rc) => Err(Error::Bootstrap(format!(
                            "the PMI process manager answered {expected} with rc={rc}: {}",
                            reply.get("msg").map_or("no message", String::as_str)
                        ))),
                    };
                }
                _ => return Err(malformed(&format!("{reply:?} where {expected} belongs"))),
            }
        }
    }

    /// The next reply line, waiting until `deadline`.
    fn recv(&mut self, deadline: Instant) -> Result<Reply> {
        loop {
            if let Some(reply) = self.take_line()? {
                return Ok(reply);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Timeout {
                    what: "a reply of the PMI process manager",
                });
            }
            self.fill(left)?;
        }
    }

    /// Reads what arrives within `wait` (nothing if `wait` is zero).
    fn fill(&mut self, wait: Duration) -> Result<()> {
        let mut poll = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let millis = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut poll, 1, millis) } <= 0 {
            return Ok(());
        }
        let mut buf = [0u8; 4096];
        match self.stream.read(&mut buf) {
            Ok(0) => Err(Error::Bootstrap(
                "the PMI process manager closed the connection".into(),
            )),
            Ok(n) => {
                self.inbox.extend_from_slice(&buf[..n]);
                if self.inbox.len() > MAX_LINE && !self.inbox.contains(&b'\n') {
                    return Err(malformed("a reply line over 64 KiB"));
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(Error::io("reading from the PMI process manager", e)),
        }
    }

    fn take_line(&mut self) -> Result<Option<Reply>> {
        let Some(end) = self.inbox.iter().position(|&b| b == b'\n') else {
            return Ok(None);
        };
        let line: Vec<u8> = self.inbox.drain(..=end).collect();
        let line = String::from_utf8_lossy(&line[..end]);
        Ok(Some(parse(&line)?))
    }
}

/// `cmd=name key=value ...` as its attributes.
fn parse(line: &str) -> Result<Reply> {
    let reply: Reply = line
        .split_ascii_whitespace()
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if !reply.contains_key("cmd") {
        return Err(malformed(&format!("a reply without cmd: {line:?}")));
    }
    Ok(reply)
}

fn number<T: std::str::FromStr>(reply: &Reply, key: &str) -> Result<T> {
    reply
        .get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(&format!("{key} missing or not a number in {reply:?}")))
}

fn malformed(what: &str) -> Error {
    Error::Bootstrap(format!("malformed PMI reply: {what}"))
}

impl Bootstrap for PmiBootstrap {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn job_id(&self) -> &str {
        &self.job
    }

    fn local_size(&self) -> u32 {
        self.local_size
    }

    fn allgather(&self, mine: &[u8], timeout: Duration) -> Result<Vec<Vec<u8>>> {
        if self.gathered.swap(true, Ordering::AcqRel) {
            return Err(Error::Bootstrap("the address allgather runs once".into()));
        }
        let deadline = Instant::now() + timeout;
        // Values are hex (no spaces or `=` on the wire), cut to what the
        // process manager takes.
        let chunk = self.vallen_max.saturating_sub(2).max(16) & !1;
        let text = hex::encode(mine);
        let pieces: Vec<&str> = if text.is_empty() {
            Vec::new()
        } else {
            text.as_bytes()
                .chunks(chunk)
                .map(|c| std::str::from_utf8(c).expect("hex digits"))
                .collect()
        };
        {
            let mut wire = self.wire();
            let count = pieces.len().to_string();
            self.put(&mut wire, &chunk_key(self.rank, None), &count, deadline)?;
            for (i, piece) in pieces.iter().enumerate() {
                self.put(&mut wire, &chunk_key(self.rank, Some(i)), piece, deadline)?;
            }
        }
        let ticket = self.start_barrier()?;
        self.wait_barrier(ticket, deadline)?;
        let mut wire = self.wire();
        (0..self.size)
            .map(|r| {
                let count = self.get(&mut wire, &chunk_key(r, None), deadline)?;
                let count: usize = count
                    .parse()
                    .map_err(|_| malformed(&format!("rank {r}'s chunk count {count:?}")))?;
                let mut text = String::new();
                for i in 0..count.min(MAX_LINE) {
                    text.push_str(&self.get(&mut wire, &chunk_key(r, Some(i)), deadline)?);
                }
                hex::decode(&text).map_err(|_| malformed(&format!("rank {r}'s address is not hex")))
            })
            .collect()
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        self.wire().send("cmd=barrier_in")?;
        Ok(BarrierTicket(
            self.barriers_started.fetch_add(1, Ordering::AcqRel) + 1,
        ))
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        let mut wire = self.wire();
        wire.fill(Duration::ZERO)?;
        while let Some(reply) = wire.take_line()? {
            if reply.get("cmd").map(String::as_str) != Some("barrier_out") {
                return Err(malformed(&format!("{reply:?} where barrier_out belongs")));
            }
            wire.barriers_out += 1;
        }
        Ok(wire.barriers_out >= ticket.0)
    }

    /// A PMI-1 process manager ends the whole job when a rank dies; it
    /// tells the others nothing.
    fn failed_rank(&self) -> Option<Rank> {
        None
    }
}

impl Drop for PmiBootstrap {
    /// Tells the process manager this rank is done (Hydra counts a rank
    /// that exits without it as failed only by its exit status).
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        let _ = self.wire().call("cmd=finalize", "finalize_ack", deadline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::fd::IntoRawFd;
    use std::os::unix::net::UnixStream;

    /// A wire to a fake process manager that answers each request line
    /// with `answer(line)` (None: closes the connection).
    fn wire_to(answer: impl Fn(&str) -> Option<String> + Send + 'static) -> Wire {
        let (ours, theirs) = UnixStream::pair().unwrap();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(theirs.try_clone().unwrap());
            let mut theirs = theirs;
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                match answer(line.trim_end()) {
                    Some(reply) => theirs.write_all(reply.as_bytes()).unwrap(),
                    None => return,
                }
                line.clear();
            }
        });
        let fd = ours.into_raw_fd();
        Wire {
            // SAFETY: the descriptor was just taken from its socket.
            stream: unsafe { File::from_raw_fd(fd) },
            fd,
            inbox: Vec::new(),
            barriers_out: 0,
        }
    }

    /// At a port, the server's `set` lines give rank and size, and the
    /// one it sends beyond them (debug) does not disturb the next call.
    #[test]
    fn at_a_port_the_server_tells_rank_and_size() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().to_string();
        std::thread::spawn(move || {
            let (theirs, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(theirs.try_clone().unwrap());
            let mut theirs = theirs;
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, "cmd=initack pmiid=3\n");
            let told = "cmd=initack\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n";
            theirs.write_all(told.as_bytes()).unwrap();
            line.clear();
            reader.read_line(&mut line).unwrap();
            assert_eq!(line, "cmd=get_maxes\n");
            theirs
                .write_all(b"cmd=maxes vallen_max=512 rc=0\n")
                .unwrap();
        });
        let (mut wire, told) = Wire::at_port(&port, 3, soon()).unwrap();
        assert_eq!(told, Some((2, 4)));
        let maxes = wire.call("cmd=get_maxes", "maxes", soon()).unwrap();
        assert_eq!(maxes["vallen_max"], "512");
        match Wire::at_port("nowhere.invalid:1", 0, soon()) {
            Err(e) => assert!(e.to_string().contains("names no address"), "{e}"),
            Ok(_) => panic!("a port naming no host was taken"),
        }
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    /// Replies come back as attributes; barrier outs that arrive before
    /// the reply asked for are counted; `rc` other than 0, a reply of the
    /// wrong kind, a closed connection and silence are typed errors.
    #[test]
    fn the_wire_checks_every_reply() {
        let mut wire = wire_to(|line| {
            Some(match line {
                "cmd=get_maxes" => "cmd=barrier_out\ncmd=maxes vallen_max=1024 rc=0\n".into(),
                "cmd=put bad" => "cmd=put_result rc=-1 msg=duplicate_key\n".into(),
                "cmd=wrong" => "cmd=get_result rc=0 value=1\n".into(),
                "cmd=silence" => String::new(),
                _ => return None,
            })
        });
        let maxes = wire.call("cmd=get_maxes", "maxes", soon()).unwrap();
        assert_eq!(maxes["vallen_max"], "1024");
        assert_eq!(wire.barriers_out, 1);
        let err = wire.call("cmd=put bad", "put_result", soon()).unwrap_err();
        assert!(err.to_string().contains("rc=-1: duplicate_key"), "{err}");
        let err = wire.call("cmd=wrong", "put_result", soon()).unwrap_err();
        assert!(err.to_string().contains("malformed PMI reply"), "{err}");
        let quick = Instant::now() + Duration::from_millis(50);
        let err = wire.call("cmd=silence", "x", quick).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let err = wire.call("cmd=bye", "x", soon()).unwrap_err();
        assert!(err.to_string().contains("closed the connection"), "{err}");
    }

    #[test]
    fn replies_parse_and_garbage_is_an_error() {
        let reply = parse("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0").unwrap();
        assert_eq!(number::<usize>(&reply, "vallen_max").unwrap(), 1024);
        assert!(number::<usize>(&reply, "absent").is_err());
        assert!(parse("rc=0 value=1").is_err());
        assert!(parse("").is_err());
    }
}
