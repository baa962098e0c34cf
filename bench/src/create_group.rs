//! `catena-bench create-group`: group-collective creation (seed 004) on N
//! local processes for three groups (the lower half, the even ranks, a
//! random half in random order): the direct construction against the
//! seed's recursive merge and, built with `mpi`, MPICH's
//! `MPI_Comm_create_group` under `mpiexec`, each the slowest member's
//! median over repetitions. `--sim N,...` runs the two catena algorithms in
//! the simulator instead (virtual time, messages and bytes per member).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use catena_algorithms::prelude::*;
use catena_fabric::{Blocking, Rank};
use catena_sim::{LogGp, Sim, SimRank};

use crate::report::{quantile, Table};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Timed creations per algorithm and group (after one warm-up).
    #[arg(long, default_value_t = 20)]
    repetitions: usize,
    /// Skip MPICH's MPI_Comm_create_group (builds with the `mpi` feature).
    #[arg(long)]
    no_mpi: bool,
    /// Run in the simulator at these numbers of ranks instead (e.g.
    /// 16,1024,65536,1048576); random groups only up to 4096.
    #[arg(long, value_delimiter = ',')]
    sim: Vec<u32>,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/create-group.csv")]
    csv: PathBuf,
}

const TIMEOUT: Duration = Duration::from_secs(300);
/// Random groups are O(g) per member to hold: the simulator keeps N of them.
const SIM_RANDOM_MAX: u32 = 4096;

/// The groups created, the same on every process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    LowerHalf,
    Evens,
    RandomHalf,
}

impl Shape {
    pub(crate) const ALL: [Shape; 3] = [Shape::LowerHalf, Shape::Evens, Shape::RandomHalf];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Shape::LowerHalf => "lower half",
            Shape::Evens => "evens",
            Shape::RandomHalf => "random half",
        }
    }

    /// The group's map (O(1) bytes for the strides) and whether `rank` is in it.
    pub(crate) fn map(self, n: u32) -> Result<GroupMap> {
        let half = n.div_ceil(2);
        let ranges = |first, last, stride| {
            [catena_algorithms::groupmap::RankRange::new(
                first, last, stride,
            )]
        };
        Ok(match self {
            Shape::LowerHalf => GroupMap::from_ranges(n, &ranges(0, half - 1, 1), Strategy::Auto)?,
            Shape::Evens => {
                GroupMap::from_ranges(n, &ranges(0, n - 1 - (n - 1) % 2, 2), Strategy::Auto)?
            }
            Shape::RandomHalf => GroupMap::from_ranks(n, &random_half(n), Strategy::Auto)?,
        })
    }
}

/// Half the ranks, drawn and ordered by a fixed seed.
fn random_half(n: u32) -> Vec<Rank> {
    let mut state = 0x5eed_u64;
    let mut next = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let z = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb)
    };
    let mut ranks: Vec<Rank> = (0..n).collect();
    for i in (1..ranks.len()).rev() {
        ranks.swap(i, (next() % (i as u64 + 1)) as usize);
    }
    ranks.truncate(n.div_ceil(2) as usize);
    ranks
}

/// One figure: a group, an algorithm, and the slowest member's median.
struct Figure {
    shape: String,
    members: u32,
    algorithm: String,
    ms: f64,
}

const DIRECT: &str = "direct";
const MERGE: &str = "recursive merge";
const MPICH: &str = "MPICH";

fn algorithms() -> [(CreateAlgorithm, &'static str); 2] {
    [
        (CreateAlgorithm::Direct, DIRECT),
        (CreateAlgorithm::RecursiveMerge, MERGE),
    ]
}

/// Outside a job: runs the job, then MPICH, and prints them side by side;
/// or the simulator sweep.
pub fn compare(args: &Args) -> crate::Outcome {
    if !args.sim.is_empty() {
        return simulate(args);
    }
    let oversubscribed = args.job.launch("create-group", "")?;
    let figures = read_csv(&args.csv)?;
    #[cfg(feature = "mpi")]
    let figures = match args.no_mpi {
        true => figures,
        false => figures.into_iter().chain(mpich(args)?).collect(),
    };
    print(args.job.ranks, oversubscribed, &figures);
    Ok(0)
}

/// In a rank: times both algorithms on every group.
pub fn main(args: &Args) -> crate::Outcome {
    let t = catena_fabric::init()?;
    let world = Comm::world(&t).with_timeout(TIMEOUT);
    let figures = measure(&t, &world, args)?;
    if t.rank() == 0 {
        write_csv(&args.csv, &figures)?;
    }
    drop(world);
    t.finalize(TIMEOUT)?;
    Ok(0)
}

fn measure<T: Transport + Blocking>(
    t: &T,
    world: &Comm<'_, T>,
    args: &Args,
) -> Result<Vec<Figure>> {
    let n = t.size();
    let mut figures = Vec::new();
    for shape in Shape::ALL {
        let map = shape.map(n)?;
        let member = map.rank(t.rank())?.is_some();
        for (algorithm, name) in algorithms() {
            let mut times = Vec::new();
            for repetition in 0..=args.repetitions {
                world.barrier()?;
                let start = Instant::now();
                if member {
                    let tag = repetition as u32;
                    let made = block_on(t, world.icreate_group(map.clone(), tag, algorithm))?;
                    made.ok_or("a member got no communicator")?;
                }
                let elapsed = start.elapsed().as_secs_f64() * 1e3;
                let slowest = world.allreduce(elapsed, |a, b| a.max(*b))?;
                if repetition > 0 {
                    times.push(slowest);
                }
            }
            figures.push(Figure {
                shape: shape.name().into(),
                members: map.len(),
                algorithm: name.into(),
                ms: quantile(&mut times, 0.5),
            });
        }
    }
    Ok(figures)
}

fn write_csv(path: &Path, figures: &[Figure]) -> Result<()> {
    let mut table = Table::new(&["group", "members", "algorithm", "ms"]);
    for f in figures {
        table.row(vec![
            f.shape.clone(),
            f.members.to_string(),
            f.algorithm.clone(),
            format!("{:.4}", f.ms),
        ]);
    }
    Ok(table.write_csv(path)?)
}

fn read_csv(path: &Path) -> Result<Vec<Figure>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            match cells[..] {
                [shape, members, algorithm, ms] => Ok(Figure {
                    shape: shape.into(),
                    members: members.parse()?,
                    algorithm: algorithm.into(),
                    ms: ms.parse()?,
                }),
                _ => Err(format!("{}: a bad line {line:?}", path.display()).into()),
            }
        })
        .collect()
}

