//! Host memory in the simulator: each rank's regions are plain memory (kept
//! with the simulator's windows). A write or store into a peer's region
//! lands as a put at its arrival under the [`HostModel`] and polls the peer;
//! into the rank's own, at once. A read is charged to the reader and sees
//! the memory as it is then.

use std::cell::RefCell;
use std::rc::Rc;

use catena_fabric::{Error, HostMemory, HostRegion, Rank, Result, Time};

use super::memory::Memory;
use super::window::{check_bounds, check_word};
use super::{Action, Sim, SimRank, WindowMemory};

/// What host memory costs, LogGP-like: a write or store of k bytes costs
/// its rank o + k G and lands L later; a read of a peer's k bytes costs o
/// + k G. Loads of words cost nothing (a rank spinning on its own line).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostModel {
    /// o: CPU time of one write, store or read, in nanoseconds.
    pub overhead_ns: f64,
    /// L: from a store until the peer sees it (a cache line crossing).
    pub latency_ns: f64,
    /// G: time per byte copied.
    pub per_byte_ns: f64,
}

impl Default for HostModel {
    /// A placeholder of the same order as a current x86 server: 20 ns a
    /// store, 100 ns a cache line crossing, 10 GB/s a copy.
    fn default() -> HostModel {
        HostModel {
            overhead_ns: 20.0,
            latency_ns: 100.0,
            per_byte_ns: 0.1,
        }
    }
}

impl std::fmt::Display for HostModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "host memory o = {} ns, L = {} ns, G = {:.3} ns/B",
            self.overhead_ns, self.latency_ns, self.per_byte_ns
        )
    }
}

/// Host regions are windows of these ids: region i of a rank is window
/// `REGION_WINDOWS + i`, at offset `i << 32` of the rank's (virtual) arena.
const REGION_WINDOWS: u64 = 1 << 48;
/// The world's region: region 0 of every rank.
const WORLD_REGION: u64 = 0;

fn split(at: u64) -> (u64, usize) {
    (REGION_WINDOWS + (at >> 32), (at & 0xffff_ffff) as usize)
}

impl SimRank<'_> {
    /// How many times this rank offered its memory to single copies.
    pub fn offers_made(&self) -> u64 {
        self.sim().state(self.rank_id()).next_offer.get()
    }

    fn region(&self, owner: Rank, at: u64) -> Result<(u64, usize, WindowMemory)> {
        let (window, offset) = split(at);
        let memory = self.sim().windows.borrow().get(&(owner, window)).cloned();
        match memory {
            Some(memory) => Ok((window, offset, memory)),
            None => Err(Error::OutOfBounds {
                offset: at as usize,
                len: 0,
                window_len: 0,
            }),
        }
    }

    /// Charges this rank for copying `bytes`; the time it has taken.
    fn charge(&self, bytes: usize) -> Time {
        let model = self.sim().host_model;
        let clock = &self.sim().state(self.rank_id()).clock;
        let cost = model.overhead_ns + bytes as f64 * model.per_byte_ns;
        clock.set(clock.get() + cost.round() as u64);
        Time(clock.get())
    }

    /// Writes `data` at `at` of `owner`'s region: at once into this rank's
    /// own memory, else as a put landing a crossing later.
    fn host_put(&self, owner: Rank, at: u64, data: &[u8], publishes: bool) -> Result<()> {
        let sim = self.sim();
        let _call = sim.call(self.rank_id());
        let (window, offset, memory) = self.region(owner, at)?;
        check_bounds(offset, data.len(), memory.borrow().len())?;
        let done = self.charge(data.len());
        if owner == self.rank_id() {
            memory.borrow_mut().write(offset, data);
            return Ok(());
        }
        let at = Time(done.0 + sim.host_model.latency_ns.round() as u64);
        let at = sim.put_lands(self.rank_id(), owner, at, publishes);
        let data = sim.as_transport(|| data.to_vec());
        sim.schedule(
            at,
            Action::Put {
                to: owner,
                window,
                offset,
                data,
                signal: None,
            },
        );
        Ok(())
    }

    /// Makes region `id` of `owner`, `len` bytes, unless it exists.
    fn new_region(&self, owner: Rank, id: u64, len: usize) -> Result<HostRegion> {
        let sim = self.sim();
        let _call = sim.call(self.rank_id());
        if len > u32::MAX as usize {
            return Err(Error::ArenaFull {
                requested: len as u64,
                arena: u32::MAX as u64,
            });
        }
        let key = (owner, REGION_WINDOWS + id);
        if !sim.windows.borrow().contains_key(&key) {
            let mut memory = Memory::zeroed(len.max(8)).ok_or_else(|| Error::Io {
                context: format!("a simulated host region of {len} bytes"),
                source: std::io::ErrorKind::OutOfMemory.into(),
            })?;
            memory.set_word(0, 1);
            sim.as_transport(|| {
                sim.windows
                    .borrow_mut()
                    .insert(key, Rc::new(RefCell::new(memory)))
            });
            sim.hold(owner, len as u64);
        }
        Ok(HostRegion {
            at: id << 32,
            len: len as u64,
        })
    }
}

