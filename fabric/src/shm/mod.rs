//! The native shared-memory provider, catena's embedded default. Every window
//! is a memfd segment; a put is a copy into the peer's mapping followed by
//! a release-ordered signal; a waiting rank sleeps on a futex doorbell in its
//! control window, which a signalling peer rings only if the rank sleeps.

pub(crate) mod window;

use std::cell::RefCell;
use std::rc::Rc;

use rustc_hash::FxHashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub use window::ShmWindow;
use window::{MappedWindow, ShmKey};

use crate::bootstrap::Bootstrap;
use crate::config;
use crate::eager::{
    Messenger, CONTROL_WINDOW_BYTES, DEFAULT_BULK_BYTES, DEFAULT_INBOX_BYTES,
    DEFAULT_RENDEZVOUS_BYTES, DEFAULT_RING_BYTES,
};
use crate::job::{Job, Spin};
use crate::kit::WindowIds;
use crate::{
    finalize_barrier, Blocking, ControlWindows, EagerMessaging, Error, LocalWindow, PeerWindow,
    Provider, Rank, RemoteKey, Result, Rma, Signal, Time,
};

/// Re-polling budget of a waiting rank when it has a core to itself.
const DEFAULT_SPIN: Duration = Duration::from_micros(50);
/// How long it re-polls in all while no runnable task waits for a core: a
/// parked rank's wake-up costs tens of microseconds on a virtual machine
/// (`catena-bench collectives -n 2`: a 1 MiB bcast's root waits about
/// 70 us for its reader's copy, and took 1.03x MPICH's time parked, 0.92x
/// spinning), but spinning on a shared core only delays its other tasks.
const IDLE_SPIN: Duration = Duration::from_millis(1);
/// Longest sleep before a parked rank re-checks job health.
const PARK_SLICE: Duration = Duration::from_millis(50);

/// The shared-memory provider: every window is a memfd segment peers on
/// this machine map, so puts are memory copies and signals are atomics.
pub struct ShmTransport {
    messenger: Messenger<ShmWindow, ShmPeerWindow>,
    window_ids: WindowIds,
    /// Tags this rank's window keys.
    /// Mappings of peers' live windows, made on first put: O(partners).
    mapped: RefCell<FxHashMap<(Rank, u32), Mapping>>,
    spin: Spin,
    /// Dropped last: the bootstrap (MPI when started by mpiexec) outlives
    /// the fabric, so MPI_Finalize never runs beside a live provider.
    job: Job,
}

impl ShmTransport {
    /// Joins the job this process was started into (see [`Job::from_env`]).
    pub fn from_env() -> Result<ShmTransport> {
        ShmTransport::new(Job::from_env()?)
    }

    /// A transport for the job `bootstrap` describes, whose ranks on this
    /// machine share `cores` cores.
    pub fn with_bootstrap(bootstrap: Box<dyn Bootstrap>, cores: usize) -> Result<ShmTransport> {
        ShmTransport::new(Job::new(bootstrap, cores))
    }

    fn new(mut job: Job) -> Result<ShmTransport> {
        // Every live window holds a descriptor.
        crate::os::raise_open_file_limit();
        let control = ShmWindow::create(job.rank(), 0, CONTROL_WINDOW_BYTES, &job.key_secret())?;
        job.publish(control.key().as_bytes())?;
        // Every rank sees the same directory, so all of them refuse alike.
        job.require_one_host(Self::NAME)?;
        let ring_bytes = config::ring_bytes(DEFAULT_RING_BYTES)?;
        let inbox_bytes = config::inbox_bytes(DEFAULT_INBOX_BYTES)?;
        let rendezvous = config::rendezvous(DEFAULT_RENDEZVOUS_BYTES, DEFAULT_BULK_BYTES)?;
        let spin = job.spin(DEFAULT_SPIN, IDLE_SPIN)?;
        Ok(ShmTransport {
            job,
            messenger: Messenger::new(control, ring_bytes)
                .with_inbox_bytes(inbox_bytes)
                .with_rendezvous(rendezvous.0, rendezvous.1),
            window_ids: WindowIds::new(),
            mapped: RefCell::new(FxHashMap::default()),
            spin,
        })
    }

    /// Peers this rank holds a messaging connection with.
    pub fn connection_count(&self) -> usize {
        self.messenger.connection_count()
    }

