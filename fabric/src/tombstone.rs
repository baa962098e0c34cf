//! Freed windows of the ofi and UCX providers become tombstones: their
//! registration and address range stay (so no later window reuses them and
//! a stale key still names them), their pages go back to the system.

/// Gives back the memory of the whole pages in `base..base + len`, which
/// stay mapped: a later access (a stale put from a peer) finds zero pages
/// again. Shared memory (UCX's posix segments) loses its pages with
/// `MADV_REMOVE`, private memory with `MADV_DONTNEED`.
///
/// # Safety
/// `base..base + len` must be mapped memory this process owns and no longer
/// reads or writes as a window (its contents are lost).
pub(crate) unsafe fn give_back_pages(base: *mut u8, len: usize) {
    // SAFETY: sysconf has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let start = (base as usize).next_multiple_of(page);
    let end = (base as usize).saturating_add(len) / page * page;
    if end <= start {
        return;
    }
    let (addr, bytes) = (start as *mut libc::c_void, end - start);
    // SAFETY: whole pages inside the caller's range. A failure (MADV_REMOVE
    // on private memory is EINVAL) only leaves the pages in place.
    unsafe {
        if libc::madvise(addr, bytes, libc::MADV_REMOVE) != 0 {
            libc::madvise(addr, bytes, libc::MADV_DONTNEED);
        }
    }
}