impl HostMemory for SimRank<'_> {
    type HostPeer = Rank;

    /// The defaults unless the run was given others
    /// (`Sim::with_host_tuning`): the simulator's cost model, not a
    /// machine, decides what the thresholds cost.
    fn host_tuning(&self) -> catena_fabric::config::HostTuning {
        self.sim().host_tuning
    }

    fn host_ranks(&self) -> &[Rank] {
        let sim = self.sim();
        let placement = sim.placement;
        let all = sim.all_ranks.get_or_init(|| {
            sim.as_transport(|| {
                let mut all: Vec<Rank> = (0..sim.size()).collect();
                all.sort_by_key(|&r| placement.host(r));
                all
            })
        });
        let host = placement.host(self.rank_id());
        let first = all.partition_point(|&r| placement.host(r) < host);
        let end = all.partition_point(|&r| placement.host(r) <= host);
        &all[first..end]
    }

    fn host_alloc(&self, len: usize, _reset: usize) -> Result<HostRegion> {
        let regions = &self.sim().state(self.rank_id()).host_regions;
        let id = regions.get() + 1;
        regions.set(id);
        self.new_region(self.rank_id(), id, len)
    }

    fn host_world_region(&self, len: usize) -> Option<HostRegion> {
        let state = self.sim().state(self.rank_id());
        if state.world_region.replace(true) {
            return None;
        }
        // A real arena holds the world's region from the start, so a peer
        // may store into it before its owner asks for it: the first rank
        // of a host to ask makes everyone's.
        for &rank in self.host_ranks() {
            self.new_region(rank, WORLD_REGION, len).ok()?;
        }
        Some(HostRegion {
            at: WORLD_REGION << 32,
            len: len as u64,
        })
    }

    fn host_release(&self, region: HostRegion) {
        let sim = self.sim();
        let (window, _) = split(region.at);
        let key = (self.rank_id(), window);
        let unused = sim
            .windows
            .borrow()
            .get(&key)
            .is_some_and(|m| m.borrow().word(0) == 0);
        // A region someone still counts as used stays until the run ends:
        // their late puts land in it, as in a real arena.
        if unused {
            sim.as_transport(|| sim.windows.borrow_mut().remove(&key));
            sim.release(self.rank_id(), region.len);
        }
    }

    fn host_peer(&self, rank: Rank) -> Result<Rank> {
        if rank >= self.sim().size() {
            return Err(Error::InvalidRank {
                rank,
                size: self.sim().size(),
            });
        }
        let placement = self.sim().placement;
        if placement.host(rank) != placement.host(self.rank_id()) {
            return Err(Error::NotOnHost { rank });
        }
        Ok(rank)
    }

    fn host_write(&self, peer: &Rank, at: u64, data: &[u8]) -> Result<()> {
        self.host_put(*peer, at, data, false)
    }

    fn host_read(&self, peer: &Rank, at: u64, buf: &mut [u8]) -> Result<()> {
        let _call = self.sim().call(self.rank_id());
        let (_, offset, memory) = self.region(*peer, at)?;
        let memory = memory.borrow();
        check_bounds(offset, buf.len(), memory.len())?;
        memory.read(offset, buf);
        if *peer != self.rank_id() {
            self.charge(buf.len());
        }
        Ok(())
    }

    fn host_store(&self, peer: &Rank, at: u64, value: u64) -> Result<()> {
        check_word(at as usize & 0xffff_ffff, usize::MAX)?;
        self.host_put(*peer, at, &value.to_le_bytes(), true)
    }

    fn host_set(&self, peer: &Rank, at: u64, value: u64) -> Result<()> {
        self.host_store(peer, at, value)
    }

    fn host_load(&self, peer: &Rank, at: u64) -> Result<u64> {
        let (_, offset, memory) = self.region(*peer, at)?;
        let memory = memory.borrow();
        check_word(offset, memory.len())?;
        Ok(memory.word(offset))
    }

    fn host_add(&self, peer: &Rank, at: u64, value: u64) -> Result<u64> {
        let (_, offset, memory) = self.region(*peer, at)?;
        let mut memory = memory.borrow_mut();
        check_word(offset, memory.len())?;
        let old = memory.word(offset);
        memory.set_word(offset, old.wrapping_add(value));
        Ok(old)
    }

    /// The simulator keeps a copy of what is offered (it costs the offering
    /// rank nothing, as a real offer of an address does not).
    fn host_offer(&self, data: &[u8]) -> Option<u64> {
        let sim = self.sim();
        if !sim.single_copy {
            return None;
        }
        let state = sim.state(self.rank_id());
        let handle = state.next_offer.get();
        state.next_offer.set(handle + 1);
        sim.as_transport(|| state.offers.borrow_mut().push((handle, data.into())));
        Some(handle)
    }

    fn host_withdraw(&self, handle: u64) {
        let sim = self.sim();
        let state = sim.state(self.rank_id());
        sim.as_transport(|| state.offers.borrow_mut().retain(|(h, _)| *h != handle));
    }

    /// Charged as a read of a peer's memory.
    fn host_copy_from(&self, peer: &Rank, handle: u64, at: u64, buf: &mut [u8]) -> Result<bool> {
        let _call = self.sim().call(self.rank_id());
        let sim = self.sim();
        if sim.single_copy_refused.contains(&self.rank_id()) {
            return Ok(false);
        }
        if sim.single_copy_failing.contains(&self.rank_id()) {
            return Err(Error::Protocol(format!(
                "rank {}'s copy from rank {peer}'s offer {handle} fails (by the simulation's \
                 choice)",
                self.rank_id()
            )));
        }
        let offers = sim.state(*peer).offers.borrow();
        let Some((_, data)) = offers.iter().find(|(h, _)| *h == handle) else {
            return Err(Error::Protocol(format!(
                "rank {peer} holds no offer {handle} to copy from"
            )));
        };
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        check_bounds(at, buf.len(), data.len())?;
        buf.copy_from_slice(&data[at..at + buf.len()]);
        self.charge((buf.len() as f64 * sim.single_copy_factor).round() as usize);
        Ok(true)
    }
}

/// Forgets every rank's host regions: a run starts with fresh arenas.
pub(super) fn reset(sim: &Sim) {
    sim.windows
        .borrow_mut()
        .retain(|&(_, window), _| window < REGION_WINDOWS);
    for state in &sim.ranks {
        state.world_region.set(false);
        state.host_regions.set(0);
        state.offers.borrow_mut().clear();
    }
}
