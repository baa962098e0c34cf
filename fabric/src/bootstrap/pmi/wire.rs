//! The simple PMI wire protocols on one connection to the process manager:
//! PMI-1 (`cmd=name key=value ...` lines, Hydra) and PMI-2 (a six-digit
//! length, then `cmd=name;key=value;...`, Slurm's `--mpi=pmi2`). A
//! request is a command and attributes; a reply is its attributes; whatever
//! does not parse, says `rc` is not 0, or comes late is a typed error.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{FromRawFd, IntoRawFd, RawFd};
use std::time::{Duration, Instant};

use crate::{Error, Rank, Result};

/// Longest reply accepted.
const MAX_REPLY: usize = 64 << 10;
/// How long connecting to a server's port may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Which of the two protocols the connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// PMI-1: newline-ended lines of space-separated attributes.
    V1,
    /// PMI-2: length-prefixed, `;`-separated attributes.
    V2,
}

/// One reply: its attributes (`cmd` among them).
pub(crate) type Reply = HashMap<String, String>;

/// The connection to the process manager and what was read of it.
pub(crate) struct Wire {
    stream: File,
    fd: RawFd,
    dialect: Dialect,
    inbox: Vec<u8>,
    /// Barrier replies (PMI-1 `barrier_out`, PMI-2 `kvs-fence-response`)
    /// received so far.
    pub(crate) barriers_out: u64,
}

impl Wire {
    /// The connection the process manager left at descriptor `fd`.
    pub(crate) fn on_descriptor(fd: RawFd, dialect: Dialect) -> Result<Wire> {
        if fd < 0 {
            return Err(Error::Bootstrap(format!("PMI_FD={fd} is no descriptor")));
        }
        // SAFETY: the process manager opened `fd` for this process to speak
        // PMI on, and nothing else in it does (an MPI library would; with
        // one linked, the MPI bootstrap is used instead).
        let stream = unsafe { File::from_raw_fd(fd) };
        Ok(Wire::new(stream, fd, dialect))
    }

    fn new(stream: File, fd: RawFd, dialect: Dialect) -> Wire {
        Wire {
            stream,
            fd,
            dialect,
            inbox: Vec::new(),
            barriers_out: 0,
        }
    }

    /// Connects to the PMI-1 server at `port` (`host:port`) as process
    /// `id` of the job (`PMI_ID`); the server's answer tells rank and size.
    pub(crate) fn at_port(port: &str, id: u32, deadline: Instant) -> Result<(Wire, (Rank, u32))> {
        let at = port
            .to_socket_addrs()
            .ok()
            .and_then(|mut found| found.next())
            .ok_or_else(|| Error::Bootstrap(format!("PMI_PORT={port:?} names no address")))?;
        let stream = TcpStream::connect_timeout(&at, CONNECT_TIMEOUT)
            .map_err(|e| Error::io(format!("connecting to the PMI server at {port}"), e))?;
        let _ = stream.set_nodelay(true);
        let fd = stream.into_raw_fd();
        // SAFETY: the descriptor was just taken from its socket.
        let mut wire = Wire::new(unsafe { File::from_raw_fd(fd) }, fd, Dialect::V1);
        wire.call(
            "initack",
            &[("pmiid", &id.to_string())],
            "initack",
            deadline,
        )?;
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
        Ok((wire, rank.zip(size).expect("both set")))
    }

    /// The protocol this connection speaks.
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Sends `cmd` with `attributes` in this connection's protocol.
    pub(crate) fn send(&mut self, cmd: &str, attributes: &[(&str, &str)]) -> Result<()> {
        self.send_as(self.dialect, cmd, attributes)
    }

