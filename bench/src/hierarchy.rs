//! `catena-bench hierarchy`: the two-level collectives against the flat
//! ones on a job that spans hosts (`--hosts`): the world's own (its host
//! levels), a `Hierarchy`'s, and a later world's (the chain alone), for
//! an allreduce of 8 B and of `--elements` u64s and a broadcast of the
//! same sizes, each as the slowest rank's median over `--repetitions`;
//! and what the split by host and the leaders' split cost once.

use std::time::{Duration, Instant};

use catena_algorithms::prelude::*;
use catena_fabric::{Provider, WithProvider};

use crate::report::{quantile, Table};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// `auto` (shm on one host, ucx or ofi across hosts), `shm`, `ofi` or
    /// `ucx` (the latter two need their cargo features).
    #[arg(long, default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(crate::relaunch::provider_names()))]
    provider: String,
    /// Timed calls of each collective (after one warm-up).
    #[arg(long, default_value_t = 50)]
    repetitions: usize,
    /// Elements (u64) of the large allreduce and broadcast.
    #[arg(long, default_value_t = 8192)]
    elements: usize,
}

const TIMEOUT: Duration = Duration::from_secs(120);

pub fn main(args: &Args) -> crate::Outcome {
    catena_fabric::with_provider(&args.provider, InRank(args))?
}

struct InRank<'a>(&'a Args);

impl WithProvider for InRank<'_> {
    type Output = crate::Outcome;
    fn run<P: Provider>(self) -> crate::Outcome {
        in_rank::<P>(self.0)
    }
}

fn in_rank<P: Provider>(args: &Args) -> crate::Outcome {
    let t = P::from_env()?;
    let world = Comm::world(&t).with_timeout(TIMEOUT);
    // A process's later worlds run on the chain alone: the flat baseline.
    let flat = Comm::world(&t).with_timeout(TIMEOUT);
    world.barrier()?;
    let start = Instant::now();
    let h = world.hierarchy()?;
    let setup_ms = world.allreduce(start.elapsed().as_secs_f64() * 1e3, |a, b| a.max(*b))?;
    let hosts = h.leaders.as_ref().map_or(0, |l| l.size());
    let hosts = world.allreduce(hosts, |a, b| *a.max(b))?;
    let rank = u64::from(world.rank());
    let big: Vec<u64> = (0..args.elements as u64).map(|i| i ^ rank).collect();
    let sum = |a: &Vec<u64>, b: &Vec<u64>| -> Vec<u64> {
        a.iter().zip(b).map(|(x, y)| x.wrapping_add(*y)).collect()
    };
    let time = |call: &mut dyn FnMut() -> Result<()>| -> Result<f64> {
        let mut times = Vec::with_capacity(args.repetitions);
        for repetition in 0..=args.repetitions {
            world.barrier()?;
            let start = Instant::now();
            call()?;
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let slowest = world.allreduce(ms, |a, b| a.max(*b))?;
            if repetition > 0 {
                times.push(slowest);
            }
        }
        Ok(quantile(&mut times, 0.5))
    };
    let root_value = |v: Vec<u64>| (world.rank() == 0).then_some(v);
    let rows = [
        (
            "allreduce 8 B",
            time(&mut || flat.allreduce(rank, |a, b| a + b).map(drop))?,
            time(&mut || world.allreduce(rank, |a, b| a + b).map(drop))?,
            time(&mut || h.allreduce(rank, |a, b| a + b).map(drop))?,
        ),
        (
            "allreduce large",
            time(&mut || flat.allreduce(big.clone(), sum).map(drop))?,
            time(&mut || world.allreduce(big.clone(), sum).map(drop))?,
            time(&mut || h.allreduce(big.clone(), sum).map(drop))?,
        ),
        (
            "bcast 8 B",
            time(&mut || flat.bcast(0, root_value(vec![7])).map(drop))?,
            time(&mut || world.bcast(0, root_value(vec![7])).map(drop))?,
            time(&mut || h.bcast(root_value(vec![7])).map(drop))?,
        ),
        (
            "bcast large",
            time(&mut || flat.bcast(0, root_value(big.clone())).map(drop))?,
            time(&mut || world.bcast(0, root_value(big.clone())).map(drop))?,
            time(&mut || h.bcast(root_value(big.clone())).map(drop))?,
        ),
    ];
    if world.rank() == 0 {
        println!(
            "{} ranks on {hosts} hosts, provider {}; hierarchy set-up (split by host, \
             leaders) {setup_ms:.2} ms; large = {} u64s ({} KiB); median of the \
             slowest rank over {} calls; flat: a later world (the chain alone), \
             world: its host levels, hierarchy: comm.hierarchy()",
            world.size(),
            P::NAME,
            args.elements,
            args.elements * 8 / 1024,
            args.repetitions
        );
        let mut table = Table::new(&[
            "collective",
            "flat ms",
            "world ms",
            "hierarchy ms",
            "flat / world",
            "flat / hierarchy",
        ]);
        for (name, flat, world, two) in rows {
            table.row(vec![
                name.to_string(),
                format!("{flat:.3}"),
                format!("{world:.3}"),
                format!("{two:.3}"),
                format!("{:.2}", flat / world),
                format!("{:.2}", flat / two),
            ]);
        }
        table.print();
    }
    drop(h);
    drop(flat);
    drop(world);
    t.finalize(TIMEOUT)?;
    Ok(0)
}
