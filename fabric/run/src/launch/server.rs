//! The launcher's side of its connections in a job across hosts, served by
//! one poll loop: it accepts a bounded number of newcomers, challenges each
//! with a deadline, lets in only those that prove the job key (once per
//! rank or proxy), and then turns their bytes into frames and back.

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use catena_fabric::bootstrap::handshake::{nonce, JobKey};
use catena_fabric::bootstrap::wire::{Frame, Nonce, Peer, MAX_HELLO};
use catena_fabric::{Error, Result};

/// Newcomers that have not answered their challenge yet, at most: more are
/// closed at once (a rank or proxy tries again), so that a flood of idle
/// connections costs the launcher this many descriptors and no thread.
pub(super) const MAX_NEWCOMERS: usize = 64;
/// How long a newcomer has to answer its challenge.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A peer that takes no byte for this long while frames wait for it is
/// dropped.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
const LISTENER: Token = Token(usize::MAX);

/// What happened on the launcher's connections.
#[derive(Debug)]
pub(super) enum Event {
    /// This rank or proxy proved the job key and is in.
    Joined(Peer),
    /// A frame from a peer that is in.
    Frame(Peer, Frame),
    /// Its connection ended (closed, broken, or dropped for stalling).
    Left(Peer),
}

struct Connection {
    stream: TcpStream,
    state: State,
    /// Bytes read and not yet parsed: less than one frame.
    inbox: Vec<u8>,
    /// Frames to write, and how much of the first is written.
    outbox: VecDeque<Arc<[u8]>>,
    written: usize,
    /// Since when frames wait for it without a byte taken.
    stalled_since: Option<Instant>,
    /// A write failed: closed at the end of the turn.
    broken: bool,
}

enum State {
    /// Challenged with this nonce; must answer by the deadline.
    Newcomer {
        nonce: Nonce,
        deadline: Instant,
    },
    Joined(Peer),
}

/// The launcher's listening socket and its connections.
pub(super) struct Server {
    poll: Poll,
    events: Events,
    listener: TcpListener,
    key: JobKey,
    size: u32,
    hosts: u32,
    connections: HashMap<Token, Connection>,
    next_token: usize,
    joined: HashMap<Peer, Token>,
    /// Every rank, then every host, that has ever joined: none joins twice.
    ever_joined: Vec<bool>,
    newcomers: usize,
}

impl Server {
    /// Serves `listener` for a job of `size` ranks on `hosts` hosts whose
    /// peers prove `key`.
    pub(super) fn new(
        listener: std::net::TcpListener,
        key: JobKey,
        size: u32,
        hosts: u32,
    ) -> Result<Server> {
        let io = |e| Error::io("the launcher's socket", e);
        listener.set_nonblocking(true).map_err(io)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new().map_err(io)?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(io)?;
        Ok(Server {
            poll,
            events: Events::with_capacity(256),
            listener,
            key,
            size,
            hosts,
            connections: HashMap::new(),
            next_token: 0,
            joined: HashMap::new(),
            ever_joined: vec![false; size as usize + hosts as usize],
            newcomers: 0,
        })
    }

    /// Connections open now, newcomers included.
    #[cfg(test)]
    pub(super) fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Waits up to `timeout` for something to happen, serves it, and
    /// appends what the job must know to `out`.
    pub(super) fn poll(&mut self, timeout: Duration, out: &mut Vec<Event>) {
        if let Err(e) = self.poll.poll(&mut self.events, Some(timeout)) {
            if e.kind() != ErrorKind::Interrupted {
                // Nothing to serve this turn; deadlines still run below.
                std::thread::sleep(timeout);
            }
        }
        let ready: Vec<Token> = self.events.iter().map(|e| e.token()).collect();
        for token in ready.into_iter().filter(|&t| t != LISTENER) {
            self.serve(token, out);
        }
        // Every turn, not only on the listener's event: connections left
        // waiting when accept failed (out of descriptors) get no new edge.
        self.accept();
        self.expire(out);
    }

    /// Queues `frame` for `peer`; false when it is not in.
    pub(super) fn send(&mut self, peer: Peer, frame: &Frame) -> bool {
        match encode(frame) {
            Some(bytes) => self.send_bytes(peer, bytes),
            None => false,
        }
    }

    /// Queues `frame` for every rank that is in (encoded once).
    pub(super) fn send_to_ranks(&mut self, frame: &Frame) {
        let Some(bytes) = encode(frame) else { return };
        for rank in 0..self.size {
            self.send_bytes(Peer::Rank(rank), bytes.clone());
        }
    }

