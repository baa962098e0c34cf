//! `catena-bench alltoall`: Alltoall_specific (seed 002) on the seed's data
//! sets A, B and C, every variant on N local processes (the slowest rank's
//! median per call, the data moved, the peak temporary heap), beside an
//! MPICH implementation of the seed's best variant (counts, MPI_Alltoall,
//! local sort, MPI_Alltoallv) built with `mpi`; `--sim N,...` runs data set
//! C in the simulator (virtual time, messages and bytes per rank).

pub(crate) mod data;

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use catena_algorithms::prelude::*;
use catena_fabric::Blocking;
use catena_fabric::{with_provider, WithProvider};
use catena_sim::{LogGp, Sim, SimRank};
use data::{Particle, Set};

use crate::heap;
use crate::report::{quantile, Table};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Elements per process.
    #[arg(long, default_value_t = 100_000)]
    elements: usize,
    /// Timed calls per variant and data set (after one warm-up call).
    #[arg(long, default_value_t = 10)]
    repetitions: usize,
    /// Data sets, of A, B and C.
    #[arg(long, value_delimiter = ',', default_value = "A,B,C")]
    sets: Vec<String>,
    /// Variants, of alltoallv, sendrecv, put, put-stable and sort.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "alltoallv,sendrecv,put,put-stable,sort"
    )]
    variants: Vec<String>,
    /// The provider the job runs on (`auto`: shm on one host, ucx or ofi
    /// across hosts; ofi and ucx need their features).
    #[arg(long, default_value = "auto")]
    provider: String,
    /// Skip MPICH (builds with the `mpi` feature).
    #[arg(long)]
    no_mpi: bool,
    /// Run data set C in the simulator at these numbers of ranks instead.
    #[arg(long, value_delimiter = ',')]
    sim: Vec<u32>,
    /// Elements per virtual rank in the simulator.
    #[arg(long, default_value_t = 100)]
    sim_elements: usize,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/alltoall.csv")]
    csv: PathBuf,
}

const TIMEOUT: Duration = Duration::from_secs(300);
/// Alltoallv sends P counts from every rank: P^2 messages in the simulator.
const SIM_ALLTOALLV_MAX: u32 = 1024;
/// Sort exchanges whole blocks log^2 P times: hours of wall time beyond.
const SIM_SORT_MAX: u32 = 4096;
const MPICH: &str = "MPICH";
/// `Put` on a neighbourhood plan (data set C: the owners of adjacent
/// sub-cubes).
const NEIGHBOURS: &str = "put-neighbours";
/// `Put` in place, with a window of a tenth of the elements.
const IN_PLACE: &str = "put-in-place";
/// `Put` visiting what landed instead of copying it into a buffer (the
/// visitor reads every element once: the check the other rows make after
/// the clock stops).
const VISIT: &str = "put-visit";

/// One figure: a data set, a variant, the slowest rank's median, the mean
/// bytes a process sends to others, the largest temporary heap of a call,
/// and the most a process holds between calls (a plan's window and
/// buffers; MPICH's reused sort buffer).
struct Figure {
    set: String,
    variant: String,
    ms: f64,
    moved: f64,
    heap: usize,
    held: usize,
}

fn sets(args: &Args) -> Result<Vec<Set>> {
    Ok(args
        .sets
        .iter()
        .map(|s| Set::parse(s))
        .collect::<Result<_, _>>()?)
}

fn variants(args: &Args) -> Result<Vec<AlltoallVariant>> {
    Ok(args
        .variants
        .iter()
        .map(|v| v.parse())
        .collect::<Result<_, _>>()?)
}

/// Room for what a process receives: the mean plus generous slack (A and
/// B are uniform, C mostly stays).
pub(crate) fn capacity(elements: usize) -> usize {
    elements + elements / 4 + 1024
}

