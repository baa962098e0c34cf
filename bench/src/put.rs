//! `catena-bench put`: one-sided put latency (8 B put ping-pong, polled at
//! the target as `ucp_put_lat` does, and 8 B put + signal) and bandwidth
//! (1 KiB .. 64 MiB) between two pinned ranks, for one provider or all of
//! them side by side, next to the machine's physical limits and the fabric
//! libraries' own tools measured in the same run. Beside each put figure,
//! the same figure for tagged messages (`Transport::send`/`recv_into`,
//! eager messaging on the provider's puts) in the same job, and their
//! ratio; and, since a put the target never reads stays in the sender's
//! cache (on shm), puts each read out by the target before the next: the
//! bytes in the target's hands, as a message's are.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use catena_fabric::{
    block_on, Blocking, LocalWindow, Provider, RemoteKey, Result, Signal, Transport, WithProvider,
};
use catena_run::launch::{launch, LaunchSpec};

#[cfg(any(feature = "ofi", feature = "ucx"))]
use crate::native;
use crate::physical::{cache_line_round_trip, memcpy_bandwidth};
use crate::report::{human_bytes, quantile, Table};

#[derive(clap::Args)]
pub struct Args {
    /// Provider configuration: `shm`, `ofi/shm`, `ofi/tcp`, `ucx/shm`,
    /// `ucx/tcp`, a provider name for all of its configurations, or `all`.
    #[arg(long, default_value = "shm")]
    provider: String,
    /// Timed round trips for the latency test.
    #[arg(long, default_value_t = 20_000)]
    round_trips: usize,
    /// Largest put of the bandwidth test.
    #[arg(long, default_value_t = 64 << 20)]
    max_size: usize,
    /// Skip the reference tools (ucx_perftest, fi_pingpong, raw fi_writedata).
    #[arg(long)]
    no_native: bool,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/put.csv")]
    csv: PathBuf,
}

/// A provider (by its `catena_fabric::PROVIDERS` name) with the
/// environment that selects its fabric.
struct Config {
    name: &'static str,
    provider: &'static str,
    env: &'static [(&'static str, &'static str)],
}

impl Config {
    /// Whether this build has the provider.
    fn built(&self) -> bool {
        catena_fabric::PROVIDERS.contains(&self.provider)
    }
}

const CONFIGS: &[Config] = &[
    Config {
        name: "shm",
        provider: "shm",
        env: &[],
    },
    Config {
        name: "ofi/shm",
        provider: "ofi",
        env: &[("CATENA_OFI_PROVIDER", "shm")],
    },
    Config {
        name: "ofi/tcp",
        provider: "ofi",
        env: &[("CATENA_OFI_PROVIDER", "tcp;ofi_rxm")],
    },
    Config {
        name: "ucx/shm",
        provider: "ucx",
        env: &[("UCX_TLS", "posix,cma,self")],
    },
    Config {
        name: "ucx/tcp",
        provider: "ucx",
        env: &[("UCX_TLS", "tcp,self")],
    },
];

const CTX: u64 = 0xBE_0001;
/// Tags of the message ping-pong, the bandwidth messages and their acks.
const PING_TAG: u32 = 1;
const BULK_TAG: u32 = 2;
const ACK_TAG: u32 = 3;
const LATENCY_SIGNAL: usize = 0;
const BANDWIDTH_SIGNAL: usize = 8;
const ACK_SIGNAL: usize = 16;
const READ_ACK_SIGNAL: usize = 24;
const READ_SIGNAL: usize = 32;
/// The word a plain put ping-pong writes and polls (a cache line of its own).
const PUT_WORD: usize = 128;
const DATA_AT: usize = 64;
/// Bandwidth puts go here, clear of the latency words.
const BULK_AT: usize = 192;
const REPETITIONS: usize = 3;
const LATENCY_BATCH: usize = 100;
/// The latency tests take turns in this many rounds.
const LATENCY_ROUNDS: usize = 10;
const TIMEOUT: Duration = Duration::from_secs(300);