    fn send_bytes(&mut self, peer: Peer, bytes: Arc<[u8]>) -> bool {
        let Some(&token) = self.joined.get(&peer) else {
            return false;
        };
        self.queue(token, bytes);
        true
    }

    fn queue(&mut self, token: Token, bytes: Arc<[u8]>) {
        if let Some(conn) = self.connections.get_mut(&token) {
            conn.outbox.push_back(bytes);
            conn.stalled_since.get_or_insert_with(Instant::now);
            // Written at once where the socket takes it; the rest when it
            // says it is writable.
            conn.broken |= conn.flush().is_err();
        }
    }

    fn accept(&mut self) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // Out of descriptors, or an aborted connection: the rest
                // wait for the next turn.
                Err(_) => return,
            };
            if self.newcomers >= MAX_NEWCOMERS {
                continue;
            }
            let token = Token(self.next_token);
            self.next_token += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut stream, token, interest)
                .is_err()
            {
                continue;
            }
            let _ = stream.set_nodelay(true);
            let nonce = nonce();
            self.connections.insert(
                token,
                Connection {
                    stream,
                    state: State::Newcomer {
                        nonce,
                        deadline: Instant::now() + HANDSHAKE_TIMEOUT,
                    },
                    inbox: Vec::new(),
                    outbox: VecDeque::new(),
                    written: 0,
                    stalled_since: None,
                    broken: false,
                },
            );
            self.newcomers += 1;
            if let Some(challenge) = encode(&Frame::Challenge(nonce)) {
                self.queue(token, challenge);
            }
        }
    }

    /// Serves a connection the poll says is ready: writes what waits,
    /// reads what came, and acts on each whole frame.
    fn serve(&mut self, token: Token, out: &mut Vec<Event>) {
        let Some(conn) = self.connections.get_mut(&token) else {
            return;
        };
        // Frames that came before the end of the stream count: a proxy's
        // last reports arrive with its close.
        let ended = conn.flush().is_err() | conn.fill().is_err();
        let mut open = true;
        while open {
            let Some(conn) = self.connections.get_mut(&token) else {
                return;
            };
            let limit = match conn.state {
                State::Newcomer { .. } => MAX_HELLO,
                // The wire's own limit.
                State::Joined(_) => usize::MAX,
            };
            let (frame, took) = match Frame::parse(&conn.inbox, limit) {
                Ok(Some(parsed)) => parsed,
                Ok(None) => break,
                Err(_) => {
                    open = false;
                    break;
                }
            };
            conn.inbox.drain(..took);
            open = match conn.state {
                State::Joined(peer) => {
                    out.push(Event::Frame(peer, frame));
                    true
                }
                State::Newcomer { nonce, .. } => self.admit(token, nonce, frame, out),
            };
        }
        if ended || !open {
            self.close(token, out);
        }
    }

    /// Lets in the newcomer at `token`, challenged with `nonce`, if `frame`
    /// is a hello proving the job key for a rank or host of the job that
    /// has not joined before; false to close it.
    fn admit(&mut self, token: Token, nonce: Nonce, frame: Frame, out: &mut Vec<Event>) -> bool {
        let Frame::Hello {
            peer,
            nonce: theirs,
            proof,
        } = frame
        else {
            return false;
        };
        let slot = match peer {
            Peer::Rank(r) if r < self.size => r as usize,
            Peer::Proxy(h) if h < self.hosts => self.size as usize + h as usize,
            _ => return false,
        };
        if self.ever_joined[slot] || !self.key.checks_hello(&proof, &nonce, &theirs, peer) {
            return false;
        }
        self.ever_joined[slot] = true;
        self.newcomers -= 1;
        self.joined.insert(peer, token);
        if let Some(conn) = self.connections.get_mut(&token) {
            conn.state = State::Joined(peer);
        }
        let welcome = Frame::Welcome(self.key.welcome_proof(&nonce, &theirs, peer));
        if let Some(bytes) = encode(&welcome) {
            self.queue(token, bytes);
        }
        out.push(Event::Joined(peer));
        true
    }

    /// Closes newcomers past their deadline, peers that stopped taking
    /// bytes, and broken connections.
    fn expire(&mut self, out: &mut Vec<Event>) {
        let now = Instant::now();
        let overdue: Vec<Token> = self
            .connections
            .iter()
            .filter(|(_, c)| {
                c.broken
                    || matches!(c.state, State::Newcomer { deadline, .. } if now >= deadline)
                    || c.stalled_since
                        .is_some_and(|since| now.duration_since(since) >= WRITE_TIMEOUT)
            })
            .map(|(&token, _)| token)
            .collect();
        for token in overdue {
            self.close(token, out);
        }
    }

    fn close(&mut self, token: Token, out: &mut Vec<Event>) {
        let Some(mut conn) = self.connections.remove(&token) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut conn.stream);
        match conn.state {
            State::Newcomer { .. } => self.newcomers -= 1,
            State::Joined(peer) => {
                self.joined.remove(&peer);
                out.push(Event::Left(peer));
            }
        }
    }
}