/// Outside a job: runs the job, then MPICH, and prints them side by side;
/// or the simulator sweep.
pub fn compare(args: &Args) -> crate::Outcome {
    if !args.sim.is_empty() {
        return simulate(args);
    }
    let detail = format!(", {} elements each, on {}", args.elements, args.provider);
    let oversubscribed = args.job.launch("alltoall", &detail)?;
    let figures = read_csv(&args.csv)?;
    #[cfg(feature = "mpi")]
    let figures = match args.no_mpi {
        true => figures,
        false => figures.into_iter().chain(mpich(args)?).collect(),
    };
    print(args, oversubscribed, &figures);
    Ok(0)
}

/// In a rank: every variant on every data set, on the chosen provider.
pub fn main(args: &Args) -> crate::Outcome {
    with_provider(&args.provider, InRank(args))?
}

struct InRank<'a>(&'a Args);

impl WithProvider for InRank<'_> {
    type Output = crate::Outcome;

    fn run<P: Provider>(self) -> crate::Outcome {
        let args = self.0;
        let t = P::from_env()?;
        let world = Comm::world(&t).with_timeout(TIMEOUT);
        let mut figures = Vec::new();
        for set in sets(args)? {
            let (rank, size, n) = (t.rank(), t.size(), args.elements);
            figures.extend(match set {
                Set::A => measure(&world, args, set, &data::integers(n, rank, size), |e| *e)?,
                Set::B => measure(&world, args, set, &data::particles(n, rank, size), tproc)?,
                Set::C => measure(&world, args, set, &data::moved(n, rank, size), tproc)?,
            });
        }
        if t.rank() == 0 {
            write_csv(&args.csv, &figures)?;
        }
        drop(world);
        t.finalize(TIMEOUT)?;
        Ok(0)
    }
}

fn tproc(p: &Particle) -> u32 {
    p.tproc
}

/// Every selected variant on one data set: repeated calls on one plan.
fn measure<T: Transport + Blocking, E: Pod>(
    world: &Comm<'_, T>,
    args: &Args,
    set: Set,
    send: &[E],
    target: impl Fn(&E) -> u32 + Copy,
) -> Result<Vec<Figure>> {
    let me = world.rank();
    let away = send.iter().filter(|e| target(e) != me).count();
    let moved = world.allreduce(away as f64, |a, b| a + b)? / f64::from(world.size());
    let moved = moved * std::mem::size_of::<E>() as f64;
    let mut figures = Vec::new();
    let mut figure = |variant: &str, (ms, peak): (f64, usize), held: usize| -> Result<()> {
        let most = |x: usize| world.allreduce(x as u64, |a, b| *a.max(b));
        figures.push(Figure {
            set: set.name().into(),
            variant: variant.into(),
            ms,
            moved,
            heap: most(peak)? as usize,
            held: most(held)? as usize,
        });
        Ok(())
    };
    let room = capacity(send.len());
    for variant in variants(args)? {
        let plan = world.alltoall_plan::<E>(room, AlltoallOptions::new(variant))?;
        figure(
            variant.name(),
            time_plan(world, &plan, args, send, target)?,
            plan.held_bytes(),
        )?;
    }
    if set == Set::C {
        let near = data::neighbourhood(me, world.size());
        let peers = AlltoallPeers {
            sources: near.clone(),
            targets: near,
        };
        let plan = world.alltoall_plan_among::<E>(room, Default::default(), peers)?;
        figure(
            NEIGHBOURS,
            time_plan(world, &plan, args, send, target)?,
            plan.held_bytes(),
        )?;
    }
    let plan = world.alltoall_plan::<E>(room, AlltoallOptions::new(AlltoallVariant::Put))?;
    // (elements visited, of them aimed elsewhere, the count the call gave)
    let seen = std::cell::Cell::new((0, 0, 0));
    let timed = time_calls(
        world,
        args,
        || seen.set((0, 0, 0)),
        || {
            let visit = |landed: &[E]| {
                let stray = landed.iter().filter(|e| target(e) != me).count();
                let (visited, strays, _) = seen.get();
                seen.set((visited + landed.len(), strays + stray, 0));
            };
            let got = plan.exchange_visit(send, |e, to| to.to(target(e)), visit)?;
            let (visited, strays, _) = seen.get();
            seen.set((visited, strays, got));
            Ok(())
        },
        || match seen.get() {
            (visited, 0, got) if visited == got => Ok(()),
            (visited, strays, got) => Err(format!(
                "rank {me} visited {visited} elements ({strays} for others) of {got} received"
            )
            .into()),
        },
    )?;
    figure(VISIT, timed, plan.held_bytes())?;
    // In place, on a plan whose window holds a tenth of the elements (so
    // a call takes several rounds and bounded extra memory).
    let plan = world.alltoall_plan::<E>(send.len() / 10 + 1, Default::default())?;
    let data = RefCell::new(Vec::new());
    let timed = time_calls(
        world,
        args,
        || *data.borrow_mut() = send.to_vec(),
        || Ok(plan.exchange_in_place(&mut data.borrow_mut(), |e, to| to.to(target(e)))?),
        || all_mine(&data.borrow(), me, target),
    )?;
    figure(IN_PLACE, timed, plan.held_bytes())?;
    Ok(figures)
}

