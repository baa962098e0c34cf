//! `catena-bench collectives`: catena against MPICH on the same processes
//! in the same run. Started from a shell it relaunches itself under
//! `mpiexec -n N` (built with `mpi`); each process initializes MPI,
//! starts catena's provider on the same processes by the MPI bootstrap
//! on `MPI_COMM_WORLD`, and times each row with catena and with MPICH,
//! a catena sample then an MPICH sample (see [`sample`]): barrier; bcast,
//! reduce, allreduce, allgather, gather and scatter at 8 B .. 16 MiB per
//! process; split on the paper's workloads; create_group;
//! alltoall_specific on data sets A, B, C through Rust and through the C
//! API. Then, as separate jobs, an unmodified MPI program's
//! `MPI_Comm_split` with and without the interposer. Per row: the slowest
//! rank's median per call, catena / MPICH, catena's peak temporary heap
//! and the processes' peak RSS (`results/collectives.csv`). Built without
//! `mpi` (or with `--no-mpi`) it runs catena alone under catena's
//! launcher.

#[cfg(feature = "mpi")]
mod capi;
#[cfg(feature = "mpi")]
mod interposer;
mod reference;
mod rows;
mod sample;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use catena_algorithms::prelude::*;
use catena_fabric::{with_provider, Blocking, WithProvider};

use crate::alltoall::data::Set;
use crate::create_group::Shape;
use crate::report::Table;
use crate::split::WORKLOADS;
use reference::Mpi;
use rows::{Collective, Ctx, TIMEOUT};
use sample::{Budget, Harness, Measured, Result, Timing};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Rows to run, comma-separated, of barrier, bcast, reduce, allreduce,
    /// allgather, gather, scatter, split, create_group, alltoall,
    /// alltoall-c (through the C API) and interposer; or `all`.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    only: Vec<String>,
    /// Bytes per process of the sized collectives (multiples of 8).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "8,1024,65536,1048576,16777216"
    )]
    sizes: Vec<usize>,
    /// The most samples per side of a row (each a batch of calls at least
    /// 1 ms long, or one call).
    #[arg(long, default_value_t = 21)]
    repetitions: usize,
    /// Seconds of samples per row, both sides together; at least 3
    /// samples per side are taken however long they take.
    #[arg(long, default_value_t = 1.5)]
    row_seconds: f64,
    /// Elements per process of the alltoall rows.
    #[arg(long, default_value_t = 100_000)]
    elements: usize,
    /// Print catena / MPICH even where there are more processes than
    /// cores (where MPICH's busy-polling ranks starve each other, and the
    /// ratio says little).
    #[arg(long)]
    ratios: bool,
    /// Run catena alone under catena's launcher, without MPICH.
    #[arg(long)]
    no_mpi: bool,
    /// bench/c/split_time.c built with mpicc (default: `split_time` beside
    /// this program, built there with mpicc if missing).
    #[arg(long)]
    split_time: Option<PathBuf>,
    /// The interposer, libcatena-mpi.so (default: beside this program or
    /// in ../lib, or installed by algorithms/capi/install.sh from the
    /// libcatena.so beside this program).
    #[arg(long)]
    interposer: Option<PathBuf>,
    /// Jobs of split_time without and with the interposer, alternating.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..))]
    interposer_runs: u32,
    /// The provider of catena's side: `auto` (shm on one host), `shm`,
    /// `ofi` or `ucx` (features of those names); the C API rows get it
    /// through CATENA_PROVIDER.
    #[arg(long, default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(crate::relaunch::provider_names()))]
    provider: String,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/collectives.csv")]
    csv: PathBuf,
}

/// The families of rows `--only` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Barrier,
    Sized(Collective),
    Split,
    CreateGroup,
    Alltoall,
    AlltoallC,
    Interposer,
}

impl Family {
    fn all() -> Vec<Family> {
        let mut all = vec![Family::Barrier];
        all.extend(Collective::ALL.map(Family::Sized));
        all.extend([
            Family::Split,
            Family::CreateGroup,
            Family::Alltoall,
            Family::AlltoallC,
            Family::Interposer,
        ]);
        all
    }

