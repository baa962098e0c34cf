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
use crate::os::futex;
use crate::{Error, HostRegion, Rank, Result};

/// The arena's size unless `CATENA_HOST_ARENA_BYTES` says otherwise: virtual
/// memory, whose pages are made only where regions are used.
pub const DEFAULT_ARENA_BYTES: usize = 64 << 20;
/// The region every rank reserves at the same offset for the world's group,
/// so that the world needs no exchange to find it.
pub const WORLD_REGION_BYTES: usize = 1 << 20;

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
        u64::from(self.own.doorbell().load(Ordering::SeqCst))
    }

    /// Sleeps on the doorbell for at most `timeout` unless it moved past
    /// `ticket`.
    pub fn park(&self, ticket: u64, timeout: std::time::Duration) {
        if !timeout.is_zero() {
            futex::wait(self.own.doorbell(), ticket as u32, timeout);
        }
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
