//! Windows of the shm provider: one segment each, a page of header (owner,
//! id, length, tag, live/freed state; in window 0 also the process's doorbell
//! and tag key) then the exposed bytes. Keys are `S | owner | id | len | fd |
//! tag`, the tag a keyed hash of the rest that only the owner can make.

use std::hash::Hasher;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use siphasher::sip::SipHasher24;

use super::segment::Segment;
use crate::bounds::{check_bounds, check_word, MAX_WINDOW_BYTES};
use crate::{Error, LocalWindow, Rank, RemoteKey, Result};

pub(crate) const HEADER_BYTES: usize = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"CATENAW2");
const MAGIC_AT: usize = 0;
const ID_AT: usize = 8;
const LEN_AT: usize = 16;
const STATE_AT: usize = 24;
const OWNER_AT: usize = 32;
const TAG_AT: usize = 40;
/// Bumped by whoever must wake this process (window 0 only).
pub(crate) const DOORBELL_AT: usize = 64;
/// Non-zero while this process is about to sleep on its doorbell.
pub(crate) const SLEEPERS_AT: usize = 68;
/// The owner's [`TagKey`] (window 0 only), for peers to check keys with.
const TAG_KEY_AT: usize = 80;
const LIVE: u64 = 1;
const FREED: u64 = 2;
const KEY_TAG: u8 = b'S';
const KEY_LEN: usize = 29;

/// A process's secret for the tags of its windows' keys, drawn at start.
/// Peers read it from the owner's control window: the tag makes keys
/// impossible to get wrong by accident or corruption (a flipped bit, a key
/// of a freed window whose descriptor number came back), not secret from
/// the job's ranks, who share the owner's user anyway.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TagKey(u64, u64);

impl TagKey {
    pub(crate) fn random() -> TagKey {
        TagKey(crate::os::random_u64(), crate::os::random_u64())
    }

    /// The tag of a key naming `key`'s window (its own tag ignored).
    fn tag(self, key: &ShmKey) -> u64 {
        let mut hasher = SipHasher24::new_with_keys(self.0, self.1);
        hasher.write_u32(key.owner);
        hasher.write_u32(key.id);
        hasher.write_u64(key.len as u64);
        hasher.write_i32(key.fd);
        hasher.finish()
    }
}

/// A decoded shm key: whose window, which one, how long, the descriptor by
/// which the owner holds it, and the owner's tag over all of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShmKey {
    pub owner: Rank,
    pub id: u32,
    pub len: usize,
    pub fd: RawFd,
    pub tag: u64,
}

impl ShmKey {
    pub(crate) fn encode(self) -> RemoteKey {
        let mut bytes = [0u8; KEY_LEN];
        bytes[0] = KEY_TAG;
        bytes[1..5].copy_from_slice(&self.owner.to_le_bytes());
        bytes[5..9].copy_from_slice(&self.id.to_le_bytes());
        bytes[9..17].copy_from_slice(&(self.len as u64).to_le_bytes());
        bytes[17..21].copy_from_slice(&self.fd.to_le_bytes());
        bytes[21..29].copy_from_slice(&self.tag.to_le_bytes());
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
        let long = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let len = long(9);
        let decoded = ShmKey {
            owner: word(1),
            id: word(5),
            len: usize::try_from(len)
                .ok()
                .filter(|&len| len <= MAX_WINDOW_BYTES)
                .ok_or_else(|| Error::InvalidKey(format!("length {len}")))?,
            fd: word(17) as RawFd,
            tag: long(21),
        };
        if decoded.owner != target {
            return Err(Error::InvalidKey(format!(
                "a key of rank {}'s window used for rank {target}",
                decoded.owner
            )));
        }
        Ok(decoded)
    }

    /// `InvalidKey` unless the owner whose tag key is `tag_key` made this key.
    pub(crate) fn check_tag(&self, tag_key: TagKey) -> Result<()> {
        if tag_key.tag(self) != self.tag {
            return Err(Error::InvalidKey(format!(
                "rank {} made no key {self:?}",
                self.owner
            )));
        }
        Ok(())
    }
}

/// A window as the origin of a put sees it: a mapping of the owner's segment.
pub(crate) struct MappedWindow {
    pub segment: Segment,
    pub key: ShmKey,
    /// The owner's control window (with its doorbell); `None` for window 0.
    pub control: Option<std::rc::Rc<MappedWindow>>,
}

impl MappedWindow {
    /// Maps the window `key` names, held by process `pid`; `None` if that
    /// window is no longer there (its descriptor was closed, or now holds
    /// another window or file, or the process is gone).
    pub(crate) fn open(
        pid: u32,
        key: ShmKey,
        control: Option<std::rc::Rc<MappedWindow>>,
    ) -> Result<Option<MappedWindow>> {
        let Some(segment) = Segment::open(pid, key.fd, HEADER_BYTES + key.len)? else {
            return Ok(None);
        };
        let header_is = |at: usize, value: u64| segment.u64_at(at).load(Ordering::Acquire) == value;
        let same = header_is(MAGIC_AT, MAGIC)
            && header_is(OWNER_AT, u64::from(key.owner))
            && header_is(ID_AT, u64::from(key.id))
            && header_is(LEN_AT, key.len as u64)
            && header_is(TAG_AT, key.tag);
        Ok(same.then_some(MappedWindow {
            segment,
            key,
            control,
        }))
    }

    /// The tag key of the window's owner, from its control window.
    pub(crate) fn tag_key(&self) -> TagKey {
        let control = self.control.as_deref().unwrap_or(self);
        let word = |at: usize| control.segment.u64_at(at).load(Ordering::Relaxed);
        TagKey(word(TAG_KEY_AT), word(TAG_KEY_AT + 8))
    }

