//! `catena-bench put`: one-sided put latency (8 B put + signal round trip) and
//! bandwidth (1 KiB .. 64 MiB) between two pinned ranks, printed next to the
//! physical limits measured in the same run.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use catena_fabric::{block_on, LocalWindow, Provider, RemoteKey, Result, Rma, Signal, Transport};

use crate::physical::{cache_line_round_trip, memcpy_bandwidth};
use crate::report::{human_bytes, quantile, Table};

#[derive(clap::Args)]
pub struct Args {
    /// Timed round trips for the latency test.
    #[arg(long, default_value_t = 20_000)]
    round_trips: usize,
    /// Where to write the results as CSV.
    #[arg(long, default_value = "results/put.csv")]
    csv: PathBuf,
}

const CTX: u32 = 0xBE_0001;
const LATENCY_SIGNAL: usize = 0;
const BANDWIDTH_SIGNAL: usize = 8;
const ACK_SIGNAL: usize = 16;
const DATA_AT: usize = 64;
const MAX_SIZE: usize = 64 << 20;
const REPETITIONS: usize = 3;
const LATENCY_BATCH: usize = 100;
const TIMEOUT: Duration = Duration::from_secs(300);

fn sizes() -> impl Iterator<Item = usize> {
    (0..=8).map(|i| 1024 << (2 * i))
}

fn iterations(size: usize) -> usize {
    ((512 << 20) / size).clamp(4, 100_000)
}

pub fn main(args: &Args) -> crate::Outcome {
    let t = catena_fabric::init()?;
    if t.size() != 2 {
        return Err(format!(
            "the put benchmark runs on exactly 2 ranks, not {}",
            t.size()
        )
        .into());
    }
    let window = t.alloc_window(DATA_AT + MAX_SIZE)?;
    let peer_key = block_on(&t, async {
        let deadline = t.deadline_in(TIMEOUT);
        t.send(1 - t.rank(), CTX, 0, window.key().as_bytes(), deadline)
            .await?;
        RemoteKey::from_bytes(&t.recv(Some(1 - t.rank()), CTX, 0, deadline).await?.data)
    })?;
    if t.rank() == 0 {
        origin(&t, &window, &peer_key, args)?;
    } else {
        block_on(&t, target(&t, &window, &peer_key, args))?;
    }
    t.finalize(TIMEOUT)?;
    Ok(0)
}

/// Rank 1: answers every latency probe and acknowledges every bandwidth run.
async fn target<T: Transport>(
    t: &T,
    window: &T::Window,
    origin: &RemoteKey,
    args: &Args,
) -> Result<()> {
    let deadline = t.deadline_in(TIMEOUT);
    t.recv(Some(0), CTX, 1, deadline).await?;
    let warm_up = args.round_trips / 10;
    for i in 1..=(warm_up + args.round_trips) as u64 {
        t.wait_signal(window, LATENCY_SIGNAL, i, deadline).await?;
        t.put_signal(
            0,
            origin,
            DATA_AT,
            &i.to_le_bytes(),
            Signal {
                offset: LATENCY_SIGNAL,
                add: 1,
            },
        )?;
    }
    for run in 1..=(sizes().count() * REPETITIONS) as u64 {
        t.wait_signal(window, BANDWIDTH_SIGNAL, run, deadline)
            .await?;
        t.put_signal(
            0,
            origin,
            DATA_AT,
            &[],
            Signal {
                offset: ACK_SIGNAL,
                add: 1,
            },
        )?;
    }
    Ok(())
}

