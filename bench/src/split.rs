//! `catena-bench split`: every split algorithm on N local processes for the
//! paper's three workloads (reorder only with integer keys; split only with
//! 5- and 80-byte string colors, few and many groups; split and reorder),
//! timed as the slowest rank's median over repetitions, with each algorithm's
//! peak temporary heap per process and the size of what a split leaves
//! behind. Built with `mpi`, the same run times MPICH's `MPI_Comm_split` on
//! the same N under `mpiexec` (integer colors: MPI has no others).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use catena_algorithms::chain::{allreduce, barrier, split, Chain, Group, Split};
use catena_algorithms::{Algorithm, Color, Key};
use catena_fabric::{block_on, Blocking, Provider, Transport, WithProvider};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

use crate::heap;
use crate::report::{quantile, Table};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Algorithms to run, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    algorithms: String,
    /// Timed splits per algorithm and workload (after one warm-up).
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// Skip MPICH's MPI_Comm_split (builds with the `mpi` feature).
    #[arg(long)]
    no_mpi: bool,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/split.csv")]
    csv: PathBuf,
    /// `auto` (shm on one host, ucx or ofi across hosts), `shm`, `ofi` or
    /// `ucx` (the latter two need their cargo features).
    #[arg(long, default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(crate::relaunch::provider_names()))]
    provider: String,
}

const CTX: u64 = 0xBE_0003;
const TIMEOUT: Duration = Duration::from_secs(300);

/// The paper's workloads.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Workload {
    /// One group, reordered by random integer keys.
    Reorder,
    /// String colors of `bytes` bytes, parent order kept.
    Split { bytes: usize, many: bool },
    /// 5-byte string colors and random integer keys.
    SplitReorder { many: bool },
}

pub(crate) const WORKLOADS: [Workload; 7] = [
    Workload::Reorder,
    Workload::Split {
        bytes: 5,
        many: false,
    },
    Workload::Split {
        bytes: 5,
        many: true,
    },
    Workload::Split {
        bytes: 80,
        many: false,
    },
    Workload::Split {
        bytes: 80,
        many: true,
    },
    Workload::SplitReorder { many: false },
    Workload::SplitReorder { many: true },
];

/// "Few" groups; "many" is one group per two processes.
const FEW_GROUPS: u32 = 4;

impl Workload {
    pub(crate) fn name(self) -> String {
        let groups = |many| if many { "many" } else { "few" };
        match self {
            Workload::Reorder => "reorder".into(),
            Workload::Split { bytes, many } => format!("split {bytes}B {}", groups(many)),
            Workload::SplitReorder { many } => format!("split+reorder 5B {}", groups(many)),
        }
    }

    fn groups(self, size: u32) -> u32 {
        match self {
            Workload::Reorder => 1,
            Workload::Split { many, .. } | Workload::SplitReorder { many } if many => {
                (size / 2).max(1)
            }
            _ => FEW_GROUPS.min(size),
        }
    }

    /// This rank's group (spread so groups interleave along the chain).
    pub(crate) fn group(self, rank: u32, size: u32) -> u32 {
        (rank.wrapping_mul(7919) ^ 0x5bd1) % self.groups(size)
    }

    pub(crate) fn color(self, rank: u32, size: u32) -> Color<String> {
        let bytes = match self {
            Workload::Reorder => return Color::Everyone,
            Workload::Split { bytes, .. } => bytes,
            Workload::SplitReorder { .. } => 5,
        };
        // Zero-padded by hand: format! widths stop at 65535.
        let group = self.group(rank, size).to_string();
        Color::Is("0".repeat(bytes.saturating_sub(group.len())) + &group)
    }

    pub(crate) fn key(self, rank: u32) -> Key<i64> {
        match self {
            Workload::Split { .. } => Key::ParentOrder,
            _ => Key::Is(random_key(rank)),
        }
    }
}

fn random_key(rank: u32) -> i64 {
    let mut z = u64::from(rank).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) as i64 % 1_000_000
}

fn selected(args: &Args) -> Result<Vec<Algorithm>> {
    if args.algorithms == "all" {
        return Ok(Algorithm::ALL.to_vec());
    }
    Ok(args
        .algorithms
        .split(',')
        .map(|a| a.trim().parse())
        .collect::<Result<_, _>>()?)
}

/// One measurement, the slowest rank's.
struct Figure {
    workload: String,
    algorithm: String,
    median_ms: f64,
    /// The largest peak of temporary heap over the ranks.
    peak_temporary_bytes: u64,
    /// What one rank keeps after the split: the group and its chain node.
    result_bytes: u64,
}

