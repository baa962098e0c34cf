//! Charging a rank's own computation to its virtual clock: the CPU time its
//! code spends between transport calls, read from this thread's CPU clock
//! and scaled from this host to the modelled machine. Off unless asked for,
//! since measured time makes a run depend on the host.

use std::cell::Cell;

/// How much virtual time a nanosecond of this host's CPU time is worth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ComputeFactor(f64);

impl ComputeFactor {
    /// A BlueGene/P core against the host these figures come from (an AMD
    /// EPYC, Zen 5, 2.6 GHz): 850 MHz is 3.1x fewer cycles, and an in-order
    /// two-issue PowerPC 450 retires about a third of what an eight-wide
    /// out-of-order core does per cycle on branchy sorting code. An
    /// estimate, not a measurement: nothing here runs on a BG/P.
    pub const BGP_ON_ZEN5: ComputeFactor = ComputeFactor(10.0);

    /// `factor` virtual nanoseconds per host CPU nanosecond; `None` unless
    /// finite and positive.
    pub fn new(factor: f64) -> Option<ComputeFactor> {
        (factor.is_finite() && factor > 0.0).then_some(ComputeFactor(factor))
    }

    /// The factor.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// Reads the CPU time of the thread that runs the ranks' code, in
/// nanoseconds: [`thread_cpu_ns`], or a test's own clock (which makes
/// charged runs exact).
pub type CpuClock = fn() -> u64;

/// Where the running rank's uncharged computation began, if its own code
/// (rather than the simulator's) runs now.
pub(crate) struct Meter {
    factor: ComputeFactor,
    clock: CpuClock,
    /// What reading the clock twice costs by itself, taken off every
    /// interval: about 170 ns of syscall on a VM, as much as a short
    /// stretch of real code, paid at every transport call.
    reading_ns: u64,
    since: Cell<Option<u64>>,
}

/// Empty intervals timed to find the clock's own cost (their median).
const CALIBRATION: usize = 201;

impl Meter {
    pub(crate) fn new(factor: ComputeFactor, clock: CpuClock) -> Meter {
        let mut empty: Vec<u64> = (0..CALIBRATION)
            .map(|_| {
                let start = clock();
                clock().saturating_sub(start)
            })
            .collect();
        empty.sort_unstable();
        Meter {
            factor,
            clock,
            reading_ns: empty[CALIBRATION / 2],
            since: Cell::new(None),
        }
    }

    /// The rank's code starts (or resumes) running now.
    pub(crate) fn start(&self) {
        self.since.set(Some((self.clock)()));
    }

    /// The rank's code stops (a transport call, or the end of a poll):
    /// the virtual nanoseconds it computed since `start`.
    pub(crate) fn stop(&self) -> u64 {
        match self.since.take() {
            Some(since) => {
                let spent = (self.clock)()
                    .saturating_sub(since)
                    .saturating_sub(self.reading_ns);
                (spent as f64 * self.factor.get()).round() as u64
            }
            None => 0,
        }
    }
}

/// This thread's CPU time in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`; 0
/// where it cannot be read).
pub fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; the clock id is a
    // constant every Linux kernel since 2.6.12 supports.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    if rc != 0 {
        return 0;
    }
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
