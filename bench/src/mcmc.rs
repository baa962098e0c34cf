//! `catena-bench mcmc`: seed 004's load-balancing kernel. Walker groups of
//! G = 4 consecutive ranks; the group led by rank L draws S = (L mod 32) x
//! `--samples` samples, each taking `--sample-ms` / |G| (the whole group's
//! time per sample, shared by its members). A group that runs out of work
//! asks the group on its right to merge (asynchronously: the right group's
//! leader checks after each sample), and the two become one communicator by
//! create_group. Reports the makespan against the unbalanced run and the
//! ideal (total work / ranks), and the merges, on real processes or in the
//! simulator (`--sim N,...`, virtual time).

use std::time::{Duration, Instant};

use catena_algorithms::groupmap::RankRange;
use catena_algorithms::prelude::*;
use catena_fabric::{wait_until, Rank};
use catena_sim::{LogGp, Sim, SimRank};
use serde::{Deserialize, Serialize};

use crate::report::Table;

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Samples per unit of (L mod 32): the seed used 10,000.
    #[arg(long, default_value_t = 10)]
    samples: u64,
    /// A sample's time for a group of one, T (the seed's 100 ms); a group
    /// of |G| takes T / |G| per sample.
    #[arg(long, default_value_t = 20.0)]
    sample_ms: f64,
    /// Run in the simulator at these numbers of ranks instead (virtual time).
    #[arg(long, value_delimiter = ',')]
    pub sim: Vec<u32>,
}

/// The seed's walker group size.
const GROUP: u32 = 4;
/// Leaders' work repeats with this period of ranks.
const PERIOD: u32 = 32;
const TIMEOUT: Duration = Duration::from_secs(600);
const REQUEST: u32 = 1;
const REPLY: u32 = 2;

/// What the group on the right answers a merge request.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum Reply {
    /// Merged: the new group ends before `hi` and has `remaining` samples.
    Merge { hi: Rank, remaining: u64 },
    /// Every group to the right is done: so is the asker.
    Done,
}

/// What a working group's leader tells its members after each sample.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
enum Step {
    Continue,
    /// The idle group on the left joins: the group now starts at `lo`.
    Merge {
        lo: Rank,
    },
}

#[derive(Clone, Copy)]
struct Params {
    samples: u64,
    sample: Duration,
    balance: bool,
}

/// One rank's figures: when its last sample ended, and the merges it led.
type Figures = (Duration, u32);

/// Work for `d`: an idle wait on the transport's clock (virtual in the
/// simulator, real elsewhere).
async fn work<T: Transport>(t: &T, d: Duration) {
    let until = t.now().saturating_add(d);
    let _timed_out = wait_until(t, until, "a sample", || Ok(None::<()>)).await;
}

/// The contiguous group `lo..hi` as a map of O(1) bytes.
fn range(n: u32, lo: Rank, hi: Rank) -> Result<GroupMap> {
    Ok(GroupMap::from_ranges(
        n,
        &[RankRange::new(lo, hi - 1, 1)],
        Strategy::Auto,
    )?)
}

/// A creation tag for the group `lo..hi`: a process is in one group at a
/// time and its groups grow, so its successive groups get different tags.
fn tag(lo: Rank, hi: Rank) -> u32 {
    (lo.wrapping_mul(2_654_435_761) ^ hi) % catena_algorithms::comm::CREATE_TAGS
}