/// Outside a job: runs the job of `args.job.ranks`, then MPICH, and prints them
/// side by side.
pub fn compare(args: &Args) -> crate::Outcome {
    selected(args)?;
    args.job.launch("split", "")?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let figures = read_csv(&args.csv)?;
    #[cfg(feature = "mpi")]
    let figures = match args.no_mpi {
        true => figures,
        false => figures.into_iter().chain(mpich(args)?).collect(),
    };
    print(args, cores, &figures);
    Ok(0)
}

/// In a rank: measures every selected algorithm on every workload.
pub fn main(args: &Args) -> crate::Outcome {
    catena_fabric::with_provider(&args.provider, InRank(args))?
}

/// [`in_rank`] on the provider the user named.
struct InRank<'a>(&'a Args);

impl WithProvider for InRank<'_> {
    type Output = crate::Outcome;
    fn run<P: Provider>(self) -> crate::Outcome {
        in_rank::<P>(self.0)
    }
}

fn in_rank<P: Provider>(args: &Args) -> crate::Outcome {
    let t = P::from_env()?;
    let figures = measure(&t, args)?;
    if t.rank() == 0 {
        write_csv(&args.csv, &figures)?;
    }
    t.finalize(TIMEOUT)?;
    Ok(0)
}

fn measure<T: Transport + Blocking>(t: &T, args: &Args) -> Result<Vec<Figure>> {
    let world = Chain::world(t, CTX);
    let (rank, size) = (t.rank(), t.size());
    let mut figures = Vec::new();
    // Tree collectives cache the world chain's neighbours: not a split's cost.
    block_on(t, world.neighbours(t, t.deadline_in(TIMEOUT)))?;
    for workload in WORKLOADS {
        for &algorithm in &selected(args)? {
            let mut times = Vec::new();
            let mut peak = 0usize;
            let mut kept = 0usize;
            for repetition in 0..=args.repetitions {
                let deadline = t.deadline_in(TIMEOUT);
                block_on(t, barrier(t, &world, deadline))?;
                let before = heap::held();
                heap::reset_peak();
                let start = Instant::now();
                let result = block_on(
                    t,
                    split(
                        t,
                        &world,
                        workload.color(rank, size),
                        workload.key(rank),
                        algorithm,
                        deadline,
                    ),
                )?;
                let elapsed = start.elapsed().as_secs_f64() * 1e3;
                let temporary = heap::peak().saturating_sub(before);
                kept = kept.max(result_bytes(&result));
                drop(result);
                // The slowest rank's time is the split's time.
                let slowest =
                    block_on(t, allreduce(t, &world, elapsed, |a, b| a.max(*b), deadline))?;
                // The warm-up also grows the transport's buffers once.
                if repetition > 0 {
                    times.push(slowest);
                    peak = peak.max(temporary);
                }
            }
            let deadline = t.deadline_in(TIMEOUT);
            let most = |x: usize| {
                block_on(
                    t,
                    allreduce(t, &world, x as u64, |a, b| *a.max(b), deadline),
                )
            };
            figures.push(Figure {
                workload: workload.name(),
                algorithm: algorithm.to_string(),
                median_ms: quantile(&mut times, 0.5),
                peak_temporary_bytes: most(peak)?,
                result_bytes: most(kept)?,
            });
        }
    }
    Ok(figures)
}

fn result_bytes(result: &Split) -> usize {
    std::mem::size_of::<Split>() + result.group().map_or(0, |g: &Group| g.chain.heap_bytes())
}

fn write_csv(path: &Path, figures: &[Figure]) -> std::io::Result<()> {
    let mut t = Table::new(&[
        "workload",
        "algorithm",
        "median_ms",
        "peak_temporary_bytes",
        "result_bytes",
    ]);
    for f in figures {
        t.row(vec![
            f.workload.clone(),
            f.algorithm.clone(),
            format!("{:.4}", f.median_ms),
            f.peak_temporary_bytes.to_string(),
            f.result_bytes.to_string(),
        ]);
    }
    t.write_csv(path)
}

fn read_csv(path: &Path) -> Result<Vec<Figure>> {
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .skip(1)
        .map(|line| {
            let c: Vec<&str> = line.split(',').collect();
            let bad = || format!("{}: unexpected line {line:?}", path.display());
            let [workload, algorithm, ms, peak, kept] = c[..] else {
                return Err(bad().into());
            };
            Ok(Figure {
                workload: workload.into(),
                algorithm: algorithm.into(),
                median_ms: ms.parse().map_err(|_| bad())?,
                peak_temporary_bytes: peak.parse().map_err(|_| bad())?,
                result_bytes: kept.parse().map_err(|_| bad())?,
            })
        })
        .collect()
}