fn origin<T: Transport>(
    t: &T,
    window: &T::Window,
    target: &RemoteKey,
    args: &Args,
) -> crate::Outcome {
    // This rank is pinned, so its own affinity mask shows one core; the
    // launcher put rank 1 on the next online core.
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    if online < 2 {
        return Err("the put benchmark needs two cores".into());
    }
    let own = catena_fabric::bootstrap::LaunchEnv::from_env()?
        .and_then(|e| e.pin_core)
        .unwrap_or(0);
    let (a, b) = (
        core_affinity::CoreId { id: own },
        core_affinity::CoreId {
            id: (own + 1) % online,
        },
    );
    println!(
        "catena-bench put: shm provider, 2 ranks pinned to cores {} and {}",
        a.id, b.id
    );
    // Rank 1 sleeps in a receive meanwhile, so its core is free.
    let line_rtt = cache_line_round_trip(a, b, 200_000);
    let deadline = t.deadline_in(TIMEOUT);
    block_on(t, t.send(1, CTX, 1, &[], deadline))?;

    // Timed in batches, like the cache-line round trip, so that reading the
    // clock does not count as latency.
    let warm_up = args.round_trips / 10;
    let mut rtts = Vec::with_capacity(args.round_trips / LATENCY_BATCH);
    let payload = [0x42u8; 8];
    let mut start = Instant::now();
    for i in 1..=(warm_up + args.round_trips) as u64 {
        t.put_signal(
            1,
            target,
            DATA_AT,
            &payload,
            Signal {
                offset: LATENCY_SIGNAL,
                add: 1,
            },
        )?;
        block_on(t, t.wait_signal(window, LATENCY_SIGNAL, i, deadline))?;
        if i as usize % LATENCY_BATCH == 0 {
            if i > warm_up as u64 {
                rtts.push(start.elapsed().as_secs_f64() * 1e9 / LATENCY_BATCH as f64);
            }
            start = Instant::now();
        }
    }
    let median = quantile(&mut rtts, 0.5);
    let p99 = quantile(&mut rtts, 0.99);
    let line_ns = line_rtt.as_secs_f64() * 1e9;

    let mut table = Table::new(&[
        "metric",
        "size_bytes",
        "value",
        "unit",
        "reference",
        "ratio",
    ]);
    table.row(vec![
        "cache_line_round_trip".into(),
        "64".into(),
        format!("{line_ns:.0}"),
        "ns".into(),
        "".into(),
        "".into(),
    ]);
    table.row(vec![
        "put_signal_round_trip_median".into(),
        "8".into(),
        format!("{median:.0}"),
        "ns".into(),
        format!("{line_ns:.0}"),
        format!("{:.2}", median / line_ns),
    ]);
    table.row(vec![
        "put_signal_round_trip_p99".into(),
        "8".into(),
        format!("{p99:.0}"),
        "ns".into(),
        "".into(),
        "".into(),
    ]);

    println!("\n8 B put+signal round trip (batches of {LATENCY_BATCH}): median {median:.0} ns, p99 {p99:.0} ns");
    println!(
        "cache-line round trip between the two cores: {line_ns:.0} ns (ratio {:.2})\n",
        median / line_ns
    );
    let mut bw = Table::new(&["size", "put GB/s", "memcpy GB/s", "put/memcpy"]);
    let source = vec![0xa5u8; MAX_SIZE];
    let mut run = 0u64;
    for size in sizes() {
        let iters = iterations(size);
        let mut put_rates = Vec::new();
        let mut copy_rates = Vec::new();
        for _ in 0..REPETITIONS {
            run += 1;
            let start = Instant::now();
            for _ in 0..iters {
                t.put(1, target, DATA_AT, &source[..size])?;
            }
            t.put_signal(
                1,
                target,
                DATA_AT,
                &[],
                Signal {
                    offset: BANDWIDTH_SIGNAL,
                    add: 1,
                },
            )?;
            block_on(t, t.wait_signal(window, ACK_SIGNAL, run, deadline))?;
            put_rates.push((size * iters) as f64 / start.elapsed().as_secs_f64() / 1e9);
            copy_rates.push(memcpy_bandwidth(size, iters) / 1e9);
        }
        let (put, copy) = (
            quantile(&mut put_rates, 0.5),
            quantile(&mut copy_rates, 0.5),
        );
        bw.row(vec![
            human_bytes(size),
            format!("{put:.2}"),
            format!("{copy:.2}"),
            format!("{:.0}%", 100.0 * put / copy),
        ]);
        table.row(vec![
            "put_bandwidth".into(),
            size.to_string(),
            format!("{put:.3}"),
            "GB/s".into(),
            format!("{copy:.3}"),
            format!("{:.3}", put / copy),
        ]);
    }
    bw.print();
    table.write_csv(&args.csv)?;
    println!("\nwrote {}", args.csv.display());
    Ok(0)
}
