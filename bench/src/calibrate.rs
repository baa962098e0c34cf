//! `catena-bench calibrate`: the simulator's cost model fitted to what
//! `catena-bench put` and `catena-bench collectives -n 2` measure on one
//! machine, the model's error on every row measured there (at N = 2 and
//! at the larger N of `collectives -n 4, 8, 16` runs), and catena's split,
//! create_group, allreduce and alltoall_specific against MPICH's
//! algorithms (`crate::mpich`) from 16 to a million simulated ranks under
//! that model: where catena overtakes MPICH.
//!
//! Both sides run in the simulator under one model: catena's algorithms
//! unmodified, MPICH's as the baselines in `crate::mpich`. Where the
//! simulator cannot hold a baseline's O(N) buffers per rank, its closed
//! form under the same LogGP is used (the tests of `crate::mpich` check
//! it against the simulation), plus the O(N) local work MPICH's split does
//! (a pass over all N pairs and a sort of its group), timed here at the
//! fitted computation factor.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytemuck::{Pod, Zeroable};
use catena_algorithms::prelude::*;
use catena_fabric::Rma;
use catena_sim::{ComputeFactor, HostModel, LogGp, Sim, SimRank};

use crate::alltoall::capacity;
use crate::alltoall::data::{self, Particle};
use crate::create_group::Shape;
use crate::mpich;
use crate::report::Table;
use crate::split::{Workload, WORKLOADS};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(clap::Args)]
pub struct Args {
    /// `catena-bench collectives` CSVs, comma-separated: the measured rows
    /// (the fit takes N = 2's; the error table is given at every N they
    /// hold, the median over the CSVs of each row).
    #[arg(long, value_delimiter = ',', default_value = "results/collectives.csv")]
    measured: Vec<PathBuf>,
    /// The fitted machine the error table and the sweep model.
    #[arg(long, value_enum, default_value_t = Fitted::Xeon16)]
    machine: Fitted,
    /// `catena-bench put`'s CSV: put latency and bandwidth.
    #[arg(long, default_value = "results/put.csv")]
    put: PathBuf,
    /// Fit the parameters from the two CSVs and print them (the figures
    /// below use the recorded [`Fitted`] machine's values, not these).
    #[arg(long)]
    fit: bool,
    /// Only the model's error on the measured rows, no sweep.
    #[arg(long)]
    error_only: bool,
    /// Rank counts of the sweep.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "16,64,256,1024,4096,16384,65536,262144,1048576"
    )]
    ranks: Vec<u32>,
    /// Operations of the sweep: split, create_group, allreduce, alltoall.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "split,create_group,allreduce,alltoall"
    )]
    ops: Vec<String>,
    /// Largest N at which MPICH's baselines run in the simulator; their
    /// closed forms above.
    #[arg(long, default_value_t = 16384)]
    mpich_sim_max: u32,
    /// Largest N of catena's alltoall_specific in the simulator (every
    /// rank holds its elements three times over).
    #[arg(long, default_value_t = 262144)]
    alltoall_max: u32,
    /// Largest N of catena's allreduce in the simulator (across hosts each
    /// simulated rank holds its host team's region, about 85 KiB).
    #[arg(long, default_value_t = 262144)]
    allreduce_max: u32,
    /// Largest N of catena's side in the simulator for every operation
    /// (its rows above show only MPICH's).
    #[arg(long, default_value_t = u32::MAX)]
    catena_max: u32,
    /// Particles per rank of the alltoall sweep (data set C).
    #[arg(long, default_value_t = 64)]
    elements: usize,
    /// Charge catena's own computation in the sweep too (at the fitted
    /// factor); by default it is free there, see docs/scaling.md.
    #[arg(long)]
    charge_catena: bool,
    /// Where the sweep's rows go.
    #[arg(long, default_value = "results/crossover.csv")]
    csv: PathBuf,
    /// Where the error table's rows go.
    #[arg(long, default_value = "results/calibrate-error.csv")]
    error_csv: PathBuf,
}

