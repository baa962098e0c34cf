//! `catena-bench sim`: the split algorithms on the simulator for the paper's
//! workloads, sweeping N = 16, 64, ..., up to a million virtual ranks in this
//! one process. For each run: virtual completion time, messages, bytes, the
//! largest per-rank memory of the algorithm (a per-rank counting allocator)
//! and of the transport, wall time, events per second and peak RSS.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use catena_algorithms::chain::{split, Chain, Split};
use catena_algorithms::Algorithm;
use catena_fabric::Rma;
use catena_sim::{ComputeFactor, CostModel, LogGp, Report, Routed, Sim, SimRank};
use catena_topo::{FatTree, Torus};
use indicatif::{ProgressBar, ProgressStyle};

use crate::heap::per_rank;
use crate::plot;
use crate::report::Table;
use crate::split::{Workload, WORKLOADS};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(clap::Args)]
pub struct Args {
    /// Largest N of the sweep 16, 64, 256, ... (1048576 for the full sweep).
    #[arg(long, default_value_t = 65536)]
    max_ranks: u32,
    /// Exact rank counts, comma-separated, instead of the sweep.
    #[arg(long)]
    ranks: Option<String>,
    /// Algorithms, comma-separated, or `all`.
    #[arg(long, default_value = "all")]
    algorithms: String,
    /// Workloads by number in the order of `catena-bench split` (0 reorder,
    /// 1-4 split 5B/80B few/many, 5-6 split+reorder few/many), or `all`.
    #[arg(long, default_value = "all")]
    workloads: String,
    /// Packed color length of the split-only workloads (1-4) instead of 5
    /// and 80 bytes: how an algorithm's messages grow with colors.
    #[arg(long)]
    color_bytes: Option<usize>,
    /// Run the O(N)-per-process algorithms (AllgatherGroup, GatherScatter)
    /// up to this N, Cheng up to 16x this.
    #[arg(long, default_value_t = 4096)]
    serial_max_ranks: u32,
    /// Cost model: `loggp` (BG/P-like LogGP), `torus` (BG/P-like 3D torus,
    /// 4 ranks a node, links shared) or `fattree` (k-ary fat-tree, 1 rank a
    /// host, links shared).
    #[arg(long, default_value = "loggp")]
    model: Model,
    /// Where to write the results as CSV; the plots go beside it, one PNG
    /// per workload (`sim-reorder.png`, ...).
    #[arg(long, default_value = "results/sim.csv")]
    csv: PathBuf,
    /// Virtual nanoseconds each host CPU nanosecond of a rank's own code
    /// costs; 0 leaves computation free (and runs reproducible). The default
    /// is a BG/P core against this host's Zen 5 (docs/scaling.md).
    #[arg(long, default_value_t = ComputeFactor::BGP_ON_ZEN5.get())]
    compute_factor: f64,
    /// Runs of each case, the median virtual time kept and the spread
    /// written beside it: with computation charged, a rank that loses its
    /// core for a moment stretches a run (up to 1.44x at 4,096 ranks), so
    /// one run can flip a comparison. Default 3 when computation is
    /// charged, 1 when it is free (such runs are reproducible).
    #[arg(long)]
    repeat: Option<usize>,
    /// Do not simulate: plot the CSV that is already there.
    #[arg(long)]
    replot: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Model {
    Loggp,
    Torus,
    Fattree,
}

/// BG/P runs 4 ranks a node (virtual node mode).
const TORUS_RANKS_PER_NODE: u32 = 4;

impl Model {
    fn build(self, ranks: u32) -> Box<dyn CostModel> {
        match self {
            Model::Loggp => Box::new(LogGp::BGP),
            Model::Torus => {
                let nodes = ranks.div_ceil(TORUS_RANKS_PER_NODE);
                Box::new(Routed::new(Torus::cube_for(nodes), TORUS_RANKS_PER_NODE))
            }
            Model::Fattree => Box::new(Routed::new(FatTree::for_hosts(ranks), 1)),
        }
    }

