//! The libfabric provider (feature `ofi`): windows are registered memory,
//! puts are `fi_write`s, a `put_signal` is one `fi_writedata` whose CQ data
//! the target applies to its signal word, atomics are fabric atomics, and
//! tagged messages come from [`crate::eager`] like on every RMA provider.
//!
//! Choose the libfabric provider with `CATENA_OFI_PROVIDER` (default `shm`
//! on one machine); `CATENA_PROGRESS_THREAD` (`off`, `on`, a core) adds a
//! thread that drives the provider while the rank computes.

mod domain;
mod engine;
mod errors;
mod info;
mod progress;
pub mod raw;
mod signal;
mod window;

use std::cell::RefCell;
use std::os::unix::ffi::OsStrExt;
use std::rc::Rc;
use std::time::{Duration, Instant};

use catena_ofi_sys as sys;
use rustc_hash::FxHashMap;

use crate::bounds::{check_bounds, check_word};
use crate::config;
use crate::eager::{
    Messenger, CONTROL_WINDOW_BYTES, DEFAULT_BULK_BYTES, DEFAULT_INBOX_BYTES,
    DEFAULT_RENDEZVOUS_BYTES, DEFAULT_RING_BYTES,
};
use crate::job::{Job, Spin};
use crate::kit::WindowIds;
use crate::{
    finalize_barrier, wait_until, Blocking, ControlWindows, EagerMessaging, Error, KeyedWindow,
    LocalWindow, Provider, Rank, RemoteKey, Result, Rma, Signal, Time,
};
use domain::Domain;
use engine::Engine;
use progress::ProgressMode;
pub use window::{OfiKey, OfiWindow};

/// Re-polling budget of a waiting rank when it has a core to itself, on a
/// machine where other tasks want cores: then a spinning rank delays them.
const DEFAULT_SPIN: Duration = Duration::from_micros(50);
/// How long it re-polls in all while no runnable task waits for a core.
/// Long, because nothing wakes a parked rank (see `park`): with 50 µs two
/// ping-ponging ranks fell into step, each napping while the other waited
/// (5.8 µs one way against 0.32 µs with 1 ms).
const IDLE_SPIN: Duration = Duration::from_millis(1);
/// Longest sleep of a parked rank (see `park`).
const PARK_SLICE: Duration = Duration::from_micros(50);
/// How long a put or signal may wait for the fabric to take its data (they
/// are synchronous calls without a deadline of their own).
const SYNC_TIMEOUT: Duration = Duration::from_secs(60);

/// A rank on the libfabric provider: its endpoint and the eager messenger
/// over its windows.
pub struct OfiTransport {
    // Dropped before the engine: windows close their registrations first.
    messenger: Messenger<OfiWindow, KeyedWindow>,
    engine: Rc<Engine>,
    /// AV handles of the peers this rank addressed: O(partners).
    peers: RefCell<FxHashMap<Rank, sys::fi_addr_t>>,
    window_ids: WindowIds,
    spin: Spin,
    inject_size: usize,
    max_msg: usize,
    /// Remote CQ data holds a whole signal (cq_data_size >= 8).
    signal_data: bool,
    provider: String,
    /// Dropped last: the bootstrap (MPI when started by mpiexec) outlives
    /// the fabric, so MPI_Finalize never runs beside a live provider.
    job: Job,
}

/// A put's destination, checked at the origin.
struct Dest {
    addr: sys::fi_addr_t,
    key: OfiKey,
}

impl OfiTransport {
    /// Joins the job this process was started into (see [`Job::from_env`]).
    pub fn from_env() -> Result<OfiTransport> {
        OfiTransport::new(Job::from_env()?)
    }

