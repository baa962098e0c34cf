//! The bootstrap of a rank whose job spans hosts: one TCP connection to the
//! launcher carries this rank's entry, its lookups of peers' entries (the
//! launcher holds the job's directory), barriers and failure news. A thread
//! reads the launcher's frames, so that news arrives while the rank
//! computes; every wait is bounded.

use std::collections::HashMap;
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::handshake::{self, JobKey};
use super::wire::{Frame, Peer};
use super::{BarrierTicket, Bootstrap, Placement};
use crate::{Error, Rank, Result};

/// How long a rank keeps trying to reach the launcher at start-up (it may
/// be busy: it closes newcomers beyond its cap at once).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long each step of the handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bootstrap of a rank started by a proxy of the launcher on some host.
pub struct TcpBootstrap {
    job: String,
    rank: Rank,
    size: u32,
    local_size: u32,
    to_launcher: Mutex<TcpStream>,
    news: Arc<News>,
    published: AtomicBool,
    barriers_started: AtomicU64,
}

/// What the launcher told this rank, filled in by the reader thread.
#[derive(Default)]
struct News {
    answers: Mutex<Answers>,
    arrived: Condvar,
    released: AtomicU64,
    /// Failed rank + 1; `u32::MAX` once the launcher is gone.
    failed: AtomicU32,
}

/// The launcher's answers not yet taken.
#[derive(Default)]
struct Answers {
    fenced: Option<Placement>,
    /// At most the entries of lookups in flight (one per calling thread).
    entries: HashMap<Rank, Vec<u8>>,
}

impl News {
    fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.answers.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `News::failed` once the connection to the launcher broke.
const LAUNCHER_GONE: u32 = u32::MAX;

impl TcpBootstrap {
    /// Connects to the launcher at `launcher` as `rank` of job `job`,
    /// proving `key` there.
    pub fn connect(
        launcher: SocketAddr,
        key: &JobKey,
        job: &str,
        rank: Rank,
        size: u32,
        local_size: u32,
    ) -> Result<TcpBootstrap> {
        let stream = join_launcher(launcher, key, Peer::Rank(rank))?;
        let writer = stream
            .try_clone()
            .map_err(|e| Error::io("cloning the launcher connection", e))?;
        let news = Arc::new(News::default());
        let reader_news = news.clone();
        std::thread::Builder::new()
            .name("catena-bootstrap".into())
            .spawn(move || read_news(stream, &reader_news))
            .map_err(|e| Error::io("starting the bootstrap's reader thread", e))?;
        Ok(TcpBootstrap {
            job: job.to_string(),
            rank,
            size,
            local_size,
            to_launcher: Mutex::new(writer),
            news,
            published: AtomicBool::new(false),
            barriers_started: AtomicU64::new(0),
        })
    }

    fn send(&self, frame: &Frame) -> Result<()> {
        let mut stream = self.to_launcher.lock().unwrap_or_else(|e| e.into_inner());
        frame.write(&mut *stream)
    }

    /// Waits until `take` finds its answer, the job fails, or `timeout`.
    fn wait<T>(
        &self,
        timeout: Duration,
        what: &'static str,
        mut take: impl FnMut(&mut Answers) -> Option<T>,
    ) -> Result<T> {
        let deadline = Instant::now() + timeout;
        let mut answers = self.news.answers();
        loop {
            if let Some(answer) = take(&mut answers) {
                return Ok(answer);
            }
            self.check_failed()?;
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout { what });
            }
            answers = self
                .news
                .arrived
                .wait_timeout(answers, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn check_failed(&self) -> Result<()> {
        match self.news.failed.load(Ordering::Acquire) {
            0 => Ok(()),
            LAUNCHER_GONE => Err(Error::Bootstrap(
                "the connection to the launcher broke (the launcher or this host's proxy is gone)"
                    .into(),
            )),
            r => Err(Error::PeerGone { rank: r - 1 }),
        }
    }
}

/// A connection to the launcher at `launcher` on which `peer` proved `key`
/// (and the launcher proved it back), trying again until
/// `CONNECT_TIMEOUT`.
pub fn join_launcher(launcher: SocketAddr, key: &JobKey, peer: Peer) -> Result<TcpStream> {
    let started = Instant::now();
    loop {
        let attempt = TcpStream::connect_timeout(&launcher, CONNECT_TIMEOUT)
            .map_err(|e| Error::io(format!("connecting to the launcher at {launcher}"), e))
            .and_then(|mut stream| {
                let _ = stream.set_nodelay(true);
                handshake::join(&mut stream, key, peer, HANDSHAKE_TIMEOUT)?;
                Ok(stream)
            });
        match attempt {
            Ok(stream) => return Ok(stream),
            Err(e) if started.elapsed() >= CONNECT_TIMEOUT => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// The reader thread: applies the launcher's frames until the connection
/// ends (the rank exits first in an orderly job).
fn read_news(mut stream: TcpStream, news: &News) {
    loop {
        match Frame::read(&mut stream) {
            Ok(Some(Frame::Fenced { hosts, local })) => {
                news.answers().fenced = Some(Placement {
                    hosts,
                    local_ranks: local,
                });
                news.arrived.notify_all();
            }
            Ok(Some(Frame::Entry(rank, entry))) => {
                news.answers().entries.insert(rank, entry);
                news.arrived.notify_all();
            }
            Ok(Some(Frame::Released(n))) => {
                news.released.fetch_max(n, Ordering::AcqRel);
            }
            Ok(Some(Frame::Failed(rank))) => {
                let _ = news.failed.compare_exchange(
                    0,
                    rank.saturating_add(1).min(LAUNCHER_GONE - 1),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                news.arrived.notify_all();
            }
            // Frames meant for proxies are no news to a rank.
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => {
                let _ = news.failed.compare_exchange(
                    0,
                    LAUNCHER_GONE,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                news.arrived.notify_all();
                return;
            }
        }
    }
}

impl Bootstrap for TcpBootstrap {
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

    fn publish(&self, mine: &[u8], timeout: Duration) -> Result<Placement> {
        if self.published.swap(true, Ordering::AcqRel) {
            return Err(Error::Bootstrap("the entry is published once".into()));
        }
        self.send(&Frame::Publish(mine.to_vec()))?;
        self.wait(timeout, "the launcher's fence", |answers| {
            answers.fenced.take()
        })
    }

    fn lookup(&self, rank: Rank, timeout: Duration) -> Result<Vec<u8>> {
        super::lookup_allowed(self.published.load(Ordering::Acquire), rank, self.size)?;
        self.send(&Frame::Lookup(rank))?;
        let entry = self.wait(timeout, "the launcher's answer to a lookup", |answers| {
            answers.entries.remove(&rank)
        })?;
        if entry.is_empty() {
            return Err(Error::Bootstrap(format!(
                "the launcher has no entry of rank {rank}"
            )));
        }
        Ok(entry)
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        if !self.published.load(Ordering::Acquire) {
            return Err(Error::Bootstrap(
                "a barrier before the entries are published".into(),
            ));
        }
        self.send(&Frame::Arrive)?;
        Ok(BarrierTicket(
            self.barriers_started.fetch_add(1, Ordering::AcqRel) + 1,
        ))
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        if self.news.released.load(Ordering::Acquire) >= ticket.0 {
            return Ok(true);
        }
        self.check_failed()?;
        Ok(false)
    }

    fn failed_rank(&self) -> Option<Rank> {
        match self.news.failed.load(Ordering::Acquire) {
            0 | LAUNCHER_GONE => None,
            r => Some(r - 1),
        }
    }
}