/// The modelled machine: one rank a core, `ranks_per_host` cores a host
/// sharing memory, every message between ranks at the fitted LogGP.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Machine {
    pub net: LogGp,
    pub host: HostModel,
    pub compute: f64,
    pub ranks_per_host: u32,
}

/// The machines the model was fitted on, each by `catena-bench calibrate
/// --fit` from `catena-bench put --provider shm` and `catena-bench
/// collectives -n 2` (catena and MPICH 4.0.2 on the same two processes, a
/// core each):
/// * L (both models): the one-way 8-byte put latency, a cache line
///   crossing with a put's own work (put.csv `put_latency`, 8 B);
/// * G (both models): the inverse of the largest put's bandwidth (a
///   memcpy between two processes' memory; put.csv `bandwidth`);
/// * o (messages, g = o): what makes the simulated MPICH allreduce of 8 B
///   at N = 2 (one exchange: 2 o + L + 8 G) equal its measured median;
///   g is not identifiable from two ranks (one message a round), so g = o
///   as in LogP's usual reading;
/// * o (host memory): what makes the simulated catena barrier at N = 2
///   (through host memory) equal its measured median;
/// * the computation factor: host CPU ns to virtual ns, 1 (the modelled
///   cores are the measured ones; `--fit` prints the least squares factor
///   over the catena rows, for comparison).
///
/// Only N = 2 is fitted: the rows at larger N are the model's test.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Fitted {
    /// The 2-vCPU AMD EPYC development VM, shared (its speed varies about
    /// 3x between runs), 2026-11-26: N = 2 only.
    DevVm,
    /// The 16-core Intel Xeon device machine (one socket, a Firecracker
    /// VM), 2026-11-26 at 2afff1e: N = 2, 4, 8 and 16 measured, hosts of
    /// 16 cores as the sweep models them.
    Xeon16,
}

impl Fitted {
    pub(crate) fn machine(self) -> Machine {
        match self {
            Fitted::DevVm => DEV_VM,
            Fitted::Xeon16 => XEON_16,
        }
    }
}

const DEV_VM: Machine = Machine {
    net: LogGp {
        latency_ns: 87.0,
        overhead_ns: 128.0,
        gap_ns: 128.0,
        per_byte_ns: 0.054,
    },
    host: HostModel {
        overhead_ns: 9.0,
        latency_ns: 87.0,
        per_byte_ns: 0.054,
    },
    compute: 1.0,
    ranks_per_host: 16,
};

const XEON_16: Machine = Machine {
    net: LogGp {
        latency_ns: 167.7,
        overhead_ns: 430.0,
        gap_ns: 430.0,
        per_byte_ns: 0.145,
    },
    host: HostModel {
        overhead_ns: 50.0,
        latency_ns: 167.7,
        per_byte_ns: 0.145,
    },
    compute: 1.0,
    ranks_per_host: 16,
};

impl Machine {
    fn sim(&self, n: u32, charged: bool) -> Sim {
        let sim = Sim::new(n, self.net)
            .with_host_model(self.host)
            .with_ranks_per_host(self.ranks_per_host);
        match ComputeFactor::new(self.compute) {
            Some(f) if charged => sim.with_compute(f),
            _ => sim,
        }
    }
}

/// How long a catena call may take in virtual time.
const TIMEOUT: Duration = Duration::from_secs(3600);

/// An operation both sides run.
#[derive(Clone, Copy, Debug)]
enum Op {
    Barrier,
    Allreduce(usize),
    Split(Workload),
    /// create_group of the lower half of the ranks.
    CreateGroup,
    /// alltoall_specific of `elements` per rank of data set A, B or C.
    Alltoall(data::Set, usize),
}