    /// A transport for `job`, on the provider its environment selects.
    pub fn new(mut job: Job) -> Result<OfiTransport> {
        let mode = ProgressMode::from_env()?;
        let request = info::Request::for_job(&job, mode != ProgressMode::Off);
        let info = info::select(&request)?;
        let provider = info.provider();
        let (inject_size, max_msg) = (info.inject_size(), info.max_msg_size().max(1));
        let signal_data = info.cq_data_size() >= 8;
        let engine = Rc::new(Engine::new(Domain::open(info, mode)?));
        let control = OfiWindow::create(
            &engine,
            job.rank(),
            &job.key_secret(),
            0,
            CONTROL_WINDOW_BYTES,
        )?;
        let name = engine.domain.name()?;
        job.publish(&directory_entry(&name, &control.key()))?;
        if provider == "shm" {
            job.require_one_host("ofi with libfabric's shm")?;
        }
        let ring_bytes = config::ring_bytes(DEFAULT_RING_BYTES)?;
        let inbox_bytes = config::inbox_bytes(DEFAULT_INBOX_BYTES)?;
        let rendezvous = config::rendezvous(DEFAULT_RENDEZVOUS_BYTES, DEFAULT_BULK_BYTES)?;
        let spin = job.spin(DEFAULT_SPIN, IDLE_SPIN)?;
        Ok(OfiTransport {
            job,
            messenger: Messenger::new(control, ring_bytes)
                .with_inbox_bytes(inbox_bytes)
                .with_rendezvous(rendezvous.0, rendezvous.1),
            engine,
            peers: RefCell::new(FxHashMap::default()),
            window_ids: WindowIds::new(),
            spin,
            inject_size,
            max_msg,
            signal_data,
            provider,
        })
    }

    /// The libfabric provider in use, e.g. `tcp;ofi_rxm`.
    pub fn provider_name(&self) -> &str {
        &self.provider
    }

    /// Peers this rank holds a messaging connection with.
    pub fn connection_count(&self) -> usize {
        self.messenger.connection_count()
    }

    /// Peers in this rank's address vector.
    pub fn peer_count(&self) -> usize {
        self.peers.borrow().len()
    }

    /// The AV handle of `rank`, inserting its address on first use.
    fn peer(&self, rank: Rank) -> Result<sys::fi_addr_t> {
        if let Some(&addr) = self.peers.borrow().get(&rank) {
            return Ok(addr);
        }
        let peer = self.job.peer(rank)?;
        let (name, _) = parse_entry(&peer.address, rank)?;
        let addr = self.engine.domain.insert(name)?;
        if self.provider == "shm" && !shm_region_exists(name) {
            // libfabric 1.17's shm provider maps a peer's region when it is
            // inserted; if the peer already exited (its region unlinked) it
            // keeps the peer unmapped, and its progress later dereferences
            // the missing region (SIGSEGV). A region existing after the
            // insert was mapped by it: owned names are never re-created.
            return Err(Error::PeerGone { rank });
        }
        self.peers.borrow_mut().insert(rank, addr);
        Ok(addr)
    }

    /// Checks a put of `len` bytes at `offset` of `target`'s window `key`.
    fn resolve(&self, target: Rank, key: &RemoteKey, offset: usize, len: usize) -> Result<Dest> {
        self.job.check_rank(target)?;
        let key = OfiKey::decode(key, target, &self.job.peer_key_secret(target)?)?;
        check_bounds(offset, len, key.len)?;
        Ok(Dest {
            addr: self.peer(target)?,
            key,
        })
    }

    fn alive(&self, target: Rank) -> Result<()> {
        self.job.check_health()?;
        self.job.check_peer(target)
    }

    fn instant(&self, deadline: Time) -> Instant {
        Instant::now() + deadline.saturating_sub(self.now())
    }

