//! Interleaved sampling of one row: catena's operation and MPICH's on the
//! same processes, a catena sample then an MPICH sample, so that drift
//! (another job, the CPU clock) hits both alike. A sample is a batch of
//! back-to-back calls long enough that reading the clock costs nothing
//! measurable; a row's figure is each rank's median per-call time over
//! its samples, the slowest rank's. Everything that coordinates the ranks
//! (barriers before samples, agreeing batch sizes, sample counts and
//! whether a side failed) goes through a [`Harness`] that is not the code
//! being timed: MPI's own collectives when MPI is there.

use std::time::Instant;

use crate::heap;
use crate::report::quantile;

pub(crate) type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

/// The untimed collectives that coordinate the ranks.
pub(crate) trait Harness {
    fn rank(&self) -> u32;
    fn barrier(&self) -> Result<()>;
    fn max(&self, x: f64) -> Result<f64>;
    fn min(&self, x: f64) -> Result<f64>;
    /// The sum over ranks (of values small enough never to wrap).
    fn sum(&self, x: u64) -> Result<u64>;
    /// Rank `from`'s `text` on every rank.
    fn share(&self, from: u32, text: &str) -> Result<String>;
}

/// One side of a row: an operation on state it owns, and a check of what
/// its first call left (collective: every rank checks, so a check may use
/// the harness).
pub(crate) trait Side {
    fn call(&mut self) -> Result<()>;
    fn check(&mut self, h: &dyn Harness) -> Result<()>;
}

/// A side from its state and two functions.
pub(crate) struct FnSide<S, C, K> {
    pub state: S,
    pub call: C,
    pub check: K,
}

impl<S, C, K> Side for FnSide<S, C, K>
where
    C: FnMut(&mut S) -> Result<()>,
    K: FnMut(&mut S, &dyn Harness) -> Result<()>,
{
    fn call(&mut self) -> Result<()> {
        (self.call)(&mut self.state)
    }

    fn check(&mut self, h: &dyn Harness) -> Result<()> {
        (self.check)(&mut self.state, h)
    }
}

/// How long a row may take and how often it samples.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    /// The most samples per side.
    pub max_samples: usize,
    /// Seconds of samples per row, both sides together (at least
    /// [`MIN_SAMPLES`] are taken however long they take).
    pub row_seconds: f64,
}

/// Samples per side whatever the budget.
pub(crate) const MIN_SAMPLES: usize = 3;
/// A batch is made this long (or one call, if a call takes longer): the
/// clock is read twice per batch, some 50 ns, under 0.01 % of it.
const BATCH_SECONDS: f64 = 1e-3;
/// At most this many calls in a batch.
const MAX_BATCH: usize = 20_000;
/// A first call quicker than this is followed by calibration batches (the
/// first pays for first contact and buffers); a slower one sets the batch
/// (one call) and the sample count itself.
const RECALIBRATE_BELOW: f64 = 10e-3;

/// One side's figure.
#[derive(Clone, Debug, Default)]
pub(crate) struct Timing {
    /// The slowest rank's median per-call time, seconds.
    pub seconds: f64,
    pub samples: usize,
    pub batch: usize,
}

/// What one row measured.
pub(crate) struct Measured {
    /// catena's timing, or why there is none (agreed by every rank).
    pub catena: std::result::Result<Timing, String>,
    /// MPICH's, where there is an MPICH side.
    pub mpich: Option<std::result::Result<Timing, String>>,
    /// catena's peak temporary heap of one batch per process, the largest
    /// over samples and ranks.
    pub heap: Option<u64>,
}

/// The state of one side while a row is measured.
struct Run<'a> {
    side: &'a mut dyn Side,
    /// Seconds per call (agreed), or why the side failed.
    per_call: std::result::Result<f64, String>,
    batch: usize,
    times: Vec<f64>,
    heap: usize,
    counts_heap: bool,
}