    fn describe(self, ranks: u32) -> String {
        match self {
            Model::Loggp => LogGp::BGP.to_string(),
            Model::Torus => {
                let nodes = ranks.div_ceil(TORUS_RANKS_PER_NODE);
                let torus = Torus::cube_for(nodes);
                let model = Routed::new(torus.clone(), TORUS_RANKS_PER_NODE);
                format!("torus {:?}: {model}", torus.dims())
            }
            Model::Fattree => {
                let tree = FatTree::for_hosts(ranks);
                format!("fat-tree: {}", Routed::new(tree, 1))
            }
        }
    }
}

/// The context of the world chain every split starts from.
const CTX: u64 = 0xBE_0005;
/// Virtual time a split may take before it counts as hung.
const DEADLINE: Duration = Duration::from_secs(3600);

struct Row {
    workload: Workload,
    algorithm: Algorithm,
    /// The median run's.
    report: Report,
    algorithm_bytes: u64,
    rss_bytes: u64,
    /// Runs of the case, and the least and most virtual time among them.
    runs: usize,
    spread: (Duration, Duration),
}

fn list<T>(text: &str, all: &[T], parse: impl Fn(&str) -> Result<T>) -> Result<Vec<T>>
where
    T: Copy,
{
    if text == "all" {
        return Ok(all.to_vec());
    }
    text.split(',').map(|s| parse(s.trim())).collect()
}

fn sweep(args: &Args) -> Result<Vec<u32>> {
    match &args.ranks {
        Some(ranks) => list(ranks, &[], |s| Ok(s.parse()?)),
        None => Ok(std::iter::successors(Some(16u32), |n| n.checked_mul(4))
            .take_while(|&n| n <= args.max_ranks)
            .collect()),
    }
}

/// Whether `algorithm` runs at `ranks` (the O(N) ones only at small N).
fn feasible(algorithm: Algorithm, ranks: u32, serial_max: u32) -> bool {
    match algorithm {
        Algorithm::AllgatherGroup | Algorithm::GatherScatter => ranks <= serial_max,
        Algorithm::Cheng(_) => ranks <= serial_max.saturating_mul(16),
        _ => true,
    }
}

/// One split of `workload` on `ranks` virtual ranks.
fn simulate(
    workload: Workload,
    algorithm: Algorithm,
    ranks: u32,
    model: Model,
    compute: Option<ComputeFactor>,
) -> Result<Row> {
    per_rank::start(ranks as usize);
    let sim = Sim::new(ranks, model.build(ranks)).with_observer(Box::new(per_rank::running));
    let sim = match compute {
        Some(factor) => sim.with_compute(factor),
        None => sim,
    };
    let (results, report) = sim.run(async |t: &SimRank<'_>| {
        let world = Chain::world(t, CTX);
        let deadline = t.deadline_in(DEADLINE);
        let (rank, size) = (t.rank(), t.size());
        let color = workload.color(rank, size);
        let split = split(t, &world, color, workload.key(rank), algorithm, deadline).await;
        // Only the group's size leaves the rank: results stay O(1) per rank.
        split.map(|s| match s {
            Split::Member(g) => g.chain.size(),
            Split::NotMember { .. } => 0,
        })
    })?;
    let algorithm_bytes = per_rank::largest_peak();
    let rss_bytes = peak_rss();
    for (rank, r) in results.into_iter().enumerate() {
        r.map_err(|e| format!("{algorithm} on {ranks} ranks, rank {rank}: {e}"))?;
    }
    let completion = report.completion;
    Ok(Row {
        workload,
        algorithm,
        report,
        algorithm_bytes,
        rss_bytes,
        runs: 1,
        spread: (completion, completion),
    })
}

/// This process's peak resident set (VmHWM), 0 where /proc has none.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

pub fn main(args: &Args) -> crate::Outcome {
    if !args.replot {
        sweep_and_write(args)?;
    }
    match plot(&args.csv) {
        Ok(written) => eprintln!("wrote {}", written.join(", ")),
        // The figures are in the CSV; the plots are a view of them.
        Err(e) => eprintln!("no plots: {e}"),
    }
    Ok(0)
}

fn sweep_and_write(args: &Args) -> Result<()> {
    let compute = match args.compute_factor {
        0.0 => None,
        f => Some(
            ComputeFactor::new(f)
                .ok_or_else(|| format!("--compute-factor {f}: a finite number, 0 or more"))?,
        ),
    };
    let repeat = args
        .repeat
        .unwrap_or(if compute.is_some() { 3 } else { 1 })
        .max(1);
    let algorithms = list(&args.algorithms, &Algorithm::ALL, |s| Ok(s.parse()?))?;
    let workloads = list(&args.workloads, &WORKLOADS, |s| {
        let i: usize = s.parse()?;
        WORKLOADS
            .get(i)
            .copied()
            .ok_or_else(|| format!("workload {i}: there are {}", WORKLOADS.len()).into())
    })?;
    let workloads: Vec<Workload> = workloads
        .into_iter()
        .map(|w| match (w, args.color_bytes) {
            (Workload::Split { many, .. }, Some(bytes)) => Workload::Split { bytes, many },
            _ => w,
        })
        .collect();
    let sweep = sweep(args)?;
    let mut runs = Vec::new();
    for &ranks in &sweep {
        for &workload in &workloads {
            for &algorithm in &algorithms {
                if feasible(algorithm, ranks, args.serial_max_ranks) {
                    runs.push((ranks, workload, algorithm));
                }
            }
        }
    }
    let largest = sweep.last().copied().unwrap_or(0);
    let charged = match compute {
        Some(f) => format!("computation charged x{}", f.get()),
        None => "computation free".into(),
    };
    eprintln!(
        "catena-bench sim: {} runs, N up to {largest}, {}, {charged}",
        runs.len(),
        args.model.describe(largest)
    );
    // Bigger runs take longer: weigh progress by N.
    let total: u64 = runs.iter().map(|r| u64::from(r.0)).sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} rank-runs, {msg}")
            .expect("a valid template"),
    );
    let mut rows = Vec::new();
    for (ranks, workload, algorithm) in runs {
        bar.set_message(format!("{} {algorithm} N = {ranks}", workload.name()));
        let started = Instant::now();
        let mut repeats = (0..repeat)
            .map(|_| simulate(workload, algorithm, ranks, args.model, compute))
            .collect::<Result<Vec<Row>>>()?;
        repeats.sort_by_key(|r| r.report.completion);
        let spread = (
            repeats[0].report.completion,
            repeats[repeats.len() - 1].report.completion,
        );
        if repeats.len() > 1 {
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            eprintln!(
                "{} {algorithm} N = {ranks}: {} runs from {:.3} to {:.3} virtual ms",
                workload.name(),
                repeats.len(),
                ms(spread.0),
                ms(spread.1)
            );
        }
        let mut row = repeats.swap_remove(repeats.len() / 2);
        row.runs = repeat;
        row.spread = spread;
        bar.inc(u64::from(ranks));
        if started.elapsed() > Duration::from_secs(5) {
            // A hidden bar (no terminal) prints nothing.
            match bar.is_hidden() {
                true => eprintln!("{}", line(&row)),
                false => bar.println(line(&row)),
            }
        }
        rows.push(row);
    }
    bar.finish_and_clear();
    let table = table(&rows);
    table.print();
    table.write_csv(&args.csv)?;
    eprintln!("wrote {}", args.csv.display());
    Ok(())
}

