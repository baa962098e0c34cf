//! One process's arena as any process of its host maps it: a header page
//! (magic, owner, length, job, the owner's doorbell, its offers), the
//! world's region at a fixed offset, then the regions the owner hands out.
//! Every access is checked against the arena's length and kept off the
//! header.

use std::cell::OnceCell;
use std::hash::{Hash, Hasher};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use super::offers::{OFFERS_AT, OFFER_SLOTS, SLOT_BYTES};
use super::{ArenaAddress, WORLD_REGION_BYTES};
use crate::bounds::{check_bounds, check_word};
use crate::os::{futex, segment::Segment};
use crate::{Error, Rank, Result};

/// The header page; no region lies in it, so no peer's store reaches it.
pub(crate) const HEADER_BYTES: usize = 4096;
pub(crate) const WORLD_REGION_AT: usize = HEADER_BYTES;
const MAGIC: u64 = u64::from_le_bytes(*b"CATENAH1");
const MAGIC_AT: usize = 0;
const OWNER_AT: usize = 8;
const LEN_AT: usize = 16;
const JOB_AT: usize = 24;
/// Bumped by whoever must wake the owner; its own cache line.
const DOORBELL_AT: usize = 64;
/// Non-zero while the owner is (about to be) asleep on its doorbell.
const SLEEPERS_AT: usize = 68;

/// A mapping of one process's arena.
pub struct ArenaMap {
    segment: Segment,
    rank: Rank,
    /// The owner's pid (a peer's arena only: 0 for this process's own).
    pid: libc::pid_t,
    /// A descriptor of the owner's process, opened on the first copy out
    /// of its memory: it tells whether the process the pid named has
    /// exited since (then the pid may name another process). `None` where
    /// the kernel gives none or this process holds [`MAX_PROCESS_FDS`].
    process: OnceCell<Option<ProcessFd>>,
}

/// The most peer process descriptors one process holds: copies from
/// further peers go through host memory instead, so that a host of many
/// ranks does not spend the descriptors its programs need.
const MAX_PROCESS_FDS: usize = 64;
static PROCESS_FDS: AtomicUsize = AtomicUsize::new(0);

/// One of the [`MAX_PROCESS_FDS`] descriptors.
struct ProcessFd(OwnedFd);

impl ProcessFd {
    fn open(pid: libc::pid_t) -> Option<ProcessFd> {
        PROCESS_FDS
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < MAX_PROCESS_FDS).then_some(n + 1)
            })
            .ok()?;
        match crate::os::pidfd_open(pid) {
            Some(fd) => Some(ProcessFd(fd)),
            None => {
                PROCESS_FDS.fetch_sub(1, Ordering::Relaxed);
                None
            }
        }
    }
}

