//! A counting global allocator: the bytes the calling thread holds on the
//! heap and their peak since the last reset, so benchmarks report what an
//! algorithm really allocated (its temporary memory) rather than an
//! estimate. Counted per thread, in plain cells: an atomic counter would
//! add locked instructions to every allocation of the code being timed
//! (and to catena's side only: MPICH's C allocations do not come here).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

pub struct Counting;

thread_local! {
    // Signed: a thread may free what another allocated.
    static HELD: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

/// Adds `delta` to this thread's bytes held (and its peak).
fn count(delta: isize) {
    // No destructors: the cells outlive every allocation of the thread.
    let _ = HELD.try_with(|held| {
        let now = held.get().wrapping_add(delta);
        held.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: delegates to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is the system allocator's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
            per_rank::count(layout.size() as i64);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above (calloc: fresh pages need no zeroing).
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            count(layout.size() as isize);
            per_rank::count(layout.size() as i64);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above (in place where the system allocator can).
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            let delta = new_size as isize - layout.size() as isize;
            count(delta);
            per_rank::count(delta as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        count(-(layout.size() as isize));
        per_rank::count(-(layout.size() as i64));
    }
}

/// Bytes this thread holds now (what it allocated less what it freed).
pub fn held() -> usize {
    HELD.with(Cell::get).max(0) as usize
}

/// Starts a new peak at what this thread holds now.
pub fn reset_peak() {
    PEAK.with(|peak| peak.set(HELD.with(Cell::get)));
}

/// The most this thread held since `reset_peak`.
pub fn peak() -> usize {
    PEAK.with(Cell::get).max(0) as usize
}

/// Per-rank attribution for the simulator: while a virtual rank runs, what
/// it allocates and frees counts to it, so each rank's peak is the memory
/// its algorithm held.
pub mod per_rank {
    use std::sync::atomic::{AtomicI64, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

    const NOBODY: u32 = u32::MAX;

    #[derive(Default)]
    struct RankHeap {
        held: AtomicI64,
        peak: AtomicI64,
    }

    static CURRENT: AtomicU32 = AtomicU32::new(NOBODY);
    static RANKS: AtomicPtr<RankHeap> = AtomicPtr::new(std::ptr::null_mut());
    static COUNT: AtomicUsize = AtomicUsize::new(0);

    fn table() -> &'static [RankHeap] {
        let p = RANKS.load(Ordering::Relaxed);
        if p.is_null() {
            return &[];
        }
        // SAFETY: `start` leaked a slice of COUNT entries at p, never freed.
        unsafe { std::slice::from_raw_parts(p, COUNT.load(Ordering::Relaxed)) }
    }

    /// Starts counting for `ranks` ranks from zero (the table, 16 bytes a
    /// rank, is the harness's, not a rank's; it is reused while large enough).
    pub fn start(ranks: usize) {
        CURRENT.store(NOBODY, Ordering::Relaxed);
        if COUNT.load(Ordering::Relaxed) < ranks {
            let table: Box<[RankHeap]> = (0..ranks).map(|_| RankHeap::default()).collect();
            RANKS.store(Box::leak(table).as_mut_ptr(), Ordering::Relaxed);
            COUNT.store(ranks, Ordering::Relaxed);
        }
        for r in table() {
            r.held.store(0, Ordering::Relaxed);
            r.peak.store(0, Ordering::Relaxed);
        }
    }

    /// The rank whose code runs now (`None`: the simulator's own).
    pub fn running(rank: Option<u32>) {
        CURRENT.store(rank.unwrap_or(NOBODY), Ordering::Relaxed);
    }

    /// The largest peak of any rank since `start`.
    pub fn largest_peak() -> u64 {
        table()
            .iter()
            .map(|r| r.peak.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0)
            .max(0) as u64
    }

    pub(super) fn count(delta: i64) {
        let rank = CURRENT.load(Ordering::Relaxed);
        if rank == NOBODY {
            return;
        }
        if let Some(r) = table().get(rank as usize) {
            let held = r.held.fetch_add(delta, Ordering::Relaxed) + delta;
            r.peak.fetch_max(held, Ordering::Relaxed);
        }
    }
}