/// Fails unless every element is aimed at `me`.
fn all_mine<E>(got: &[E], me: u32, target: impl Fn(&E) -> u32) -> Result<()> {
    match got.iter().find(|e| target(e) != me) {
        Some(e) => Err(format!("rank {me} got an element for {}", target(e)).into()),
        None => Ok(()),
    }
}

/// The figure of a plan's ordinary calls.
fn time_plan<T: Transport + Blocking, E: Pod>(
    world: &Comm<'_, T>,
    plan: &AlltoallPlan<'_, '_, T, E>,
    args: &Args,
    send: &[E],
    target: impl Fn(&E) -> u32 + Copy,
) -> Result<(f64, usize)> {
    let me = world.rank();
    let recv = RefCell::new(vec![E::zeroed(); plan.capacity()]);
    let got = std::cell::Cell::new(0);
    time_calls(
        world,
        args,
        || {},
        || {
            let mut recv = recv.borrow_mut();
            got.set(plan.exchange(send, &mut recv, |e, to| to.to(target(e)))?);
            Ok(())
        },
        || all_mine(&recv.borrow()[..got.get()], me, target),
    )
}

/// `call` run `repetitions + 1` times, `prepare` before and `check` after
/// each, untimed: the slowest process's median (the first call, which also
/// learns the peers' windows, not counted) and the most heap one call
/// allocated.
fn time_calls<T: Transport + Blocking>(
    world: &Comm<'_, T>,
    args: &Args,
    mut prepare: impl FnMut(),
    mut call: impl FnMut() -> Result<()>,
    mut check: impl FnMut() -> Result<()>,
) -> Result<(f64, usize)> {
    let (mut times, mut peak) = (Vec::new(), 0usize);
    for repetition in 0..=args.repetitions {
        prepare();
        world.barrier()?;
        let before = heap::held();
        heap::reset_peak();
        let start = Instant::now();
        call()?;
        let elapsed = start.elapsed().as_secs_f64() * 1e3;
        let temporary = heap::peak().saturating_sub(before);
        check()?;
        let slowest = world.allreduce(elapsed, |a, b| a.max(*b))?;
        if repetition > 0 {
            times.push(slowest);
            peak = peak.max(temporary);
        }
    }
    Ok((quantile(&mut times, 0.5), peak))
}

fn write_csv(path: &Path, figures: &[Figure]) -> Result<()> {
    let mut table = Table::new(&[
        "set",
        "variant",
        "ms",
        "moved_bytes",
        "heap_bytes",
        "held_bytes",
    ]);
    for f in figures {
        table.row(vec![
            f.set.clone(),
            f.variant.clone(),
            format!("{:.4}", f.ms),
            format!("{:.0}", f.moved),
            f.heap.to_string(),
            f.held.to_string(),
        ]);
    }
    Ok(table.write_csv(path)?)
}

fn read_csv(path: &Path) -> Result<Vec<Figure>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .skip(1)
        .map(|line| match line.split(',').collect::<Vec<_>>()[..] {
            [set, variant, ms, moved, heap, held] => Ok(Figure {
                set: set.into(),
                variant: variant.into(),
                ms: ms.parse()?,
                moved: moved.parse()?,
                heap: heap.parse()?,
                held: held.parse()?,
            }),
            _ => Err(format!("{}: a bad line {line:?}", path.display()).into()),
        })
        .collect()
}

