//! The machine's physical limits, measured in the benchmark's own run: the
//! single-core memcpy bandwidth and the core-to-core cache-line round trip.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Bytes per second of one core copying `size`-byte buffers `iterations` times.
pub fn memcpy_bandwidth(size: usize, iterations: usize) -> f64 {
    let src = vec![0x5au8; size];
    let mut dst = vec![0u8; size];
    dst.copy_from_slice(&src);
    let start = Instant::now();
    for _ in 0..iterations {
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
    }
    (size * iterations) as f64 / start.elapsed().as_secs_f64()
}

#[repr(align(128))]
struct Line(AtomicU64);

/// Median round trip of one cache line bounced between two threads pinned to
/// `a` and `b` (batches of 1000 round trips).
pub fn cache_line_round_trip(
    a: core_affinity::CoreId,
    b: core_affinity::CoreId,
    round_trips: u64,
) -> Duration {
    let line = Line(AtomicU64::new(0));
    let mut batches = Vec::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            core_affinity::set_for_current(b);
            for i in 0..round_trips {
                while line.0.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                line.0.store(2 * i + 2, Ordering::Release);
            }
        });
        core_affinity::set_for_current(a);
        let mut start = Instant::now();
        for i in 0..round_trips {
            line.0.store(2 * i + 1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
            if (i + 1) % 1000 == 0 {
                batches.push(start.elapsed().as_secs_f64() / 1000.0);
                start = Instant::now();
            }
        }
    });
    Duration::from_secs_f64(crate::report::quantile(&mut batches, 0.5))
}
