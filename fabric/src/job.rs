//! What every provider needs from the job besides its own fabric: identity,
//! the bootstrap it was started with (launcher, PMIx, PMI, MPI, or a job of
//! one), the directory of the entries of the peers it contacted (addresses
//! and key secrets), the clock, failure detection and finalize.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::bootstrap::{self, Bootstrap};
use crate::config::{
    env_number, host_tuning, ENV_DIRECTORY_ENTRIES, ENV_HOST_ARENA_BYTES, ENV_SPIN_US,
};
use crate::directory::{Directory, DirectoryUse, Entry, DEFAULT_CACHED_ENTRIES};
use crate::host::{ArenaMap, Host, DEFAULT_ARENA_BYTES};
use crate::key::KeySecret;
use crate::os::process_alive;
use crate::{Error, Rank, Result, Time};

/// How often a wait looks whether a peer's process still exists.
const PEER_CHECK_INTERVAL: Duration = Duration::from_millis(20);
const BOOTSTRAP_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the bootstrap may take to answer a lookup.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(60);

/// This rank's membership in a job, shared by every provider: who it is, its
/// peers' entries (looked up at first contact), the transport clock,
/// failure checks and finalize.
pub struct Job {
    rank: Rank,
    size: u32,
    id: String,
    /// Cores the ranks of this machine share (counted before pinning).
    cores: usize,
    host: u64,
    host_name: String,
    /// How many hosts the job's ranks run on (known once published).
    hosts: u32,
    /// Ranks on this host: the bootstrap's count, then its placement's.
    local_size: u32,
    /// Seals the keys of this rank's windows (see [`KeySecret`]).
    secret: KeySecret,
    epoch: Instant,
    /// `epoch` on the kernel's monotonic clock, in nanoseconds.
    epoch_ns: u64,
    bootstrap: Box<dyn Bootstrap>,
    /// Peers' entries, made when this rank publishes its own.
    directory: Option<Directory>,
    /// This rank's host arena, made when it publishes its entry.
    host_memory: Option<Host>,
    last_peer_check: Cell<Instant>,
    wake_at: Cell<Time>,
    serials: Cell<u64>,
}

