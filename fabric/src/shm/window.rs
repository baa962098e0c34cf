//! Windows of the shm provider: one segment each, a page of header (owner,
//! length, live/freed state; in window 0 also the process's doorbell) then
//! the exposed bytes. Keys are `S | id | len`.

use std::sync::atomic::Ordering;

use super::segment::Segment;
use crate::bounds::{check_bounds, check_word};
use crate::{Error, LocalWindow, Rank, RemoteKey, Result};

pub(crate) const HEADER_BYTES: usize = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"CATENAW1");
const MAGIC_AT: usize = 0;
const ID_AT: usize = 8;
const LEN_AT: usize = 16;
const STATE_AT: usize = 24;
/// Bumped by whoever must wake this process (window 0 only).
pub(crate) const DOORBELL_AT: usize = 64;
/// Non-zero while this process is about to sleep on its doorbell.
pub(crate) const SLEEPERS_AT: usize = 68;
const LIVE: u64 = 1;
const FREED: u64 = 2;
const KEY_TAG: u8 = b'S';
const KEY_LEN: usize = 17;

pub(crate) fn segment_name(job: &str, rank: Rank, id: u32) -> String {
    super::segment::name(job, &format!("r{rank}-w{id}"))
}

/// A decoded shm key: whose window, which one, how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShmKey {
    pub owner: Rank,
    pub id: u32,
    pub len: usize,
}

impl ShmKey {
    pub(crate) fn encode(self) -> RemoteKey {
        let mut bytes = [0u8; KEY_LEN];
        bytes[0] = KEY_TAG;
        bytes[1..5].copy_from_slice(&self.owner.to_le_bytes());
        bytes[5..9].copy_from_slice(&self.id.to_le_bytes());
        bytes[9..17].copy_from_slice(&(self.len as u64).to_le_bytes());
        RemoteKey::from_bytes(&bytes).expect("shm keys are short")
    }

    /// Decodes a key meant for a window of `target`: a key of another
    /// rank's window is refused, so a misdirected put writes nothing.
    pub(crate) fn decode(key: &RemoteKey, target: Rank) -> Result<ShmKey> {
        let b = key.as_bytes();
        if b.len() != KEY_LEN || b[0] != KEY_TAG {
            return Err(Error::InvalidKey(format!("not a shm window key: {key:?}")));
        }
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        let len = u64::from_le_bytes(b[9..17].try_into().expect("8 bytes"));
        let decoded = ShmKey {
            owner: word(1),
            id: word(5),
            len: usize::try_from(len).map_err(|_| Error::InvalidKey(format!("length {len}")))?,
        };
        if decoded.owner != target {
            return Err(Error::InvalidKey(format!(
                "a key of rank {}'s window used for rank {target}",
                decoded.owner
            )));
        }
        Ok(decoded)
    }
}

/// A window as the origin of a put sees it: a mapping of the owner's segment.
pub(crate) struct MappedWindow {
    pub segment: Segment,
    pub len: usize,
    /// The owner's control window (with its doorbell); `None` for window 0.
    pub control: Option<std::rc::Rc<MappedWindow>>,
}

impl MappedWindow {
    /// Maps `rank`'s window `id` and checks it is the live window the key named.
    pub(crate) fn open(
        job: &str,
        rank: Rank,
        id: u32,
        key_len: usize,
        control: Option<std::rc::Rc<MappedWindow>>,
    ) -> Result<MappedWindow> {
        let segment = Segment::open(&segment_name(job, rank, id)).map_err(|e| match e {
            Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::WindowFreed { rank }
            }
            e => e,
        })?;
        if segment.mapped_len() < HEADER_BYTES
            || segment.u64_at(MAGIC_AT).load(Ordering::Acquire) != MAGIC
            || segment.u64_at(ID_AT).load(Ordering::Relaxed) != u64::from(id)
        {
            return Err(Error::InvalidKey(format!("rank {rank} has no window {id}")));
        }
        let len = segment.u64_at(LEN_AT).load(Ordering::Relaxed) as usize;
        // The owner's header is trusted no further than its mapping: a length
        // near usize::MAX must not wrap the end of the window back inside it.
        let fits = len
            .checked_add(HEADER_BYTES)
            .is_some_and(|end| end <= segment.mapped_len());
        if len != key_len || !fits {
            return Err(Error::InvalidKey(format!(
                "key says {key_len} bytes but rank {rank}'s window {id} has {len}"
            )));
        }
        Ok(MappedWindow {
            segment,
            len,
            control,
        })
    }

    pub(crate) fn is_live(&self) -> bool {
        self.segment.u64_at(STATE_AT).load(Ordering::Acquire) == LIVE
    }

    pub(crate) fn data(&self) -> *mut u8 {
        // SAFETY: the segment is at least HEADER_BYTES long (checked in open).
        unsafe { self.segment.base().add(HEADER_BYTES) }
    }

    /// The signal or atomic word at `offset` of the data area, checked.
    pub(crate) fn word(&self, offset: usize) -> Result<&std::sync::atomic::AtomicU64> {
        check_word(offset, self.len)?;
        Ok(self.segment.u64_at(HEADER_BYTES + offset))
    }

    /// Copies `data` to `offset` of the data area, checked against the length
    /// the owner published.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_bounds(offset, data.len(), self.len)?;
        // SAFETY: the range lies inside the owner's data area; `data` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.data().add(offset), data.len())
        };
        Ok(())
    }

    /// The doorbell and sleeper flag of the owner.
    pub(crate) fn doorbell(
        &self,
    ) -> (&std::sync::atomic::AtomicU32, &std::sync::atomic::AtomicU32) {
        let control = self.control.as_deref().unwrap_or(self);
        (
            control.segment.u32_at(DOORBELL_AT),
            control.segment.u32_at(SLEEPERS_AT),
        )
    }
}

