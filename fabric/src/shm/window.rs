//! Windows of the shm provider: one segment each, a page of header (owner,
//! id, length, live/freed state) then the exposed bytes. Keys are `S | owner | id | len | fd | tag`, the
//! tag sealing the rest under the owner's secret (see [`KeySecret`]).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;

use crate::bounds::{check_bounds, check_word};
use crate::host::ArenaMap;
use crate::key::KeySecret;
use crate::kit::{KeyHeader, RestLen};
use crate::os::segment::Segment;
use crate::{LocalWindow, Rank, RemoteKey, Result};

pub(crate) const HEADER_BYTES: usize = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"CATENAW2");
const MAGIC_AT: usize = 0;
const ID_AT: usize = 8;
const LEN_AT: usize = 16;
const STATE_AT: usize = 24;
const OWNER_AT: usize = 32;
const LIVE: u64 = 1;
const FREED: u64 = 2;
const KEY_TAG: u8 = b'S';
/// The descriptor by which the owner holds the segment.
const FIELDS: RestLen = RestLen::Exactly(4);

/// A decoded shm key: whose window, which one, how long, and the
/// descriptor by which the owner holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ShmKey {
    pub owner: Rank,
    pub id: u32,
    pub len: usize,
    pub fd: RawFd,
}

impl ShmKey {
    /// The key, sealed with its owner's `secret`.
    pub(crate) fn encode(self, secret: &KeySecret) -> RemoteKey {
        self.header()
            .seal(KEY_TAG, &self.fd.to_le_bytes(), secret)
            .expect("shm keys are short")
    }

    /// Decodes a key meant for a window of `target`, whose published
    /// secret is `secret`: a key of another rank's window, or one whose tag
    /// is not the owner's (corrupted or forged), is refused, so such a put
    /// writes nothing.
    pub(crate) fn decode(key: &RemoteKey, target: Rank, secret: &KeySecret) -> Result<ShmKey> {
        let (header, fd) =
            KeyHeader::open(key, KEY_TAG, FIELDS, target, secret, "a shm window key")?;
        Ok(ShmKey {
            owner: header.owner,
            id: header.id,
            len: header.len,
            fd: RawFd::from_le_bytes(fd.try_into().expect("4 bytes")),
        })
    }

    /// The window id a key claims, unchecked: only to find a mapping made
    /// through the very same key bytes.
    #[inline]
    pub(crate) fn peek_id(key: &RemoteKey) -> Option<u32> {
        KeyHeader::peek_id(key, KEY_TAG, FIELDS)
    }

    fn header(&self) -> KeyHeader {
        KeyHeader {
            owner: self.owner,
            id: self.id,
            len: self.len,
        }
    }
}

/// A window as the origin of a put sees it: a mapping of the owner's segment.
pub(crate) struct MappedWindow {
    pub segment: Segment,
    pub key: ShmKey,
    /// The owner's host arena, where its doorbell is.
    pub owner: std::rc::Rc<ArenaMap>,
}

impl MappedWindow {
    /// Maps the window `key` names, held by process `pid`; `None` if that
    /// window is no longer there (its descriptor was closed, or now holds
    /// another window or file, or the process is gone).
    pub(crate) fn open(
        pid: u32,
        key: ShmKey,
        owner: std::rc::Rc<ArenaMap>,
    ) -> Result<Option<MappedWindow>> {
        let Some(segment) = Segment::open(pid, key.fd, HEADER_BYTES + key.len)? else {
            return Ok(None);
        };
        let header_is = |at: usize, value: u64| segment.u64_at(at).load(Ordering::Acquire) == value;
        let same = header_is(MAGIC_AT, MAGIC)
            && header_is(OWNER_AT, u64::from(key.owner))
            && header_is(ID_AT, u64::from(key.id))
            && header_is(LEN_AT, key.len as u64);
        Ok(same.then_some(MappedWindow {
            segment,
            key,
            owner,
        }))
    }

    #[inline(always)]
    pub(crate) fn is_live(&self) -> bool {
        self.segment.u64_at(STATE_AT).load(Ordering::Acquire) == LIVE
    }

    #[inline(always)]
    pub(crate) fn data(&self) -> *mut u8 {
        // SAFETY: the segment is HEADER_BYTES + len long (checked in open).
        unsafe { self.segment.base().add(HEADER_BYTES) }
    }

    /// The signal or atomic word at `offset` of the data area, checked.
    #[inline(always)]
    pub(crate) fn word(&self, offset: usize) -> Result<&std::sync::atomic::AtomicU64> {
        check_word(offset, self.key.len)?;
        Ok(self.segment.u64_at(HEADER_BYTES + offset))
    }

    /// Copies `data` to `offset` of the data area, checked against the
    /// window's length (the key's, which the owner tagged and `open` found
    /// to be the segment's).
    #[inline]
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_bounds(offset, data.len(), self.key.len)?;
        // SAFETY: the range lies inside the owner's data area; `data` is ours.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.data().add(offset), data.len())
        };
        Ok(())
    }
}

