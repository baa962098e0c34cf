//! Windows of the ofi provider: page-aligned anonymous memory catena owns,
//! registered for remote access, and the key peers address it by:
//! `O | owner | id | len | remote base | memory key | tag`. The base is the
//! window's virtual address where the provider wants FI_MR_VIRT_ADDR, else 0
//! (offsets); the memory key is the provider's or one the domain chose; the
//! tag seals the rest with the owner's secret (see [`KeySecret`]).

use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use catena_ofi_sys as sys;
use memmap2::MmapMut;

use super::domain::Mr;
use super::engine::Engine;
use crate::bounds::{check_bounds, check_word};
use crate::key::KeySecret;
use crate::kit::{KeyHeader, RestLen};
use crate::tombstone::{size_class, Grave};
use crate::{Error, LocalWindow, Rank, RemoteKey, Result};

const KEY_TAG: u8 = b'O';
/// The remote base and the memory key.
const FIELDS: RestLen = RestLen::Exactly(16);

/// A decoded ofi key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfiKey {
    /// The rank that owns the window (a put to another rank is refused).
    pub owner: Rank,
    /// The owner's window id, never reused (signals carry it in CQ data).
    pub id: u32,
    /// The window's length in bytes, as its owner registered it.
    pub len: usize,
    /// Remote address of byte 0 of the window.
    pub addr: u64,
    /// libfabric's key of the window's memory registration.
    pub mr_key: u64,
}

impl OfiKey {
    /// The key as the bytes peers ship in messages (41 bytes), sealed with
    /// the owner's `secret`.
    pub(crate) fn encode(self, secret: &KeySecret) -> Result<RemoteKey> {
        let mut fields = [0u8; 16];
        fields[..8].copy_from_slice(&self.addr.to_le_bytes());
        fields[8..].copy_from_slice(&self.mr_key.to_le_bytes());
        let header = KeyHeader {
            owner: self.owner,
            id: self.id,
            len: self.len,
        };
        header.seal(KEY_TAG, &fields, secret)
    }

    /// Decodes a key meant for a window of `target`, whose published secret
    /// is `secret`. Another rank's key, and a key whose tag does not match
    /// (corrupted or forged), are refused before any field is trusted, so a
    /// bad key never reaches the fabric.
    pub(crate) fn decode(key: &RemoteKey, target: Rank, secret: &KeySecret) -> Result<OfiKey> {
        let (header, fields) =
            KeyHeader::open(key, KEY_TAG, FIELDS, target, secret, "an ofi window key")?;
        let u64_at =
            |at: usize| u64::from_le_bytes(fields[at..at + 8].try_into().expect("8 bytes"));
        Ok(OfiKey {
            owner: header.owner,
            id: header.id,
            len: header.len,
            addr: u64_at(0),
            mr_key: u64_at(8),
        })
    }

    /// The remote address of byte `offset` (checked by the caller).
    pub fn at(&self, offset: usize) -> u64 {
        self.addr.wrapping_add(offset as u64)
    }
}

/// A window this process exposes.
pub struct OfiWindow {
    key: OfiKey,
    /// `key`, sealed.
    sealed: RemoteKey,
    /// Taken by `drop`, which hands it to the engine as a tombstone.
    memory: Option<Registered>,
    /// Start of the mapping, taken from it mutably once: peers write
    /// through it.
    base: *mut u8,
    engine: Rc<Engine>,
}

/// A window's memory (its whole size class) and its registration, which
/// outlive the window (see [`crate::tombstone`]): libfabric's `tcp` drops
/// the whole connection when a write names a key it does not know, and
/// `shm` silently drops the write or atomic, leaving the origin to wait for
/// an answer that never comes. Kept, the stale key stays valid and its
/// writes land in the tombstone (or, once it is reused, in a later window).
pub(crate) struct Registered {
    // Drop order: the registration goes before the memory it covers.
    mr: Mr,
    map: MmapMut,
}

