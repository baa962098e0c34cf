//! Offers of a process's own memory to its host peers' single copies: a
//! table in its arena's header page, which no peer's store reaches, one
//! slot per standing offer. A peer copies only what is offered now, within
//! its length, and learns if the offer was withdrawn while it copied (the
//! memory may then hold anything): the slot is read before and after the
//! copy, as a sequence lock.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{fence, Ordering};

use super::arena::{ArenaMap, HEADER_BYTES};
use crate::bounds::check_bounds;
use crate::{Error, Result};

/// Where the table lies in the header page.
pub(super) const OFFERS_AT: usize = 1024;
/// Offers one process holds at once; past them its data moves through
/// host memory instead (two copies).
pub(super) const OFFER_SLOTS: usize = 128;
/// A slot: the offer's generation (0 while the slot is free), then the
/// offered bytes' address and length.
pub(super) const SLOT_BYTES: usize = 24;
const _: () = assert!(OFFERS_AT + OFFER_SLOTS * SLOT_BYTES <= HEADER_BYTES);

/// What names an offer to peers: its generation (unique in the process,
/// from 1) and its slot.
fn handle(generation: u64, slot: usize) -> u64 {
    generation * OFFER_SLOTS as u64 + slot as u64
}

fn slot_and_generation(handle: u64) -> (usize, u64) {
    (
        (handle % OFFER_SLOTS as u64) as usize,
        handle / OFFER_SLOTS as u64,
    )
}

/// The owner's side: which slots are free, and the next generation.
pub(super) struct Offers {
    free: RefCell<Vec<usize>>,
    next: Cell<u64>,
}

impl Offers {
    pub(super) fn new() -> Offers {
        Offers {
            free: RefCell::new((0..OFFER_SLOTS).rev().collect()),
            next: Cell::new(1),
        }
    }

    /// Publishes `data` in a free slot of `own` (this process's arena):
    /// its handle, or `None` while every slot holds an offer.
    pub(super) fn offer(&self, own: &ArenaMap, data: &[u8]) -> Option<u64> {
        let slot = self.free.borrow_mut().pop()?;
        let generation = self.next.get();
        self.next.set(generation + 1);
        let [held, addr, len] = own.offer_slot(slot);
        addr.store(data.as_ptr() as u64, Ordering::Relaxed);
        len.store(data.len() as u64, Ordering::Relaxed);
        held.store(generation, Ordering::Release);
        Some(handle(generation, slot))
    }

    /// Ends the offer `handle` (one of this process's own; another is
    /// ignored). SeqCst: a peer that copied after the memory changed then
    /// sees the slot changed too.
    pub(super) fn withdraw(&self, own: &ArenaMap, handle: u64) {
        let (slot, generation) = slot_and_generation(handle);
        let [held, ..] = own.offer_slot(slot);
        if generation != 0 && held.load(Ordering::Relaxed) == generation {
            held.store(0, Ordering::SeqCst);
            self.free.borrow_mut().push(slot);
        }
    }
}