    fn name(self) -> &'static str {
        match self {
            Family::Barrier => "barrier",
            Family::Sized(op) => op.name(),
            Family::Split => "split",
            Family::CreateGroup => "create_group",
            Family::Alltoall => "alltoall",
            Family::AlltoallC => "alltoall-c",
            Family::Interposer => "interposer",
        }
    }

    /// Whether the row needs MPI (the C API starts on an MPI communicator;
    /// the interposer is MPI's).
    fn needs_mpi(self) -> bool {
        matches!(self, Family::AlltoallC | Family::Interposer)
    }

    /// Whether the rows run in the main job (the interposer's are jobs of
    /// their own).
    fn in_job(self, with_mpi: bool) -> bool {
        self != Family::Interposer && (with_mpi || !self.needs_mpi())
    }
}

/// The families `--only` names, in the benchmark's order.
fn selected(args: &Args) -> Result<Vec<Family>> {
    let all = Family::all();
    if args.only.iter().any(|o| o == "all") {
        return Ok(all);
    }
    for name in &args.only {
        let name = name.replace('-', "_");
        if !all.iter().any(|f| f.name().replace('-', "_") == name) {
            let names: Vec<&str> = all.iter().map(|f| f.name()).collect();
            return Err(format!("--only: no row {name:?} (of {})", names.join(", ")).into());
        }
    }
    Ok(all
        .into_iter()
        .filter(|f| {
            let name = f.name().replace('-', "_");
            args.only.iter().any(|o| o.replace('-', "_") == name)
        })
        .collect())
}

fn check_args(args: &Args) -> Result<()> {
    selected(args)?;
    if let Some(bad) = args.sizes.iter().find(|&&s| s == 0 || s % 8 != 0) {
        return Err(
            format!("--sizes: {bad} is not a positive multiple of 8 (u64 elements)").into(),
        );
    }
    if args.elements == 0 || args.repetitions == 0 || args.row_seconds.is_nan() {
        return Err("--elements and --repetitions must be positive".into());
    }
    Ok(())
}

impl Args {
    fn budget(&self) -> Budget {
        Budget {
            max_samples: self.repetitions,
            row_seconds: self.row_seconds.max(0.0),
        }
    }

    /// Whether MPICH takes part (a build with `mpi`, not `--no-mpi`).
    fn with_mpi(&self) -> bool {
        cfg!(feature = "mpi") && !self.no_mpi
    }
}

/// One row: each side's figure (`None` where it has none: failed, or no
/// MPICH), catena's peak temporary heap and the peak RSS, and what went
/// wrong ("ok" if nothing).
pub(crate) struct Figure {
    op: String,
    case: String,
    catena: Option<Timing>,
    mpich: Option<Timing>,
    heap: Option<u64>,
    rss: Option<u64>,
    status: String,
}

impl Figure {
    /// The row's figure from what was measured, with the processes' peak
    /// RSS so far (the largest over ranks).
    fn new(op: &str, case: &str, m: Measured, h: &dyn Harness) -> Result<Figure> {
        let mut problems = Vec::new();
        let catena = m
            .catena
            .map_err(|why| problems.push(format!("catena: {why}")))
            .ok();
        let mpich = m
            .mpich
            .and_then(|r| r.map_err(|why| problems.push(format!("MPICH: {why}"))).ok());
        let rss = h.max(peak_rss().unwrap_or(0) as f64)? as u64;
        Ok(Figure {
            op: op.into(),
            case: case.into(),
            catena,
            mpich,
            heap: m.heap,
            rss: (rss > 0).then_some(rss),
            status: match problems.is_empty() {
                true => "ok".into(),
                false => problems.join("; "),
            },
        })
    }

    /// A row that was not measured, and why.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn failed(op: &str, case: &str, why: String) -> Figure {
        Figure {
            op: op.into(),
            case: case.into(),
            catena: None,
            mpich: None,
            heap: None,
            rss: None,
            status: why,
        }
    }
}