/// The kernel on one rank.
async fn walker<T: Transport>(t: &T, p: Params) -> Result<Figures> {
    let world = Comm::world(t).with_timeout(TIMEOUT);
    let (n, me) = (t.size(), t.rank());
    let (mut lo, mut hi) = (me / GROUP * GROUP, (me / GROUP * GROUP + GROUP).min(n));
    let mut remaining = u64::from(lo % PERIOD) * p.samples;
    let made = world.icreate_group(range(n, lo, hi)?, tag(lo, hi), CreateAlgorithm::Direct);
    let mut comm = made.await?.ok_or("not in its own group")?;
    world.ibarrier().await?;
    let start = t.now();
    let mut finished = start;
    let mut merges = 0;
    loop {
        while remaining > 0 {
            work(t, p.sample / comm.size()).await;
            remaining -= 1;
            finished = t.now();
            let leader = comm.rank() == 0;
            let step = match leader && p.balance && lo > 0 {
                true => match world.itry_recv_any::<Rank>(REQUEST).await? {
                    Some((asker, asker_lo)) => {
                        world
                            .isend(asker, REPLY, &Reply::Merge { hi, remaining })
                            .await?;
                        merges += 1;
                        Some(Step::Merge { lo: asker_lo })
                    }
                    None => Some(Step::Continue),
                },
                false => leader.then_some(Step::Continue),
            };
            if let Step::Merge { lo: new_lo } = comm.ibcast(0, step).await? {
                lo = new_lo;
                let made =
                    world.icreate_group(range(n, lo, hi)?, tag(lo, hi), CreateAlgorithm::Direct);
                comm = made.await?.ok_or("not in the merged group")?;
            }
        }
        if !p.balance {
            break;
        }
        // Idle: ask the group on the right (led by `hi`) to merge.
        let reply = match comm.rank() == 0 {
            true if hi < n => {
                world.isend(hi, REQUEST, &lo).await?;
                Some(world.irecv::<Reply>(hi, REPLY).await?)
            }
            true => Some(Reply::Done),
            false => None,
        };
        match comm.ibcast(0, reply).await? {
            Reply::Merge {
                hi: new_hi,
                remaining: left,
            } => {
                (hi, remaining) = (new_hi, left);
                let made =
                    world.icreate_group(range(n, lo, hi)?, tag(lo, hi), CreateAlgorithm::Direct);
                comm = made.await?.ok_or("not in the merged group")?;
            }
            Reply::Done => {
                // Tell the group on the left, once it asks, that all is done.
                if comm.rank() == 0 && lo > 0 {
                    let (asker, _): (u32, Rank) = world.irecv_any(REQUEST).await?;
                    world.isend(asker, REPLY, &Reply::Done).await?;
                }
                break;
            }
        }
    }
    let makespan = finished.saturating_sub(start);
    let figures = world.iallreduce((makespan, merges), |a, b| (a.0.max(b.0), a.1 + b.1));
    Ok(figures.await?)
}

/// The ideal makespan: total work over all ranks.
fn ideal(n: u32, p: &Params) -> Duration {
    let work: u64 = (0..n)
        .step_by(GROUP as usize)
        .map(|lo| u64::from(lo % PERIOD) * p.samples)
        .sum();
    p.sample.mul_f64(work as f64 / f64::from(n))
}

fn params(args: &Args, balance: bool) -> Params {
    Params {
        samples: args.samples,
        sample: Duration::from_secs_f64(args.sample_ms / 1e3),
        balance,
    }
}

fn row(table: &mut Table, n: u32, args: &Args, runs: [Figures; 2], wall: Duration) {
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);
    let ideal = ideal(n, &params(args, true));
    let [unbalanced, balanced] = runs;
    table.row(vec![
        n.to_string(),
        ms(unbalanced.0),
        ms(balanced.0),
        ms(ideal),
        format!(
            "{:.2}",
            unbalanced.0.as_secs_f64() / balanced.0.as_secs_f64()
        ),
        balanced.1.to_string(),
        format!("{:.1}", wall.as_secs_f64()),
    ]);
}

fn table() -> Table {
    Table::new(&[
        "ranks",
        "unbalanced ms",
        "balanced ms",
        "ideal ms",
        "speed-up",
        "merges",
        "wall s",
    ])
}

/// In a rank (or alone, as a job of one): both runs, then rank 0 prints.
pub fn main(args: &Args) -> crate::Outcome {
    if !args.sim.is_empty() {
        return simulate(args);
    }
    let t = catena_fabric::init()?;
    let started = Instant::now();
    let mut runs = [(Duration::ZERO, 0); 2];
    for (i, balance) in [false, true].into_iter().enumerate() {
        runs[i] = block_on(&t, walker(&t, params(args, balance))).map_err(|e| e.to_string())?;
    }
    if t.rank() == 0 {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        println!(
            "mcmc: {} processes on {cores} cores, S = (L mod 32) x {}, T = {} ms",
            t.size(),
            args.samples,
            args.sample_ms
        );
        let mut table = table();
        row(&mut table, t.size(), args, runs, started.elapsed());
        table.print();
    }
    t.finalize(TIMEOUT)?;
    Ok(0)
}

/// The kernel in the simulator, in virtual time (BG/P-like LogGP).
fn simulate(args: &Args) -> crate::Outcome {
    eprintln!(
        "catena-bench mcmc --sim: {}, S = (L mod 32) x {}, T = {} ms",
        LogGp::BGP,
        args.samples,
        args.sample_ms
    );
    let mut table = table();
    for &n in &args.sim {
        let started = Instant::now();
        let mut runs = [(Duration::ZERO, 0); 2];
        for (i, balance) in [false, true].into_iter().enumerate() {
            let p = params(args, balance);
            let (results, _) = Sim::new(n, LogGp::BGP)
                .run(async |t: &SimRank<'_>| walker(t, p).await.map_err(|e| e.to_string()))?;
            runs[i] = results.into_iter().next().ok_or("no ranks")??;
        }
        row(&mut table, n, args, runs, started.elapsed());
        eprintln!("N = {n} done in {:.1} s", started.elapsed().as_secs_f64());
    }
    table.print();
    Ok(0)
}