    /// Peers' windows this rank holds mapped.
    pub fn peer_mapping_count(&self) -> usize {
        self.mapped.borrow().len()
    }

    /// The mapping of `target`'s live window named by `key` (its tag
    /// checked), made on first use.
    fn peer_mapping(&self, target: Rank, key: &RemoteKey) -> Result<Rc<MappedWindow>> {
        self.job.check_rank(target)?;
        let decoded = ShmKey::decode(key, target, &self.job.peer_key_secret(target)?)?;
        let w = self.map_peer_window(decoded, key)?;
        if w.is_live() {
            Ok(w)
        } else {
            Err(Error::WindowFreed { rank: target })
        }
    }

    /// Runs `f` on the mapping of `target`'s window named by `key`, mapping
    /// it on first use.
    #[inline]
    fn with_peer_window<R>(
        &self,
        target: Rank,
        key: &RemoteKey,
        f: impl FnOnce(&MappedWindow) -> Result<R>,
    ) -> Result<R> {
        self.job.check_rank(target)?;
        // The bytes of a key a mapping was made through had their tag
        // checked then: the same bytes again need no second check.
        if let Some(id) = ShmKey::peek_id(key) {
            if let Some(m) = self.mapped.borrow().get(&(target, id)) {
                if m.sealed == *key && m.window.is_live() {
                    return f(&m.window);
                }
            }
        }
        f(&*self.peer_mapping(target, key)?)
    }

    /// Maps the window `key` (`sealed`, decoded) names, once the key proved
    /// to be one its owner made, with its owner's host arena (where its
    /// doorbell is).
    fn map_peer_window(&self, key: ShmKey, sealed: &RemoteKey) -> Result<Rc<MappedWindow>> {
        let target = key.owner;
        if let Some(Mapping { window: w, .. }) = self.mapped.borrow().get(&(target, key.id)) {
            if w.key != key {
                return Err(Error::InvalidKey(format!(
                    "rank {target} made no key {key:?}"
                )));
            }
            return Ok(w.clone());
        }
        if key.id == 0 {
            let secret = self.job.peer_key_secret(target)?;
            if key != ShmKey::decode(&self.control_key(target)?, target, &secret)? {
                return Err(Error::InvalidKey(format!(
                    "{key:?} is not rank {target}'s control window"
                )));
            }
        }
        let owner = self.job.host_peer(target)?;
        let pid = self.job.pid(target)?;
        let w = match MappedWindow::open(pid, key, owner)? {
            Some(w) => Rc::new(w),
            // A rank holds its control window while it lives.
            None if key.id == 0 || !crate::os::process_alive(pid as i32) => {
                return Err(Error::PeerGone { rank: target })
            }
            // The key is genuine, so its window was freed.
            None => return Err(Error::WindowFreed { rank: target }),
        };
        let mut mapped = self.mapped.borrow_mut();
        // Mapping is rare, so it is where mappings of freed windows are
        // dropped: the cache stays O(live windows this rank puts into).
        mapped.retain(|_, m| m.window.is_live());
        if w.is_live() {
            let mapping = Mapping {
                sealed: sealed.clone(),
                window: w.clone(),
            };
            mapped.insert((target, key.id), mapping);
        }
        Ok(w)
    }
}

/// A peer's window as [`Rma::resolve_window`] makes it on shm: its mapping,
/// into which each [`Rma::put_stamp`] copies straight.
pub struct ShmPeerWindow {
    target: Rank,
    key: RemoteKey,
    mapped: Rc<MappedWindow>,
}

impl PeerWindow for ShmPeerWindow {
    fn target(&self) -> Rank {
        self.target
    }

    fn key(&self) -> &RemoteKey {
        &self.key
    }
}

/// A peer's window mapped, and the key it was mapped through.
struct Mapping {
    /// The key's bytes, whose tag was checked when the mapping was made.
    sealed: RemoteKey,
    window: Rc<MappedWindow>,
}

/// Rings the doorbell of `w`'s owner if it is (about to be) asleep: after
/// the caller's signal RMW (SeqCst) or stamp store
/// ([`crate::host::store_for_sleeper`]), with the fences in
/// `Host::prepare_park`, either the owner sees the signal or this sees the
/// sleeper.
fn wake(w: &MappedWindow) {
    w.owner.wake();
}

