//! Simulated windows: plain memory the simulator writes when a put's event
//! comes due. Signal words are little-endian u64s of that memory.

use std::cell::RefCell;
use std::rc::Rc;

use super::memory::Memory;
use super::Sim;
pub(super) use catena_fabric::bounds::{check_bounds, check_word};
use catena_fabric::{Error, LocalWindow, Rank, RemoteKey, Result};

/// What a simulated window's key names.
pub(super) struct SimKey {
    pub id: u64,
    pub len: usize,
}

const KEY_TAG: u8 = b'S';
/// Tag, owner, id and length; then a check word over them.
const BODY_LEN: usize = 21;
const KEY_LEN: usize = BODY_LEN + 4;

/// A check word over a key's fields, so that a key with a byte changed is
/// refused rather than naming another live window of the same size (the
/// simulator has no secrets to seal keys with, as real providers do).
fn check_word_of(body: &[u8]) -> [u8; 4] {
    let mut h = std::hash::BuildHasher::build_hasher(&rustc_hash::FxBuildHasher);
    std::hash::Hasher::write(&mut h, body);
    let h = std::hash::Hasher::finish(&h);
    ((h ^ (h >> 32)) as u32).to_le_bytes()
}

impl SimKey {
    pub(crate) fn encode(owner: Rank, id: u64, len: usize) -> RemoteKey {
        let mut bytes = vec![KEY_TAG];
        bytes.extend_from_slice(&owner.to_le_bytes());
        bytes.extend_from_slice(&id.to_le_bytes());
        bytes.extend_from_slice(&(len as u64).to_le_bytes());
        let check = check_word_of(&bytes);
        bytes.extend_from_slice(&check);
        RemoteKey::from_bytes(&bytes).expect("a 25-byte key")
    }

    /// The key's window, which must be `target`'s.
    pub(crate) fn decode(key: &RemoteKey, target: Rank) -> Result<SimKey> {
        let bytes = key.as_bytes();
        if bytes.len() != KEY_LEN || bytes[0] != KEY_TAG {
            return Err(Error::InvalidKey(format!("not a simulator key: {key:?}")));
        }
        if bytes[BODY_LEN..] != check_word_of(&bytes[..BODY_LEN]) {
            return Err(Error::InvalidKey(format!(
                "a changed simulator key: {key:?}"
            )));
        }
        let owner = Rank::from_le_bytes(bytes[1..5].try_into().expect("4 bytes"));
        if owner != target {
            return Err(Error::InvalidKey(format!(
                "the key names a window of rank {owner}, not of rank {target}"
            )));
        }
        let id = u64::from_le_bytes(bytes[5..13].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(bytes[13..21].try_into().expect("8 bytes"));
        let len = usize::try_from(len).map_err(|_| Error::InvalidKey(format!("length {len}")))?;
        Ok(SimKey { id, len })
    }
}

/// A window of a simulated rank; freed (and its puts dropped) on drop.
pub struct SimWindow<'s> {
    sim: &'s Sim,
    owner: Rank,
    id: u64,
    memory: Rc<RefCell<Memory>>,
}

impl<'s> SimWindow<'s> {
    /// A fresh zeroed window of `len` bytes; `Io` (out of memory) where
    /// this process cannot hold it, rather than an abort.
    pub(super) fn new(sim: &'s Sim, owner: Rank, len: usize) -> Result<SimWindow<'s>> {
        let bytes = Memory::zeroed(len).ok_or_else(|| Error::Io {
            context: format!("a simulated window of {len} bytes"),
            source: std::io::ErrorKind::OutOfMemory.into(),
        })?;
        let id = sim.next_window.get();
        sim.next_window.set(id + 1);
        let memory = Rc::new(RefCell::new(bytes));
        sim.windows.borrow_mut().insert((owner, id), memory.clone());
        sim.hold(owner, len as u64);
        Ok(SimWindow {
            sim,
            owner,
            id,
            memory,
        })
    }
}

impl Drop for SimWindow<'_> {
    fn drop(&mut self) {
        let memory = std::mem::take(&mut *self.memory.borrow_mut());
        self.sim.release(self.owner, memory.len() as u64);
        self.sim.as_transport(|| {
            self.sim.windows.borrow_mut().remove(&(self.owner, self.id));
            drop(memory);
        });
    }
}

impl LocalWindow for SimWindow<'_> {
    fn key(&self) -> RemoteKey {
        SimKey::encode(self.owner, self.id, self.len())
    }

    fn len(&self) -> usize {
        self.memory.borrow().len()
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let memory = self.memory.borrow();
        check_bounds(offset, buf.len(), memory.len())?;
        memory.read(offset, buf);
        Ok(())
    }

    fn read_append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        let memory = self.memory.borrow();
        check_bounds(offset, len, memory.len())?;
        memory.append(offset, len, buf);
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let mut memory = self.memory.borrow_mut();
        check_bounds(offset, data.len(), memory.len())?;
        memory.write(offset, data);
        Ok(())
    }

    fn signal(&self, offset: usize) -> Result<u64> {
        let memory = self.memory.borrow();
        check_word(offset, memory.len())?;
        Ok(memory.word(offset))
    }

    fn set_signal(&self, offset: usize, value: u64) -> Result<()> {
        let mut memory = self.memory.borrow_mut();
        check_word(offset, memory.len())?;
        memory.set_word(offset, value);
        Ok(())
    }
}