impl Job {
    /// Joins the job this process was started into (see
    /// [`bootstrap::from_env`]), or as a job of one. Pins to a core if the
    /// launcher was asked to.
    pub fn from_env() -> Result<Job> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(Job::new(bootstrap::from_env()?, cores))
    }

    /// A job described by `bootstrap`, whose local ranks share `cores` cores.
    pub fn new(bootstrap: Box<dyn Bootstrap>, cores: usize) -> Job {
        let name = host_name();
        Job {
            rank: bootstrap.rank(),
            size: bootstrap.size(),
            id: bootstrap.job_id().to_string(),
            cores,
            host: host_hash(&name),
            host_name: name,
            hosts: 1,
            local_size: bootstrap.local_size(),
            secret: KeySecret::draw(),
            epoch: Instant::now(),
            epoch_ns: crate::os::monotonic_ns(),
            bootstrap,
            directory: None,
            host_memory: None,
            last_peer_check: Cell::new(Instant::now()),
            wake_at: Cell::new(Time::MAX),
            serials: Cell::new(0),
        }
    }

    /// Makes this rank's host arena and publishes it with the provider
    /// `address` and key secret (once); peers' entries are looked up when
    /// first needed.
    pub fn publish(&mut self, address: &[u8]) -> Result<()> {
        let arena_bytes = env_number(ENV_HOST_ARENA_BYTES)?.unwrap_or(DEFAULT_ARENA_BYTES);
        let mut host_memory = Host::create(self.rank, &self.id, arena_bytes, host_tuning()?)?;
        let own = Entry {
            pid: std::process::id(),
            host: self.host,
            secret: self.secret,
            arena: host_memory.address(),
            host_name: self.host_name.as_str().into(),
            address: address.into(),
        };
        let placement = self.bootstrap.publish(&own.encode(), BOOTSTRAP_TIMEOUT)?;
        if !placement.local_ranks.contains(&self.rank)
            || placement.local_ranks.iter().any(|&r| r >= self.size)
        {
            return Err(Error::Bootstrap(format!(
                "the starter placed ranks {:?} on this host, which is rank {}'s of {}",
                placement.local_ranks, self.rank, self.size
            )));
        }
        self.hosts = placement.hosts.max(1);
        self.local_size = placement.local_ranks.len() as u32;
        host_memory.set_ranks(placement.local_ranks);
        self.host_memory = Some(host_memory);
        let capacity = env_number(ENV_DIRECTORY_ENTRIES)?.unwrap_or(DEFAULT_CACHED_ENTRIES);
        self.directory = Some(Directory::new(self.size, self.rank, own, capacity));
        Ok(())
    }

    fn directory(&self) -> Result<&Directory> {
        self.directory
            .as_ref()
            .ok_or_else(|| Error::Bootstrap("this rank has not published its entry yet".into()))
    }

    /// `rank`'s entry: from the directory, else asked of the bootstrap.
    fn entry(&self, rank: Rank) -> Result<Rc<Entry>> {
        self.directory()?
            .entry(rank, || self.bootstrap.lookup(rank, LOOKUP_TIMEOUT))
    }

    /// What this rank's directory of peers holds now.
    pub fn directory_use(&self) -> DirectoryUse {
        self.directory
            .as_ref()
            .map_or_else(DirectoryUse::default, Directory::usage)
    }

    /// The peers whose entries this rank holds, ascending.
    pub fn directory_ranks(&self) -> Vec<Rank> {
        self.directory
            .as_ref()
            .map_or_else(Vec::new, Directory::held_ranks)
    }

    /// This rank's host memory: its arena and its peers' (see
    /// [`crate::HostMemory`]); `Bootstrap` before the entry is published.
    pub fn host_memory(&self) -> Result<&Host> {
        self.host_memory
            .as_ref()
            .ok_or_else(|| Error::Bootstrap("this rank has not published its entry yet".into()))
    }

    /// `rank`'s host arena, mapped on first use.
    pub fn host_peer(&self, rank: Rank) -> Result<Rc<ArenaMap>> {
        self.check_rank(rank)?;
        self.host_memory()?.peer(rank, &self.id, || {
            let entry = self.entry(rank)?;
            if entry.host != self.host {
                return Err(Error::Bootstrap(format!(
                    "rank {rank} was placed on this host but runs on {}",
                    entry.host_name
                )));
            }
            Ok((entry.pid, entry.arena))
        })
    }

    /// How many hosts the job's ranks run on (1 before the exchange).
    pub fn host_count(&self) -> u32 {
        self.hosts
    }

    /// An id of this rank's host, the same for every rank on it (a hash of
    /// the host name).
    pub fn host_id(&self) -> u64 {
        self.host
    }

    /// `Unavailable` naming the hosts when the job spans more than one:
    /// for a provider (`provider`) whose ranks reach only their own host.
    pub fn require_one_host(&self, provider: &str) -> Result<()> {
        if self.hosts <= 1 {
            return Ok(());
        }
        let local = self.host_memory().map_or(0, |host| host.ranks().len());
        Err(Error::Unavailable(Box::new(crate::Unavailable {
            requested: provider.into(),
            why: format!(
                "the job spans {} hosts ({} with {local} of its {} ranks); it reaches only \
                 ranks on its own host",
                self.hosts, self.host_name, self.size
            ),
            available: crate::catalog::NETWORK_PROVIDERS.join(", "),
        })))
    }

    /// This process's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job id shared by every rank.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Nanoseconds since this rank joined: the transport clock of real
    /// providers.
    #[inline]
    pub fn now(&self) -> Time {
        Time::from_duration(self.epoch.elapsed())
    }

    /// [`Job::now`] as of the kernel's last tick (`CLOCK_MONOTONIC_COARSE`,
    /// the same clock, read for a few nanoseconds instead of tens): see
    /// [`crate::Rma::coarse_now`].
    #[inline]
    pub fn coarse_now(&self) -> Time {
        Time(crate::os::coarse_monotonic_ns().saturating_sub(self.epoch_ns))
    }

    /// Whether more ranks share this machine than it has cores, so that a
    /// spinning rank only delays the one it waits for.
    pub fn oversubscribed(&self) -> bool {
        self.local_size as usize > self.cores
    }

    /// Whether every rank of the job runs on this machine.
    pub fn single_node(&self) -> bool {
        self.local_size == self.size
    }

    /// How a waiting rank spins: for `budget`, then on, up to `idle` in
    /// all, while a core is free for every runnable task. `CATENA_SPIN_US`
    /// sets the budget and no more; ranks that outnumber cores spin not at
    /// all (a spinning rank only delays the one it waits for).
    pub fn spin(&self, budget: Duration, idle: Duration) -> Result<Spin> {
        let (budget, idle) = match env_number(ENV_SPIN_US)? {
            Some(us) => (Duration::from_micros(us as u64), Duration::ZERO),
            None if self.oversubscribed() => (Duration::ZERO, Duration::ZERO),
            None => (budget, idle),
        };
        Ok(Spin {
            budget,
            idle,
            cores: self.cores,
        })
    }

    /// The entry `rank` published, its provider address among it.
    pub fn peer(&self, rank: Rank) -> Result<Rc<Entry>> {
        self.entry(rank)
    }

    /// The secret that seals this rank's keys.
    #[cfg_attr(not(any(feature = "ofi", feature = "ucx")), allow(dead_code))]
    pub(crate) fn key_secret(&self) -> KeySecret {
        self.secret
    }

    /// The secret `rank` seals its keys with, as it published it.
    #[cfg_attr(not(any(feature = "ofi", feature = "ucx")), allow(dead_code))]
    pub(crate) fn peer_key_secret(&self, rank: Rank) -> Result<KeySecret> {
        self.directory()?
            .secret(rank, || self.bootstrap.lookup(rank, LOOKUP_TIMEOUT))
    }

    /// `InvalidRank` unless `rank` is in this job.
    pub fn check_rank(&self, rank: Rank) -> Result<()> {
        if rank >= self.size {
            return Err(Error::InvalidRank {
                rank,
                size: self.size,
            });
        }
        Ok(())
    }

    /// `PeerGone` once the bootstrap knows the job lost a rank.
    #[inline]
    pub fn check_health(&self) -> Result<()> {
        match self.bootstrap.failed_rank() {
            Some(rank) => Err(Error::PeerGone { rank }),
            None => Ok(()),
        }
    }

    /// The process id of `rank` (on its own host).
    pub fn pid(&self, rank: Rank) -> Result<u32> {
        Ok(self.entry(rank)?.pid)
    }

    /// `PeerGone` if `rank` runs on this host and its process is gone
    /// (looked at most every 20 ms; across hosts the bootstrap tells).
    pub fn check_peer(&self, rank: Rank) -> Result<()> {
        let now = Instant::now();
        if now.duration_since(self.last_peer_check.get()) < PEER_CHECK_INTERVAL {
            return Ok(());
        }
        self.last_peer_check.set(now);
        let entry = self.entry(rank)?;
        if entry.host != self.host || process_alive(entry.pid as i32) {
            Ok(())
        } else {
            Err(Error::PeerGone { rank })
        }
    }

    /// See [`crate::Rma::next_serial`].
    pub fn next_serial(&self) -> u64 {
        let serial = self.serials.get();
        self.serials.set(serial + 1);
        serial
    }

    /// Records the earliest time a pending wait wants to be polled again.
    #[inline]
    pub fn wake_at(&self, at: Time) {
        self.wake_at.set(self.wake_at.get().min(at));
    }

    /// How long a parking rank may block: until the earliest `wake_at`, at
    /// most `slice`. Resets the recorded wake-up.
    pub fn take_park_timeout(&self, slice: Duration) -> Duration {
        let until = self.wake_at.replace(Time::MAX);
        until.saturating_sub(self.now()).min(slice)
    }

    /// Parks a rank of a provider whose incoming data wakes nothing (a plain
    /// write lands without an event at the target, and with manual progress
    /// even completion data appears only when the rank reads its queue):
    /// sleeps until the earliest `wake_at`, at most `slice`, or only yields
    /// the core when ranks outnumber cores (the rank we wait for may need it).
    pub fn nap(&self, slice: Duration) {
        let timeout = self.take_park_timeout(slice);
        if timeout.is_zero() {
            return;
        }
        if self.oversubscribed() {
            std::thread::yield_now();
        } else {
            std::thread::sleep(timeout);
        }
    }

    /// Arrives at the finalize barrier; `finalize_done` tests it.
    pub fn start_finalize(&self) -> Result<bootstrap::BarrierTicket> {
        self.bootstrap.start_barrier()
    }

    /// Whether every rank has arrived at the finalize barrier of `ticket`;
    /// `PeerGone` if the job lost a rank meanwhile.
    pub fn finalize_done(&self, ticket: bootstrap::BarrierTicket) -> Result<bool> {
        self.bootstrap.barrier_done(ticket)
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .unwrap_or_default()
}