impl Op {
    fn name(self) -> (String, String) {
        match self {
            Op::Barrier => ("barrier".into(), "-".into()),
            Op::Allreduce(b) => ("allreduce".into(), size_name(b)),
            Op::Split(w) => ("split".into(), w.name()),
            Op::CreateGroup => ("create_group".into(), "lower half".into()),
            Op::Alltoall(s, _) => ("alltoall (Rust)".into(), s.name().into()),
        }
    }
}

/// A size as `catena-bench collectives` names it ("8 B", "64 KiB").
fn size_name(bytes: usize) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1 << 20 => format!("{} KiB", b >> 10),
        b => format!("{} MiB", b >> 20),
    }
}

/// The virtual ns of the `calls`-th call (the slowest rank's end of that
/// call less the slowest rank's end of the one before; of the call itself
/// when `calls` is 1), and the run's wall time.
fn per_call(ends: &[Vec<u64>], calls: usize) -> f64 {
    let latest = |k: usize| ends.iter().map(|e| e[k]).max().unwrap_or(0);
    let before = if calls > 1 { latest(calls - 2) } else { 0 };
    (latest(calls - 1) - before) as f64
}

fn sum(a: &u64, b: &u64) -> u64 {
    a.wrapping_add(*b)
}

/// catena's side of `op`, `calls` calls in a row on `n` ranks.
fn catena(m: &Machine, op: Op, n: u32, calls: usize, charged: bool) -> Result<f64> {
    let sim = m.sim(n, charged);
    let group = Shape::LowerHalf.map(n)?;
    let (ends, _) = sim.run(async |t: &SimRank<'_>| -> Result<Vec<u64>, String> {
        let world = Comm::world(t).with_timeout(TIMEOUT);
        let me = t.rank();
        let mut ends = Vec::new();
        let e = |e: catena_algorithms::Error| e.to_string();
        match op {
            Op::Barrier => {
                for _ in 0..calls {
                    world.ibarrier().await.map_err(e)?;
                    ends.push(t.now().0);
                }
            }
            Op::Allreduce(bytes) => {
                let send: Vec<u64> = (0..bytes / 8).map(|i| u64::from(me) + i as u64).collect();
                let mut recv = vec![0u64; send.len()];
                for _ in 0..calls {
                    world
                        .iallreduce_into(&send, &mut recv, sum)
                        .await
                        .map_err(e)?;
                    ends.push(t.now().0);
                }
            }
            Op::Split(w) => {
                for _ in 0..calls {
                    let color = w.color(me, n);
                    let made = match w.key(me) {
                        Key::Is(k) => world.isplit(color, k).await,
                        Key::ParentOrder => world.isplit_by_color(color).await,
                    };
                    made.map_err(e)?;
                    ends.push(t.now().0);
                }
            }
            Op::CreateGroup => {
                for call in 0..calls {
                    world
                        .icreate_group(group.clone(), call as u32, CreateAlgorithm::Direct)
                        .await
                        .map_err(e)?;
                    ends.push(t.now().0);
                }
            }
            Op::Alltoall(set, elements) => match set {
                data::Set::A => {
                    let send = data::integers(elements, me, n);
                    exchange(t, &world, &send, |x| *x, calls, &mut ends).await?
                }
                data::Set::B => {
                    let send = data::particles(elements, me, n);
                    exchange(t, &world, &send, |p: &Particle| p.tproc, calls, &mut ends).await?
                }
                data::Set::C => {
                    let send = data::moved(elements, me, n);
                    exchange(t, &world, &send, |p: &Particle| p.tproc, calls, &mut ends).await?
                }
            },
        }
        Ok(ends)
    })?;
    let ends = ends.into_iter().collect::<Result<Vec<_>, String>>()?;
    Ok(per_call(&ends, calls))
}