/// This process's peak resident set (VmHWM), bytes.
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Every selected row but the interposer's, on one communicator: what a
/// rank of the main job measures.
fn run_rows<T: Transport + Blocking>(
    world: &Comm<'_, T>,
    args: &Args,
    h: &dyn Harness,
    mpi: Option<&Mpi>,
) -> Result<Vec<Figure>> {
    let ctx = Ctx {
        world,
        h,
        budget: args.budget(),
        mpi,
    };
    // First contacts, MPICH's and catena's, before any row.
    for _ in 0..3 {
        world.barrier()?;
        world.allreduce(0u64, |a, b| a + b)?;
        h.barrier()?;
        if let Some(mpi) = mpi {
            reference::Reference::barrier(mpi);
        }
    }
    let mut figures = Vec::new();
    let mut progress = |f: Figure| {
        if h.rank() == 0 {
            eprintln!("  {} {}: {}", f.op, f.case, f.status);
        }
        figures.push(f);
    };
    for family in selected(args)? {
        match family {
            Family::Barrier => progress(rows::barrier(&ctx)?),
            Family::Sized(op) => {
                for &bytes in &args.sizes {
                    progress(rows::collective(&ctx, op, bytes)?);
                }
            }
            Family::Split => {
                for workload in WORKLOADS {
                    progress(rows::split(&ctx, workload)?);
                }
            }
            Family::CreateGroup => {
                for shape in Shape::ALL {
                    progress(rows::create_group(&ctx, shape)?);
                }
            }
            Family::Alltoall => {
                for set in Set::ALL {
                    progress(rows::alltoall(&ctx, set, args.elements)?);
                }
            }
            Family::AlltoallC | Family::Interposer => {}
        }
    }
    Ok(figures)
}

/// The intermediate CSV the job's rank 0 writes for the command that
/// started it.
fn job_csv(csv: &Path) -> PathBuf {
    csv.with_extension("job.csv")
}

/// Outside a job: runs the main job (under `mpiexec`, or the launcher
/// without MPI), then the interposer's jobs; prints the table and writes
/// the CSV.
pub fn compare(args: &Args) -> crate::Outcome {
    check_args(args)?;
    let families = selected(args)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = args.job.ranks;
    let oversubscribed = n as usize > cores;
    let load = loadavg();
    println!(
        "catena-bench collectives: N = {n} on {cores} cores ({}), load average at start {load}",
        match oversubscribed {
            true => "OVERSUBSCRIBED: more processes than cores, so figures compare badly and no ratio is printed unless --ratios",
            false => "a core per process",
        }
    );
    let busy = load
        .split_whitespace()
        .next()
        .and_then(|l| l.parse::<f64>().ok())
        .is_some_and(|l| l >= 0.5);
    if busy {
        println!("(the 1-minute load is 0.5 or more: other work competes for the cores, so expect noise)");
    }
    let skipped: Vec<&str> = families
        .iter()
        .filter(|f| f.needs_mpi() && !args.with_mpi())
        .map(|f| f.name())
        .collect();
    if !skipped.is_empty() {
        println!("(not run without MPI: {})", skipped.join(", "));
    }
    let mut figures = Vec::new();
    if families.iter().any(|f| f.in_job(args.with_mpi())) {
        let part = job_csv(&args.csv);
        let _ = std::fs::remove_file(&part);
        match args.with_mpi() {
            true => run_mpiexec(args)?,
            false => {
                args.job.launch("collectives", ", catena alone")?;
            }
        }
        figures = read_csv(&part)?;
        std::fs::remove_file(&part)?;
    }
    #[cfg(feature = "mpi")]
    if args.with_mpi() && families.contains(&Family::Interposer) {
        figures.push(interposer::row(args));
    }
    let meta = Meta {
        n,
        cores,
        oversubscribed,
        load,
        ratios: !oversubscribed || args.ratios,
        provider: args.provider.clone(),
        mpi: args.with_mpi(),
    };
    print(&meta, &figures);
    write_csv(&args.csv, &meta, &figures)?;
    println!(
        "load average at the end {}; wrote {}",
        loadavg(),
        args.csv.display()
    );
    Ok(0)
}

/// The first three fields of /proc/loadavg.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// This very command under `mpiexec -n N`.
fn run_mpiexec(args: &Args) -> Result<()> {
    eprintln!(
        "catena-bench collectives: catena ({}) and MPICH under mpiexec -n {} ...",
        args.provider, args.job.ranks
    );
    let mut mpiexec = std::process::Command::new("mpiexec");
    mpiexec
        .args(args.job.hosts.mpiexec_args(args.job.ranks))
        .arg("-n")
        .arg(args.job.ranks.to_string());
    if args.provider != catena_fabric::AUTO {
        mpiexec
            .arg("-genv")
            .arg("CATENA_PROVIDER")
            .arg(&args.provider);
    }
    let status = mpiexec
        .arg(std::env::current_exe()?)
        .args(std::env::args_os().skip(1))
        .status()
        .map_err(|e| format!("starting mpiexec (is MPICH installed?): {e}"))?;
    match status.success() {
        true => Ok(()),
        false => Err(format!("mpiexec failed: {status}").into()),
    }
}

