//! `catena-bench groupmap`: every group-map representation and strategy on
//! Taheri's experiment classes A-E and his Table 6.1 communicators: bytes
//! against the information-theoretic bound, build time, select and rank ns.

mod classes;
mod measure;
mod output;

use std::path::PathBuf;

use catena_groupmap::{GroupMapError, OrderKind, SetKind, Strategy};
use indicatif::{ProgressBar, ProgressStyle};

use classes::{Class, Rng};
use measure::{Probe, Timing};

#[derive(clap::Args)]
pub struct Args {
    /// Classes, comma-separated: A random members, B strides, C ranges of
    /// ranges, D hypercube faces, E unordered ranges [default: all, or none
    /// with --table].
    #[arg(long, value_delimiter = ',', ignore_case = true)]
    classes: Option<Vec<Class>>,
    /// Run Table 6.1's 14 communicators (only them unless --classes is given).
    #[arg(long, conflicts_with = "no_table")]
    table: bool,
    /// Skip Table 6.1.
    #[arg(long)]
    no_table: bool,
    /// Maps per class [default: 100; 1000 with --thorough; 3 with --quick].
    #[arg(long)]
    maps: Option<u32>,
    /// The thesis's 1000 maps per class.
    #[arg(long)]
    thorough: bool,
    /// Seed of the map generator; map i of a class is the same whatever else
    /// a run picks.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// World of the classes [default: 1048576; 4096 with --quick].
    #[arg(long)]
    world: Option<u32>,
    /// World of Table 6.1 [default: 200000; 20000 with --quick]; its random
    /// communicators scale with it.
    #[arg(long)]
    table_world: Option<u32>,
    /// Directory for groupmap.csv and the plots (groupmap-A.png, ...,
    /// groupmap-table.png).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// A tiny run, for tests: small worlds and 3 maps a class.
    #[arg(long)]
    quick: bool,
}

/// The strategies measured beside the fixed representations.
const STRATEGIES: [(&str, Strategy); 3] = [
    ("Space", Strategy::Space),
    ("Time", Strategy::Time),
    ("Auto", Strategy::Auto),
];

/// What a row measured.
#[derive(Clone, Copy, Debug, PartialEq)]
enum What {
    /// `Strategy::Fixed` of the row's set and order.
    Fixed,
    Strategy(&'static str),
    /// The plain `Vec<u32>` MPICH keeps.
    Vec,
    /// The information-theoretic lower bound.
    Bound,
}

/// One (map, representation or strategy) measurement, a line of the CSV.
struct Row {
    /// `A`..`E`, or `T1`..`T14` for Table 6.1.
    workload: String,
    map: u32,
    members: u32,
    world: u32,
    permuted: bool,
    what: What,
    /// The representation built (what a strategy chose).
    set: Option<SetKind>,
    order: Option<OrderKind>,
    /// None where the representation cannot hold the map.
    bytes: Option<f64>,
    bound: f64,
    timing: Option<Timing>,
    note: String,
}

impl Row {
    fn what(&self) -> String {
        match self.what {
            What::Fixed => self.representation().unwrap_or_default(),
            What::Strategy(name) => format!("strategy:{name}"),
            What::Vec => "baseline:Vec<u32>".to_string(),
            What::Bound => "bound".to_string(),
        }
    }

    /// `Set+Order`, for rows that built a map.
    fn representation(&self) -> Option<String> {
        Some(format!("{}+{}", self.set?, self.order?))
    }

    fn in_table(&self) -> bool {
        self.workload.starts_with('T')
    }
}

/// One map to generate and measure.
enum Job {
    Class(Class, u32),
    Table(usize),
}

pub fn main(args: &Args) -> crate::Outcome {
    let quick = |fast, slow| if args.quick { fast } else { slow };
    let world = args.world.unwrap_or(quick(4096, 1 << 20));
    let table_world = args
        .table_world
        .unwrap_or(quick(20_000, classes::TABLE_WORLD));
    if world < 2 || table_world < 2 {
        return Err("the worlds need at least 2 ranks".into());
    }
    let maps = args
        .maps
        .unwrap_or(quick(3, if args.thorough { 1000 } else { 100 }));
    let classes = args.classes.clone().unwrap_or_else(|| {
        if args.table {
            Vec::new()
        } else {
            Class::ALL.to_vec()
        }
    });
    let mut jobs: Vec<Job> = classes
        .iter()
        .flat_map(|&c| (0..maps).map(move |i| Job::Class(c, i)))
        .collect();
    if !args.no_table {
        jobs.extend((1..=classes::TABLE.len()).map(Job::Table));
    }
    let names: Vec<&str> = classes.iter().map(|c| c.name()).collect();
    let classes_line = match names.is_empty() {
        true => "no classes".to_string(),
        false => format!("classes {} on {world} ranks, {maps} each", names.join(",")),
    };
    let table_line = match args.no_table {
        true => "no Table 6.1".to_string(),
        false => format!("Table 6.1 on {table_world} ranks"),
    };
    eprintln!(
        "catena-bench groupmap: {} maps ({classes_line}; {table_line})",
        jobs.len()
    );
    let slow = slow_lookups_warning();
    if let Some(warning) = &slow {
        eprintln!("{warning}");
    }
    let bar = ProgressBar::new(jobs.len() as u64).with_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} maps, {msg}")
            .expect("a valid template"),
    );
    let mut rows = Vec::new();
    for job in jobs {
        // Class workloads are tagged 1..=5, the table 100 + id.
        let (name, index, world, tag) = match job {
            Job::Class(c, i) => (c.name().to_string(), i, world, c as u64 + 1),
            Job::Table(id) => (format!("T{id}"), 0, table_world, 100 + id as u64),
        };
        let mut rng = Rng::for_map(args.seed, tag, u64::from(index));
        let ranks = match job {
            Job::Class(c, _) => c.generate(world, &mut rng),
            Job::Table(id) => classes::communicator(id, world, &mut rng),
        };
        bar.set_message(format!("{name} map {index}: {} members", ranks.len()));
        let map = Map {
            workload: &name,
            index,
            world,
            ranks: &ranks,
        };
        rows.extend(map.measure(&mut rng, &bar));
        bar.inc(1);
    }
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.out)?;
    let csv = args.out.join("groupmap.csv");
    output::table(&rows).write_csv(&csv)?;
    eprintln!("wrote {}", csv.display());
    match output::plots(&rows, &args.out) {
        Ok(written) => eprintln!("wrote {}", written.join(", ")),
        // The figures are in the CSV; the plots are a view of them.
        Err(e) => eprintln!("no plots: {e}"),
    }
    output::summary(&rows);
    if let Some(warning) = &slow {
        println!("\n{warning}");
    }
    Ok(0)
}