/// `calls` exchanges of `send` on a plan of the default variant.
async fn exchange<E: Pod>(
    t: &SimRank<'_>,
    world: &Comm<'_, SimRank<'_>>,
    send: &[E],
    target: impl Fn(&E) -> u32,
    calls: usize,
    ends: &mut Vec<u64>,
) -> Result<(), String> {
    let plan = world
        .alltoall_plan::<E>(capacity(send.len()), AlltoallOptions::default())
        .map_err(|e| e.to_string())?;
    let mut recv = vec![E::zeroed(); plan.capacity()];
    for _ in 0..calls {
        plan.iexchange(send, &mut recv, |e, to| to.to(target(e)))
            .await
            .map_err(|e| e.to_string())?;
        ends.push(t.now().0);
    }
    Ok(())
}

/// MPICH's side of `op` (the baselines of `crate::mpich`) in the simulator.
fn mpich(m: &Machine, op: Op, n: u32, calls: usize, charged: bool) -> Result<f64> {
    let sim = m.sim(n, charged);
    let (ends, _) = sim.run(async |t: &SimRank<'_>| -> Result<Vec<u64>, String> {
        let deadline = t.deadline_in(TIMEOUT);
        let me = t.rank();
        let mut ends = Vec::new();
        let e = |e: catena_fabric::Error| e.to_string();
        let world: Vec<u32> = (0..n).collect();
        for _ in 0..calls {
            match op {
                Op::Barrier => return Err("no MPICH barrier baseline".into()),
                Op::Allreduce(bytes) => {
                    let x = vec![1u8; bytes];
                    let add = |a: &mut [u8], b: &[u8]| {
                        for (a, b) in a.iter_mut().zip(b) {
                            *a = a.wrapping_add(*b);
                        }
                    };
                    mpich::allreduce::allreduce(t, &world, me as usize, x, add, 0, deadline)
                        .await
                        .map_err(e)?;
                }
                Op::Split(w) => {
                    let key = match w.key(me) {
                        Key::Is(k) => k as i32,
                        Key::ParentOrder => me as i32,
                    };
                    let color = w.group(me, n) as i32;
                    mpich::split::split(t, color, key, deadline)
                        .await
                        .map_err(e)?;
                }
                Op::CreateGroup => {
                    let members: Vec<u32> = (0..n.div_ceil(2).max(1)).collect();
                    mpich::create_group::create_group(t, &members, deadline)
                        .await
                        .map_err(e)?;
                }
                Op::Alltoall(set, elements) => {
                    let room = capacity(elements);
                    match set {
                        data::Set::A => {
                            let send = data::integers(elements, me, n);
                            let mut recv = vec![0u32; room];
                            mpich::alltoallv::exchange(t, &send, &mut recv, |x| *x, deadline)
                                .await
                                .map_err(e)?;
                        }
                        data::Set::B | data::Set::C => {
                            let send = match set {
                                data::Set::B => data::particles(elements, me, n),
                                _ => data::moved(elements, me, n),
                            };
                            let mut recv = vec![Particle::zeroed(); room];
                            let to = |p: &Particle| p.tproc;
                            mpich::alltoallv::exchange(t, &send, &mut recv, to, deadline)
                                .await
                                .map_err(e)?;
                        }
                    }
                }
            }
            ends.push(t.now().0);
        }
        Ok(ends)
    })?;
    let ends = ends.into_iter().collect::<Result<Vec<_>, String>>()?;
    Ok(per_call(&ends, calls))
}

/// A measured row of collectives.csv: catena's and MPICH's µs at `n`
/// (the median over the CSVs given).
struct Measured {
    n: u32,
    op: String,
    case: String,
    catena_us: f64,
    mpich_us: Option<f64>,
}

/// A row's (N, op, case).
type RowId = (u32, String, String);