/// In a rank started by catena's launcher: catena alone.
pub fn main(args: &Args) -> crate::Outcome {
    with_provider(&args.provider, Alone(args))?
}

struct Alone<'a>(&'a Args);

impl WithProvider for Alone<'_> {
    type Output = crate::Outcome;

    fn run<P: Provider>(self) -> crate::Outcome {
        let args = self.0;
        let t = P::from_env()?;
        let figures = {
            let world = Comm::world(&t).with_timeout(TIMEOUT);
            // The harness's collectives keep to a communicator of their own.
            let own = world.dup()?;
            run_rows(&world, args, &CommHarness(&own), None)?
        };
        if t.rank() == 0 {
            write_job_csv(&job_csv(&args.csv), &figures)?;
        }
        t.finalize(TIMEOUT)?;
        Ok(0)
    }
}

/// The harness over a catena communicator (catena alone).
struct CommHarness<'a, 't, T: Transport>(&'a Comm<'t, T>);

impl<T: Transport + Blocking> Harness for CommHarness<'_, '_, T> {
    fn rank(&self) -> u32 {
        self.0.rank()
    }

    fn barrier(&self) -> Result<()> {
        Ok(self.0.barrier()?)
    }

    fn max(&self, x: f64) -> Result<f64> {
        Ok(self.0.allreduce(x, |a, b| a.max(*b))?)
    }

    fn min(&self, x: f64) -> Result<f64> {
        Ok(self.0.allreduce(x, |a, b| a.min(*b))?)
    }

    fn sum(&self, x: u64) -> Result<u64> {
        Ok(self.0.allreduce(x, |a, b| a + b)?)
    }

    fn share(&self, from: u32, text: &str) -> Result<String> {
        let mine = (self.0.rank() == from).then(|| text.to_string());
        Ok(self.0.bcast(from, mine)?)
    }
}

/// Under `mpiexec`: catena on the MPI bootstrap of `MPI_COMM_WORLD` and
/// MPICH on the same processes; then the C API's rows. A rank that fails
/// aborts the job (its peers would wait in a collective for ever).
#[cfg(feature = "mpi")]
pub fn mpi_main(args: &Args) -> crate::Outcome {
    use mpi::traits::*;
    let universe = mpi::initialize().ok_or("MPI is initialized already")?;
    let world = universe.world();
    match on_mpi(args, &world) {
        Ok(()) => Ok(0),
        Err(e) => {
            eprintln!("catena-bench collectives: rank {}: {e}", world.rank());
            world.abort(1)
        }
    }
}

#[cfg(feature = "mpi")]
fn on_mpi(args: &Args, world: &Mpi) -> Result<()> {
    use catena_fabric::bootstrap::MpiBootstrap;
    use catena_fabric::job::Job;
    use mpi::raw::AsRaw;

    let h = MpiHarness(world);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: MPI_COMM_WORLD is live until `universe` drops.
    let bootstrap = unsafe { MpiBootstrap::on_comm(world.as_raw()) }?;
    let job = Job::new(Box::new(bootstrap), cores);
    let mut figures = with_provider(
        &args.provider,
        OnMpi {
            args,
            job,
            h: &h,
            mpi: world,
        },
    )??;
    if selected(args)?.contains(&Family::AlltoallC) {
        for figure in capi::rows(&h, args.budget(), world, &Set::ALL, args.elements)? {
            if h.rank() == 0 {
                eprintln!("  {} {}: {}", figure.op, figure.case, figure.status);
            }
            figures.push(figure);
        }
    }
    if h.rank() == 0 {
        write_job_csv(&job_csv(&args.csv), &figures)?;
    }
    Ok(())
}

/// catena's provider on the MPI job, the rows, and its finalize.
#[cfg(feature = "mpi")]
struct OnMpi<'a> {
    args: &'a Args,
    job: catena_fabric::job::Job,
    h: &'a dyn Harness,
    mpi: &'a Mpi,
}

#[cfg(feature = "mpi")]
impl WithProvider for OnMpi<'_> {
    type Output = Result<Vec<Figure>>;

    fn run<P: Provider>(self) -> Result<Vec<Figure>> {
        let t = P::from_job(self.job)?;
        let figures = {
            let world = Comm::world(&t).with_timeout(TIMEOUT);
            run_rows(&world, self.args, self.h, Some(self.mpi))?
        };
        t.finalize(TIMEOUT)?;
        Ok(figures)
    }
}