fn print(args: &Args, oversubscribed: bool, figures: &[Figure]) {
    println!(
        "alltoall_specific on {} processes ({}{}), {} elements each: the slowest rank's median",
        args.job.ranks,
        args.provider,
        if oversubscribed {
            ", OVERSUBSCRIBED: more processes than cores"
        } else {
            ""
        },
        args.elements
    );
    let mut table = Table::new(&[
        "set",
        "variant",
        "ms",
        "MPICH/this",
        "MB moved/process",
        "temp heap MB",
        "held MB",
    ]);
    let mb = |b: f64| format!("{:.2}", b / 1e6);
    for f in figures {
        let mpich = figures
            .iter()
            .find(|m| m.set == f.set && m.variant == MPICH);
        table.row(vec![
            f.set.clone(),
            f.variant.clone(),
            format!("{:.2}", f.ms),
            mpich.map_or("-".into(), |m| format!("{:.2}", m.ms / f.ms)),
            mb(f.moved),
            mb(f.heap as f64),
            mb(f.held as f64),
        ]);
    }
    table.print();
}

/// The seed's best variant on MPICH, under `mpiexec`.
#[cfg(feature = "mpi")]
fn mpich(args: &Args) -> Result<Vec<Figure>> {
    let csv = args.csv.with_extension("mpich.csv");
    let extra = [
        "--elements".to_string(),
        args.elements.to_string(),
        "--sets".into(),
        args.sets.join(","),
    ];
    crate::relaunch::run_under_mpiexec(
        args.job.ranks,
        &args.job.hosts,
        "alltoall",
        args.repetitions,
        &csv,
        &extra,
    )?;
    read_csv(&csv)
}

/// Data set `set` of `n` elements on `rank` as bytes, with its layout
/// ([`Set::layout`]).
#[cfg(feature = "mpi")]
pub(crate) fn set_bytes(set: Set, n: usize, rank: u32, size: u32) -> (Vec<u8>, (usize, usize)) {
    let bytes = match set {
        Set::A => bytemuck::cast_slice(&data::integers(n, rank, size)).to_vec(),
        Set::B => bytemuck::cast_slice(&data::particles(n, rank, size)).to_vec(),
        Set::C => bytemuck::cast_slice(&data::moved(n, rank, size)).to_vec(),
    };
    (bytes, set.layout())
}

/// The target of an element of `element` bytes whose target lies at `at`.
pub(crate) fn target_at(e: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(e[at..at + 4].try_into().expect("4 bytes"))
}

/// The seed's best variant on MPICH: counts per target, MPI_Alltoall of
/// the counts, a stable counting sort into a temporary, MPI_Alltoallv of
/// bytes; its buffers are kept across calls, as a plan's are (the
/// exchange itself needs the `mpi` feature).
#[cfg_attr(not(feature = "mpi"), allow(dead_code))]
pub(crate) struct MpichExchange {
    element: usize,
    at: usize,
    sorted: Vec<u8>,
    /// What arrived (room for `capacity` elements).
    pub(crate) recv: Vec<u8>,
}

impl MpichExchange {
    /// For `send_bytes` bytes of elements of `element` bytes, their target
    /// at `at`, receiving up to `capacity` elements.
    pub(crate) fn new(send_bytes: usize, (element, at): (usize, usize), capacity: usize) -> Self {
        MpichExchange {
            element,
            at,
            sorted: vec![0u8; send_bytes],
            recv: vec![0u8; capacity * element],
        }
    }

    /// The temporary it keeps between calls (the sort buffer).
    #[cfg(feature = "mpi")]
    pub(crate) fn held_bytes(&self) -> usize {
        self.sorted.len()
    }