fn read_measured(args: &Args) -> Result<Vec<Measured>> {
    // Each row's catena and MPICH µs over the CSVs.
    let mut runs: BTreeMap<RowId, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for path in &args.measured {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().ok_or("an empty CSV")?.split(',').collect();
        let col = |name: &str| {
            header
                .iter()
                .position(|h| *h == name)
                .ok_or_else(|| format!("{}: no column {name}", path.display()))
        };
        let (n, op, case, c, m) = (
            col("n")?,
            col("op")?,
            col("case")?,
            col("catena_us")?,
            col("mpich_us")?,
        );
        for line in lines {
            let cells: Vec<&str> = line.split(',').collect();
            let Some(size) = cells.get(n).and_then(|v| v.parse().ok()) else {
                continue;
            };
            // A row that was not measured (no figure) is left out.
            let Some(catena_us) = cells.get(c).and_then(|v| v.parse().ok()) else {
                continue;
            };
            let (Some(&name), Some(&case)) = (cells.get(op), cells.get(case)) else {
                return Err(
                    format!("{}: a row without its cells: {line:?}", path.display()).into(),
                );
            };
            let row = runs.entry((size, name.into(), case.into())).or_default();
            row.0.push(catena_us);
            row.1
                .extend(cells.get(m).and_then(|v| v.parse::<f64>().ok()));
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    Ok(runs
        .into_iter()
        .filter_map(|((n, op, case), (catena, mpich))| {
            Some(Measured {
                n,
                op,
                case,
                catena_us: median(catena)?,
                mpich_us: median(mpich),
            })
        })
        .collect())
}

fn find<'a>(rows: &'a [Measured], n: u32, op: &str, case: &str) -> Result<&'a Measured> {
    rows.iter()
        .find(|r| r.n == n && r.op == op && r.case.starts_with(case))
        .ok_or_else(|| format!("no measured row {op} {case} at N = {n}").into())
}

/// put.csv's 8-byte put latency (ns) and largest bandwidth (GB/s).
fn read_put(args: &Args) -> Result<(f64, f64)> {
    let path = &args.put;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (mut latency, mut bandwidth) = (None, (0usize, 0.0));
    for line in text.lines().skip(1) {
        let c: Vec<&str> = line.split(',').collect();
        if c.len() < 4 || c[0] != "shm" {
            continue;
        }
        let (size, value): (usize, f64) = (c[2].parse()?, c[3].parse()?);
        match c[1] {
            "put_latency" if size == 8 => latency = Some(value),
            "bandwidth" if size >= bandwidth.0 => bandwidth = (size, value),
            _ => {}
        }
    }
    Ok((
        latency.ok_or("put.csv: no 8-byte put_latency")?,
        bandwidth.1,
    ))
}

/// The o that makes `simulate(o)` equal `want` ns (the time is linear in o
/// on a fixed critical path: two runs give the line).
fn solve_o(want: f64, simulate: impl Fn(f64) -> Result<f64>) -> Result<f64> {
    let (a, b) = (simulate(0.0)?, simulate(1000.0)?);
    Ok(((want - a) * 1000.0 / (b - a)).max(0.0))
}

fn fit(args: &Args) -> Result<()> {
    let rows = read_measured(args)?;
    let (latency, gbps) = read_put(args)?;
    let per_byte = 1.0 / gbps;
    let mut m = args.machine.machine();
    m.net = LogGp {
        latency_ns: latency,
        per_byte_ns: per_byte,
        ..m.net
    };
    m.host = HostModel {
        latency_ns: latency,
        per_byte_ns: per_byte,
        ..m.host
    };
    let allreduce = find(&rows, 2, "allreduce", "8 B")?
        .mpich_us
        .ok_or("no MPICH allreduce")?;
    let o = solve_o(allreduce * 1e3, |o| {
        let mut m = m;
        m.net.overhead_ns = o;
        m.net.gap_ns = o;
        mpich(&m, Op::Allreduce(8), 2, 3, false)
    })?;
    m.net.overhead_ns = o;
    m.net.gap_ns = o;
    let barrier = find(&rows, 2, "barrier", "-")?.catena_us;
    let oh = solve_o(barrier * 1e3, |o| {
        let mut m = m;
        m.host.overhead_ns = o;
        catena(&m, Op::Barrier, 2, 3, false)
    })?;
    m.host.overhead_ns = oh;
    println!("fitted on this machine:");
    println!("  messages: {}", m.net);
    println!("  {}", m.host);
    // The computation factor by least squares over catena's rows: what
    // the measured time has beyond the free simulation, against what a
    // charged run (factor 1) adds.
    let (mut num, mut den) = (0.0, 0.0);
    for op in error_ops() {
        let (name, case) = op.name();
        let Ok(row) = find(&rows, 2, &name, &case) else {
            continue;
        };
        let free = catena(&m, op, 2, 3, false)?;
        let charged = median(5, || catena(&m, op, 2, 3, true))?;
        let (r, d) = (row.catena_us * 1e3 - free, charged - free);
        num += r * d;
        den += d * d;
    }
    println!(
        "  computation factor, least squares over catena's rows: {:.2}",
        num / den.max(1e-9)
    );
    Ok(())
}

