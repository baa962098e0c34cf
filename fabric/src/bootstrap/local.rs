//! The local launcher's bootstrap: one job segment (shared memory with no
//! name) that the launcher creates and its ranks inherit, holding a slot per
//! rank for its published entry, an arrival counter (a futex) for
//! barriers, and the launcher's failure flag.

use std::cell::Cell;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{BarrierTicket, Bootstrap, LaunchEnv, Placement};
use crate::os::futex;
use crate::os::segment::Segment;
use crate::{Error, Rank, Result};

const MAGIC: u64 = u64::from_le_bytes(*b"CATENAJ1");
const MAGIC_AT: usize = 0;
const SIZE_AT: usize = 8;
/// 0 while healthy, failed rank + 1 once the launcher saw a rank fail.
const FAILED_AT: usize = 64;
const ARRIVALS_AT: usize = 128;
const SLOTS_AT: usize = 4096;
// UCX worker addresses with several transports run to hundreds of bytes.
const SLOT_BYTES: usize = 4096;
const SLOT_DATA: usize = SLOT_BYTES - 8;
/// Longest sleep between checks of the failure flag.
const SLICE: Duration = Duration::from_millis(50);

/// The shared job segment as one rank (or the launcher, which creates it and
/// raises the failure flag) sees it; the launcher keeps it for the job's life.
pub struct JobSegment {
    segment: Segment,
    size: u32,
}

impl JobSegment {
    /// Creates the segment of a job of `size` ranks; called by the launcher
    /// before it starts the ranks, which inherit the returned descriptor.
    pub fn create(size: u32) -> Result<(JobSegment, OwnedFd)> {
        let (segment, fd) = Segment::create(Self::bytes(size))?;
        segment
            .u64_at(SIZE_AT)
            .store(u64::from(size), Ordering::Relaxed);
        segment.u64_at(MAGIC_AT).store(MAGIC, Ordering::Release);
        Ok((JobSegment { segment, size }, fd))
    }

    /// Maps the segment the launcher created and left at descriptor `fd`;
    /// fails with `Bootstrap` if it is not there or was made for another
    /// number of ranks.
    pub fn inherit(fd: RawFd, size: u32) -> Result<JobSegment> {
        let segment = Segment::adopt(fd, Self::bytes(size)).map_err(|e| {
            Error::Bootstrap(format!(
                "no job segment of {size} ranks at descriptor {fd} ({e}); \
                 was this process started by the launcher?"
            ))
        })?;
        if segment.u64_at(MAGIC_AT).load(Ordering::Acquire) != MAGIC
            || segment.u64_at(SIZE_AT).load(Ordering::Relaxed) != u64::from(size)
        {
            return Err(Error::Bootstrap(format!(
                "the job segment at descriptor {fd} does not describe {size} ranks"
            )));
        }
        Ok(JobSegment { segment, size })
    }

    fn bytes(size: u32) -> usize {
        SLOTS_AT + size as usize * SLOT_BYTES
    }

    /// Marks the job failed because of `rank` and wakes everyone in a barrier.
    pub fn mark_failed(&self, rank: Rank) {
        let _ = self.segment.u32_at(FAILED_AT).compare_exchange(
            0,
            rank + 1,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        futex::wake(self.arrivals(), i32::MAX);
    }

    /// The rank the launcher reported failed, if any.
    pub fn failed_rank(&self) -> Option<Rank> {
        match self.segment.u32_at(FAILED_AT).load(Ordering::Acquire) {
            0 => None,
            r => Some(r - 1),
        }
    }

    fn arrivals(&self) -> &std::sync::atomic::AtomicU32 {
        self.segment.u32_at(ARRIVALS_AT)
    }

    fn arrive(&self) {
        self.arrivals().fetch_add(1, Ordering::SeqCst);
        futex::wake(self.arrivals(), i32::MAX);
    }

    /// Whether `target` arrivals were counted.
    fn arrived(&self, target: u32) -> Result<bool> {
        if self.arrivals().load(Ordering::SeqCst) >= target {
            return Ok(true);
        }
        match self.failed_rank() {
            Some(rank) => Err(Error::PeerGone { rank }),
            None => Ok(false),
        }
    }

    /// Arrives once and sleeps until `target` arrivals were counted.
    fn arrive_and_wait(&self, target: u32, timeout: Duration) -> Result<()> {
        self.arrive();
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.arrivals().load(Ordering::SeqCst);
            if self.arrived(target)? {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: "the bootstrap barrier",
                });
            }
            futex::wait(self.arrivals(), seen, (deadline - now).min(SLICE));
        }
    }

    fn slot(&self, rank: Rank) -> *mut u8 {
        assert!(
            rank < self.size,
            "slot of rank {rank} in a job of {}",
            self.size
        );
        // SAFETY: rank < size, and the segment holds `size` slots (checked).
        unsafe {
            self.segment
                .base()
                .add(SLOTS_AT + rank as usize * SLOT_BYTES)
        }
    }
}