    /// Writes `data` to `offset` of `dest`, with remote CQ data `imm` if
    /// given; returns once `data` may be reused.
    fn write(
        &self,
        target: Rank,
        dest: &Dest,
        offset: usize,
        data: &[u8],
        imm: Option<u64>,
    ) -> Result<()> {
        let deadline = Instant::now() + SYNC_TIMEOUT;
        let alive = || self.alive(target);
        let (addr, key) = (dest.addr, dest.key.mr_key);
        if data.len() <= self.inject_size {
            let raddr = dest.key.at(offset);
            // The provider copies injected data before returning.
            return match imm {
                // SAFETY: `data` is valid for its length during the call.
                Some(imm) => {
                    self.engine
                        .post("fi_inject_writedata", deadline, &alive, |ep| unsafe {
                            sys::fi_inject_writedata(
                                ep,
                                data.as_ptr().cast(),
                                data.len(),
                                imm,
                                addr,
                                raddr,
                                key,
                            )
                        })
                }
                // SAFETY: as above.
                None => self
                    .engine
                    .post("fi_inject_write", deadline, &alive, |ep| unsafe {
                        sys::fi_inject_write(ep, data.as_ptr().cast(), data.len(), addr, raddr, key)
                    }),
            };
        }
        // Larger writes go straight from `data` (no copy) and are waited for.
        let mr = if self.engine.mr_local {
            // SAFETY: `data` outlives `mr`, which is dropped when this returns
            // (after the endpoint was closed if the write could not finish).
            Some(unsafe {
                self.engine
                    .domain
                    .register(data.as_ptr(), data.len(), u64::from(sys::FI_WRITE))?
            })
        } else {
            None
        };
        let desc = mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc());
        let parts = data.len().div_ceil(self.max_msg);
        let mut tokens = Vec::with_capacity(parts);
        let mut failure = None;
        for (i, part) in data.chunks(self.max_msg).enumerate() {
            let token = self.engine.track();
            let raddr = dest.key.at(offset + i * self.max_msg);
            let context = token as *mut std::ffi::c_void;
            // Only the last part carries the signal: with ordered writes its
            // data lands after all the others'.
            let imm = imm.filter(|_| i + 1 == parts);
            let posted = match imm {
                // SAFETY: `part` stays valid until the write completes (waited
                // for below) or the endpoint is closed.
                Some(imm) => self
                    .engine
                    .post("fi_writedata", deadline, &alive, |ep| unsafe {
                        sys::fi_writedata(
                            ep,
                            part.as_ptr().cast(),
                            part.len(),
                            desc,
                            imm,
                            addr,
                            raddr,
                            key,
                            context,
                        )
                    }),
                // SAFETY: as above.
                None => self.engine.post("fi_write", deadline, &alive, |ep| unsafe {
                    sys::fi_write(
                        ep,
                        part.as_ptr().cast(),
                        part.len(),
                        desc,
                        addr,
                        raddr,
                        key,
                        context,
                    )
                }),
            };
            if let Err(e) = posted {
                self.engine.abandon(token, false);
                failure = Some(e);
                break;
            }
            tokens.push(token);
        }
        let waited = self
            .engine
            .wait(&tokens, deadline, "a put's local completion", &alive);
        if tokens.iter().any(|&t| self.engine.is_pending(t)) {
            // The provider may still read `data`, which the caller gets back
            // now: only closing the endpoint stops it.
            self.engine.domain.close_endpoint();
        }
        drop(mr);
        match failure {
            Some(e) => Err(e),
            None => waited.map(drop),
        }
    }

    /// Posts an 8-byte read of `target`'s control window: with RAW ordering
    /// it completes only after every earlier write to `target` has landed.
    fn post_flush(&self, target: Rank, deadline: Instant) -> Result<u64> {
        let peer = self.job.peer(target)?;
        let (_, control) = parse_entry(&peer.address, target)?;
        let control = OfiKey::decode(
            &RemoteKey::from_bytes(control)?,
            target,
            &self.job.peer_key_secret(target)?,
        )?;
        let addr = self.peer(target)?;
        let slot = self.engine.start([0; 3])?;
        // SAFETY: the result word lives in the op table until completion.
        let posted = self
            .engine
            .post("fi_read", deadline, &|| self.alive(target), |ep| unsafe {
                sys::fi_read(
                    ep,
                    slot.buf.add(2).cast(),
                    8,
                    slot.desc,
                    addr,
                    control.at(0),
                    control.mr_key,
                    slot.context(),
                )
            });
        self.posted(slot.token, posted)
    }

    /// `token` if posting succeeded; else forgets the op.
    fn posted(&self, token: u64, posted: Result<()>) -> Result<u64> {
        if posted.is_err() {
            self.engine.abandon(token, false);
        }
        posted.map(|()| token)
    }

    /// Waits for op `token` to `target` (the result word), giving it up if
    /// the future is dropped.
    async fn complete(
        &self,
        token: u64,
        target: Rank,
        deadline: Time,
        what: &'static str,
    ) -> Result<u64> {
        struct GiveUp<'a>(&'a Engine, u64);
        impl Drop for GiveUp<'_> {
            fn drop(&mut self) {
                self.0.abandon(self.1, true);
            }
        }
        let _give_up = GiveUp(&self.engine, token);
        wait_until(self, deadline, what, || {
            self.engine.poll();
            match self.engine.finish(token) {
                Some(result) => result.map(Some),
                None => self.job.check_peer(target).map(|()| None),
            }
        })
        .await
    }

    /// A signal that cannot travel as CQ data: once every earlier write to
    /// `target` has landed (a flush), a fabric atomic adds to the word. The
    /// atomic is awaited, so later signals cannot overtake it.
    fn signal_by_atomic(&self, target: Rank, dest: &Dest, signal: Signal) -> Result<()> {
        let deadline = Instant::now() + SYNC_TIMEOUT;
        let alive = || self.alive(target);
        let flush = self.post_flush(target, deadline)?;
        self.engine
            .wait(&[flush], deadline, "a flush before a signal", &alive)?;
        let slot = self.engine.start([signal.add, 0, 0])?;
        let (addr, raddr, key) = (dest.addr, dest.key.at(signal.offset), dest.key.mr_key);
        // SAFETY: operand and result words live in the op table until completion.
        let posted = self
            .engine
            .post("fi_fetch_atomic", deadline, &alive, |ep| unsafe {
                sys::fi_fetch_atomic(
                    ep,
                    slot.buf.cast(),
                    1,
                    slot.desc,
                    slot.buf.add(2).cast(),
                    slot.desc,
                    addr,
                    raddr,
                    key,
                    sys::fi_datatype_FI_UINT64,
                    sys::fi_op_FI_SUM,
                    slot.context(),
                )
            });
        let token = self.posted(slot.token, posted)?;
        self.engine
            .wait(&[token], deadline, "a signal", &alive)
            .map(drop)
    }
}

