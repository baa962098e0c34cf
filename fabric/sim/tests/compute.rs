//! Charged computation: the CPU time a rank's code spends between transport
//! calls moves its clock by that time times the factor, before the next send
//! departs; with charging off a run is the hand-computed LogGP figure. Exact
//! figures come from a test-owned CPU clock; the host's clock is checked
//! with bounds.

use std::cell::Cell;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use catena_fabric::{Error, Rank, Rma, Time, Transport};
use catena_sim::{ComputeFactor, CostModel, LogGp, Sim, SimRank};

const MODEL: LogGp = LogGp {
    latency_ns: 1_000.0,
    overhead_ns: 100.0,
    gap_ns: 50.0,
    per_byte_ns: 0.5,
};

/// The tests on the host's clock measure its CPU time, so they run one at a
/// time: a test spinning on the other core would slow the one measuring.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// CPU time spun by rank 0 before its send.
const SPIN: Duration = Duration::from_millis(20);

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec and a clock every Linux has.
    assert_eq!(
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) },
        0
    );
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// Rank 0 computes for `SPIN` of CPU time, then sends to rank 1; rank 1
/// computes too, after its receive. Returns the run's completion.
fn spin_then_send(sim: Sim) -> Duration {
    let deadline = |t: &SimRank<'_>| t.deadline_in(Duration::from_secs(3600));
    let (_, report) = sim
        .run(async |t: &SimRank<'_>| {
            let spin = || {
                let start = thread_cpu();
                while thread_cpu() - start < SPIN {
                    std::hint::black_box(());
                }
            };
            if t.rank() == 0 {
                spin();
                t.send(1, 1, 1, &[7u8; 100], deadline(t)).await?;
            } else {
                t.recv(Some(0), 1, 1, deadline(t)).await?;
                spin();
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    report.completion
}

#[test]
fn computation_is_free_unless_charged() {
    let _alone = alone();
    let one_way = Duration::from_nanos(100 + 1_000 + 50 + 100);
    assert_eq!(spin_then_send(Sim::new(2, MODEL)), one_way);
}

#[test]
fn charged_computation_delays_the_send_after_it_and_the_end() {
    let _alone = alone();
    let factor = ComputeFactor::new(3.0).unwrap();
    let charged = spin_then_send(Sim::new(2, MODEL).with_compute(factor));
    // Both spins lie on the critical path: rank 0's before its send departs,
    // rank 1's after the message arrives.
    let least = 2 * SPIN * 3;
    assert!(charged >= least, "{charged:?} < {least:?}");
    // The simulator's own work is not charged: at most a few ms of slack on
    // a loaded machine beside the 120 ms the ranks computed.
    assert!(charged < least + Duration::from_millis(60), "{charged:?}");
}

/// Rank 0 sends `MESSAGES` to rank 1 with nothing between the calls.
fn calls_without_computation(sim: Sim) -> Duration {
    let deadline = |t: &SimRank<'_>| t.deadline_in(Duration::from_secs(3600));
    let (_, report) = sim
        .run(async |t: &SimRank<'_>| {
            for _ in 0..MESSAGES {
                match t.rank() {
                    0 => t.send(1, 1, 1, &[7u8; 8], deadline(t)).await?,
                    _ => drop(t.recv(Some(0), 1, 1, deadline(t)).await?),
                }
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    report.completion
}

const MESSAGES: u32 = 2_000;

thread_local! {
    /// The test clock's time: the CPU time of the thread running the ranks.
    static TEST_CPU_NS: Cell<u64> = const { Cell::new(0) };
}

/// What one read of the test clock costs, as a real clock's syscall does.
const READ_NS: u64 = 170;

/// A CPU clock that moves only where the test says: by `READ_NS` at every
/// read, by what `compute` and `BusyModel` spend, and by nothing else.
fn test_clock() -> u64 {
    TEST_CPU_NS.with(|now| {
        now.set(now.get() + READ_NS);
        now.get()
    })
}

/// The running rank computes for `ns` of the test clock's CPU time.
fn compute(ns: u64) {
    TEST_CPU_NS.with(|now| now.set(now.get() + ns));
}

/// LogGP whose every send costs the simulator 1 ms of the test clock's CPU
/// time: its own work, inside the transport call, never to be charged.
struct BusyModel(LogGp);

impl CostModel for BusyModel {
    fn arrival(&mut self, from: Rank, to: Rank, bytes: usize, depart: Time) -> Time {
        compute(1_000_000);
        self.0.arrival(from, to, bytes, depart)
    }

    fn overhead_ns(&self) -> u64 {
        self.0.overhead_ns()
    }

    fn gap_ns(&self, bytes: usize) -> u64 {
        self.0.gap_ns(bytes)
    }
}

#[test]
fn reading_the_clock_and_the_simulators_work_are_not_charged() {
    let free = calls_without_computation(Sim::new(2, MODEL));
    let factor = ComputeFactor::new(10.0).unwrap();
    let charged = calls_without_computation(
        Sim::new(2, BusyModel(MODEL)).with_compute_clock(factor, test_clock),
    );
    // Charging a read would add 2 x 170 ns x 10 a call on each side, the
    // simulator's work 1 ms x 10 a send.
    assert_eq!(charged, free);
}

#[test]
fn computation_is_charged_exactly_on_the_test_clock() {
    let deadline = |t: &SimRank<'_>| t.deadline_in(Duration::from_secs(3600));
    let factor = ComputeFactor::new(3.0).unwrap();
    let sim = Sim::new(2, BusyModel(MODEL)).with_compute_clock(factor, test_clock);
    let (_, report) = sim
        .run(async |t: &SimRank<'_>| {
            if t.rank() == 0 {
                compute(20_000);
                t.send(1, 1, 1, &[7u8; 100], deadline(t)).await?;
            } else {
                t.recv(Some(0), 1, 1, deadline(t)).await?;
                compute(20_000);
            }
            Ok::<(), Error>(())
        })
        .unwrap();
    // Rank 0's 20 µs x 3 before the send departs, the one-way message, rank
    // 1's 20 µs x 3 after it.
    let one_way = Duration::from_nanos(100 + 1_000 + 50 + 100);
    assert_eq!(
        report.completion,
        one_way + Duration::from_nanos(2 * 60_000)
    );
}

#[test]
fn a_compute_factor_is_finite_and_positive() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(ComputeFactor::new(bad), None);
    }
    assert_eq!(ComputeFactor::new(2.5).map(ComputeFactor::get), Some(2.5));
}