impl Connection {
    /// Writes queued frames until they are all out or the socket is full.
    fn flush(&mut self) -> std::io::Result<()> {
        while let Some(front) = self.outbox.front() {
            match self.stream.write(&front[self.written..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    self.stalled_since = Some(Instant::now());
                    if self.written == front.len() {
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.stalled_since = None;
        Ok(())
    }

    /// Reads what the socket holds (the poll is edge-triggered: all of
    /// it); an error at the end of the stream. A newcomer may not send
    /// more than a hello's worth.
    fn fill(&mut self) -> std::io::Result<()> {
        let mut buf = [0u8; 64 << 10];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => {
                    self.inbox.extend_from_slice(&buf[..n]);
                    if matches!(self.state, State::Newcomer { .. })
                        && self.inbox.len() > 4 + MAX_HELLO
                    {
                        return Err(ErrorKind::InvalidData.into());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

fn encode(frame: &Frame) -> Option<Arc<[u8]>> {
    let mut bytes = Vec::new();
    frame.write(&mut bytes).ok()?;
    Some(bytes.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::bootstrap::handshake::join;
    use catena_fabric::bootstrap::wire::NONCE_BYTES;
    use std::net::TcpStream as StdStream;

    /// What a stranger does on its connection.
    type Attack = Box<dyn FnOnce(&mut StdStream) + Send>;

    /// A server for a job of 2 ranks on 1 host, served by the test thread.
    fn server(key: &JobKey) -> (Server, std::net::SocketAddr) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        (Server::new(listener, key.clone(), 2, 1).unwrap(), at)
    }

    /// Polls until `done` holds of the events so far (10 s at most).
    fn serve_until(server: &mut Server, done: impl Fn(&[Event]) -> bool) -> Vec<Event> {
        let mut events = Vec::new();
        let until = Instant::now() + Duration::from_secs(10);
        while !done(&events) && Instant::now() < until {
            server.poll(Duration::from_millis(2), &mut events);
        }
        events
    }

    /// What a stranger gets: the bytes the server sent before it closed
    /// the connection (or 2 s passed).
    fn what_it_got(mut stream: StdStream) -> Vec<u8> {
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut got = Vec::new();
        let _ = stream.read_to_end(&mut got);
        got
    }

    fn challenge_of(stream: &mut StdStream) -> Nonce {
        match Frame::read(stream).unwrap() {
            Some(Frame::Challenge(nonce)) => nonce,
            other => panic!("{other:?} where a challenge belongs"),
        }
    }

    fn bytes_of(frame: &Frame) -> Vec<u8> {
        let mut bytes = Vec::new();
        frame.write(&mut bytes).unwrap();
        bytes
    }

    /// Strangers (garbage, a wrong key, a peer outside the job, a hello
    /// recorded on another connection, a second session of a peer that is
    /// in) get the challenge and nothing more; the job's own peers get in.
    #[test]
    fn only_peers_proving_the_key_get_in_and_a_replay_gets_nothing() {
        let key = JobKey::generate();
        let (mut server, at) = server(&key);
        let genuine = std::thread::spawn(move || {
            let mut stream = StdStream::connect(at).unwrap();
            let launcher = challenge_of(&mut stream);
            let hello = {
                let nonce = [9; NONCE_BYTES];
                Frame::Hello {
                    peer: Peer::Rank(0),
                    nonce,
                    proof: key.hello_proof(&launcher, &nonce, Peer::Rank(0)),
                }
            };
            hello.write(&mut stream).unwrap();
            assert!(matches!(
                Frame::read(&mut stream),
                Ok(Some(Frame::Welcome(_)))
            ));
            (stream, bytes_of(&hello), key)
        });
        let events = serve_until(&mut server, |e| !e.is_empty());
        assert!(
            matches!(events[..], [Event::Joined(Peer::Rank(0))]),
            "{events:?}"
        );
        let (rank0, recorded_hello, key) = genuine.join().unwrap();

        let wrong = JobKey::generate();
        let strangers: Vec<Attack> = vec![
            Box::new(|s| {
                let _ = s.write_all(b"GET / HTTP/1.0\r\n\r\n");
            }),
            Box::new(|s| {
                let _ = s.write_all(&[0xff, 0xff, 0xff, 0x0f]);
            }),
            Box::new(move |s| {
                let _ = s.write_all(&recorded_hello);
            }),
            Box::new(move |s| {
                let launcher = challenge_of(s);
                let nonce = [1; NONCE_BYTES];
                let proof = wrong.hello_proof(&launcher, &nonce, Peer::Proxy(0));
                let hello = Frame::Hello {
                    peer: Peer::Proxy(0),
                    nonce,
                    proof,
                };
                let _ = hello.write(s);
            }),
            {
                let key = key.clone();
                Box::new(move |s| {
                    let launcher = challenge_of(s);
                    let nonce = [1; NONCE_BYTES];
                    for peer in [Peer::Rank(2), Peer::Proxy(1), Peer::Rank(0)] {
                        let proof = key.hello_proof(&launcher, &nonce, peer);
                        // Closed after the first: later writes may fail.
                        let _ = Frame::Hello { peer, nonce, proof }.write(s);
                    }
                })
            },
            {
                // A second session of rank 0, which is in.
                let key = key.clone();
                Box::new(move |s| {
                    let launcher = challenge_of(s);
                    let nonce = [2; NONCE_BYTES];
                    let proof = key.hello_proof(&launcher, &nonce, Peer::Rank(0));
                    Frame::Hello {
                        peer: Peer::Rank(0),
                        nonce,
                        proof,
                    }
                    .write(s)
                    .unwrap();
                })
            },
        ];
        let attacks: Vec<_> = strangers
            .into_iter()
            .map(|attack| {
                std::thread::spawn(move || {
                    let mut stream = StdStream::connect(at).unwrap();
                    attack(&mut stream);
                    what_it_got(stream)
                })
            })
            .collect();
        let events = serve_until(&mut server, |_| attacks.iter().all(|a| a.is_finished()));
        assert!(events.is_empty(), "strangers made events: {events:?}");
        for attack in attacks {
            let got = attack.join().unwrap();
            // At most the challenge (read already by those that answered).
            let challenge_len = bytes_of(&Frame::Challenge([0; NONCE_BYTES])).len();
            assert!(
                got.is_empty() || got.len() == challenge_len,
                "a stranger got {got:?}"
            );
        }
        assert_eq!(server.connections(), 1, "strangers stay connected");
        drop(rank0);
        let events = serve_until(&mut server, |e| !e.is_empty());
        assert!(
            matches!(events[..], [Event::Left(Peer::Rank(0))]),
            "{events:?}"
        );
        // Rank 0 left: it still cannot come back.
        let again = std::thread::spawn(move || {
            let mut stream = StdStream::connect(at).unwrap();
            join(&mut stream, &key, Peer::Rank(0), Duration::from_secs(2))
        });
        let events = serve_until(&mut server, |_| again.is_finished());
        assert!(events.is_empty() && again.join().unwrap().is_err());
    }

    /// A flood of idle connections holds at most `MAX_NEWCOMERS` of them
    /// open and no thread; a genuine peer gets in once it recedes.
    #[test]
    fn a_flood_of_idle_connections_is_capped() {
        let key = JobKey::generate();
        let (mut server, at) = server(&key);
        let flood: Vec<StdStream> = (0..1000)
            .map(|_| {
                let stream = StdStream::connect(at).unwrap();
                server.poll(Duration::ZERO, &mut Vec::new());
                stream
            })
            .collect();
        let until = Instant::now() + Duration::from_millis(300);
        while Instant::now() < until {
            server.poll(Duration::from_millis(2), &mut Vec::new());
        }
        assert!(
            server.connections() <= MAX_NEWCOMERS,
            "{} open",
            server.connections()
        );
        let genuine = std::thread::spawn(move || {
            catena_fabric::bootstrap::join_launcher(at, &key, Peer::Proxy(0)).map(|_| ())
        });
        std::thread::sleep(Duration::from_millis(300));
        drop(flood);
        let events = serve_until(&mut server, |e| !e.is_empty());
        assert!(
            matches!(events[..], [Event::Joined(Peer::Proxy(0))]),
            "{events:?}"
        );
        genuine.join().unwrap().unwrap();
    }
}
