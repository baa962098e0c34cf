//! Charged computation: the CPU time a rank's code spends between transport
//! calls moves its clock by that time times the factor, before the next send
//! departs; with charging off a run is the hand-computed LogGP figure.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use catena_fabric::{Error, Rma, Transport};
use catena_sim::{ComputeFactor, LogGp, Sim, SimRank};

const MODEL: LogGp = LogGp {
    latency_ns: 1_000.0,
    overhead_ns: 100.0,
    gap_ns: 50.0,
    per_byte_ns: 0.5,
};

/// The tests here measure host CPU time, so they run one at a time: a
/// test spinning on the other core would slow the one measuring.
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

#[test]
fn reading_the_clock_is_not_charged() {
    let _alone = alone();
    let free = calls_without_computation(Sim::new(2, MODEL));
    let factor = ComputeFactor::new(10.0).unwrap();
    // The fastest of five: a run in which the host takes the core away from
    // a rank for a moment is charged that moment ten times over, whereas
    // charging the clock's reads would slow every run alike.
    let charged = (0..5)
        .map(|_| calls_without_computation(Sim::new(2, MODEL).with_compute(factor)))
        .min()
        .expect("five runs");
    // Each call reads the CPU clock twice, about 170 ns on a VM: charged,
    // that alone would add 2 x 170 ns x 10 a call on each side.
    let per_call = (charged - free) / MESSAGES;
    eprintln!("free {free:?}, charged {charged:?}: {per_call:?} a call");
    assert!(
        per_call < Duration::from_nanos(1_500),
        "{per_call:?} a call"
    );
}

#[test]
fn a_compute_factor_is_finite_and_positive() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert_eq!(ComputeFactor::new(bad), None);
    }
    assert_eq!(ComputeFactor::new(2.5).map(ComputeFactor::get), Some(2.5));
}