/// Measures one row: first calls (checked), a calibration, then
/// interleaved samples within `budget`. A side that fails or answers
/// wrong is reported, not timed; the other side goes on.
pub(crate) fn measure(
    h: &dyn Harness,
    budget: Budget,
    catena: &mut dyn Side,
    mpich: Option<&mut dyn Side>,
) -> Result<Measured> {
    let mut runs = vec![Run::new(catena, true)];
    runs.extend(mpich.map(|side| Run::new(side, false)));
    for run in &mut runs {
        run.per_call = first_calls(h, run.side)?;
        if let Ok(per_call) = run.per_call {
            run.batch = ((BATCH_SECONDS / per_call).ceil() as usize).clamp(1, MAX_BATCH);
        }
    }
    let sample_seconds: f64 = runs
        .iter()
        .filter_map(|r| r.per_call.as_ref().ok().map(|&t| t * r.batch as f64))
        .sum();
    let samples = match sample_seconds > 0.0 {
        true => ((budget.row_seconds / sample_seconds) as usize)
            .clamp(MIN_SAMPLES, budget.max_samples.max(MIN_SAMPLES)),
        false => 0,
    };
    for _ in 0..samples {
        for run in runs.iter_mut().filter(|r| r.per_call.is_ok()) {
            run.sample(h)?;
        }
    }
    let mut figures = Vec::new();
    for run in &mut runs {
        figures.push(match &run.per_call {
            Err(why) => Err(why.clone()),
            Ok(_) => Ok(Timing {
                seconds: h.max(quantile(&mut run.times, 0.5))?,
                samples: run.times.len(),
                batch: run.batch,
            }),
        });
    }
    let heap = match runs[0].per_call.is_ok() {
        true => Some(h.max(runs[0].heap as f64)? as u64),
        false => None,
    };
    let mut figures = figures.into_iter();
    Ok(Measured {
        catena: figures.next().expect("catena's side"),
        mpich: figures.next(),
        heap,
    })
}