    /// Sends in `dialect` (PMI-2 starts with a PMI-1 `init`).
    pub(crate) fn send_as(
        &mut self,
        dialect: Dialect,
        cmd: &str,
        attributes: &[(&str, &str)],
    ) -> Result<()> {
        let message = match dialect {
            Dialect::V1 => {
                let mut line = format!("cmd={cmd}");
                for (key, value) in attributes {
                    line.push_str(&format!(" {key}={value}"));
                }
                line.push('\n');
                line
            }
            Dialect::V2 => {
                let mut body = format!("cmd={cmd};");
                for (key, value) in attributes {
                    body.push_str(&format!("{key}={};", value.replace(';', ";;")));
                }
                format!("{:<6}{body}", body.len())
            }
        };
        self.stream
            .write_all(message.as_bytes())
            .map_err(|e| Error::io("writing to the PMI process manager", e))
    }

    /// Sends `cmd`, then waits for its reply `cmd=expected`, which must say
    /// `rc=0` where it says anything. Barrier replies arriving meanwhile
    /// are counted.
    pub(crate) fn call(
        &mut self,
        cmd: &str,
        attributes: &[(&str, &str)],
        expected: &str,
        deadline: Instant,
    ) -> Result<Reply> {
        self.send(cmd, attributes)?;
        self.reply(expected, deadline)
    }

    /// The reply `cmd=expected` (see [`Wire::call`]).
    pub(crate) fn reply(&mut self, expected: &str, deadline: Instant) -> Result<Reply> {
        loop {
            let reply = self.recv(deadline)?;
            let cmd = reply.get("cmd").cloned().unwrap_or_default();
            match cmd.as_str() {
                cmd if cmd == expected => return checked(reply, expected),
                cmd if cmd == self.barrier_reply() => {
                    checked(reply, cmd)?;
                    self.barriers_out += 1;
                }
                // What a port's server sets beyond rank and size (debug).
                "set" => {}
                _ => return Err(malformed(&format!("{reply:?} where {expected} belongs"))),
            }
        }
    }

    /// The command that ends a barrier in this protocol.
    pub(crate) fn barrier_reply(&self) -> &'static str {
        match self.dialect {
            Dialect::V1 => "barrier_out",
            Dialect::V2 => "kvs-fence-response",
        }
    }

    /// Counts the barrier replies that arrived, without waiting.
    pub(crate) fn count_barriers(&mut self) -> Result<u64> {
        self.fill(Duration::ZERO)?;
        while let Some(reply) = self.take()? {
            let cmd = reply.get("cmd").cloned().unwrap_or_default();
            match cmd.as_str() {
                cmd if cmd == self.barrier_reply() => {
                    checked(reply, cmd)?;
                    self.barriers_out += 1;
                }
                _ => {
                    return Err(malformed(&format!(
                        "{reply:?} where {} belongs",
                        self.barrier_reply()
                    )))
                }
            }
        }
        Ok(self.barriers_out)
    }

    /// The next reply, waiting until `deadline`.
    pub(crate) fn recv(&mut self, deadline: Instant) -> Result<Reply> {
        loop {
            if let Some(reply) = self.take()? {
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
                if self.inbox.len() > MAX_REPLY + 6 {
                    return Err(malformed("a reply over 64 KiB"));
                }
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(Error::io("reading from the PMI process manager", e)),
        }
    }

    /// The first whole reply in the inbox, taken out of it.
    fn take(&mut self) -> Result<Option<Reply>> {
        // A PMI-2 client's first reply, to its PMI-1 `init`, is a line.
        let line_first = self.dialect == Dialect::V1 || self.inbox.starts_with(b"cmd=");
        if line_first {
            let Some(end) = self.inbox.iter().position(|&b| b == b'\n') else {
                return Ok(None);
            };
            let line: Vec<u8> = self.inbox.drain(..=end).collect();
            return parse_v1(&String::from_utf8_lossy(&line[..end])).map(Some);
        }
        if self.inbox.len() < 6 {
            return Ok(None);
        }
        let len: usize = std::str::from_utf8(&self.inbox[..6])
            .ok()
            .and_then(|n| n.trim().parse().ok())
            .filter(|&n| n <= MAX_REPLY)
            .ok_or_else(|| malformed("a PMI-2 length that is not a number up to 64 KiB"))?;
        if self.inbox.len() < 6 + len {
            return Ok(None);
        }
        let message: Vec<u8> = self.inbox.drain(..6 + len).skip(6).collect();
        parse_v2(&String::from_utf8_lossy(&message)).map(Some)
    }
}

