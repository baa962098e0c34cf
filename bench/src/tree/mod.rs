//! `catena-bench tree`: torus-aware broadcast and allreduce trees for
//! sub-communicators (seed 001). `loads` prints link-load tables, `sim`
//! times the collectives on the simulated torus, `run` on a real provider.

mod cases;
mod loads;
mod real;
mod simulate;

use std::path::PathBuf;

use catena_topo::Torus;
use indicatif::{ProgressBar, ProgressStyle};

use crate::plot;
use crate::report::{human_bytes, Table};
use simulate::{Algo, Op};

pub use real::RunArgs;

#[derive(clap::Subcommand)]
pub enum TreeCommand {
    /// Link loads of each construction against the binomial tree.
    Loads(CaseArgs),
    /// Simulated broadcast and allreduce times, as CSV and PNG plots.
    Sim(SimArgs),
    /// Real runs on a local provider (a job of -n ranks).
    Run(RunArgs),
}

#[derive(clap::Args)]
pub struct CaseArgs {
    /// Torus extents, comma-separated.
    #[arg(long, default_value = "8,8,8", value_delimiter = ',')]
    dims: Vec<u32>,
    /// Members of the random sub-communicator (and of all simultaneous ones).
    #[arg(long, default_value_t = 256)]
    members: usize,
    /// Simultaneous random sub-communicators.
    #[arg(long, default_value_t = 4)]
    groups: usize,
    /// The dimension whose planes "half the planes" takes (default: the last).
    #[arg(long)]
    plane_dim: Option<usize>,
    #[arg(long, default_value_t = 0x5eed_0001)]
    seed: u64,
}

#[derive(clap::Args)]
pub struct SimArgs {
    #[command(flatten)]
    cases: CaseArgs,
    /// Smallest message.
    #[arg(long, default_value_t = 64 << 10)]
    min_bytes: usize,
    /// Largest message (sizes grow by 4).
    #[arg(long, default_value_t = 64 << 20)]
    max_bytes: usize,
    /// Operations, comma-separated.
    #[arg(long, default_value = "bcast,allreduce", value_delimiter = ',')]
    ops: Vec<Op>,
    /// Algorithms, comma-separated.
    #[arg(long, default_value = "ours,binomial,ring", value_delimiter = ',')]
    algorithms: Vec<Algo>,
    /// Where to write the CSV; one PNG per case goes beside it.
    #[arg(long, default_value = "results/tree.csv")]
    csv: PathBuf,
}

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

impl CaseArgs {
    fn cases(&self, torus: &Torus) -> Result<Vec<Result<cases::Case, cases::NotFound>>> {
        let plane_dim = self.plane_dim.unwrap_or(torus.dims().len() - 1);
        if plane_dim >= torus.dims().len() {
            return Err(format!(
                "--plane-dim {plane_dim}: the torus has {} dimensions",
                torus.dims().len()
            )
            .into());
        }
        Ok(cases::cases(
            torus,
            self.members,
            self.groups,
            plane_dim,
            self.seed,
        ))
    }
}

pub fn main(command: &TreeCommand) -> crate::Outcome {
    match command {
        TreeCommand::Loads(args) => {
            let torus = Torus::new(&args.dims)?;
            let cases = args.cases(&torus)?;
            println!(
                "link loads on a {:?} torus ({} random members, {} groups at once)",
                args.dims, args.members, args.groups
            );
            loads::table(&torus, &cases)?.print();
            Ok(0)
        }
        TreeCommand::Sim(args) => sim(args).map(|()| 0),
        TreeCommand::Run(args) => real::main(args),
    }
}

fn name(algo: Algo, op: Op) -> &'static str {
    match (algo, op) {
        (Algo::Ours, _) => "ours",
        (Algo::Binomial, _) => "binomial",
        (Algo::Ring, Op::Bcast) => "scatter+allgather",
        (Algo::Ring, Op::Allreduce) => "ring allreduce",
    }
}