    /// One exchange of `send` over `world`: the number of bytes received.
    #[cfg(feature = "mpi")]
    pub(crate) fn exchange<C: mpi::traits::Communicator>(
        &mut self,
        world: &C,
        send: &[u8],
    ) -> Result<usize> {
        use mpi::datatype::{Partition, PartitionMut};
        use mpi::traits::*;

        let (element, at) = (self.element, self.at);
        let size = world.size() as usize;
        let mut counts = vec![0i32; size];
        for e in send.chunks(element) {
            counts[target_at(e, at) as usize] += 1;
        }
        let mut recv_counts = vec![0i32; size];
        world.all_to_all_into(&counts[..], &mut recv_counts[..]);
        let displs = |c: &[i32]| -> Vec<i32> {
            c.iter()
                .scan(0, |at, &c| Some(std::mem::replace(at, *at + c)))
                .collect()
        };
        let mut next: Vec<usize> = displs(&counts).iter().map(|&d| d as usize).collect();
        for e in send.chunks(element) {
            let t = target_at(e, at) as usize;
            self.sorted[next[t] * element..(next[t] + 1) * element].copy_from_slice(e);
            next[t] += 1;
        }
        let bytes = |c: &[i32]| c.iter().map(|&c| c * element as i32).collect::<Vec<_>>();
        let (scounts, rcounts) = (bytes(&counts), bytes(&recv_counts));
        let (sdispls, rdispls) = (displs(&scounts), displs(&rcounts));
        let total: i32 = rcounts.iter().sum();
        if total as usize > self.recv.len() {
            return Err(format!(
                "rank {} receives {total} bytes, room for {}",
                world.rank(),
                self.recv.len()
            )
            .into());
        }
        let s = Partition::new(&self.sorted[..], &scounts[..], &sdispls[..]);
        let mut r = PartitionMut::new(&mut self.recv[..], &rcounts[..], &rdispls[..]);
        world.all_to_all_varcount_into(&s, &mut r);
        Ok(total as usize)
    }
}

/// Under `mpiexec`: [`MpichExchange`] on every data set.
#[cfg(feature = "mpi")]
pub fn mpi_main(args: &Args) -> crate::Outcome {
    use mpi::collective::SystemOperation;
    use mpi::traits::*;

    let universe = mpi::initialize().ok_or("MPI is initialized already")?;
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    let n = args.elements;
    let mut figures = Vec::new();
    for set in sets(args)? {
        let (send, (element, at)) = set_bytes(set, n, rank, size);
        let away = send
            .chunks(element)
            .filter(|e| target_at(e, at) != rank)
            .count() as f64;
        let mut moved = 0.0;
        world.all_reduce_into(&away, &mut moved, SystemOperation::sum());
        let mut mpich = MpichExchange::new(send.len(), (element, at), capacity(n));
        let (mut times, mut peak) = (Vec::new(), 0usize);
        for repetition in 0..=args.repetitions {
            world.barrier();
            let before = heap::held();
            heap::reset_peak();
            let start = Instant::now();
            mpich.exchange(&world, &send)?;
            let elapsed = start.elapsed().as_secs_f64() * 1e3;
            let temporary = heap::peak().saturating_sub(before);
            let mut slowest = 0.0f64;
            world.all_reduce_into(&elapsed, &mut slowest, SystemOperation::max());
            if repetition > 0 {
                times.push(slowest);
                peak = peak.max(temporary);
            }
        }
        let mut most = 0u64;
        world.all_reduce_into(&(peak as u64), &mut most, SystemOperation::max());
        figures.push(Figure {
            set: set.name().into(),
            variant: MPICH.into(),
            ms: quantile(&mut times, 0.5),
            moved: moved / f64::from(size) * element as f64,
            heap: most as usize,
            held: mpich.held_bytes(),
        });
    }
    if rank == 0 {
        write_csv(&args.csv, &figures)?;
    }
    Ok(0)
}