/// `reply` if its `rc` is absent or 0, else the error naming it.
fn checked(reply: Reply, cmd: &str) -> Result<Reply> {
    match reply.get("rc").map(String::as_str) {
        None | Some("0") => Ok(reply),
        Some(rc) => Err(Error::Bootstrap(format!(
            "the PMI process manager answered {cmd} with rc={rc}: {}",
            reply
                .get("msg")
                .or_else(|| reply.get("errmsg"))
                .map_or("no message", String::as_str)
        ))),
    }
}

/// `cmd=name key=value ...` as its attributes.
pub(crate) fn parse_v1(line: &str) -> Result<Reply> {
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

/// `cmd=name;key=value;...` (`;;` is a `;` inside a value) as its
/// attributes.
pub(crate) fn parse_v2(message: &str) -> Result<Reply> {
    let mut reply = Reply::new();
    let mut pair = String::new();
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ';' {
            pair.push(c);
        } else if chars.peek() == Some(&';') {
            chars.next();
            pair.push(';');
        } else {
            if let Some((k, v)) = pair.split_once('=') {
                reply.insert(k.to_string(), v.to_string());
            }
            pair.clear();
        }
    }
    if let Some((k, v)) = pair.split_once('=') {
        reply.insert(k.to_string(), v.to_string());
    }
    if !reply.contains_key("cmd") {
        return Err(malformed(&format!("a reply without cmd: {message:?}")));
    }
    Ok(reply)
}

/// The number `key` of `reply`.
pub(crate) fn number<T: std::str::FromStr>(reply: &Reply, key: &str) -> Result<T> {
    reply
        .get(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| malformed(&format!("{key} missing or not a number in {reply:?}")))
}