impl Rma for ShmTransport {
    type Window = ShmWindow;
    type PeerWindow = ShmPeerWindow;

    crate::kit::rma_from_job!(identity, health);

    fn progress(&self) {
        self.messenger.progress(self);
    }

    fn alloc_window(&self, len: usize) -> Result<ShmWindow> {
        crate::bounds::check_window_len(len)?;
        let id = self.window_ids.next()?;
        ShmWindow::create(self.job.rank(), id, len, &self.job.key_secret())
    }

    #[inline]
    fn put(&self, target: Rank, window: &RemoteKey, offset: usize, data: &[u8]) -> Result<()> {
        self.with_peer_window(target, window, |w| w.write(offset, data))
    }

    #[inline]
    fn put_signal(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Signal,
    ) -> Result<()> {
        self.with_peer_window(target, window, |w| {
            let word = w.word(signal.offset)?;
            w.write(offset, data)?;
            word.fetch_add(signal.add, Ordering::SeqCst);
            wake(w);
            Ok(())
        })
    }

    fn resolve_window(&self, target: Rank, window: &RemoteKey) -> Result<ShmPeerWindow> {
        Ok(ShmPeerWindow {
            target,
            key: window.clone(),
            mapped: self.peer_mapping(target, window)?,
        })
    }

    // Inlined, so that a frame's header, put together in a caller's
    // registers, is stored straight into the ring.
    #[inline(always)]
    fn put_stamp(
        &self,
        window: &ShmPeerWindow,
        offset: usize,
        (head, data): (&[u8], &[u8]),
        stamp: Signal,
    ) -> Result<()> {
        let w = &window.mapped;
        if !w.is_live() {
            return Err(Error::WindowFreed {
                rank: window.target,
            });
        }
        let word = w.word(stamp.offset)?;
        w.write_pieces(offset, head, data)?;
        crate::host::store_for_sleeper(word, stamp.add);
        wake(w);
        Ok(())
    }

    async fn fetch_add(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        value: u64,
        _: Time,
    ) -> Result<u64> {
        self.with_peer_window(target, window, |w| {
            let old = w.word(offset)?.fetch_add(value, Ordering::SeqCst);
            wake(w);
            Ok(old)
        })
    }

    async fn compare_swap(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        expected: u64,
        new: u64,
        _: Time,
    ) -> Result<u64> {
        self.with_peer_window(target, window, |w| {
            let old = match w.word(offset)?.compare_exchange(
                expected,
                new,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(old) | Err(old) => old,
            };
            wake(w);
            Ok(old)
        })
    }

    async fn flush(&self, target: Rank, _: Time) -> Result<()> {
        // Puts are copies that completed before they returned.
        self.job.check_rank(target)
    }
}

impl Blocking for ShmTransport {
    fn spin_budget(&self) -> Duration {
        self.spin.budget()
    }

    fn spin_on(&self, spun: Duration) -> bool {
        self.spin.on(spun)
    }

    // The doorbell is in the host arena, so that puts, signals and host
    // stores all wake a parked rank.
    fn prepare_park(&self) -> u64 {
        self.job.host_memory().map_or(0, |host| host.prepare_park())
    }

    fn park(&self, ticket: u64) {
        let timeout = self.job.take_park_timeout(PARK_SLICE);
        match self.job.host_memory() {
            Ok(host) => host.park(ticket, timeout),
            Err(_) => std::thread::sleep(timeout),
        }
    }

    fn cancel_park(&self) {
        if let Ok(host) = self.job.host_memory() {
            host.cancel_park();
        }
    }
}

impl ControlWindows for ShmTransport {
    fn control_key(&self, rank: Rank) -> Result<RemoteKey> {
        RemoteKey::from_bytes(&self.job.peer(rank)?.address)
    }
}

crate::kit::host_memory_from_job!(ShmTransport);

impl EagerMessaging for ShmTransport {
    fn messenger(&self) -> &Messenger<ShmWindow, ShmPeerWindow> {
        &self.messenger
    }
}

impl Provider for ShmTransport {
    const NAME: &'static str = "shm";

    fn job(&self) -> &Job {
        &self.job
    }

    fn from_job(job: Job) -> Result<ShmTransport> {
        ShmTransport::new(job)
    }

    fn finalize(self, timeout: Duration) -> Result<()> {
        finalize_barrier(&self, &self.job, timeout)
    }
}
