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
            per_rank::count(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) };
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        per_rank::count(-(layout.size() as i64));
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