impl MappedWindow {
    /// Copies `head` and then `data` to `offset` of the data area, checked
    /// as one range (so that nothing is written if either piece would not
    /// fit).
    #[inline(always)]
    pub(crate) fn write_pieces(&self, offset: usize, head: &[u8], data: &[u8]) -> Result<()> {
        let len = head.len().saturating_add(data.len());
        check_bounds(offset, len, self.key.len)?;
        // SAFETY: both pieces lie inside the owner's data area, checked
        // above; they are ours.
        unsafe {
            let dst = self.data().add(offset);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(head.len()), data.len());
        }
        Ok(())
    }
}

/// A window this process exposes.
pub struct ShmWindow {
    key: ShmKey,
    /// `key`, sealed.
    sealed: RemoteKey,
    segment: Segment,
    /// Peers open the window by this descriptor; closed when it is freed.
    _fd: OwnedFd,
}

impl ShmWindow {
    /// Creates window `id` of `rank`: a segment of `len` zeroed bytes after
    /// a header, marked live for peers to map, its key sealed with `secret`.
    pub(crate) fn create(rank: Rank, id: u32, len: usize, secret: &KeySecret) -> Result<ShmWindow> {
        crate::bounds::check_window_len(len)?;
        let (segment, fd) = Segment::create(HEADER_BYTES + len)?;
        let key = ShmKey {
            owner: rank,
            id,
            len,
            fd: fd.as_raw_fd(),
        };
        let header = |at: usize, value: u64| segment.u64_at(at).store(value, Ordering::Relaxed);
        header(ID_AT, u64::from(id));
        header(LEN_AT, len as u64);
        header(OWNER_AT, u64::from(rank));
        header(STATE_AT, LIVE);
        segment.u64_at(MAGIC_AT).store(MAGIC, Ordering::Release);
        Ok(ShmWindow {
            key,
            sealed: key.encode(secret),
            segment,
            _fd: fd,
        })
    }

    /// The segment behind the window, header included.
    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    #[inline(always)]
    fn check(&self, offset: usize, len: usize) -> Result<*mut u8> {
        check_bounds(offset, len, self.key.len)?;
        // SAFETY: in bounds of the data area, checked above.
        Ok(unsafe { self.segment.base().add(HEADER_BYTES + offset) })
    }
}

impl LocalWindow for ShmWindow {
    fn key(&self) -> RemoteKey {
        self.sealed.clone()
    }

    fn len(&self) -> usize {
        self.key.len
    }

    #[inline(always)]
    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let src = self.check(offset, buf.len())?;
        // SAFETY: `src..src+len` is inside the mapping; `buf` is private memory.
        unsafe { std::ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    #[inline]
    fn read_append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        let src = self.check(offset, len)?;
        buf.reserve(len);
        let spare = &mut buf.spare_capacity_mut()[..len];
        // SAFETY: `src..src+len` is inside the mapping, `spare` is `len`
        // bytes of `buf`'s capacity, set as its length once written.
        unsafe {
            std::ptr::copy_nonoverlapping(src, spare.as_mut_ptr().cast::<u8>(), len);
            buf.set_len(buf.len() + len);
        }
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let dst = self.check(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    #[inline(always)]
    fn signal(&self, offset: usize) -> Result<u64> {
        check_word(offset, self.key.len)?;
        Ok(self
            .segment
            .u64_at(HEADER_BYTES + offset)
            .load(Ordering::Acquire))
    }

    #[inline(always)]
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
    use crate::Error;

    fn open_own(key: ShmKey) -> Option<MappedWindow> {
        let (arena, _fd) = ArenaMap::create(0, "test", 0).unwrap();
        MappedWindow::open(std::process::id(), key, std::rc::Rc::new(arena)).unwrap()
    }

    /// A header that disagrees with the key in any field is not the key's
    /// window: the origin maps nothing (a length near `usize::MAX` in the
    /// header cannot widen the window either; the key's length counts).
    #[test]
    fn a_window_is_mapped_only_if_its_header_matches_the_key() {
        let secret = KeySecret::draw();
        let window = ShmWindow::create(3, 1, 64, &secret).unwrap();
        let key = ShmKey::decode(&window.key(), 3, &secret).unwrap();
        assert!(open_own(key).is_some());
        for at in [MAGIC_AT, ID_AT, LEN_AT, OWNER_AT] {
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
        let secret = KeySecret::draw();
        let window = ShmWindow::create(0, 5, 64, &secret).unwrap();
        let key = ShmKey::decode(&window.key(), 0, &secret).unwrap();
        assert!(matches!(
            ShmKey::decode(&window.key(), 0, &KeySecret::draw()),
            Err(Error::InvalidKey(_))
        ));
        for forged in [
            ShmKey { id: 6, ..key },
            ShmKey {
                len: usize::MAX,
                ..key
            },
        ] {
            let made_elsewhere = forged.encode(&KeySecret::draw());
            assert!(matches!(
                ShmKey::decode(&made_elsewhere, 0, &secret),
                Err(Error::InvalidKey(_))
            ));
        }
    }

    #[test]
    fn windows_past_the_limit_are_not_made() {
        let made = ShmWindow::create(0, 1, usize::MAX, &KeySecret::draw());
        assert!(matches!(made, Err(Error::WindowTooLarge { .. })));
    }
}