/// The harness over MPI's own collectives.
#[cfg(feature = "mpi")]
struct MpiHarness<'a>(&'a Mpi);

#[cfg(feature = "mpi")]
impl Harness for MpiHarness<'_> {
    fn rank(&self) -> u32 {
        mpi::traits::Communicator::rank(self.0) as u32
    }

    fn barrier(&self) -> Result<()> {
        mpi::traits::CommunicatorCollectives::barrier(self.0);
        Ok(())
    }

    fn max(&self, x: f64) -> Result<f64> {
        use mpi::traits::*;
        let mut y = 0.0;
        self.0
            .all_reduce_into(&x, &mut y, mpi::collective::SystemOperation::max());
        Ok(y)
    }

    fn min(&self, x: f64) -> Result<f64> {
        use mpi::traits::*;
        let mut y = 0.0;
        self.0
            .all_reduce_into(&x, &mut y, mpi::collective::SystemOperation::min());
        Ok(y)
    }

    fn sum(&self, x: u64) -> Result<u64> {
        use mpi::traits::*;
        let mut y = 0u64;
        self.0
            .all_reduce_into(&x, &mut y, mpi::collective::SystemOperation::sum());
        Ok(y)
    }

    fn share(&self, from: u32, text: &str) -> Result<String> {
        use mpi::traits::*;
        let root = self.0.process_at_rank(from as i32);
        let mine = self.rank() == from;
        let mut len = if mine { text.len() as u64 } else { 0 };
        root.broadcast_into(&mut len);
        let mut bytes = match mine {
            true => text.as_bytes().to_vec(),
            false => vec![0u8; len as usize],
        };
        root.broadcast_into(&mut bytes[..]);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// What the command that started the job knows of the run.
struct Meta {
    n: u32,
    cores: usize,
    oversubscribed: bool,
    load: String,
    /// Whether ratios are shown.
    ratios: bool,
    provider: String,
    mpi: bool,
}

const JOB_HEADER: [&str; 11] = [
    "op",
    "case",
    "catena_us",
    "catena_samples",
    "catena_batch",
    "mpich_us",
    "mpich_samples",
    "mpich_batch",
    "catena_heap_bytes",
    "rss_bytes",
    "status",
];

/// A CSV cell: no commas or line breaks.
fn cell(text: &str) -> String {
    text.replace([',', '\n', '\r'], ";")
}

fn opt<T: ToString>(x: Option<T>) -> String {
    x.map_or(String::new(), |x| x.to_string())
}

impl Figure {
    fn cells(&self) -> Vec<String> {
        let timing = |t: &Option<Timing>| match t {
            Some(t) => [
                format!("{:.4}", t.seconds * 1e6),
                t.samples.to_string(),
                t.batch.to_string(),
            ],
            None => Default::default(),
        };
        let mut cells = vec![cell(&self.op), cell(&self.case)];
        cells.extend(timing(&self.catena));
        cells.extend(timing(&self.mpich));
        cells.extend([opt(self.heap), opt(self.rss), cell(&self.status)]);
        cells
    }

    fn from_cells(cells: &[&str]) -> Result<Figure> {
        let [op, case, cus, cs, cb, mus, ms, mb, heap, rss, status] = cells[..] else {
            return Err(
                format!("{} cells where {} were due", cells.len(), JOB_HEADER.len()).into(),
            );
        };
        let timing = |us: &str, samples: &str, batch: &str| -> Result<Option<Timing>> {
            if us.is_empty() {
                return Ok(None);
            }
            Ok(Some(Timing {
                seconds: us.parse::<f64>()? * 1e-6,
                samples: samples.parse()?,
                batch: batch.parse()?,
            }))
        };
        let number = |x: &str| -> Result<Option<u64>> {
            Ok(match x.is_empty() {
                true => None,
                false => Some(x.parse()?),
            })
        };
        Ok(Figure {
            op: op.into(),
            case: case.into(),
            catena: timing(cus, cs, cb)?,
            mpich: timing(mus, ms, mb)?,
            heap: number(heap)?,
            rss: number(rss)?,
            status: status.into(),
        })
    }

    /// catena / MPICH, where both were measured.
    fn ratio(&self) -> Option<f64> {
        Some(self.catena.as_ref()?.seconds / self.mpich.as_ref()?.seconds)
    }
}

fn write_job_csv(path: &Path, figures: &[Figure]) -> Result<()> {
    let mut table = Table::new(&JOB_HEADER);
    for f in figures {
        table.row(f.cells());
    }
    Ok(table.write_csv(path)?)
}

fn read_csv(path: &Path) -> Result<Vec<Figure>> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.lines()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split(',').collect();
            Figure::from_cells(&cells)
                .map_err(|e| format!("{}: {line:?}: {e}", path.display()).into())
        })
        .collect()
}

