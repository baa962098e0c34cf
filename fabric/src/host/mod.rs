//! Memory the ranks of one host share, under every provider (the processes
//! of one host can always map each other's memory): each process exposes one
//! arena, a sealed memfd it publishes with its directory entry, carves
//! regions out of it for its groups, and maps its host peers' arenas on first
//! use. The contract is [`crate::HostMemory`]; host collectives build on it.

mod allocator;
mod arena;
mod offers;

use std::cell::{Cell, RefCell};
use std::os::fd::{AsRawFd, OwnedFd};
use std::rc::Rc;
use std::sync::atomic::Ordering;

use rustc_hash::FxHashMap;

use allocator::Allocator;
pub use arena::ArenaMap;
use arena::{HEADER_BYTES, WORLD_REGION_AT};
use offers::Offers;

use crate::config::HostTuning;
use crate::os::{futex, membarrier};
use crate::{Error, HostRegion, Rank, Result};

/// The arena's size unless `CATENA_HOST_ARENA_BYTES` says otherwise: virtual
/// memory, whose pages are made only where regions are used.
pub const DEFAULT_ARENA_BYTES: usize = 64 << 20;
/// The region every rank reserves at the same offset for the world's group,
/// so that the world needs no exchange to find it.
pub const WORLD_REGION_BYTES: usize = 1 << 20;

/// How long a rank sleeps at most without the fence that makes posters'
/// release stores safe to sleep on ([`membarrier`]): a post it missed
/// wakes it this late. The fence interrupts every core running a catena
/// process, which costs the sleeper about a microsecond and each of
/// those cores about as much; where ranks hand off to one another
/// through sleeps (more ranks than cores), one per sleep doubled an
/// 8-rank ring's round. So a sleep goes unfenced, for at most this long,
/// unless the one before it ended without a ring (or the kernel refuses
/// the fence: then every sleep is this short).
const UNFENCED_SLEEP: std::time::Duration = std::time::Duration::from_millis(1);

/// Stores `value` into `word` of a rank that may sleep waiting for it (a
/// mailbox stamp, a frame's stamp), publishing every write before it; the
/// caller then reads the owner's sleepers flag and wakes it if set. A
/// release store where this process is registered for the fence a
/// sleeper puts on posters' cores ([`Host::prepare_park`]), else SeqCst.
/// Either way the owner's last look before it sleeps sees the store, or
/// the caller sees the flag. The release store is the point: it leaves
/// the core at once, where a SeqCst one waits until the line is this
/// core's, a crossing per post that posts one after another cannot
/// overlap.
#[inline(always)]
pub fn store_for_sleeper(word: &std::sync::atomic::AtomicU64, value: u64) {
    match membarrier::registered() {
        true => word.store(value, Ordering::Release),
        false => word.store(value, Ordering::SeqCst),
    }
}

/// This process's arena and its mappings of its host peers' arenas.
pub struct Host {
    own: Rc<ArenaMap>,
    /// Peers open the arena by this descriptor while the process lives.
    fd: OwnedFd,
    allocator: RefCell<Allocator>,
    peers: RefCell<FxHashMap<Rank, Rc<ArenaMap>>>,
    /// The job's ranks on this host, ascending (this one included).
    ranks: Vec<Rank>,
    world_taken: Cell<bool>,
    tuning: HostTuning,
    offers: Offers,
    /// Whether the last [`Host::prepare_park`] fenced the posters' cores.
    fenced: Cell<bool>,
    /// Whether the next sleep is to be fenced: the last one ended unrung.
    fence_next: Cell<bool>,
}

/// What a peer needs to map an arena: its owner's descriptor and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArenaAddress {
    /// The owner's descriptor of the memfd.
    pub fd: i32,
    /// The arena's length in bytes.
    pub len: u64,
}

impl ArenaAddress {
    /// Bytes in a directory entry.
    pub const BYTES: usize = 12;

    /// The address as it travels in a directory entry.
    pub fn to_bytes(self) -> [u8; Self::BYTES] {
        let mut bytes = [0; Self::BYTES];
        bytes[..4].copy_from_slice(&self.fd.to_le_bytes());
        bytes[4..].copy_from_slice(&self.len.to_le_bytes());
        bytes
    }

    /// The address in a directory entry.
    pub fn from_bytes(bytes: [u8; Self::BYTES]) -> ArenaAddress {
        ArenaAddress {
            fd: i32::from_le_bytes(bytes[..4].try_into().expect("4 bytes")),
            len: u64::from_le_bytes(bytes[4..].try_into().expect("8 bytes")),
        }
    }
}

