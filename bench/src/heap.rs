//! A counting global allocator: the bytes this process holds on the heap and
//! their peak since the last reset, so benchmarks report what an algorithm
//! really allocated (its temporary memory) rather than an estimate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: delegates to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(held, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

/// Bytes held now.
pub fn held() -> usize {
    HELD.load(Ordering::Relaxed)
}

/// Starts a new peak at what is held now.
pub fn reset_peak() {
    PEAK.store(held(), Ordering::Relaxed);
}

/// The most held since `reset_peak`.
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}