fn sizes(max: usize) -> impl Iterator<Item = usize> {
    (0..=8)
        .map(|i| 1024 << (2 * i))
        .take_while(move |&s| s <= max)
}

fn iterations(size: usize) -> usize {
    ((512 << 20) / size).clamp(4, 100_000)
}

/// Outside a job: runs every selected configuration as a job of two pinned
/// ranks, then the reference tools, and prints them side by side.
pub fn compare(args: &Args) -> crate::Outcome {
    let selected: Vec<&Config> = CONFIGS
        .iter()
        .filter(|c| c.built())
        .filter(|c| {
            args.provider == "all" || c.name == args.provider || c.provider == args.provider
        })
        .collect();
    if selected.is_empty() {
        let known: Vec<_> = CONFIGS
            .iter()
            .filter(|c| c.built())
            .map(|c| c.name)
            .collect();
        return Err(format!(
            "unknown provider {:?}; this build has: {}, or all (ofi and ucx need the cargo features of the same name)",
            args.provider,
            known.join(", ")
        )
        .into());
    }
    let dir = args.csv.with_extension("d");
    let mut results: Vec<(String, Figures)> = Vec::new();
    for config in &selected {
        let csv = dir.join(format!("{}.csv", config.name.replace('/', "-")));
        let mut rank_args: Vec<std::ffi::OsString> =
            vec!["put".into(), "--provider".into(), config.name.into()];
        rank_args.extend(["--round-trips".into(), args.round_trips.to_string().into()]);
        rank_args.extend([
            "--max-size".into(),
            args.max_size.to_string().into(),
            "--csv".into(),
            csv.clone().into(),
        ]);
        eprintln!("catena-bench put: measuring {} ...", config.name);
        run_job(&rank_args, config.env)?;
        results.push((config.name.into(), Figures::read(&csv)?));
    }
    if !args.no_native {
        results.extend(references(&selected, args));
    }
    print_comparison(&results, args)
}

fn run_job(
    args: &[std::ffi::OsString],
    env: &[(&str, &str)],
) -> Result<(), Box<dyn std::error::Error>> {
    let mut spec = LaunchSpec::new(2, std::env::current_exe()?);
    spec.args = args.to_vec();
    spec.pin = true;
    spec.env = env
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    let report = launch(&spec)?;
    match report.first_failure {
        None => Ok(()),
        Some((rank, status)) => Err(format!("rank {rank} failed ({status})").into()),
    }
}

/// The cache-line round trip between cores 0 and 1 and memcpy bandwidth on
/// core 0 (pins the calling thread).
fn machine_limits(max_size: usize) -> Figures {
    let cores = (
        core_affinity::CoreId { id: 0 },
        core_affinity::CoreId { id: 1 },
    );
    let line = cache_line_round_trip(cores.0, cores.1, 200_000);
    let mut machine = Figures {
        put_ns: Some(line.as_secs_f64() * 1e9 / 2.0),
        ..Figures::default()
    };
    core_affinity::set_for_current(cores.0);
    for size in sizes(max_size) {
        let mut rates: Vec<f64> = (0..REPETITIONS)
            .map(|_| memcpy_bandwidth(size, iterations(size)) / 1e9)
            .collect();
        machine.bandwidth.insert(size, quantile(&mut rates, 0.5));
    }
    machine
}