/// A line to print at the start and the end of a run whose lookups are
/// vers-vecs' software fallbacks (a build without the target features
/// catena's `.cargo/config.toml` turns on), so no one takes its times for
/// catena's.
fn slow_lookups_warning() -> Option<&'static str> {
    if catena_groupmap::fast_lookups() {
        None
    } else if cfg!(target_arch = "x86_64") {
        Some(
            "WARNING: built without the popcnt and BMI2 target features: bitmap, Elias-Fano, \
             complement, indexed and wavelet lookups take vers-vecs' software fallbacks, 2-4x \
             slower, so these times are not catena's. Build with RUSTFLAGS=\"-C \
             target-feature=+popcnt,+bmi1,+bmi2,+lzcnt\" (catena's .cargo/config.toml does; \
             see docs/groupmap.md).",
        )
    } else {
        Some(
            "WARNING: not x86-64: vers-vecs' rank and select take software fallbacks here (no \
             pdep), so bitmap, Elias-Fano, complement, indexed and wavelet lookups are slower \
             than docs/groupmap.md's x86-64 figures.",
        )
    }
}

/// One generated map, in group order.
struct Map<'a> {
    workload: &'a str,
    index: u32,
    world: u32,
    ranks: &'a [u32],
}

impl Map<'_> {
    /// The bound, the plain array, every applicable fixed representation
    /// and every strategy, each map built, timed and dropped in turn.
    fn measure(&self, rng: &mut Rng, bar: &ProgressBar) -> Vec<Row> {
        let n = self.ranks.len() as u32;
        let permuted = !self.ranks.windows(2).all(|p| p[0] < p[1]);
        let probe = Probe::new(self.world, self.ranks, rng);
        let row = |what, bytes, timing| Row {
            workload: self.workload.to_string(),
            map: self.index,
            members: n,
            world: self.world,
            permuted,
            what,
            set: None,
            order: None,
            bytes,
            bound: measure::bound_bytes(self.world, n, permuted),
            timing,
            note: String::new(),
        };
        let mut rows = vec![row(What::Bound, None, None)];
        let (timing, bytes) = measure::time_vec(self.ranks, &probe);
        rows.push(row(What::Vec, Some(bytes as f64), Some(timing)));
        // Only the sorted order fits a sorted map; the plain array holds a
        // permuted group's order itself.
        let orders = |set: SetKind| -> &[OrderKind] {
            match permuted && set != SetKind::Plain {
                true => &[
                    OrderKind::Blocks,
                    OrderKind::Packed,
                    OrderKind::Shortcuts,
                    OrderKind::Wavelet,
                ],
                false => &[OrderKind::Sorted],
            }
        };
        let fixed = SetKind::ALL.into_iter().flat_map(|set| {
            orders(set)
                .iter()
                .map(move |&order| Strategy::Fixed { set, order })
        });
        let strategies = STRATEGIES.iter().map(|&(_, s)| s);
        for strategy in fixed.chain(strategies) {
            let what = match STRATEGIES.iter().find(|s| s.1 == strategy) {
                Some(&(name, _)) => What::Strategy(name),
                None => What::Fixed,
            };
            let mut r = row(what, None, None);
            self.build(strategy, &probe, &mut r);
            if r.note.starts_with("WRONG") || r.note.starts_with("error") {
                let line = format!(
                    "{} map {}: {}: {}",
                    self.workload,
                    self.index,
                    r.what(),
                    r.note
                );
                match bar.is_hidden() {
                    true => eprintln!("{line}"),
                    false => bar.println(line),
                }
            }
            rows.push(r);
        }
        rows
    }

    /// Builds the map with `strategy` and fills in `row` with what it
    /// measured, or why it could not be built.
    fn build(&self, strategy: Strategy, probe: &Probe, row: &mut Row) {
        if let Strategy::Fixed { set, order } = strategy {
            (row.set, row.order) = (Some(set), Some(order));
        }
        let (built, build_us) = measure::build(self.world, self.ranks, strategy);
        match built {
            Ok((map, report)) => {
                (row.set, row.order) = (Some(map.set_kind()), Some(map.order_kind()));
                row.bytes = Some(map.bytes() as f64);
                row.timing = Some(measure::time_map(&map, probe, build_us));
                let wrong = measure::wrong_answers(&map, self.ranks, probe);
                if wrong > 0 {
                    row.note = format!("WRONG: {wrong} sampled answers disagree with the ranks");
                } else if (report.set, report.order) != (map.set_kind(), map.order_kind()) {
                    row.note = format!("reported {}+{}", report.set, report.order);
                }
            }
            Err(GroupMapError::NotApplicable {
                representation,
                why,
            }) => row.note = format!("not applicable: {representation}: {why}"),
            Err(e) => row.note = format!("error: {e}"),
        }
    }
}