/// One log-log plot of virtual time against N per workload in `csv`, one
/// line per algorithm; returns the files written.
fn plot(csv: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(csv).map_err(|e| format!("{}: {e}", csv.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("an empty CSV")?.split(',').collect();
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or_else(|| format!("{}: no column {name}", csv.display()))
    };
    let (w, a, n, t) = (
        column("workload")?,
        column("algorithm")?,
        column("ranks")?,
        column("virtual_ms")?,
    );
    // workload -> algorithm -> points, in the order they first appear.
    let mut plots: Vec<(String, Vec<plot::Series>)> = Vec::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let bad = || format!("{}: unexpected line {line:?}", csv.display());
        let (Some(workload), Some(algorithm)) = (cells.get(w), cells.get(a)) else {
            return Err(bad().into());
        };
        let ranks: f64 = cells.get(n).and_then(|c| c.parse().ok()).ok_or_else(bad)?;
        let ms: f64 = cells.get(t).and_then(|c| c.parse().ok()).ok_or_else(bad)?;
        let at = match plots.iter().position(|p| p.0 == *workload) {
            Some(i) => i,
            None => {
                plots.push((workload.to_string(), Vec::new()));
                plots.len() - 1
            }
        };
        let series = &mut plots[at].1;
        match series.iter_mut().find(|s| s.name == *algorithm) {
            Some(s) => s.points.push((ranks, ms)),
            None => series.push(plot::Series {
                name: algorithm.to_string(),
                points: vec![(ranks, ms)],
            }),
        }
    }
    let stem = csv.file_stem().and_then(|s| s.to_str()).unwrap_or("sim");
    let mut written = Vec::new();
    for (workload, series) in plots {
        let slug: String = workload
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let path = csv.with_file_name(format!("{stem}-{slug}.png"));
        let title = format!("{workload}: split time on the simulator");
        plot::log_log(&path, &title, "ranks", "virtual time, ms", &series)?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

fn line(r: &Row) -> String {
    format!(
        "{} {} N = {}: {:.3} ms virtual, {:.1} s wall, {:.2} M events/s, peak RSS {:.2} GiB",
        r.workload.name(),
        r.algorithm,
        r.report.ranks,
        r.report.completion.as_secs_f64() * 1e3,
        r.report.wall.as_secs_f64(),
        r.report.events_per_second() / 1e6,
        r.rss_bytes as f64 / (1u64 << 30) as f64
    )
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "algorithm",
        "ranks",
        "virtual_ms",
        "runs",
        "virtual_ms_low",
        "virtual_ms_high",
        "messages",
        "bytes",
        "algorithm_bytes_per_rank",
        "transport_bytes_per_rank",
        "directory_entries_per_rank",
        "events",
        "wall_s",
        "events_per_s",
        "peak_rss_bytes",
    ]);
    for r in rows {
        t.row(vec![
            r.workload.name(),
            r.algorithm.to_string(),
            r.report.ranks.to_string(),
            format!("{:.4}", r.report.completion.as_secs_f64() * 1e3),
            r.runs.to_string(),
            format!("{:.4}", r.spread.0.as_secs_f64() * 1e3),
            format!("{:.4}", r.spread.1.as_secs_f64() * 1e3),
            r.report.messages.to_string(),
            r.report.bytes.to_string(),
            r.algorithm_bytes.to_string(),
            r.report.peak_transport_bytes.to_string(),
            r.report.peak_directory_entries.to_string(),
            r.report.events.to_string(),
            format!("{:.3}", r.report.wall.as_secs_f64()),
            format!("{:.0}", r.report.events_per_second()),
            r.rss_bytes.to_string(),
        ]);
    }
    t
}