/// A window this process exposes.
pub struct ShmWindow {
    owner: Rank,
    id: u32,
    len: usize,
    segment: Segment,
}

impl ShmWindow {
    /// Creates window `id` of `rank` in job `job`: a segment of `len` zeroed
    /// bytes after a header, marked live for peers to map.
    pub fn create(job: &str, rank: Rank, id: u32, len: usize) -> Result<ShmWindow> {
        crate::bounds::check_window_len(len)?;
        let segment = Segment::create(&segment_name(job, rank, id), HEADER_BYTES + len)?;
        segment
            .u64_at(ID_AT)
            .store(u64::from(id), Ordering::Relaxed);
        segment.u64_at(LEN_AT).store(len as u64, Ordering::Relaxed);
        segment.u64_at(STATE_AT).store(LIVE, Ordering::Relaxed);
        segment.u64_at(MAGIC_AT).store(MAGIC, Ordering::Release);
        Ok(ShmWindow {
            owner: rank,
            id,
            len,
            segment,
        })
    }

    /// The segment behind the window, header included.
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    fn check(&self, offset: usize, len: usize) -> Result<*mut u8> {
        check_bounds(offset, len, self.len)?;
        // SAFETY: in bounds of the data area, checked above.
        Ok(unsafe { self.segment.base().add(HEADER_BYTES + offset) })
    }
}

impl LocalWindow for ShmWindow {
    fn key(&self) -> RemoteKey {
        ShmKey {
            owner: self.owner,
            id: self.id,
            len: self.len,
        }
        .encode()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let src = self.check(offset, buf.len())?;
        // SAFETY: `src..src+len` is inside the mapping; `buf` is private memory.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let dst = self.check(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn signal(&self, offset: usize) -> Result<u64> {
        check_word(offset, self.len)?;
        Ok(self
            .segment
            .u64_at(HEADER_BYTES + offset)
            .load(Ordering::Acquire))
    }

    fn set_signal(&self, offset: usize, value: u64) -> Result<()> {
        check_word(offset, self.len)?;
        self.segment
            .u64_at(HEADER_BYTES + offset)
            .store(value, Ordering::Release);
        Ok(())
    }
}

impl Drop for ShmWindow {
    fn drop(&mut self) {
        // Peers that still map the segment see the state and refuse to put.
        self.segment
            .u64_at(STATE_AT)
            .store(FREED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window whose owner (or another local user) wrote a length near
    /// `usize::MAX` into its header is refused by a peer that maps it: the
    /// end of the window must not wrap back inside the mapping.
    #[test]
    fn a_header_claiming_a_huge_length_is_refused() {
        let job = crate::shm::segment::new_job_id();
        let window = ShmWindow::create(&job, 0, 1, 64).unwrap();
        window
            .segment()
            .u64_at(LEN_AT)
            .store(u64::MAX, Ordering::Relaxed);
        let opened = MappedWindow::open(&job, 0, 1, usize::MAX, None);
        assert!(
            matches!(opened, Err(Error::InvalidKey(_))),
            "{:?}",
            opened.err()
        );
        let len = (usize::MAX - HEADER_BYTES + 1) as u64;
        window
            .segment()
            .u64_at(LEN_AT)
            .store(len, Ordering::Relaxed);
        let opened = MappedWindow::open(&job, 0, 1, len as usize, None);
        assert!(
            matches!(opened, Err(Error::InvalidKey(_))),
            "{:?}",
            opened.err()
        );
    }

    #[test]
    fn windows_past_the_limit_are_not_made() {
        let job = crate::shm::segment::new_job_id();
        let made = ShmWindow::create(&job, 0, 1, usize::MAX);
        assert!(matches!(made, Err(Error::WindowTooLarge { .. })));
        assert!(crate::shm::segment::job_segments(&job).is_empty());
    }
}