/// This rank's directory entry: its endpoint name, then its control key.
fn directory_entry(name: &[u8], control: &RemoteKey) -> Vec<u8> {
    let mut entry = (name.len() as u32).to_le_bytes().to_vec();
    entry.extend_from_slice(name);
    entry.extend_from_slice(control.as_bytes());
    entry
}

/// (endpoint name, control key) of `rank`'s directory entry.
fn parse_entry(entry: &[u8], rank: Rank) -> Result<(&[u8], &[u8])> {
    let bad = || Error::Bootstrap(format!("rank {rank} published a malformed ofi address"));
    let len = u32::from_le_bytes(*entry.first_chunk().ok_or_else(bad)?) as usize;
    let rest = &entry[4..];
    if rest.len() <= len {
        return Err(bad());
    }
    Ok(rest.split_at(len))
}

/// Whether the /dev/shm region of a libfabric shm endpoint whose address is
/// `name` (`fi_shm://<region>`, NUL-terminated) exists.
fn shm_region_exists(name: &[u8]) -> bool {
    let name = name.split(|&b| b == 0).next().unwrap_or_default();
    let region = name
        .windows(3)
        .position(|w| w == b"://")
        .map_or(name, |at| &name[at + 3..]);
    !region.is_empty()
        && !region.contains(&b'/')
        && std::path::Path::new("/dev/shm")
            .join(std::ffi::OsStr::from_bytes(region))
            .exists()
}

impl Rma for OfiTransport {
    type Window = OfiWindow;
    type PeerWindow = KeyedWindow;

    crate::kit::rma_from_job!(identity, health);

    fn resolve_window(&self, target: Rank, window: &RemoteKey) -> Result<KeyedWindow> {
        KeyedWindow::of(self, target, window)
    }

    fn progress(&self) {
        self.engine.poll();
        self.engine.quietly(|| self.messenger.progress(self));
    }

    fn alloc_window(&self, len: usize) -> Result<OfiWindow> {
        crate::bounds::check_window_len(len)?;
        let id = self.window_ids.next()?;
        OfiWindow::create(
            &self.engine,
            self.job.rank(),
            &self.job.key_secret(),
            id,
            len,
        )
    }