fn print(args: &Args, cores: usize, figures: &[Figure]) {
    let mut algorithms: Vec<&str> = Vec::new();
    for f in figures {
        if !algorithms.contains(&f.algorithm.as_str()) {
            algorithms.push(&f.algorithm);
        }
    }
    let oversubscribed = if args.job.ranks as usize > cores {
        format!(
            ", OVERSUBSCRIBED: {} processes on {cores} cores",
            args.job.ranks
        )
    } else {
        String::new()
    };
    let value = |workload: &str, algorithm: &str, cell: &dyn Fn(&Figure) -> String| {
        figures
            .iter()
            .find(|f| f.workload == workload && f.algorithm == algorithm)
            .map_or("-".into(), cell)
    };
    let mut header = vec!["workload"];
    header.extend(&algorithms);
    for (title, cell) in [
        (
            "median split time, ms (slowest rank)",
            &(|f: &Figure| format!("{:.3}", f.median_ms)) as &dyn Fn(&Figure) -> String,
        ),
        (
            "peak temporary heap per process, bytes (largest over ranks)",
            // MPICH's memory is not counted (it is not this process's heap).
            &|f: &Figure| {
                if f.algorithm.starts_with("MPICH") {
                    "-".into()
                } else {
                    f.peak_temporary_bytes.to_string()
                }
            },
        ),
    ] {
        println!("\n{title}, N = {}{oversubscribed}:", args.job.ranks);
        let mut table = Table::new(&header);
        for workload in WORKLOADS.map(Workload::name) {
            let mut row = vec![workload.clone()];
            row.extend(algorithms.iter().map(|a| value(&workload, a, cell)));
            table.row(row);
        }
        table.print();
    }
    let kept: Vec<u64> = figures
        .iter()
        .map(|f| f.result_bytes)
        .filter(|&b| b > 0)
        .collect();
    if let (Some(lo), Some(hi)) = (kept.iter().min(), kept.iter().max()) {
        println!(
            "\nA split's result (group and chain node) holds {lo}..{hi} bytes per process, whatever the algorithm."
        );
    }
    println!("wrote {}", args.csv.display());
}

/// MPICH's `MPI_Comm_split` on the same workloads under `mpiexec` (integer
/// colors), read back from its CSV.
#[cfg(feature = "mpi")]
fn mpich(args: &Args) -> Result<Vec<Figure>> {
    let csv = args.csv.with_extension("mpich.csv");
    crate::relaunch::run_under_mpiexec(
        args.job.ranks,
        &args.job.hosts,
        "split",
        args.repetitions,
        &csv,
        &[],
    )?;
    read_csv(&csv)
}

/// Under `mpiexec`: times `MPI_Comm_split` on the workloads.
#[cfg(feature = "mpi")]
pub fn mpi_main(args: &Args) -> crate::Outcome {
    use mpi::collective::SystemOperation;
    use mpi::topology::Color as MpiColor;
    use mpi::traits::*;

    let universe = mpi::initialize().ok_or("MPI is initialized already")?;
    let world = universe.world();
    let (rank, size) = (world.rank() as u32, world.size() as u32);
    let mut figures = Vec::new();
    for workload in WORKLOADS {
        let color = match workload.color(rank, size) {
            Color::Everyone => MpiColor::with_value(0),
            _ => MpiColor::with_value(workload.group(rank, size) as i32),
        };
        let key = match workload.key(rank) {
            Key::Is(k) => k as i32,
            Key::ParentOrder => 0,
        };
        let mut times = Vec::new();
        for repetition in 0..=args.repetitions {
            world.barrier();
            let start = Instant::now();
            let group = world.split_by_color_with_key(color, key);
            let elapsed = start.elapsed().as_secs_f64() * 1e3;
            drop(group);
            let mut slowest = 0.0f64;
            world.all_reduce_into(&elapsed, &mut slowest, SystemOperation::max());
            if repetition > 0 {
                times.push(slowest);
            }
        }
        figures.push(Figure {
            workload: workload.name(),
            algorithm: "MPICH MPI_Comm_split".into(),
            median_ms: quantile(&mut times, 0.5),
            peak_temporary_bytes: 0,
            result_bytes: 0,
        });
    }
    if rank == 0 {
        write_csv(&args.csv, &figures)?;
    }
    Ok(0)
}