fn median(k: usize, f: impl Fn() -> Result<f64>) -> Result<f64> {
    let mut v = (0..k).map(|_| f()).collect::<Result<Vec<f64>>>()?;
    v.sort_by(f64::total_cmp);
    Ok(v[k / 2])
}

/// The rows of the error table, as `catena-bench collectives` measures
/// them (100,000 elements a rank for alltoall).
fn error_ops() -> Vec<Op> {
    let mut ops = vec![Op::Barrier, Op::Allreduce(8), Op::Allreduce(65536)];
    ops.extend(WORKLOADS.iter().map(|&w| Op::Split(w)));
    ops.push(Op::CreateGroup);
    for set in [data::Set::A, data::Set::B, data::Set::C] {
        ops.push(Op::Alltoall(set, 100_000));
    }
    ops
}

fn error_table(args: &Args) -> Result<()> {
    let rows = read_measured(args)?;
    let m = args.machine.machine();
    let mut t = Table::new(&[
        "N",
        "op",
        "case",
        "catena measured us",
        "catena model us",
        "catena error",
        "charged us",
        "charged error",
        "MPICH measured us",
        "MPICH model us",
        "MPICH error",
    ]);
    let err = |model: f64, real: f64| format!("{:+.0}%", (model / real - 1.0) * 100.0);
    let mut sizes: Vec<u32> = rows.iter().map(|r| r.n).collect();
    sizes.dedup();
    for n in sizes {
        for op in error_ops() {
            let (name, case) = op.name();
            let Ok(row) = find(&rows, n, &name, &case) else {
                eprintln!("no measured row {name} {case} at N = {n}: skipped");
                continue;
            };
            let free = catena(&m, op, n, 3, false)? / 1e3;
            let charged = median(5, || catena(&m, op, n, 3, true))? / 1e3;
            let mut cells = vec![
                n.to_string(),
                name,
                case,
                format!("{:.3}", row.catena_us),
                format!("{free:.3}"),
                err(free, row.catena_us),
                format!("{charged:.3}"),
                err(charged, row.catena_us),
            ];
            match (op, row.mpich_us) {
                (Op::Barrier, _) | (_, None) => cells.extend(["-".into(), "-".into(), "-".into()]),
                (_, Some(real)) => {
                    let model = mpich(&m, op, n, 3, false)? / 1e3;
                    cells.extend([
                        format!("{real:.3}"),
                        format!("{model:.3}"),
                        err(model, real),
                    ]);
                }
            }
            eprintln!("{}", cells.join("  "));
            t.row(cells);
        }
    }
    t.print();
    t.write_csv(&args.error_csv)?;
    eprintln!("wrote {}", args.error_csv.display());
    Ok(())
}