fn sim(args: &SimArgs) -> Result<()> {
    let torus = Torus::new(&args.cases.dims)?;
    let cases: Vec<cases::Case> = args
        .cases
        .cases(&torus)?
        .into_iter()
        .filter_map(|c| {
            c.map_err(|missing| eprintln!("{}: not found ({})", missing.name, missing.why))
                .ok()
        })
        .collect();
    let sizes: Vec<usize> = (0..)
        .map(|i| args.min_bytes << (2 * i))
        .take_while(|&s| s <= args.max_bytes)
        .collect();
    let runs: Vec<_> = cases
        .iter()
        .flat_map(|c| {
            sizes.iter().flat_map(move |&b| {
                args.ops
                    .iter()
                    .flat_map(move |&op| args.algorithms.iter().map(move |&a| (c, b, op, a)))
            })
        })
        .collect();
    // Bigger messages take longer: weigh progress by size.
    let bar = ProgressBar::new(runs.iter().map(|r| r.1 as u64 >> 10).sum()).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {msg}")
            .expect("a valid template"),
    );
    let mut table = Table::new(&[
        "case",
        "op",
        "algorithm",
        "bytes",
        "virtual_ms",
        "MB_per_s",
        "link_fraction",
        "speedup_vs_binomial",
    ]);
    let mut binomial_ms = std::collections::HashMap::new();
    let mut rows = Vec::new();
    for (case, bytes, op, algo) in runs {
        bar.set_message(format!(
            "{} {} {} {}",
            case.name,
            name(algo, op),
            human_bytes(bytes),
            ""
        ));
        let ms = simulate::run(&torus, case, algo, op, bytes)?.as_secs_f64() * 1e3;
        bar.inc(bytes as u64 >> 10);
        if bar.is_hidden() {
            // No terminal shows the bar: say what was done, line by line.
            let elapsed = bar.elapsed().as_secs();
            eprintln!(
                "[{elapsed} s] {} {} {}: {ms:.3} virtual ms",
                case.name,
                name(algo, op),
                human_bytes(bytes)
            );
        }
        if algo == Algo::Binomial {
            binomial_ms.insert((case.name, op, bytes), ms);
        }
        rows.push((case.name, op, algo, bytes, ms));
    }
    bar.finish_and_clear();
    // One link moves 425 MB/s in the model.
    for &(case, op, algo, bytes, ms) in &rows {
        let mb_s = bytes as f64 / ms / 1e3;
        let speedup = binomial_ms
            .get(&(case, op, bytes))
            .map_or(String::new(), |b| format!("{:.2}", b / ms));
        table.row(vec![
            case.into(),
            format!("{op:?}").to_lowercase(),
            name(algo, op).into(),
            bytes.to_string(),
            format!("{ms:.3}"),
            format!("{mb_s:.1}"),
            format!("{:.3}", mb_s / 425.0),
            speedup,
        ]);
    }
    table.print();
    table.write_csv(&args.csv)?;
    let mut written = vec![args.csv.display().to_string()];
    for case in &cases {
        let series: Vec<plot::Series> = args
            .ops
            .iter()
            .flat_map(|&op| args.algorithms.iter().map(move |&a| (op, a)))
            .map(|(op, algo)| plot::Series {
                name: format!("{} {}", format!("{op:?}").to_lowercase(), name(algo, op)),
                points: rows
                    .iter()
                    .filter(|r| r.0 == case.name && r.1 == op && r.2 == algo)
                    .map(|r| (r.3 as f64, r.4))
                    .collect(),
            })
            .collect();
        let slug = case.name.replace(' ', "-");
        let path = args.csv.with_file_name(format!("tree-{slug}.png"));
        let title = format!("{} on a {:?} torus (simulated)", case.name, args.cases.dims);
        match plot::log_log(&path, &title, "message bytes", "virtual ms", &series) {
            Ok(()) => written.push(path.display().to_string()),
            Err(e) => eprintln!("no plot for {}: {e}", case.name),
        }
    }
    eprintln!("wrote {}", written.join(", "));
    Ok(())
}
