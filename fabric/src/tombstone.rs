//! Freed windows of the ofi and UCX providers become tombstones: their
//! registration and address range stay (so a stale key still names them and
//! lands there), their pages go back to the system. The latest
//! [`QUARANTINE`] stay untouched; older ones are reused, registration and
//! all, for new windows of their size class, so that what a transport holds
//! is bounded by its peak use, not by how many windows it ever freed.

use std::collections::{HashMap, VecDeque};

/// Freed windows per transport kept from any reuse: a stale key of one of
/// them lands in its tombstone; an older one may land in a window allocated
/// since (of the owner's, never outside one).
pub(crate) const QUARANTINE: usize = 128;

/// A freed window's memory and whatever registers it.
pub(crate) trait Grave {
    /// Start of its mapping.
    fn base(&self) -> *mut u8;
    /// Bytes mapped: its size class.
    fn len(&self) -> usize;
}

/// Where a transport's freed windows wait: in quarantine, then for reuse.
pub(crate) struct Graveyard<G> {
    quarantine: VecDeque<G>,
    /// Out of quarantine, by size class.
    reusable: HashMap<usize, Vec<G>>,
}

impl<G: Grave> Graveyard<G> {
    pub(crate) fn new() -> Graveyard<G> {
        Graveyard {
            quarantine: VecDeque::new(),
            reusable: HashMap::new(),
        }
    }

    /// Takes a freed window's memory: its pages go back to the system.
    ///
    /// # Safety
    /// Nothing reads or writes the grave's memory as a window any more.
    pub(crate) unsafe fn bury(&mut self, grave: G) {
        // SAFETY: per this function's contract.
        unsafe { give_back_pages(grave.base(), grave.len()) };
        self.quarantine.push_back(grave);
        if self.quarantine.len() > QUARANTINE {
            let released = self.quarantine.pop_front().expect("over the bound");
            self.reusable
                .entry(released.len())
                .or_default()
                .push(released);
        }
    }

    /// A grave of size class `class` out of quarantine, its pages zero
    /// again (stale writes may have landed there since it was freed).
    pub(crate) fn reuse(&mut self, class: usize) -> Option<G> {
        let grave = self.reusable.get_mut(&class)?.pop()?;
        // SAFETY: a buried window's memory, which nothing uses.
        unsafe { give_back_pages(grave.base(), grave.len()) };
        Some(grave)
    }

    /// Every grave, to release with the transport.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = G> + '_ {
        self.quarantine
            .drain(..)
            .chain(self.reusable.drain().flat_map(|(_, graves)| graves))
    }
}

/// The size class a window of `len` bytes is mapped in: whole pages, a
/// power of two of them (pages past `len` are never touched, so they cost
/// address space only). `None` past what any mapping could be.
pub(crate) fn size_class(len: usize) -> Option<usize> {
    len.max(1)
        .checked_next_multiple_of(page_size())?
        .checked_next_power_of_two()
}

/// Gives back the memory of the whole pages in `base..base + len`, which
/// stay mapped: a later access (a stale put from a peer) finds zero pages
/// again. Shared memory (UCX's posix segments) loses its pages with
/// `MADV_REMOVE`, private memory with `MADV_DONTNEED`.
///
/// # Safety
/// `base..base + len` must be mapped memory this process owns and no longer
/// reads or writes as a window (its contents are lost).
pub(crate) unsafe fn give_back_pages(base: *mut u8, len: usize) {
    let (start, bytes) = whole_pages(base, len);
    if bytes == 0 {
        return;
    }
    let addr = start as *mut libc::c_void;
    // SAFETY: whole pages inside the caller's range. A failure (MADV_REMOVE
    // on private memory is EINVAL) only leaves the pages in place.
    unsafe {
        if libc::madvise(addr, bytes, libc::MADV_REMOVE) != 0 {
            libc::madvise(addr, bytes, libc::MADV_DONTNEED);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096)
}

/// (start, length) of the whole pages inside `base..base + len`.
fn whole_pages(base: *mut u8, len: usize) -> (usize, usize) {
    let page = page_size();
    let start = (base as usize).next_multiple_of(page);
    let end = (base as usize).saturating_add(len) / page * page;
    (start, end.saturating_sub(start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap2::MmapMut;

    struct Mapped(MmapMut);

    impl Grave for Mapped {
        fn base(&self) -> *mut u8 {
            self.0.as_ptr().cast_mut()
        }

        fn len(&self) -> usize {
            self.0.len()
        }
    }

    #[test]
    fn classes_are_whole_pages_in_powers_of_two() {
        let page = page_size();
        assert_eq!(size_class(0), Some(page));
        assert_eq!(size_class(page), Some(page));
        assert_eq!(size_class(page + 1), Some(2 * page));
        assert_eq!(size_class(3 * page), Some(4 * page));
        assert_eq!(size_class(usize::MAX), None);
        assert_eq!(size_class(usize::MAX / 2 + 2), None);
    }

    /// Nothing of the latest `QUARANTINE` freed is reused; then the oldest
    /// is, of its class only, with its pages zero again.
    #[test]
    fn only_graves_out_of_quarantine_are_reused_zeroed() {
        let page = page_size();
        let mut yard = Graveyard::new();
        let mut first = MmapMut::map_anon(page).unwrap();
        first.fill(0xAB);
        let first_base = first.as_ptr();
        // SAFETY: the mapping is no window.
        unsafe { yard.bury(Mapped(first)) };
        for _ in 0..QUARANTINE {
            assert!(yard.reuse(page).is_none());
            // SAFETY: as above.
            unsafe { yard.bury(Mapped(MmapMut::map_anon(page).unwrap())) };
        }
        assert!(yard.reuse(2 * page).is_none());
        let reused = yard.reuse(page).expect("the oldest is out of quarantine");
        assert_eq!(reused.0.as_ptr(), first_base);
        assert!(reused.0.iter().all(|&b| b == 0));
        assert!(yard.reuse(page).is_none());
        assert_eq!(yard.drain().count(), QUARANTINE);
    }
}