fn print(n: u32, oversubscribed: bool, figures: &[Figure]) {
    println!(
        "create_group on {n} processes{}: the slowest member's median, us",
        if oversubscribed {
            " (OVERSUBSCRIBED: more processes than cores)"
        } else {
            ""
        }
    );
    let mut table = Table::new(&["group", "members", DIRECT, MERGE, MPICH]);
    for shape in Shape::ALL {
        let of = |algorithm: &str| {
            figures
                .iter()
                .find(|f| f.shape == shape.name() && f.algorithm == algorithm)
        };
        let Some(first) = of(DIRECT) else { continue };
        let cell = |a| of(a).map_or("-".into(), |f: &Figure| format!("{:.1}", f.ms * 1e3));
        table.row(vec![
            shape.name().into(),
            first.members.to_string(),
            cell(DIRECT),
            cell(MERGE),
            cell(MPICH),
        ]);
    }
    table.print();
}

/// MPICH's `MPI_Comm_create_group` on the same groups under `mpiexec`.
#[cfg(feature = "mpi")]
fn mpich(args: &Args) -> Result<Vec<Figure>> {
    let csv = args.csv.with_extension("mpich.csv");
    crate::relaunch::run_under_mpiexec(
        args.job.ranks,
        &args.job.hosts,
        "create-group",
        args.repetitions,
        &csv,
        &[],
    )?;
    read_csv(&csv)
}

/// Under `mpiexec`: times `MPI_Comm_create_group` on the groups.
#[cfg(feature = "mpi")]
pub fn mpi_main(args: &Args) -> crate::Outcome {
    use mpi::collective::SystemOperation;
    use mpi::traits::*;

    let universe = mpi::initialize().ok_or("MPI is initialized already")?;
    let world = universe.world();
    let n = world.size() as u32;
    let mut figures = Vec::new();
    for shape in Shape::ALL {
        let map = shape.map(n)?;
        let ranks: Vec<i32> = map.iter().map(|w| w as i32).collect();
        let group = world.group().include(&ranks);
        let member = map.rank(world.rank() as u32)?.is_some();
        let mut times = Vec::new();
        for repetition in 0..=args.repetitions {
            world.barrier();
            let start = Instant::now();
            if member {
                let made = world.split_by_subgroup_with_tag(&group, repetition as i32);
                made.ok_or("a member got MPI_COMM_NULL")?;
            }
            let elapsed = start.elapsed().as_secs_f64() * 1e3;
            let mut slowest = 0.0f64;
            world.all_reduce_into(&elapsed, &mut slowest, SystemOperation::max());
            if repetition > 0 {
                times.push(slowest);
            }
        }
        figures.push(Figure {
            shape: shape.name().into(),
            members: map.len(),
            algorithm: MPICH.into(),
            ms: quantile(&mut times, 0.5),
        });
    }
    if world.rank() == 0 {
        write_csv(&args.csv, &figures)?;
    }
    Ok(0)
}

/// The two catena algorithms in the simulator (BG/P-like LogGP,
/// computation free): virtual time, and messages and bytes per member.
fn simulate(args: &Args) -> crate::Outcome {
    let mut table = Table::new(&[
        "ranks",
        "group",
        "members",
        "algorithm",
        "virtual us",
        "msgs/member",
        "bytes/member",
        "wall s",
    ]);
    eprintln!(
        "catena-bench create-group --sim: {}, computation free",
        LogGp::BGP
    );
    for &n in &args.sim {
        for shape in Shape::ALL {
            if shape == Shape::RandomHalf && n > SIM_RANDOM_MAX {
                continue;
            }
            let map = shape.map(n)?;
            for (algorithm, name) in algorithms() {
                let started = Instant::now();
                let sim = Sim::new(n, LogGp::BGP);
                let (results, report) = sim.run(async |t: &SimRank<'_>| {
                    if map.rank(t.rank()).ok()?.is_none() {
                        return Some(true);
                    }
                    let world = Comm::world(t).with_timeout(TIMEOUT);
                    let made = world.icreate_group(map.clone(), 1, algorithm).await;
                    Some(made.ok()?.is_some())
                })?;
                if results.iter().any(|r| *r != Some(true)) {
                    return Err(format!("{name} on {n} ranks: a member failed").into());
                }
                let g = f64::from(map.len());
                let row = vec![
                    n.to_string(),
                    shape.name().into(),
                    map.len().to_string(),
                    name.into(),
                    format!("{:.1}", report.completion.as_secs_f64() * 1e6),
                    format!("{:.1}", report.messages as f64 / g),
                    format!("{:.0}", report.bytes as f64 / g),
                    format!("{:.1}", started.elapsed().as_secs_f64()),
                ];
                eprintln!("{}", row.join("  "));
                table.row(row);
            }
        }
    }
    table.print();
    table.write_csv(&args.csv)?;
    eprintln!("wrote {}", args.csv.display());
    Ok(0)
}