impl Drop for ProcessFd {
    fn drop(&mut self) {
        PROCESS_FDS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A job's id as the header holds it: arenas of another job are not ours.
fn job_hash(job: &str) -> u64 {
    let mut hasher = rustc_hash::FxHasher::default();
    job.hash(&mut hasher);
    hasher.finish()
}

impl ArenaMap {
    /// Creates `rank`'s arena of `len` bytes (at least the header and the
    /// world's region); its pages are made when first touched.
    pub(crate) fn create(rank: Rank, job: &str, len: usize) -> Result<(ArenaMap, OwnedFd)> {
        let len = len.max(HEADER_BYTES + WORLD_REGION_BYTES);
        crate::bounds::check_window_len(len)?;
        let (segment, fd) = Segment::create_lazy(len)?;
        let header = |at: usize, value: u64| segment.u64_at(at).store(value, Ordering::Relaxed);
        header(OWNER_AT, u64::from(rank));
        header(LEN_AT, len as u64);
        header(JOB_AT, job_hash(job));
        segment.u64_at(MAGIC_AT).store(MAGIC, Ordering::Release);
        let arena = ArenaMap {
            segment,
            rank,
            pid: 0,
            process: OnceCell::new(),
        };
        Ok((arena, fd))
    }

    /// Maps the arena `rank` (process `pid`) published at `address`, if it
    /// is that rank's arena of this job: a memfd of the published length
    /// whose header names the same owner, length and job.
    pub(crate) fn open(rank: Rank, job: &str, pid: u32, address: ArenaAddress) -> Result<ArenaMap> {
        let refused = |why: &str| Error::Protocol(format!("rank {rank}'s host arena: {why}"));
        let len = usize::try_from(address.len)
            .ok()
            .filter(|&len| len >= HEADER_BYTES + WORLD_REGION_BYTES)
            .ok_or_else(|| refused(&format!("a published length of {}", address.len)))?;
        crate::bounds::check_window_len(len)?;
        let Some(segment) = Segment::open_lazy(pid, address.fd, len)? else {
            return Err(match crate::os::process_alive(pid as i32) {
                true => refused("its descriptor is not a sealed segment of its length"),
                false => Error::PeerGone { rank },
            });
        };
        let header_is = |at: usize, value: u64| segment.u64_at(at).load(Ordering::Acquire) == value;
        if !(header_is(MAGIC_AT, MAGIC)
            && header_is(OWNER_AT, u64::from(rank))
            && header_is(LEN_AT, len as u64)
            && header_is(JOB_AT, job_hash(job)))
        {
            return Err(refused("its header names another owner, length or job"));
        }
        Ok(ArenaMap {
            segment,
            rank,
            pid: pid as libc::pid_t,
            process: OnceCell::new(),
        })
    }

    /// The owner's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The arena's length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.segment.mapped_len()
    }

    /// Never: an arena holds at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// `OutOfBounds` unless `len` bytes at `at` lie past the header and
    /// inside the arena; the offset as an index.
    #[inline]
    fn check(&self, at: u64, len: usize) -> Result<usize> {
        let at = usize::try_from(at).unwrap_or(usize::MAX);
        if at < HEADER_BYTES {
            return Err(Error::OutOfBounds {
                offset: at,
                len,
                window_len: self.len(),
            });
        }
        check_bounds(at, len, self.len())?;
        Ok(at)
    }

    #[inline]
    fn word(&self, at: u64) -> Result<&AtomicU64> {
        let at = self.check(at, 8)?;
        check_word(at, self.len())?;
        Ok(self.segment.u64_at(at))
    }

    /// Copies `data` to `at` (a plain store: a flag stored after it
    /// publishes it).
    #[inline]
    pub fn write(&self, at: u64, data: &[u8]) -> Result<()> {
        let at = self.check(at, data.len())?;
        // SAFETY: the range lies inside the mapping (checked); `data` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.segment.base().add(at), data.len())
        };
        Ok(())
    }

    /// Zeroes `len` bytes at `at` (plain stores, as `write`).
    #[inline]
    pub fn zero(&self, at: u64, len: usize) -> Result<()> {
        let at = self.check(at, len)?;
        // SAFETY: as in `write`.
        unsafe { std::ptr::write_bytes(self.segment.base().add(at), 0, len) };
        Ok(())
    }