impl<'a> Run<'a> {
    fn new(side: &'a mut dyn Side, counts_heap: bool) -> Run<'a> {
        Run {
            side,
            per_call: Err("not run".into()),
            batch: 1,
            times: Vec::new(),
            heap: 0,
            counts_heap,
        }
    }

    /// One sample: a barrier, then a batch of calls; every rank learns
    /// whether any failed.
    fn sample(&mut self, h: &dyn Harness) -> Result<()> {
        h.barrier()?;
        let before = heap::held();
        heap::reset_peak();
        let start = Instant::now();
        let mut result = Ok(());
        for _ in 0..self.batch {
            result = self.side.call();
            if result.is_err() {
                break;
            }
        }
        let seconds = start.elapsed().as_secs_f64() / self.batch as f64;
        if self.counts_heap {
            self.heap = self.heap.max(heap::peak().saturating_sub(before));
        }
        match agree(h, result.map_err(|e| e.to_string()))? {
            Ok(()) => self.times.push(seconds),
            Err(why) => self.per_call = Err(why),
        }
        Ok(())
    }
}

/// The first call, checked, then the calibration: where the first call
/// was quick, batches of 1, 4, 16, ... calls until one would take a
/// quarter of a sample at the least time per call seen (so one slow call,
/// a first contact, a page fault or a preemption, does not set the
/// batch). The agreed (slowest rank's) seconds per call, or why the side
/// failed.
fn first_calls(h: &dyn Harness, side: &mut dyn Side) -> Result<std::result::Result<f64, String>> {
    let timed = |side: &mut dyn Side, calls: usize| -> Result<std::result::Result<f64, String>> {
        h.barrier()?;
        let start = Instant::now();
        let mut result = Ok(());
        for _ in 0..calls {
            result = side.call();
            if result.is_err() {
                break;
            }
        }
        let seconds = start.elapsed().as_secs_f64();
        match agree(h, result.map_err(|e| e.to_string()))? {
            Ok(()) => Ok(Ok(h.max(seconds)?)),
            Err(why) => Ok(Err(why)),
        }
    };
    let first = match timed(side, 1)? {
        Ok(seconds) => seconds,
        Err(why) => return Ok(Err(why)),
    };
    let checked = side.check(h).map_err(|e| format!("wrong result: {e}"));
    if let Err(why) = agree(h, checked)? {
        return Ok(Err(why));
    }
    // The least time per call seen: a call delayed once (another
    // process ran) does not shrink the batch.
    let mut per_call = first;
    if first < RECALIBRATE_BELOW {
        let mut calls = 1;
        loop {
            let seconds = match timed(side, calls)? {
                Ok(seconds) => seconds,
                Err(why) => return Ok(Err(why)),
            };
            per_call = per_call.min(seconds / calls as f64);
            if calls as f64 * per_call >= BATCH_SECONDS / 4.0 || calls >= MAX_BATCH {
                break;
            }
            calls *= 4;
        }
    }
    Ok(Ok(per_call.max(1e-9)))
}

/// Every rank's verdict: `Ok` where every rank's `result` is; otherwise
/// the lowest failing rank's reason (every failing rank also prints its
/// own on stderr).
fn agree(
    h: &dyn Harness,
    result: std::result::Result<(), String>,
) -> Result<std::result::Result<(), String>> {
    let me = h.rank();
    if let Err(why) = &result {
        eprintln!("[rank {me}] {why}");
    }
    let failed = h.min(match &result {
        Ok(()) => f64::INFINITY,
        Err(_) => f64::from(me),
    })?;
    if failed.is_infinite() {
        return Ok(Ok(()));
    }
    let why = h.share(failed as u32, result.err().as_deref().unwrap_or(""))?;
    Ok(Err(format!("rank {failed}: {why}")))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The harness of a job of one process.
    pub(crate) struct Alone;

    impl Harness for Alone {
        fn rank(&self) -> u32 {
            0
        }
        fn barrier(&self) -> Result<()> {
            Ok(())
        }
        fn max(&self, x: f64) -> Result<f64> {
            Ok(x)
        }
        fn min(&self, x: f64) -> Result<f64> {
            Ok(x)
        }
        fn sum(&self, x: u64) -> Result<u64> {
            Ok(x)
        }
        fn share(&self, _: u32, text: &str) -> Result<String> {
            Ok(text.into())
        }
    }

    /// A side that counts its calls, fails its `fail_at`-th (from 1) and
    /// answers its check with `right`.
    fn side(fail_at: usize, right: bool) -> impl Side {
        FnSide {
            state: 0usize,
            call: move |calls: &mut usize| {
                *calls += 1;
                match *calls == fail_at {
                    true => Err("broken".into()),
                    false => Ok(()),
                }
            },
            check: move |_: &mut usize, _: &dyn Harness| match right {
                true => Ok(()),
                false => Err("element 3 is 7, not 8".into()),
            },
        }
    }

    const BUDGET: Budget = Budget {
        max_samples: 5,
        row_seconds: 0.01,
    };

    #[test]
    fn both_sides_are_sampled_in_batches() {
        let (mut catena, mut mpich) = (side(0, true), side(0, true));
        let m = measure(&Alone, BUDGET, &mut catena, Some(&mut mpich)).unwrap();
        let (c, m) = (m.catena.unwrap(), m.mpich.unwrap().unwrap());
        for t in [c, m] {
            assert!((MIN_SAMPLES..=5).contains(&t.samples), "{t:?}");
            assert!(t.batch > 100, "a call of nothing is batched: {t:?}");
            assert!(t.seconds < 1e-5, "{t:?}");
        }
    }

    #[test]
    fn a_wrong_answer_is_reported_not_timed() {
        let (mut catena, mut mpich) = (side(0, false), side(0, true));
        let m = measure(&Alone, BUDGET, &mut catena, Some(&mut mpich)).unwrap();
        let why = m.catena.unwrap_err();
        assert!(why.contains("wrong result: element 3"), "{why}");
        assert!(m.heap.is_none());
        assert!(m.mpich.unwrap().is_ok(), "the other side goes on");
    }

    #[test]
    fn a_failing_call_is_reported_at_first_call_or_while_sampling() {
        for fail_at in [1, 2, 500] {
            let (mut catena, mut mpich) = (side(0, true), side(fail_at, true));
            let m = measure(&Alone, BUDGET, &mut catena, Some(&mut mpich)).unwrap();
            assert!(m.catena.is_ok());
            let why = m.mpich.unwrap().unwrap_err();
            assert_eq!(why, "rank 0: broken", "failing at call {fail_at}");
        }
    }
}