    fn put(&self, target: Rank, window: &RemoteKey, offset: usize, data: &[u8]) -> Result<()> {
        let dest = self.resolve(target, window, offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.write(target, &dest, offset, data, None)
    }

    fn put_signal(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Signal,
    ) -> Result<()> {
        let dest = self.resolve(target, window, offset, data.len())?;
        check_word(signal.offset, dest.key.len)?;
        let imm =
            signal::encode(dest.key.id, signal.offset, signal.add).filter(|_| self.signal_data);
        match imm {
            // Writes are ordered (FI_ORDER_RMA_WAW): the target reads this
            // write's CQ data only after the data of every earlier write to
            // it, and of this one, was placed.
            Some(imm) => self.write(target, &dest, offset, data, Some(imm)),
            None => {
                if !data.is_empty() {
                    self.write(target, &dest, offset, data, None)?;
                }
                self.signal_by_atomic(target, &dest, signal)
            }
        }
    }

    async fn fetch_add(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        value: u64,
        deadline: Time,
    ) -> Result<u64> {
        let dest = self.resolve(target, window, offset, 8)?;
        check_word(offset, dest.key.len)?;
        let slot = self.engine.start([value, 0, 0])?;
        let (addr, raddr, key) = (dest.addr, dest.key.at(offset), dest.key.mr_key);
        // SAFETY: operand and result words live in the op table until completion.
        let posted = self.engine.post(
            "fi_fetch_atomic",
            self.instant(deadline),
            &|| self.alive(target),
            |ep| unsafe {
                sys::fi_fetch_atomic(
                    ep,
                    slot.buf.cast(),
                    1,
                    slot.desc,
                    slot.buf.add(2).cast(),
                    slot.desc,
                    addr,
                    raddr,
                    key,
                    sys::fi_datatype_FI_UINT64,
                    sys::fi_op_FI_SUM,
                    slot.context(),
                )
            },
        );
        let token = self.posted(slot.token, posted)?;
        self.complete(token, target, deadline, "a remote fetch-and-add")
            .await
    }

    async fn compare_swap(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        expected: u64,
        new: u64,
        deadline: Time,
    ) -> Result<u64> {
        let dest = self.resolve(target, window, offset, 8)?;
        check_word(offset, dest.key.len)?;
        let slot = self.engine.start([new, expected, 0])?;
        let (addr, raddr, key) = (dest.addr, dest.key.at(offset), dest.key.mr_key);
        // SAFETY: operand, compare and result words live in the op table
        // until completion.
        let posted = self.engine.post(
            "fi_compare_atomic",
            self.instant(deadline),
            &|| self.alive(target),
            |ep| unsafe {
                sys::fi_compare_atomic(
                    ep,
                    slot.buf.cast(),
                    1,
                    slot.desc,
                    slot.buf.add(1).cast(),
                    slot.desc,
                    slot.buf.add(2).cast(),
                    slot.desc,
                    addr,
                    raddr,
                    key,
                    sys::fi_datatype_FI_UINT64,
                    sys::fi_op_FI_CSWAP,
                    slot.context(),
                )
            },
        );
        let token = self.posted(slot.token, posted)?;
        self.complete(token, target, deadline, "a remote compare-and-swap")
            .await
    }

    async fn flush(&self, target: Rank, deadline: Time) -> Result<()> {
        self.job.check_rank(target)?;
        if let Some(e) = self.engine.take_stray() {
            return Err(e);
        }
        if !self.peers.borrow().contains_key(&target) {
            return Ok(()); // Nothing was ever put there.
        }
        let token = self.post_flush(target, self.instant(deadline))?;
        self.complete(token, target, deadline, "a flush").await?;
        Ok(())
    }
}

impl Blocking for OfiTransport {
    fn spin_budget(&self) -> Duration {
        self.spin.budget()
    }

    fn spin_on(&self, spun: Duration) -> bool {
        self.spin.on(spun)
    }

    fn prepare_park(&self) -> u64 {
        0
    }

    fn park(&self, _: u64) {
        self.job.nap(PARK_SLICE);
    }

    fn cancel_park(&self) {}
}

impl ControlWindows for OfiTransport {
    fn control_key(&self, rank: Rank) -> Result<RemoteKey> {
        let peer = self.job.peer(rank)?;
        let (_, key) = parse_entry(&peer.address, rank)?;
        RemoteKey::from_bytes(key)
    }
}

crate::kit::host_memory_from_job!(OfiTransport);

impl EagerMessaging for OfiTransport {
    fn messenger(&self) -> &Messenger<OfiWindow, KeyedWindow> {
        &self.messenger
    }
}

impl Provider for OfiTransport {
    const NAME: &'static str = "ofi";

    fn job(&self) -> &Job {
        &self.job
    }

    fn from_job(job: Job) -> Result<OfiTransport> {
        OfiTransport::new(job)
    }

    fn finalize(self, timeout: Duration) -> Result<()> {
        finalize_barrier(&self, &self.job, timeout)
    }
}