fn host_hash(name: &str) -> u64 {
    // FNV-1a: stable across processes, unlike std's randomly seeded hasher.
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// How a provider's waiting rank spins before it parks (what
/// [`Blocking::spin_budget`](crate::Blocking::spin_budget) and
/// [`Blocking::spin_on`](crate::Blocking::spin_on) answer), from
/// [`Job::spin`].
#[derive(Clone, Copy, Debug)]
pub struct Spin {
    budget: Duration,
    idle: Duration,
    cores: usize,
}

impl Spin {
    /// How long a wait re-polls before it parks, or asks [`Spin::on`].
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Whether a wait that re-polled for `spun` may re-poll on: while it
    /// spun less than the idle budget and no runnable task on this machine
    /// waits for a core (the kernel counts at most this process's cores,
    /// this task among them), so that spinning takes no one's time.
    pub fn on(&self, spun: Duration) -> bool {
        spun < self.idle && crate::os::runnable_tasks().is_some_and(|n| n as usize <= self.cores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin(idle_ms: u64, cores: usize) -> Spin {
        Spin {
            budget: Duration::from_micros(50),
            idle: Duration::from_millis(idle_ms),
            cores,
        }
    }

    #[test]
    fn a_rank_spins_on_only_within_its_idle_budget_and_with_cores_to_spare() {
        // Room for every task there can be: only the idle budget decides.
        let roomy = spin(1, usize::MAX);
        assert!(roomy.on(Duration::ZERO));
        assert!(roomy.on(Duration::from_micros(999)));
        assert!(!roomy.on(Duration::from_millis(1)));
        // No idle budget (CATENA_SPIN_US set, or oversubscribed): never.
        assert!(!spin(0, usize::MAX).on(Duration::ZERO));
        // No core to spare: the caller itself is runnable, so a machine of
        // no cores always has a task waiting.
        assert!(!spin(1, 0).on(Duration::ZERO));
    }
}
