//! A global allocator for fuzz targets fed hostile input: it refuses any
//! single allocation over [`LIMIT`] (so an absurd one aborts the test at
//! once, naming its size, instead of swapping the machine) and records the
//! largest asked. A test binary installs it with
//! `#[global_allocator] static A: catena_fuzz::alloc::Limited = catena_fuzz::alloc::Limited;`.

#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// The largest allocation a test may make.
pub const LIMIT: usize = 1 << 30;

/// The system allocator, refusing allocations over [`LIMIT`].
pub struct Limited;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// The largest allocation asked for so far (by any thread).
pub fn largest() -> usize {
    LARGEST.load(Ordering::Relaxed)
}

// SAFETY: forwards to the system allocator unchanged, or fails (null) as
// the GlobalAlloc contract allows.
unsafe impl GlobalAlloc for Limited {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LARGEST.fetch_max(layout.size(), Ordering::Relaxed);
        if layout.size() > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's layout, as given.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LARGEST.fetch_max(new_size, Ordering::Relaxed);
        if new_size > LIMIT {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from `System` with `layout`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