    pub(crate) fn is_live(&self) -> bool {
        self.segment.u64_at(STATE_AT).load(Ordering::Acquire) == LIVE
    }

    pub(crate) fn data(&self) -> *mut u8 {
        // SAFETY: the segment is HEADER_BYTES + len long (checked in open).
        unsafe { self.segment.base().add(HEADER_BYTES) }
    }

    /// The signal or atomic word at `offset` of the data area, checked.
    pub(crate) fn word(&self, offset: usize) -> Result<&std::sync::atomic::AtomicU64> {
        check_word(offset, self.key.len)?;
        Ok(self.segment.u64_at(HEADER_BYTES + offset))
    }

    /// Copies `data` to `offset` of the data area, checked against the
    /// window's length (the key's, which the owner tagged and `open` found
    /// to be the segment's).
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_bounds(offset, data.len(), self.key.len)?;
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
    key: ShmKey,
    segment: Segment,
    /// Peers open the window by this descriptor; closed when it is freed.
    _fd: OwnedFd,
}

impl ShmWindow {
    /// Creates window `id` of `rank`: a segment of `len` zeroed bytes after
    /// a header, marked live for peers to map, its key tagged with
    /// `tag_key`. Window 0, the control window, also publishes `tag_key`.
    pub(crate) fn create(rank: Rank, id: u32, len: usize, tag_key: TagKey) -> Result<ShmWindow> {
        crate::bounds::check_window_len(len)?;
        let (segment, fd) = Segment::create(HEADER_BYTES + len)?;
        let mut key = ShmKey {
            owner: rank,
            id,
            len,
            fd: fd.as_raw_fd(),
            tag: 0,
        };
        key.tag = tag_key.tag(&key);
        let header = |at: usize, value: u64| segment.u64_at(at).store(value, Ordering::Relaxed);
        header(ID_AT, u64::from(id));
        header(LEN_AT, len as u64);
        header(OWNER_AT, u64::from(rank));
        header(TAG_AT, key.tag);
        header(STATE_AT, LIVE);
        if id == 0 {
            header(TAG_KEY_AT, tag_key.0);
            header(TAG_KEY_AT + 8, tag_key.1);
        }
        segment.u64_at(MAGIC_AT).store(MAGIC, Ordering::Release);
        Ok(ShmWindow {
            key,
            segment,
            _fd: fd,
        })
    }

    /// The segment behind the window, header included.
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    fn check(&self, offset: usize, len: usize) -> Result<*mut u8> {
        check_bounds(offset, len, self.key.len)?;
        // SAFETY: in bounds of the data area, checked above.
        Ok(unsafe { self.segment.base().add(HEADER_BYTES + offset) })
    }
}

impl LocalWindow for ShmWindow {
    fn key(&self) -> RemoteKey {
        self.key.encode()
    }

    fn len(&self) -> usize {
        self.key.len
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
        check_word(offset, self.key.len)?;
        Ok(self
            .segment
            .u64_at(HEADER_BYTES + offset)
            .load(Ordering::Acquire))
    }

    fn set_signal(&self, offset: usize, value: u64) -> Result<()> {
        check_word(offset, self.key.len)?;
        self.segment
            .u64_at(HEADER_BYTES + offset)
            .store(value, Ordering::Release);
        Ok(())
    }
}

impl Drop for ShmWindow {
    fn drop(&mut self) {
        // Peers that still map the segment see the state and refuse to put;
        // closing the descriptor then keeps new peers from opening it.
        self.segment
            .u64_at(STATE_AT)
            .store(FREED, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_own(key: ShmKey) -> Option<MappedWindow> {
        MappedWindow::open(std::process::id(), key, None).unwrap()
    }

    /// A header that disagrees with the key in any field is not the key's
    /// window: the origin maps nothing (a length near `usize::MAX` in the
    /// header cannot widen the window either; the key's length counts).
    #[test]
    fn a_window_is_mapped_only_if_its_header_matches_the_key() {
        let window = ShmWindow::create(3, 1, 64, TagKey::random()).unwrap();
        let key = ShmKey::decode(&window.key(), 3).unwrap();
        assert!(open_own(key).is_some());
        for at in [MAGIC_AT, ID_AT, LEN_AT, OWNER_AT, TAG_AT] {
            let word = window.segment().u64_at(at);
            let genuine = word.load(Ordering::Relaxed);
            word.store(
                if at == LEN_AT { u64::MAX } else { genuine ^ 1 },
                Ordering::Relaxed,
            );
            assert!(open_own(key).is_none(), "header word {at} changed");
            word.store(genuine, Ordering::Relaxed);
        }
    }

    #[test]
    fn keys_carry_the_owners_tag() {
        let tag_key = TagKey::random();
        let window = ShmWindow::create(0, 5, 64, tag_key).unwrap();
        let key = ShmKey::decode(&window.key(), 0).unwrap();
        assert!(key.check_tag(tag_key).is_ok());
        assert!(key.check_tag(TagKey::random()).is_err());
        let forged = ShmKey { id: 6, ..key };
        assert!(matches!(
            forged.check_tag(tag_key),
            Err(Error::InvalidKey(_))
        ));
        let huge = ShmKey {
            len: usize::MAX,
            ..key
        }
        .encode();
        assert!(matches!(
            ShmKey::decode(&huge, 0),
            Err(Error::InvalidKey(_))
        ));
    }

    #[test]
    fn windows_past_the_limit_are_not_made() {
        let made = ShmWindow::create(0, 1, usize::MAX, TagKey::random());
        assert!(matches!(made, Err(Error::WindowTooLarge { .. })));
    }
}