/// The `Bootstrap` error of a reply that breaks the protocol.
pub(crate) fn malformed(what: &str) -> Error {
    Error::Bootstrap(format!("malformed PMI reply: {what}"))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::unix::net::UnixStream;

    /// A wire in `dialect` to a fake process manager that answers each
    /// request (PMI-1 lines; PMI-2 messages are read whole) with
    /// `answer(request)` (None: closes the connection).
    pub(crate) fn wire_to(
        dialect: Dialect,
        answer: impl Fn(&str) -> Option<String> + Send + 'static,
    ) -> Wire {
        let (ours, theirs) = UnixStream::pair().unwrap();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(theirs.try_clone().unwrap());
            let mut theirs = theirs;
            loop {
                let request = match dialect {
                    Dialect::V1 => {
                        let mut line = String::new();
                        if !reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                            return;
                        }
                        line.trim_end().to_string()
                    }
                    Dialect::V2 => {
                        let mut len = [0u8; 6];
                        if reader.read_exact(&mut len).is_err() {
                            return;
                        }
                        let len: usize = std::str::from_utf8(&len).unwrap().trim().parse().unwrap();
                        let mut body = vec![0; len];
                        reader.read_exact(&mut body).unwrap();
                        String::from_utf8(body).unwrap()
                    }
                };
                match answer(&request) {
                    Some(reply) => theirs.write_all(reply.as_bytes()).unwrap(),
                    None => return,
                }
            }
        });
        let fd = ours.into_raw_fd();
        // SAFETY: the descriptor was just taken from its socket.
        Wire::new(unsafe { File::from_raw_fd(fd) }, fd, dialect)
    }

    /// A PMI-2 message as a server frames it.
    pub(crate) fn v2(body: &str) -> String {
        format!("{:<6}{body}", body.len())
    }

    pub(crate) fn soon() -> Instant {
        Instant::now() + Duration::from_secs(5)
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
        assert_eq!(told, (2, 4));
        let maxes = wire.call("get_maxes", &[], "maxes", soon()).unwrap();
        assert_eq!(maxes["vallen_max"], "512");
        match Wire::at_port("nowhere.invalid:1", 0, soon()) {
            Err(e) => assert!(e.to_string().contains("names no address"), "{e}"),
            Ok(_) => panic!("a port naming no host was taken"),
        }
    }

    /// Replies come back as attributes; barrier replies that arrive before
    /// the one asked for are counted; `rc` other than 0, a reply of the
    /// wrong kind, a closed connection and silence are typed errors.
    #[test]
    fn the_wire_checks_every_reply() {
        let mut wire = wire_to(Dialect::V1, |line| {
            Some(match line {
                "cmd=get_maxes" => "cmd=barrier_out\ncmd=maxes vallen_max=1024 rc=0\n".into(),
                "cmd=put bad=1" => "cmd=put_result rc=-1 msg=duplicate_key\n".into(),
                "cmd=wrong" => "cmd=get_result rc=0 value=1\n".into(),
                "cmd=silence" => String::new(),
                _ => return None,
            })
        });
        let maxes = wire.call("get_maxes", &[], "maxes", soon()).unwrap();
        assert_eq!(maxes["vallen_max"], "1024");
        assert_eq!(wire.barriers_out, 1);
        let err = wire
            .call("put", &[("bad", "1")], "put_result", soon())
            .unwrap_err();
        assert!(err.to_string().contains("rc=-1: duplicate_key"), "{err}");
        let err = wire.call("wrong", &[], "put_result", soon()).unwrap_err();
        assert!(err.to_string().contains("malformed PMI reply"), "{err}");
        let quick = Instant::now() + Duration::from_millis(50);
        let err = wire.call("silence", &[], "x", quick).unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{err}");
        let err = wire.call("bye", &[], "x", soon()).unwrap_err();
        assert!(err.to_string().contains("closed the connection"), "{err}");
    }

    /// PMI-2 frames requests with their length and escapes `;`; replies
    /// split on `;` with `;;` kept; a reply in two pieces waits for the
    /// rest; a length that is no number is an error.
    #[test]
    fn pmi2_messages_are_framed_and_escaped() {
        let mut wire = wire_to(Dialect::V2, |request| {
            Some(match request {
                "cmd=kvs-get;jobid=j;srcid=-1;key=a;;b;" => {
                    v2("cmd=kvs-get-response;found=TRUE;value=x;;y;rc=0;")
                }
                "cmd=kvs-fence;" => format!(
                    "{}{}",
                    v2("cmd=kvs-fence-response;rc=0;"),
                    v2("cmd=kvs-put-response;rc=0;")
                ),
                _ => "abcdef".into(),
            })
        });
        let got = wire
            .call(
                "kvs-get",
                &[("jobid", "j"), ("srcid", "-1"), ("key", "a;b")],
                "kvs-get-response",
                soon(),
            )
            .unwrap();
        assert_eq!(got["value"], "x;y");
        let put = wire
            .call("kvs-fence", &[], "kvs-put-response", soon())
            .unwrap();
        assert_eq!(put["rc"], "0");
        assert_eq!(wire.barriers_out, 1);
        let err = wire.call("junk", &[], "x", soon()).unwrap_err();
        assert!(err.to_string().contains("PMI-2 length"), "{err}");
    }

    #[test]
    fn replies_parse_and_garbage_is_an_error() {
        let reply =
            parse_v1("cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024 rc=0").unwrap();
        assert_eq!(number::<usize>(&reply, "vallen_max").unwrap(), 1024);
        assert!(number::<usize>(&reply, "absent").is_err());
        assert!(parse_v1("rc=0 value=1").is_err());
        assert!(parse_v1("").is_err());
        assert_eq!(parse_v2("cmd=a;b=c").unwrap()["b"], "c");
        assert!(parse_v2("rc=0;").is_err());
    }
}