/// MPICH's split's local work on this host: the pass over `n` pairs and
/// the sort of this rank's group (`n` / 4 members, the few-groups
/// workload), the median of 5, in ns.
fn split_local_ns(n: u32) -> f64 {
    let w = WORKLOADS[1];
    let all: Vec<(i32, i32)> = (0..n).map(|r| (w.group(r, n) as i32, r as i32)).collect();
    let mut v: Vec<f64> = (0..5)
        .map(|_| {
            let start = Instant::now();
            std::hint::black_box(mpich::split::place(&all, n as usize / 2));
            start.elapsed().as_nanos() as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[2]
}

fn sweep(args: &Args) -> Result<()> {
    let m = args.machine.machine();
    let mut t = Table::new(&[
        "op",
        "ranks",
        "catena us",
        "mpich us",
        "mpich how",
        "catena/mpich",
        "catena wall s",
    ]);
    for name in &args.ops {
        for &n in &args.ranks {
            let op = match name.as_str() {
                "split" => Op::Split(WORKLOADS[1]),
                "create_group" => Op::CreateGroup,
                "allreduce" => Op::Allreduce(8),
                "alltoall" => Op::Alltoall(data::Set::C, args.elements),
                other => return Err(format!("--ops: no operation {other}").into()),
            };
            // The second call where the first does one-off work: an
            // alltoall's plan, the world's host levels across hosts (which
            // an allreduce or a split builds).
            let calls = match op {
                Op::Alltoall(..) | Op::Allreduce(_) | Op::Split(_) => 2,
                _ => 1,
            };
            let started = Instant::now();
            let cat = match op {
                _ if n > args.catena_max => None,
                Op::Alltoall(..) if n > args.alltoall_max => None,
                Op::Allreduce(_) if n > args.allreduce_max => None,
                _ => Some(catena(&m, op, n, calls, args.charge_catena)? / 1e3),
            };
            let wall = started.elapsed().as_secs_f64();
            let (mp, how) = if n <= args.mpich_sim_max {
                (mpich(&m, op, n, calls, false)?, "simulated")
            } else {
                let ns = match op {
                    Op::Allreduce(b) => mpich::allreduce::closed_form_ns(&m.net, n, b),
                    Op::CreateGroup => mpich::create_group::closed_form_ns(&m.net, n / 2),
                    Op::Split(_) => mpich::split::closed_form_ns(&m.net, n),
                    Op::Alltoall(..) => {
                        // The counts' Bruck alltoall in closed form, the data
                        // phase as simulated at the largest simulated N
                        // (a particle moves to a neighbour: the same few
                        // messages at every N).
                        let big = args.mpich_sim_max;
                        let data = mpich(&m, op, big, calls, false)?
                            - mpich::alltoallv::counts_closed_form_ns(&m.net, big);
                        mpich::alltoallv::counts_closed_form_ns(&m.net, n) + data
                    }
                    Op::Barrier => unreachable!("not swept"),
                };
                (ns, "closed form")
            };
            // MPICH's split sorts on the host: charge its local step.
            let mp = match op {
                Op::Split(_) => mp + m.compute * split_local_ns(n),
                _ => mp,
            } / 1e3;
            let cells = vec![
                name.clone(),
                n.to_string(),
                cat.map_or("-".into(), |c| format!("{c:.2}")),
                format!("{mp:.2}"),
                how.into(),
                cat.map_or("-".into(), |c| format!("{:.2}", c / mp)),
                format!("{wall:.1}"),
            ];
            eprintln!("{}", cells.join("  "));
            t.row(cells);
        }
    }
    t.print();
    t.write_csv(&args.csv)?;
    eprintln!("wrote {}", args.csv.display());
    Ok(())
}

pub fn main(args: &Args) -> crate::Outcome {
    if args.fit {
        fit(args)?;
        return Ok(0);
    }
    let m = args.machine.machine();
    eprintln!(
        "calibrate ({:?}): messages {}; {}; computation x{}; {} ranks a host",
        args.machine, m.net, m.host, m.compute, m.ranks_per_host
    );
    error_table(args)?;
    if !args.error_only {
        sweep(args)?;
    }
    Ok(0)
}
