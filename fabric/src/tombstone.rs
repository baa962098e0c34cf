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

/// Maps private anonymous memory (`MAP_NORESERVE`: nothing committed) over
/// the pages of `base..base + len`, where nothing is mapped any more, so
/// that no later allocation lands there; a stale write into it costs at
/// most its pages. Leaves ranges that something else mapped meanwhile alone.
///
/// # Safety
/// The range must be memory this process just unmapped (or still owns and
/// no longer uses).
pub(crate) unsafe fn reserve_range(base: *mut u8, len: usize) {
    // Every page the window touched: where one of them is still mapped
    // (memory from the heap), nothing is reserved.
    let page = page_size();
    let start = base as usize / page * page;
    let end = (base as usize).saturating_add(len).next_multiple_of(page);
    let bytes = end.saturating_sub(start);
    if bytes == 0 {
        return;
    }
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping. The
    // reservation is never unmapped: it is the tombstone.
    let got = unsafe {
        libc::mmap(
            start as *mut libc::c_void,
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_NORESERVE
                | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if got != libc::MAP_FAILED && got as usize != start {
        // A kernel older than 4.17 took the address as a hint and mapped
        // elsewhere: that mapping reserves nothing.
        // SAFETY: the mapping just made, unmapped once.
        unsafe { libc::munmap(got, bytes) };
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