/// Data set C in the simulator (BG/P-like LogGP, computation free): a
/// first call (which also learns the peers' windows) and a second; the
/// second call's virtual time (slowest rank) and traffic per rank.
fn simulate(args: &Args) -> crate::Outcome {
    let mut table = Table::new(&[
        "ranks",
        "variant",
        "moved/rank",
        "targets/rank",
        "first us",
        "second us",
        "msgs/rank",
        "bytes/rank",
        "wall s",
    ]);
    eprintln!(
        "catena-bench alltoall --sim: data set C, {} particles per rank, {}, computation free",
        args.sim_elements,
        LogGp::BGP
    );
    let runs: Vec<(AlltoallVariant, bool)> = variants(args)?
        .into_iter()
        .map(|v| (v, false))
        .chain([(AlltoallVariant::Put, true)])
        .collect();
    for &n in &args.sim {
        for &(variant, among) in &runs {
            let too_many = match variant {
                AlltoallVariant::Alltoallv => n > SIM_ALLTOALLV_MAX,
                AlltoallVariant::Sort => n > SIM_SORT_MAX,
                _ => false,
            };
            if too_many {
                continue;
            }
            let started = Instant::now();
            let (first, one) = sim_calls(n, args.sim_elements, variant, among, 1)?;
            let (second, two) = sim_calls(n, args.sim_elements, variant, among, 2)?;
            let per_rank = |x: u64| x as f64 / f64::from(n);
            let (moved, targets) = moved_per_rank(n, args.sim_elements);
            let name = if among { NEIGHBOURS } else { variant.name() };
            let row = vec![
                n.to_string(),
                name.into(),
                format!("{moved:.1}"),
                format!("{targets:.2}"),
                format!("{:.1}", first.as_secs_f64() * 1e6),
                format!("{:.1}", second.as_secs_f64() * 1e6),
                format!("{:.1}", per_rank(two.messages - one.messages)),
                format!("{:.0}", per_rank(two.bytes - one.bytes)),
                format!("{:.1}", started.elapsed().as_secs_f64()),
            ];
            eprintln!("{}", row.join("  "));
            table.row(row);
        }
    }
    table.print();
    table.write_csv(&args.csv)?;
    eprintln!("wrote {}", args.csv.display());
    Ok(0)
}

/// Particles per rank that leave it, and other ranks each sends to, on
/// average.
fn moved_per_rank(n: u32, elements: usize) -> (f64, f64) {
    let (mut away, mut targets) = (0usize, 0usize);
    for r in 0..n {
        let mut to: Vec<u32> = data::moved(elements, r, n)
            .iter()
            .map(|p| p.tproc)
            .filter(|&t| t != r)
            .collect();
        away += to.len();
        to.sort_unstable();
        to.dedup();
        targets += to.len();
    }
    (away as f64 / f64::from(n), targets as f64 / f64::from(n))
}

/// `calls` alltoalls of data set C on `n` virtual ranks (`among`: on a
/// neighbourhood plan): the last call's virtual time (slowest rank) and the
/// run's report.
fn sim_calls(
    n: u32,
    elements: usize,
    variant: AlltoallVariant,
    among: bool,
    calls: usize,
) -> Result<(Duration, catena_sim::Report)> {
    let sim = Sim::new(n, LogGp::BGP);
    let (results, report) = sim.run(async |t: &SimRank<'_>| {
        let world = Comm::world(t).with_timeout(TIMEOUT);
        let send = data::moved(elements, t.rank(), n);
        let (room, options) = (capacity(elements), AlltoallOptions::new(variant));
        let plan = match among {
            false => world.alltoall_plan::<Particle>(room, options).ok()?,
            true => {
                let near = data::neighbourhood(t.rank(), n);
                let peers = AlltoallPeers {
                    sources: near.clone(),
                    targets: near,
                };
                world
                    .ialltoall_plan_among(room, options, peers)
                    .await
                    .ok()?
            }
        };
        let mut recv = vec![Particle::zeroed(); plan.capacity()];
        let mut last = Duration::ZERO;
        for _ in 0..calls {
            let start = t.now();
            let got = plan
                .iexchange(&send, &mut recv, |e, to| to.to(e.tproc))
                .await
                .ok()?;
            last = t.now().saturating_sub(start);
            if recv[..got].iter().any(|p| p.tproc != t.rank()) {
                return None;
            }
        }
        Some(last)
    })?;
    let mut slowest = Duration::ZERO;
    for r in results {
        slowest = slowest.max(r.ok_or(format!("{variant:?} on {n} ranks: a rank failed"))?);
    }
    Ok((slowest, report))
}