/// The libraries' own tools for the selected configurations, and the
/// machine's limits.
fn references(selected: &[&Config], args: &Args) -> Vec<(String, Figures)> {
    let mut out = Vec::new();
    // Measured on a thread of its own: pinning this one would pin every job
    // started afterwards (the launcher spreads ranks over the cores the
    // parent may use), and the ranks of the next job would share one core.
    let machine = std::thread::scope(|s| {
        s.spawn(|| machine_limits(args.max_size))
            .join()
            .expect("the machine-limit thread")
    });
    out.push(("cache line / memcpy".into(), machine));
    for config in selected {
        match config.name {
            #[cfg(feature = "ucx")]
            "ucx/shm" | "ucx/tcp" => {
                eprintln!("catena-bench put: ucx_perftest with {:?} ...", config.env);
                let mut f = Figures {
                    put_ns: native::ucp_put_lat(config.env),
                    ..Figures::default()
                };
                for size in sizes(args.max_size).filter(|&s| s >= 1 << 20) {
                    if let Some(bw) = native::ucp_put_bw(size, config.env) {
                        f.bandwidth.insert(size, bw);
                    }
                }
                out.push((format!("ucx_perftest ucp_put_* ({})", config.name), f));
            }
            #[cfg(feature = "ofi")]
            "ofi/shm" | "ofi/tcp" => {
                let csv = args
                    .csv
                    .with_extension("d")
                    .join(format!("fi_writedata-{}.csv", &config.name[4..]));
                let rank_args: Vec<std::ffi::OsString> = vec![
                    "put".into(),
                    "--provider".into(),
                    "raw-ofi".into(),
                    "--csv".into(),
                    csv.clone().into(),
                ];
                eprintln!(
                    "catena-bench put: raw fi_writedata ping-pong on {} ...",
                    config.name
                );
                match run_job(&rank_args, config.env)
                    .map_err(|e| e.to_string())
                    .and_then(|_| Figures::read(&csv).map_err(|e| e.to_string()))
                {
                    Ok(f) => out.push((format!("raw fi_writedata ping-pong ({})", config.name), f)),
                    Err(e) => eprintln!("catena-bench put: raw fi_writedata ping-pong failed: {e}"),
                }
                let provider = config.env[0].1.split(';').next().unwrap_or("shm");
                let env: &[(&str, &str)] = if provider == "tcp" {
                    &[("FI_TCP_IFACE", "lo")]
                } else {
                    &[]
                };
                let f = Figures {
                    put_signal_ns: native::fi_pingpong(provider, env),
                    ..Figures::default()
                };
                out.push((
                    format!("fi_pingpong, send/recv not RMA ({})", config.name),
                    f,
                ));
            }
            _ => {}
        }
    }
    out
}