fn write_csv(path: &Path, meta: &Meta, figures: &[Figure]) -> Result<()> {
    let mut header = vec!["n", "cores", "oversubscribed", "load_at_start", "provider"];
    header.extend(&JOB_HEADER[..2]);
    header.push("ratio");
    header.extend(&JOB_HEADER[2..]);
    let mut table = Table::new(&header);
    for f in figures {
        let mut row = vec![
            meta.n.to_string(),
            meta.cores.to_string(),
            meta.oversubscribed.to_string(),
            meta.load.clone(),
            cell(&meta.provider),
        ];
        let cells = f.cells();
        row.extend(cells[..2].iter().cloned());
        row.push(match meta.ratios {
            true => opt(f.ratio().map(|r| format!("{r:.3}"))),
            false => String::new(),
        });
        row.extend(cells[2..].iter().cloned());
        table.row(row);
    }
    Ok(table.write_csv(path)?)
}

/// Microseconds to three significant digits or so.
fn micros(t: &Option<Timing>) -> String {
    let Some(t) = t else { return "-".into() };
    let us = t.seconds * 1e6;
    match us {
        us if us < 10.0 => format!("{us:.2}"),
        us if us < 100.0 => format!("{us:.1}"),
        us => format!("{us:.0}"),
    }
}

fn mebibytes(bytes: Option<u64>) -> String {
    match bytes {
        None => "-".into(),
        Some(b) if b < 1 << 20 => format!("{:.1} KiB", b as f64 / 1024.0),
        Some(b) => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
    }
}

fn print(meta: &Meta, figures: &[Figure]) {
    let mut title = format!(
        "\ncatena ({}) {} N = {} processes; per row the slowest rank's median per call \
         (each rank's median over its samples, the largest over ranks), us",
        meta.provider,
        match meta.mpi {
            true => "against MPICH on the same",
            false => "alone (no MPICH) on",
        },
        meta.n
    );
    if meta.oversubscribed {
        let _ = write!(
            title,
            "\nOVERSUBSCRIBED: {} processes on {} cores{}",
            meta.n,
            meta.cores,
            match meta.ratios {
                true => " (ratios printed as asked: they say little here)",
                false => ": no ratios (--ratios prints them)",
            }
        );
    }
    println!("{title}");
    let mut table = Table::new(&[
        "op",
        "case",
        "catena",
        "MPICH",
        "catena/MPICH",
        "samples c/m",
        "batch c/m",
        "catena heap",
        "peak RSS",
        "status",
    ]);
    let count = |t: &Option<Timing>, f: fn(&Timing) -> usize| {
        t.as_ref().map_or("-".into(), |t| f(t).to_string())
    };
    for f in figures {
        table.row(vec![
            f.op.clone(),
            f.case.clone(),
            micros(&f.catena),
            micros(&f.mpich),
            match (meta.ratios, f.ratio()) {
                (true, Some(r)) => format!("{r:.2}"),
                _ => "-".into(),
            },
            format!(
                "{}/{}",
                count(&f.catena, |t| t.samples),
                count(&f.mpich, |t| t.samples)
            ),
            format!(
                "{}/{}",
                count(&f.catena, |t| t.batch),
                count(&f.mpich, |t| t.batch)
            ),
            mebibytes(f.heap),
            mebibytes(f.rss),
            f.status.clone(),
        ]);
    }
    table.print();
    let rss = figures.iter().filter_map(|f| f.rss).max();
    println!(
        "catena heap: catena's peak temporary heap in a sample (a batch of calls), per process, the largest over \
         samples and ranks; peak RSS: the processes' peak resident set after the row (MPICH's memory included \
         where it runs), the largest over ranks; at the end {}.",
        mebibytes(rss)
    );
}