    /// Copies `buf.len()` bytes at `at` out (after a flag's load that
    /// published them).
    #[inline]
    pub fn read(&self, at: u64, buf: &mut [u8]) -> Result<()> {
        let at = self.check(at, buf.len())?;
        // SAFETY: as in `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(self.segment.base().add(at), buf.as_mut_ptr(), buf.len())
        };
        Ok(())
    }

    /// Asks for the line at `at` in this core's cache ahead of a read
    /// there (nothing where `at` lies outside the arena's data).
    #[inline]
    pub fn prefetch(&self, at: u64) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(at) = self.check(at, 8) {
            // SAFETY: a prefetch reads and writes nothing, and `at` lies
            // inside the mapping anyway.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.segment.base().add(at) as *const i8);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = at;
    }

    /// Stores `value` into the word at `at`, publishing every write before
    /// it, and wakes the owner if it sleeps.
    #[inline]
    pub fn store(&self, at: u64, value: u64) -> Result<()> {
        super::store_for_sleeper(self.word(at)?, value);
        self.wake();
        Ok(())
    }

    /// Stores `value` into the word at `at`, publishing every write before
    /// it (release), and wakes nobody.
    #[inline]
    pub fn set(&self, at: u64, value: u64) -> Result<()> {
        self.word(at)?.store(value, Ordering::Release);
        Ok(())
    }

    /// The word at `at` (acquire: what was written before its store is
    /// visible).
    #[inline]
    pub fn load(&self, at: u64) -> Result<u64> {
        Ok(self.word(at)?.load(Ordering::Acquire))
    }

    /// Copies `buf.len()` bytes from `at` bytes into the owner's offer
    /// `handle` (a slot of the offer table in its header) into `buf` in one
    /// copy; `Ok(false)` where this process cannot, and then `buf` holds
    /// nothing meant.
    pub fn copy_offered(&self, handle: u64, at: u64, buf: &mut [u8]) -> Result<bool> {
        super::offers::copy_offered(self, handle, at, buf, |addr, buf| self.copy_from(addr, buf))
    }

    /// Copies `buf.len()` bytes at address `addr` of the owner's own memory
    /// into `buf` in one copy (Linux's cross-memory attach); `Ok(false)`
    /// where the kernel does not let this process do so (another user, a
    /// ptrace scope that forbids it, no process descriptors) or the owner
    /// exited before the copy ended (what was copied may be another
    /// process's: `buf` holds nothing meant). An address range the owner
    /// does not hold is an error.
    fn copy_from(&self, addr: u64, buf: &mut [u8]) -> Result<bool> {
        if self.pid == 0 {
            return Ok(false);
        }
        // Opened after the mapping was checked to be this pid's arena, and
        // while the owner is in the call that offered the memory: the
        // descriptor names the arena's owner.
        let Some(process) = self.process.get_or_init(|| ProcessFd::open(self.pid)) else {
            return Ok(false);
        };
        let mut done = 0;
        while done < buf.len() {
            let rest = &mut buf[done..];
            let local = libc::iovec {
                iov_base: rest.as_mut_ptr().cast(),
                iov_len: rest.len(),
            };
            let remote = libc::iovec {
                iov_base: (addr as usize).wrapping_add(done) as *mut libc::c_void,
                iov_len: rest.len(),
            };
            // SAFETY: the kernel writes at most `rest.len()` bytes into
            // `rest`, ours; the remote range is checked by the kernel
            // against the owner's mappings (EFAULT), never dereferenced here.
            let n = unsafe { libc::process_vm_readv(self.pid, &local, 1, &remote, 1, 0) };
            match n {
                n if n > 0 => done += n as usize,
                0 => return Err(self.not_held(addr, buf.len())),
                _ => {
                    let e = std::io::Error::last_os_error();
                    return match e.raw_os_error() {
                        Some(libc::EFAULT) => Err(self.not_held(addr, buf.len())),
                        Some(libc::EPERM | libc::ENOSYS | libc::ESRCH) => Ok(false),
                        _ => Err(Error::io(
                            format!("copying from rank {}'s memory", self.rank),
                            e,
                        )),
                    };
                }
            }
        }
        Ok(!crate::os::pidfd_exited(&process.0))
    }

    fn not_held(&self, addr: u64, len: usize) -> Error {
        Error::Protocol(format!(
            "rank {} offered {len} bytes at {addr:#x}, which it does not hold",
            self.rank
        ))
    }

    /// Adds `value` to the word at `at` (wrapping); yields the old value and
    /// wakes the owner if it sleeps.
    #[inline]
    pub fn add(&self, at: u64, value: u64) -> Result<u64> {
        let old = self.word(at)?.fetch_add(value, Ordering::SeqCst);
        self.wake();
        Ok(old)
    }

    /// Rings the owner's doorbell if it is (about to be) asleep.
    #[inline]
    pub fn wake(&self) {
        if self.sleepers().load(Ordering::SeqCst) != 0 {
            self.doorbell().fetch_add(1, Ordering::SeqCst);
            futex::wake(self.doorbell(), 1);
        }
    }

    #[inline]
    pub(crate) fn doorbell(&self) -> &AtomicU32 {
        self.segment.u32_at(DOORBELL_AT)
    }

    #[inline]
    pub(crate) fn sleepers(&self) -> &AtomicU32 {
        self.segment.u32_at(SLEEPERS_AT)
    }

    /// The words of offer slot `slot` (below [`OFFER_SLOTS`]) in the
    /// header: generation, address, length (see [`super::offers`]).
    pub(super) fn offer_slot(&self, slot: usize) -> [&AtomicU64; 3] {
        assert!(slot < OFFER_SLOTS, "offer slot {slot} of {OFFER_SLOTS}");
        let at = OFFERS_AT + slot * SLOT_BYTES;
        [0, 8, 16].map(|word| self.segment.u64_at(at + word))
    }
}