fn print_comparison(results: &[(String, Figures)], args: &Args) -> crate::Outcome {
    let mut csv = Table::new(&["source", "metric", "size_bytes", "value", "unit"]);
    println!("\n8 B one-way latency, ns (half the ping-pong round trip, median):");
    let mut lat = Table::new(&[
        "source",
        "put",
        "put + signal",
        "send/recv",
        "send/recv / put+signal",
    ]);
    let cell = |v: Option<f64>| v.map_or("-".into(), |ns| format!("{ns:.0}"));
    for (name, f) in results {
        if f.put_ns.is_none() && f.put_signal_ns.is_none() && f.message_ns.is_none() {
            continue;
        }
        let ratio = ratio(f.message_ns, f.put_signal_ns);
        lat.row(vec![
            name.clone(),
            cell(f.put_ns),
            cell(f.put_signal_ns),
            cell(f.message_ns),
            ratio.map_or("-".into(), |r| format!("{r:.2}x")),
        ]);
        for (metric, value) in [
            ("put_latency", f.put_ns),
            ("put_signal_latency", f.put_signal_ns),
            ("message_latency", f.message_ns),
        ] {
            if let Some(ns) = value {
                csv.row(vec![
                    name.clone(),
                    metric.into(),
                    "8".into(),
                    format!("{ns:.1}"),
                    "ns".into(),
                ]);
            }
        }
    }
    lat.print();
    let sizes: Vec<usize> = sizes(args.max_size).collect();
    // Per source its put column, and where it has them its message column
    // and the message / put ratio.
    let mut header = vec!["size".to_string()];
    for (name, f) in results {
        if !f.bandwidth.is_empty() {
            header.push(format!("{name} put"));
        }
        if !f.read_bandwidth.is_empty() {
            header.push(format!("{name} put + read"));
        }
        if !f.message_bandwidth.is_empty() {
            header.extend([format!("{name} send/recv"), "/ put".into(), "/ read".into()]);
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut bw = Table::new(&header);
    let gbs = |g: Option<&f64>| g.map_or("-".into(), |g| format!("{g:.2}"));
    for &size in &sizes {
        let mut row = vec![human_bytes(size)];
        for (name, f) in results {
            let put = f.bandwidth.get(&size);
            let read = f.read_bandwidth.get(&size);
            let message = f.message_bandwidth.get(&size);
            if !f.bandwidth.is_empty() {
                row.push(gbs(put));
            }
            if !f.read_bandwidth.is_empty() {
                row.push(gbs(read));
            }
            if !f.message_bandwidth.is_empty() {
                row.push(gbs(message));
                for reference in [put, read] {
                    let r = ratio(message.copied(), reference.copied());
                    row.push(r.map_or("-".into(), |r| format!("{:.0} %", r * 100.0)));
                }
            }
            let metrics = [
                ("bandwidth", put),
                ("read_bandwidth", read),
                ("message_bandwidth", message),
            ];
            for (metric, value) in metrics {
                if let Some(g) = value {
                    csv.row(vec![
                        name.clone(),
                        metric.into(),
                        size.to_string(),
                        format!("{g:.3}"),
                        "GB/s".into(),
                    ]);
                }
            }
        }
        bw.row(row);
    }
    println!(
        "\nBandwidth, GB/s (puts into one window; put + read: the same, each read out \
         by the target before the next; messages each received into one buffer):"
    );
    bw.print();
    csv.write_csv(&args.csv)?;
    println!("\nwrote {}", args.csv.display());
    Ok(0)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    Some(a? / b?).filter(|r| r.is_finite())
}

/// Spins until the word at `offset` reaches `at_least`, progressing the
/// transport as it goes, as `ucp_put_lat` does. A plain put wakes no parked
/// waiter, so this cannot be `wait_signal`.
fn poll_word<T: Transport + Blocking>(
    t: &T,
    window: &T::Window,
    offset: usize,
    at_least: u64,
    deadline: catena_fabric::Time,
) -> Result<()> {
    let mut polls = 0u32;
    loop {
        if window.signal(offset)? >= at_least {
            return Ok(());
        }
        polls = polls.wrapping_add(1);
        if polls % 16 == 0 {
            t.progress();
            t.check_health()?;
            if t.now() >= deadline {
                return Err(catena_fabric::Error::Timeout {
                    what: "the put ping-pong",
                });
            }
        }
        std::hint::spin_loop();
    }
}

/// Time per round trip of each batch of `round_trips` made by `run` (a
/// multiple of [`LATENCY_BATCH`], after `warm_up` untimed ones): `run(n)`
/// makes n round trips, timed as a whole so that reading the clock does
/// not count.
fn batches(
    round_trips: usize,
    warm_up: usize,
    mut run: impl FnMut(usize) -> Result<()>,
) -> Result<Vec<f64>> {
    run(warm_up)?;
    let mut rtts = Vec::with_capacity(round_trips / LATENCY_BATCH);
    for _ in 0..round_trips / LATENCY_BATCH {
        let start = Instant::now();
        run(LATENCY_BATCH)?;
        rtts.push(start.elapsed().as_secs_f64() * 1e9 / LATENCY_BATCH as f64);
    }
    Ok(rtts)
}

/// One configuration's results, as its rank 0 writes them.
#[derive(Default)]
struct Figures {
    /// 8 B put, polled at the target: half the round trip, ns.
    put_ns: Option<f64>,
    /// 8 B put + signal: half the round trip, ns.
    put_signal_ns: Option<f64>,
    bandwidth: BTreeMap<usize, f64>,
    /// Puts each read out by the target before the next, GB/s by size.
    read_bandwidth: BTreeMap<usize, f64>,
    /// 8 B send/recv ping-pong, each message received into a buffer
    /// (`recv_into`): half the round trip, ns.
    message_ns: Option<f64>,
    /// Back-to-back messages, each received into one buffer, GB/s by size.
    message_bandwidth: BTreeMap<usize, f64>,
}

impl Figures {
    fn write(&self, path: &Path) -> std::io::Result<()> {
        let mut t = Table::new(&["metric", "size_bytes", "value"]);
        for (metric, value) in [
            ("put_ns", self.put_ns),
            ("put_signal_ns", self.put_signal_ns),
            ("message_ns", self.message_ns),
        ] {
            if let Some(ns) = value {
                t.row(vec![metric.into(), "8".into(), ns.to_string()]);
            }
        }
        for (metric, table) in [
            ("bandwidth_gbs", &self.bandwidth),
            ("read_bandwidth_gbs", &self.read_bandwidth),
            ("message_bandwidth_gbs", &self.message_bandwidth),
        ] {
            for (size, gbs) in table {
                t.row(vec![metric.into(), size.to_string(), gbs.to_string()]);
            }
        }
        t.write_csv(path)
    }

    fn read(path: &Path) -> Result<Figures, Box<dyn std::error::Error>> {
        let text = std::fs::read_to_string(path)?;
        let mut f = Figures::default();
        for line in text.lines().skip(1) {
            let cells: Vec<&str> = line.split(',').collect();
            match cells[..] {
                ["put_ns", _, v] => f.put_ns = Some(v.parse()?),
                ["put_signal_ns", _, v] => f.put_signal_ns = Some(v.parse()?),
                ["message_ns", _, v] => f.message_ns = Some(v.parse()?),
                ["bandwidth_gbs", size, v] => {
                    f.bandwidth.insert(size.parse()?, v.parse()?);
                }
                ["read_bandwidth_gbs", size, v] => {
                    f.read_bandwidth.insert(size.parse()?, v.parse()?);
                }
                ["message_bandwidth_gbs", size, v] => {
                    f.message_bandwidth.insert(size.parse()?, v.parse()?);
                }
                _ => return Err(format!("{}: unexpected line {line:?}", path.display()).into()),
            }
        }
        Ok(f)
    }
}

/// Inside a job of two: measures the one configuration `args.provider`
/// (its environment came with the job), or the raw libfabric ping-pong.
pub fn main(args: &Args) -> crate::Outcome {
    #[cfg(feature = "ofi")]
    if args.provider == "raw-ofi" {
        // Rank 0 times the ping-pong; rank 1 only answers.
        if let Some(ns) = catena_fabric::ofi::raw::writedata_pingpong(args.round_trips)? {
            Figures {
                put_signal_ns: Some(ns),
                ..Figures::default()
            }
            .write(&args.csv)?;
        }
        return Ok(0);
    }
    let config = CONFIGS
        .iter()
        .find(|c| c.name == args.provider)
        .ok_or_else(|| format!("{} is not a single provider configuration", args.provider))?;
    catena_fabric::with_provider(config.provider, Measure(args))?
}

/// [`measure`] on the configuration's provider.
struct Measure<'a>(&'a Args);

impl WithProvider for Measure<'_> {
    type Output = crate::Outcome;
    fn run<P: Provider>(self) -> crate::Outcome {
        measure::<P>(self.0)
    }
}