impl Host {
    /// Creates the arena of `rank` in job `job` (`len` bytes, at least the
    /// header and the world's region).
    pub fn create(rank: Rank, job: &str, len: usize, tuning: HostTuning) -> Result<Host> {
        let (own, fd) = ArenaMap::create(rank, job, len)?;
        let len = own.len() as u64;
        Ok(Host {
            own: Rc::new(own),
            fd,
            allocator: RefCell::new(Allocator::new(
                (WORLD_REGION_AT + WORLD_REGION_BYTES) as u64,
                len,
            )),
            peers: RefCell::new(FxHashMap::default()),
            ranks: Vec::new(),
            world_taken: Cell::new(false),
            tuning,
            offers: Offers::new(),
            fenced: Cell::new(false),
            fence_next: Cell::new(false),
        })
    }

    /// What peers need to map this arena.
    pub fn address(&self) -> ArenaAddress {
        ArenaAddress {
            fd: self.fd.as_raw_fd(),
            len: self.own.len() as u64,
        }
    }

    /// Records the job's ranks on this host (ascending), once they are known.
    pub fn set_ranks(&mut self, ranks: Vec<Rank>) {
        self.ranks = ranks;
    }

    /// The job's ranks on this host, ascending.
    pub fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    /// Where this host's collectives change algorithm (see
    /// [`crate::HostMemory::host_tuning`]).
    pub fn tuning(&self) -> HostTuning {
        self.tuning
    }

    /// See [`crate::HostMemory::host_alloc`].
    pub fn alloc(&self, len: usize, reset: usize) -> Result<HostRegion> {
        let region = self.allocator.borrow_mut().alloc(len, reset, &self.own)?;
        self.own.store(region.at, 1)?;
        Ok(region)
    }

    /// See [`crate::HostMemory::host_world_region`].
    pub fn world_region(&self, len: usize) -> Option<HostRegion> {
        if len > WORLD_REGION_BYTES || self.world_taken.replace(true) {
            return None;
        }
        self.own.store(WORLD_REGION_AT as u64, 1).ok()?;
        Some(HostRegion {
            at: WORLD_REGION_AT as u64,
            len: len as u64,
        })
    }

    /// See [`crate::HostMemory::host_release`].
    pub fn release(&self, region: HostRegion) {
        if region.at != WORLD_REGION_AT as u64 {
            self.allocator.borrow_mut().release(region);
        }
    }

    /// See [`crate::HostMemory::host_offer`].
    pub fn offer(&self, data: &[u8]) -> Option<u64> {
        self.offers.offer(&self.own, data)
    }

    /// See [`crate::HostMemory::host_withdraw`].
    pub fn withdraw(&self, handle: u64) {
        self.offers.withdraw(&self.own, handle);
    }

    /// This rank's own arena.
    pub fn own(&self) -> &Rc<ArenaMap> {
        &self.own
    }

    /// `rank`'s arena, mapped on first use through its owner's process
    /// `pid` and published `address`; `rank` must share this host.
    pub fn peer(
        &self,
        rank: Rank,
        job: &str,
        locate: impl FnOnce() -> Result<(u32, ArenaAddress)>,
    ) -> Result<Rc<ArenaMap>> {
        if rank == self.own.rank() {
            return Ok(self.own.clone());
        }
        if let Some(peer) = self.peers.borrow().get(&rank) {
            return Ok(peer.clone());
        }
        if self.ranks.binary_search(&rank).is_err() {
            return Err(Error::NotOnHost { rank });
        }
        let (pid, address) = locate()?;
        let peer = Rc::new(ArenaMap::open(rank, job, pid, address)?);
        self.peers.borrow_mut().insert(rank, peer.clone());
        Ok(peer)
    }