impl Registered {
    /// `class` zeroed bytes, registered for remote reads, writes and
    /// atomics.
    fn new(engine: &Engine, class: usize) -> Result<Registered> {
        let mut map = MmapMut::map_anon(class)
            .map_err(|e| Error::io(format!("mapping a window of {class} bytes"), e))?;
        let access =
            u64::from(sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE);
        // SAFETY: the mapping lives next to the MR, which is dropped first;
        // the engine (and its domain) outlives both.
        let mr = unsafe { engine.domain.register(map.as_mut_ptr(), class, access)? };
        Ok(Registered { mr, map })
    }
}

impl Grave for Registered {
    fn base(&self) -> *mut u8 {
        self.map.as_ptr().cast_mut()
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

impl OfiWindow {
    /// `len` zeroed bytes (anonymous pages: FI_MR_ALLOCATED is satisfied),
    /// registered for remote reads, writes and atomics: a freed window's
    /// out of quarantine where one of its size class waits, else new.
    pub(crate) fn create(
        engine: &Rc<Engine>,
        owner: Rank,
        secret: &KeySecret,
        id: u32,
        len: usize,
    ) -> Result<OfiWindow> {
        let class = size_class(len).ok_or_else(|| {
            Error::io(
                format!("mapping a window of {len} bytes"),
                std::io::ErrorKind::OutOfMemory.into(),
            )
        })?;
        let mut memory = match engine.reuse(class) {
            Some(memory) => memory,
            None => Registered::new(engine, class)?,
        };
        let base = memory.map.as_mut_ptr();
        let virt = engine.domain.info().has_mr_mode(sys::FI_MR_VIRT_ADDR);
        let key = OfiKey {
            owner,
            id,
            len,
            addr: if virt { base as u64 } else { 0 },
            mr_key: memory.mr.key(),
        };
        let sealed = key.encode(secret)?;
        engine.expose(id, base, len);
        Ok(OfiWindow {
            key,
            sealed,
            memory: Some(memory),
            base,
            engine: engine.clone(),
        })
    }

    fn word(&self, offset: usize) -> Result<&AtomicU64> {
        check_word(offset, self.key.len)?;
        // SAFETY: in bounds and 8-aligned (page-aligned base); the mapping
        // outlives the returned reference.
        Ok(unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) })
    }
}

impl LocalWindow for OfiWindow {
    fn key(&self) -> RemoteKey {
        self.sealed.clone()
    }

    fn len(&self) -> usize {
        self.key.len
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        check_bounds(offset, buf.len(), self.key.len)?;
        // SAFETY: the range is inside the mapping; `buf` is private memory.
        // The fabric may write the window concurrently: raw copies, no
        // references to its bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(offset), buf.as_mut_ptr(), buf.len())
        };
        Ok(())
    }

    fn read_append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        check_bounds(offset, len, self.key.len)?;
        buf.reserve(len);
        let spare = &mut buf.spare_capacity_mut()[..len];
        // SAFETY: as in `read`; `spare` is `len` bytes of `buf`'s capacity,
        // set as its length once written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(offset),
                spare.as_mut_ptr().cast::<u8>(),
                len,
            );
            buf.set_len(buf.len() + len);
        }
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_bounds(offset, data.len(), self.key.len)?;
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(offset), data.len()) };
        Ok(())
    }

    /// Reads the CQ first (unless the transport is already doing so), so a
    /// rank that only watches its window still sees signals arrive.
    fn signal(&self, offset: usize) -> Result<u64> {
        let word = self.word(offset)?;
        self.engine.poll_unless_quiet();
        Ok(word.load(Ordering::Acquire))
    }

    fn set_signal(&self, offset: usize, value: u64) -> Result<()> {
        self.word(offset)?.store(value, Ordering::Release);
        Ok(())
    }
}

impl Drop for OfiWindow {
    fn drop(&mut self) {
        // Signals for this window arriving from now on are dropped.
        self.engine.withdraw(self.key.id);
        if let Some(memory) = self.memory.take() {
            // SAFETY: the window's own memory, which nobody uses any more.
            unsafe { self.engine.bury(memory) };
        }
    }
}