fn measure<P: Provider>(args: &Args) -> crate::Outcome {
    let t = P::from_env()?;
    if t.size() != 2 {
        return Err(format!(
            "the put benchmark runs on exactly 2 ranks, not {}",
            t.size()
        )
        .into());
    }
    let window = t.alloc_window(BULK_AT + args.max_size)?;
    let peer_key = block_on(&t, async {
        let deadline = t.deadline_in(TIMEOUT);
        t.send(1 - t.rank(), CTX, 0, window.key().as_bytes(), deadline)
            .await?;
        RemoteKey::from_bytes(&t.recv(Some(1 - t.rank()), CTX, 0, deadline).await?.data)
    })?;
    if t.rank() == 0 {
        let figures = origin(&t, &window, &peer_key, args)?;
        figures.write(&args.csv)?;
    } else {
        block_on(&t, target(&t, &window, &peer_key, args))?;
    }
    t.finalize(TIMEOUT)?;
    Ok(0)
}

/// Rank 1: answers every latency probe and acknowledges every bandwidth run,
/// for puts and for messages, in the order [`origin`] makes them.
async fn target<T: Transport + Blocking>(
    t: &T,
    window: &T::Window,
    origin: &RemoteKey,
    args: &Args,
) -> Result<()> {
    let deadline = t.deadline_in(TIMEOUT);
    let (mut put, mut signalled) = (0u64, 0u64);
    for round in 0..LATENCY_ROUNDS {
        let probes = probes_in(round, args.round_trips) as u64;
        for _ in 0..probes {
            put += 1;
            poll_word(t, window, PUT_WORD, put, deadline)?;
            t.put(0, origin, PUT_WORD, &put.to_ne_bytes())?;
        }
        for _ in 0..probes {
            signalled += 1;
            t.wait_signal(window, LATENCY_SIGNAL, signalled, deadline)
                .await?;
            let signal = Signal {
                offset: LATENCY_SIGNAL,
                add: 1,
            };
            t.put_signal(0, origin, DATA_AT, &signalled.to_le_bytes(), signal)?;
        }
        let mut ping = [0u8; 8];
        for _ in 0..probes {
            t.recv_into(Some(0), CTX, PING_TAG, &mut ping, deadline)
                .await?;
            t.send(0, CTX, PING_TAG, &ping, deadline).await?;
        }
    }
    // Messages land in one buffer, as an MPI program's receives would.
    let mut landing = vec![0u8; args.max_size];
    let (mut run, mut read) = (0u64, 0u64);
    for size in sizes(args.max_size) {
        for _ in 0..REPETITIONS {
            run += 1;
            t.wait_signal(window, BANDWIDTH_SIGNAL, run, deadline)
                .await?;
            let ack = Signal {
                offset: ACK_SIGNAL,
                add: 1,
            };
            t.put_signal(0, origin, DATA_AT, &[], ack)?;
            for _ in 0..iterations(size) {
                let got = t
                    .recv_into(Some(0), CTX, BULK_TAG, &mut landing, deadline)
                    .await?;
                if got.len != size {
                    return Err(catena_fabric::Error::Protocol(format!(
                        "a {}-byte message where {size} were sent",
                        got.len
                    )));
                }
            }
            t.send(0, CTX, ACK_TAG, &[], deadline).await?;
            // Each put read out here as soon as it has landed, before the
            // next is put: the bytes in this process's hands, as a
            // message's are.
            for _ in 0..iterations(size) {
                read += 1;
                t.wait_signal(window, READ_SIGNAL, read, deadline).await?;
                window.read(BULK_AT, &mut landing[..size])?;
                let ack = Signal {
                    offset: READ_ACK_SIGNAL,
                    add: 1,
                };
                t.put_signal(0, origin, DATA_AT, &[], ack)?;
            }
        }
    }
    Ok(())
}