    /// Announces that this rank is about to sleep on its doorbell; returns
    /// the ticket to sleep on (see [`crate::Blocking::prepare_park`]).
    pub fn prepare_park(&self) -> u64 {
        self.own.sleepers().store(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        // A poster's release store may still sit in its core's store buffer
        // while its load of our flag (after the store) has already read 0.
        // The fence runs on every poster's core after our flag is visible:
        // a store before it is visible to our look that follows, and a
        // flag load after it reads 1 and rings the doorbell. Only after a
        // sleep that ended unrung: an unfenced one is short (see
        // `UNFENCED_SLEEP`).
        self.fenced
            .set(self.fence_next.get() && membarrier::fence_others());
        u64::from(self.own.doorbell().load(Ordering::SeqCst))
    }

    /// Sleeps on the doorbell for at most `timeout` unless it moved past
    /// `ticket`.
    pub fn park(&self, ticket: u64, timeout: std::time::Duration) {
        // Unfenced, a post may have been missed: sleep briefly, then look.
        let timeout = match self.fenced.get() {
            true => timeout,
            false => timeout.min(UNFENCED_SLEEP),
        };
        if !timeout.is_zero() {
            futex::wait(self.own.doorbell(), ticket as u32, timeout);
        }
        let rung = u64::from(self.own.doorbell().load(Ordering::SeqCst)) != ticket;
        self.fence_next.set(!rung);
        self.cancel_park();
    }

    /// Withdraws [`Host::prepare_park`].
    pub fn cancel_park(&self) {
        self.own.sleepers().store(0, Ordering::Relaxed);
    }

    /// The bytes below which no region lies (the arena's header).
    pub const fn header_bytes() -> usize {
        HEADER_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Posts meet a rank going to sleep at every moment: each is seen by
    /// the sleeper's last look, or wakes it. The poster's stores are the
    /// release stores of [`store_for_sleeper`] where the kernel has the
    /// fence (`membarrier`), so a missing fence shows here as a fenced
    /// sleep that lasts its whole timeout (no other sleep can: the post it
    /// waits for comes microseconds after the sleeper says it is ready).
    /// Every other sleep is unfenced, which a post it missed only lets last
    /// [`UNFENCED_SLEEP`].
    #[test]
    fn a_post_racing_a_sleeper_wakes_it() {
        const ROUNDS: u64 = 20_000;
        let job = format!("wake-race-{}", std::process::id());
        let host = Host::create(0, &job, DEFAULT_ARENA_BYTES, HostTuning::default()).unwrap();
        let (word, ready) = (WORLD_REGION_AT as u64, WORLD_REGION_AT as u64 + 64);
        let address = host.address();
        let poster = std::thread::spawn(move || {
            let arena = ArenaMap::open(0, &job, std::process::id(), address).unwrap();
            let mut noise = Noise(0x9e37_79b9_7f4a_7c15);
            for k in 1..=ROUNDS {
                spin_until("the sleeper's turn", || arena.load(ready).unwrap() == k);
                noise.spin();
                arena.store(word, k).unwrap();
            }
        });
        let mut noise = Noise(0x2545_f491_4f6c_dd1d);
        let (mut slept_through, mut fenced_sleeps) = (0, 0);
        for k in 1..=ROUNDS {
            host.own.set(ready, k).unwrap();
            noise.spin();
            host.fence_next.set(k % 2 == 0);
            let ticket = host.prepare_park();
            if host.own.load(word).unwrap() == k {
                host.cancel_park();
                continue;
            }
            fenced_sleeps += u32::from(host.fenced.get());
            let asleep = Instant::now();
            host.park(ticket, Duration::from_secs(2));
            if asleep.elapsed() >= Duration::from_secs(1) {
                slept_through += 1;
            }
            spin_until("the post", || host.own.load(word).unwrap() == k);
        }
        poster.join().unwrap();
        assert_eq!(slept_through, 0, "posts slept through in {ROUNDS} rounds");
        if membarrier::registered() {
            assert!(fenced_sleeps > 0, "no fenced sleep in {ROUNDS} rounds");
        }
    }

    /// A sleep that ends unrung (its timeout, or a spurious wake) is
    /// followed by a fenced one where the kernel has the fence; one that a
    /// post rang, by an unfenced one again.
    #[test]
    fn only_a_sleep_after_an_unrung_one_is_fenced() {
        let job = format!("sleep-kinds-{}", std::process::id());
        let host = Host::create(0, &job, DEFAULT_ARENA_BYTES, HostTuning::default()).unwrap();
        let ticket = host.prepare_park();
        assert!(!host.fenced.get());
        host.park(ticket, Duration::from_millis(1));
        let ticket = host.prepare_park();
        assert_eq!(host.fenced.get(), membarrier::registered());
        host.own.wake();
        host.park(ticket, Duration::from_secs(2));
        host.prepare_park();
        assert!(!host.fenced.get());
        host.cancel_park();
    }

    /// Spins until `done`; panics past 30 s, so that a side that died
    /// fails the test instead of hanging it.
    fn spin_until(what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "waited 30 s for {what}"
            );
            std::hint::spin_loop();
        }
    }

    /// A few hundred nanoseconds of spinning or none, varied round to round
    /// (xorshift), so that posts land at every point of the sleeper's steps.
    struct Noise(u64);

    impl Noise {
        fn spin(&mut self) {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            for _ in 0..self.0 % 64 {
                std::hint::spin_loop();
            }
        }
    }
}
