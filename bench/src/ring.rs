//! `catena-bench ring`: the hand-off benchmark. Each round every rank sends a
//! few bytes to its right neighbour and waits for its left one; the round time
//! is what a rank pays per hand-off, also with more ranks than cores.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use catena_algorithms::chain::shift;
use catena_fabric::{block_on, Error, Provider, WithProvider};

use crate::report::{quantile, Table};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Timed rounds.
    #[arg(long, default_value_t = 1000)]
    rounds: u32,
    /// Bytes each rank sends per round (at least 8).
    #[arg(long, default_value_t = 8)]
    bytes: usize,
    /// Where to write the per-rank results as CSV.
    #[arg(long, default_value = "results/ring.csv")]
    csv: PathBuf,
    /// `auto` (shm on one host, ucx or ofi across hosts), `shm`, `ofi` or
    /// `ucx` (the latter two need their cargo features).
    #[arg(long, default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(crate::relaunch::provider_names()))]
    provider: String,
    /// Deadline of each round and of finalize, in seconds: how long a rank
    /// waits for a stopped neighbour before it gives up with `Timeout`.
    #[arg(long, default_value_t = 120)]
    timeout_s: u64,
    /// Create `<PATH>.<rank>` once this rank has joined the job, so that a
    /// script can tell a running job from one still starting.
    #[arg(long)]
    ready_file: Option<PathBuf>,
}

const CTX: u64 = 0xBE_0002;
const WARM_UP: u32 = 50;

pub fn main(args: &Args) -> crate::Outcome {
    catena_fabric::with_provider(&args.provider, Ring(args))?
}

/// [`ring`] on the provider the user named.
struct Ring<'a>(&'a Args);

impl WithProvider for Ring<'_> {
    type Output = crate::Outcome;
    fn run<P: Provider>(self) -> crate::Outcome {
        ring::<P>(self.0)
    }
}

fn ring<P: Provider>(args: &Args) -> crate::Outcome {
    let t = P::from_env()?;
    let timeout = Duration::from_secs(args.timeout_s);
    let (rank, size) = (t.rank(), t.size());
    if let Some(path) = &args.ready_file {
        let mut ready = path.clone().into_os_string();
        ready.push(format!(".{rank}"));
        std::fs::write(ready, b"")?;
    }
    let left = (rank + size - 1) % size;
    let bytes = args.bytes.max(8);
    let mut rounds_us = Vec::with_capacity(args.rounds as usize);
    let mut timed_from = Instant::now();
    block_on(&t, async {
        let mut payload = vec![0u8; bytes];
        for round in 0..WARM_UP + args.rounds {
            if round == WARM_UP {
                timed_from = Instant::now();
            }
            payload[..4].copy_from_slice(&rank.to_le_bytes());
            payload[4..8].copy_from_slice(&round.to_le_bytes());
            let start = Instant::now();
            let got = shift(&t, 1, CTX, 0, &payload, t.deadline_in(timeout)).await?;
            let elapsed = start.elapsed();
            let expected = [left.to_le_bytes(), round.to_le_bytes()].concat();
            if got.data.len() != bytes || got.data[..8] != expected[..] {
                return Err(Error::Protocol(format!(
                    "round {round}: wrong bytes from rank {left}"
                )));
            }
            if round >= WARM_UP {
                rounds_us.push(elapsed.as_secs_f64() * 1e6);
            }
        }
        Ok(())
    })?;
    let mean = timed_from.elapsed().as_secs_f64() * 1e6 / f64::from(args.rounds.max(1));
    let [median, p90, p99, max] = [0.5, 0.9, 0.99, 1.0].map(|q| quantile(&mut rounds_us, q));
    let summary = [mean, median, p90, p99, max];
    let encoded: Vec<u8> = summary.iter().flat_map(|v| v.to_le_bytes()).collect();
    let all = block_on(&t, async {
        let deadline = t.deadline_in(timeout);
        t.send(0, CTX, 1, &encoded, deadline).await?;
        let mut all = Vec::new();
        if rank == 0 {
            for peer in 0..size {
                let m = t.recv(Some(peer), CTX, 1, deadline).await?;
                all.push(
                    m.data
                        .chunks(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                        .collect::<Vec<f64>>(),
                );
            }
        }
        Ok::<_, Error>(all)
    })?;
    if rank == 0 {
        report(args, size, &all)?;
    }
    t.finalize(timeout)?;
    Ok(0)
}

fn report(args: &Args, size: u32, all: &[Vec<f64>]) -> crate::Outcome {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "catena-bench ring: {size} ranks on {cores} cores, {} rounds of {} B, load average {}",
        args.rounds,
        args.bytes.max(8),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ")
    );
    // The mean (wall time / rounds) is the hand-off cost; a single round can
    // look free to a rank whose left neighbour ran ahead.
    let mut table = Table::new(&["rank", "mean_us", "median_us", "p90_us", "p99_us", "max_us"]);
    for (rank, s) in all.iter().enumerate() {
        table.row(
            std::iter::once(rank.to_string())
                .chain(s.iter().map(|v| format!("{v:.1}")))
                .collect(),
        );
    }
    table.print();
    let mut means: Vec<f64> = all.iter().map(|s| s[0]).collect();
    let mut medians: Vec<f64> = all.iter().map(|s| s[1]).collect();
    println!(
        "round time: mean {:.1} us, median {:.1} us (medians over ranks)",
        quantile(&mut means, 0.5),
        quantile(&mut medians, 0.5)
    );
    table.write_csv(&args.csv)?;
    println!("wrote {}", args.csv.display());
    Ok(0)
}