/// Timed round trips of each latency test in round `round` of
/// [`LATENCY_ROUNDS`] (the first also warms up, with a tenth more).
fn probes_in(round: usize, round_trips: usize) -> usize {
    let per_round = (round_trips / LATENCY_ROUNDS / LATENCY_BATCH).max(1) * LATENCY_BATCH;
    match round {
        0 => per_round + warm_up(round_trips),
        _ => per_round,
    }
}

/// Untimed round trips before the first timed ones of each test.
fn warm_up(round_trips: usize) -> usize {
    round_trips / 10
}

/// Rank 0: the three ping-pongs (put, put + signal, message), in rounds
/// that take turns so that all three see the same machine (on a shared or
/// virtual machine, how far apart the two cores are changes over seconds),
/// each timed in batches so that reading the clock does not count as
/// latency. A batch of put + signal or message round trips runs in one
/// `block_on`, as rank 1 answers them all in one: with a `block_on` per
/// round trip, an executor's entry would sit between a message's receive
/// and the next send, on the critical path, and after a put + signal's
/// put, off it, so the two would differ by the executor rather than by
/// what they move. Then, per size, back-to-back puts and back-to-back
/// messages in turn (each message sent and received in a `block_on` of
/// its own, as a program that sends and receives one message at a time
/// would).
fn origin<T: Transport + Blocking>(
    t: &T,
    window: &T::Window,
    target: &RemoteKey,
    args: &Args,
) -> Result<Figures> {
    let deadline = t.deadline_in(TIMEOUT);
    let payload = [0x42u8; 8];
    let (mut put, mut signalled) = (0u64, 0u64);
    let (mut put_rtts, mut signal_rtts, mut message_rtts) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..LATENCY_ROUNDS {
        let warm_up = if round == 0 {
            warm_up(args.round_trips)
        } else {
            0
        };
        let probes = probes_in(round, args.round_trips) - warm_up;
        // A put of the round-trip number to a word the peer polls, as
        // ucp_put_lat does: what a bare put costs.
        put_rtts.extend(batches(probes, warm_up, |round_trips| {
            for _ in 0..round_trips {
                put += 1;
                t.put(1, target, PUT_WORD, &put.to_ne_bytes())?;
                poll_word(t, window, PUT_WORD, put, deadline)?;
            }
            Ok(())
        })?);
        // What a put that tells its target costs: data, then a signal it is there.
        signal_rtts.extend(batches(probes, warm_up, |round_trips| {
            block_on(t, async {
                for _ in 0..round_trips {
                    signalled += 1;
                    let signal = Signal {
                        offset: LATENCY_SIGNAL,
                        add: 1,
                    };
                    t.put_signal(1, target, DATA_AT, &payload, signal)?;
                    t.wait_signal(window, LATENCY_SIGNAL, signalled, deadline)
                        .await?;
                }
                Ok(())
            })
        })?);
        // Each reply received into one buffer, as MPI_Recv receives.
        let mut pong = [0u8; 8];
        message_rtts.extend(batches(probes, warm_up, |round_trips| {
            block_on(t, async {
                for _ in 0..round_trips {
                    t.send(1, CTX, PING_TAG, &payload, deadline).await?;
                    t.recv_into(Some(1), CTX, PING_TAG, &mut pong, deadline)
                        .await?;
                }
                Ok(())
            })
        })?);
    }
    let half = |rtts: &mut Vec<f64>| Some(quantile(rtts, 0.5) / 2.0);
    let mut figures = Figures {
        put_ns: half(&mut put_rtts),
        put_signal_ns: half(&mut signal_rtts),
        message_ns: half(&mut message_rtts),
        ..Figures::default()
    };
    let source = vec![0xa5u8; args.max_size];
    let (mut run, mut read) = (0u64, 0u64);
    for size in sizes(args.max_size) {
        let (mut put_rates, mut message_rates, mut read_rates) =
            (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..REPETITIONS {
            run += 1;
            let iters = iterations(size);
            let start = Instant::now();
            for _ in 0..iters {
                t.put(1, target, BULK_AT, &source[..size])?;
            }
            let done = Signal {
                offset: BANDWIDTH_SIGNAL,
                add: 1,
            };
            t.put_signal(1, target, DATA_AT, &[], done)?;
            block_on(t, t.wait_signal(window, ACK_SIGNAL, run, deadline))?;
            put_rates.push((size * iters) as f64 / start.elapsed().as_secs_f64() / 1e9);
            let start = Instant::now();
            for _ in 0..iters {
                block_on(t, t.send(1, CTX, BULK_TAG, &source[..size], deadline))?;
            }
            block_on(t, t.recv(Some(1), CTX, ACK_TAG, deadline))?;
            message_rates.push((size * iters) as f64 / start.elapsed().as_secs_f64() / 1e9);
            let start = Instant::now();
            for _ in 0..iters {
                read += 1;
                t.put(1, target, BULK_AT, &source[..size])?;
                let landed = Signal {
                    offset: READ_SIGNAL,
                    add: 1,
                };
                t.put_signal(1, target, DATA_AT, &[], landed)?;
                block_on(t, t.wait_signal(window, READ_ACK_SIGNAL, read, deadline))?;
            }
            read_rates.push((size * iters) as f64 / start.elapsed().as_secs_f64() / 1e9);
        }
        figures
            .bandwidth
            .insert(size, quantile(&mut put_rates, 0.5));
        figures
            .message_bandwidth
            .insert(size, quantile(&mut message_rates, 0.5));
        figures
            .read_bandwidth
            .insert(size, quantile(&mut read_rates, 0.5));
    }
    Ok(figures)
}