/// Bootstrap of a rank started by the launcher (or of a job of one).
pub struct LocalBootstrap {
    job: String,
    rank: Rank,
    size: u32,
    local_size: u32,
    segment: JobSegment,
    rounds: Cell<u32>,
}

impl LocalBootstrap {
    /// Joins the job the launcher described in `env` through its segment.
    /// `job_fd` is where it inherited the segment.
    pub fn from_launch_env(env: &LaunchEnv, job_fd: RawFd) -> Result<LocalBootstrap> {
        Ok(LocalBootstrap {
            segment: JobSegment::inherit(job_fd, env.size)?,
            job: env.job.clone(),
            rank: env.rank,
            size: env.size,
            local_size: env.local_size,
            rounds: Cell::new(0),
        })
    }

    /// A job of one, for a program started without the launcher.
    pub fn singleton() -> Result<LocalBootstrap> {
        Ok(LocalBootstrap {
            segment: JobSegment::create(1)?.0,
            job: crate::bootstrap::new_job_id(),
            rank: 0,
            size: 1,
            local_size: 1,
            rounds: Cell::new(0),
        })
    }

    fn next_round(&self) -> u32 {
        let round = self.rounds.get() + 1;
        self.rounds.set(round);
        round * self.size
    }
}

impl Bootstrap for LocalBootstrap {
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
        if self.rounds.get() != 0 {
            return Err(Error::Bootstrap(
                "the entry is published once, before any barrier".into(),
            ));
        }
        if mine.len() > SLOT_DATA {
            return Err(Error::Bootstrap(format!(
                "an entry of {} bytes exceeds {SLOT_DATA}",
                mine.len()
            )));
        }
        let slot = self.segment.slot(self.rank);
        // SAFETY: our own slot, in bounds; peers read it only after the barrier.
        unsafe {
            std::ptr::copy_nonoverlapping((mine.len() as u64).to_le_bytes().as_ptr(), slot, 8);
            std::ptr::copy_nonoverlapping(mine.as_ptr(), slot.add(8), mine.len());
        }
        self.segment.arrive_and_wait(self.next_round(), timeout)?;
        // The local launcher starts every rank on its own host.
        Ok(Placement {
            hosts: 1,
            local_ranks: (0..self.size).collect(),
        })
    }

    fn lookup(&self, rank: Rank, _timeout: Duration) -> Result<Vec<u8>> {
        super::lookup_allowed(self.rounds.get() != 0, rank, self.size)?;
        let slot = self.segment.slot(rank);
        let mut len = [0u8; 8];
        // SAFETY: every slot was written before its owner arrived at the
        // publishing barrier, which this rank passed.
        unsafe { std::ptr::copy_nonoverlapping(slot, len.as_mut_ptr(), 8) };
        let len = u64::from_le_bytes(len) as usize;
        if len > SLOT_DATA {
            return Err(Error::Bootstrap(format!(
                "rank {rank} published a corrupt entry"
            )));
        }
        let mut data = vec![0u8; len];
        // SAFETY: as above, and len is within the slot.
        unsafe { std::ptr::copy_nonoverlapping(slot.add(8), data.as_mut_ptr(), len) };
        Ok(data)
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        if self.rounds.get() == 0 {
            return Err(Error::Bootstrap(
                "a barrier before the entries are published".into(),
            ));
        }
        let target = self.next_round();
        self.segment.arrive();
        Ok(BarrierTicket(u64::from(target)))
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        self.segment.arrived(ticket.0 as u32)
    }

    fn failed_rank(&self) -> Option<Rank> {
        self.segment.failed_rank()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, IntoRawFd};

    #[test]
    fn a_rank_inherits_only_a_job_segment_of_its_size() {
        let (launcher, fd) = JobSegment::create(3).unwrap();
        let wrong_size = JobSegment::inherit(fd.as_raw_fd(), 2);
        assert!(matches!(wrong_size, Err(Error::Bootstrap(_))));
        assert!(matches!(
            JobSegment::inherit(0, 3),
            Err(Error::Bootstrap(_))
        ));
        assert!(matches!(
            JobSegment::inherit(-1, 3),
            Err(Error::Bootstrap(_))
        ));
        let rank = JobSegment::inherit(fd.into_raw_fd(), 3).unwrap();
        launcher.mark_failed(2);
        assert_eq!(rank.failed_rank(), Some(2));
    }
}