/// A peer's side: copies `buf.len()` bytes from `at` bytes into `owner`'s
/// offer `handle` by `copy` (the bytes' address, `buf`). An offer `owner`
/// does not hold, a range past its end, or an offer withdrawn before the
/// copy ended is an error; `copy`'s `Ok(false)` (this process cannot copy)
/// is passed on.
pub(super) fn copy_offered(
    owner: &ArenaMap,
    handle: u64,
    at: u64,
    buf: &mut [u8],
    copy: impl FnOnce(u64, &mut [u8]) -> Result<bool>,
) -> Result<bool> {
    let (slot, generation) = slot_and_generation(handle);
    let [held, addr, len] = owner.offer_slot(slot);
    let standing = || generation != 0 && held.load(Ordering::Acquire) == generation;
    if !standing() {
        return Err(Error::Protocol(format!(
            "rank {} holds no offer {handle:#x} to copy from",
            owner.rank()
        )));
    }
    let (addr, len) = (addr.load(Ordering::Relaxed), len.load(Ordering::Relaxed));
    let from = usize::try_from(at).unwrap_or(usize::MAX);
    check_bounds(from, buf.len(), usize::try_from(len).unwrap_or(usize::MAX))?;
    let copied = copy(addr.wrapping_add(at), buf)?;
    // The copy's reads come before the second look at the slot.
    fence(Ordering::SeqCst);
    if !standing() {
        return Err(Error::Protocol(format!(
            "rank {} withdrew offer {handle:#x} while it was copied",
            owner.rank()
        )));
    }
    Ok(copied)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_arena() -> ArenaMap {
        ArenaMap::create(0, "offers-test", 0).unwrap().0
    }

    /// What a copy of `buf.len()` bytes at `addr` would read: this
    /// process's own memory, which the tests offer.
    fn read_own(addr: u64, buf: &mut [u8]) -> Result<bool> {
        // SAFETY: the tests offer live buffers of their own, and check
        // the range against the offer before they copy.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, buf.as_mut_ptr(), buf.len()) };
        Ok(true)
    }

    #[test]
    fn a_peer_copies_what_is_offered_within_its_length() {
        let (own, offers) = (own_arena(), Offers::new());
        let data: Vec<u8> = (0..200).collect();
        let handle = offers.offer(&own, &data).unwrap();
        let mut buf = [0; 50];
        assert!(copy_offered(&own, handle, 150, &mut buf, read_own).unwrap());
        assert_eq!(buf[..], data[150..]);
        let past = copy_offered(&own, handle, 151, &mut buf, read_own);
        assert!(matches!(past, Err(Error::OutOfBounds { .. })), "{past:?}");
        let huge = copy_offered(&own, handle, u64::MAX - 8, &mut buf, read_own);
        assert!(matches!(huge, Err(Error::OutOfBounds { .. })), "{huge:?}");
    }

    #[test]
    fn a_withdrawn_or_forged_offer_is_not_copied_from() {
        let (own, offers) = (own_arena(), Offers::new());
        let data = [7u8; 64];
        let handle = offers.offer(&own, &data).unwrap();
        offers.withdraw(&own, handle);
        let never = |_: u64, _: &mut [u8]| -> Result<bool> { panic!("copied") };
        for forged in [handle, 0, 5, u64::MAX, handle + OFFER_SLOTS as u64] {
            let copied = copy_offered(&own, forged, 0, &mut [0; 8], never);
            assert!(
                matches!(copied, Err(Error::Protocol(_))),
                "{forged:#x}: {copied:?}"
            );
        }
        // The slot comes back for another offer, under another handle.
        let again = offers.offer(&own, &data).unwrap();
        assert_ne!(again, handle);
        assert!(copy_offered(&own, handle, 0, &mut [0; 8], never).is_err());
        assert!(copy_offered(&own, again, 0, &mut [0; 8], read_own).unwrap());
    }

    #[test]
    fn an_offer_withdrawn_while_it_is_copied_fails_the_copy() {
        let (own, offers) = (own_arena(), Offers::new());
        let data = [7u8; 64];
        let handle = offers.offer(&own, &data).unwrap();
        let withdrawing = |addr: u64, buf: &mut [u8]| {
            offers.withdraw(&own, handle);
            read_own(addr, buf)
        };
        let copied = copy_offered(&own, handle, 0, &mut [0; 8], withdrawing);
        assert!(matches!(copied, Err(Error::Protocol(_))), "{copied:?}");
    }

    #[test]
    fn offers_past_the_table_move_through_host_memory() {
        let (own, offers) = (own_arena(), Offers::new());
        let data = [1u8; 8];
        let handles: Vec<u64> = (0..OFFER_SLOTS)
            .map(|_| offers.offer(&own, &data).unwrap())
            .collect();
        assert_eq!(offers.offer(&own, &data), None);
        offers.withdraw(&own, handles[3]);
        assert!(offers.offer(&own, &data).is_some());
        assert_eq!(offers.offer(&own, &data), None);
    }
}
