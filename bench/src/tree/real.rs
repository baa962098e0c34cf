//! `catena-bench tree run`: the same collectives on a real provider, the job's
//! ranks mapped row-major onto the most cube-like torus: our schedule for
//! the whole job and for all but the last node, the binomial tree through
//! the same engine, and scatter+allgather / ring allreduce. Every call's
//! bytes are checked; rank 0 prints the slowest rank's median time.

use std::time::{Duration, Instant};

use catena_algorithms::chain::{ring_allreduce, scatter_allgather, BulkCall, Chain};
use catena_algorithms::{torus_plan, PipelineConfig, TreeCollective};
use catena_fabric::{block_on, Blocking, Provider, Rank, Transport, WithProvider};
use catena_topo::trees::{auto, binomial};
use catena_topo::{Node, RankMap, Schedule, Torus};

use super::simulate::{Algo, Op};
use crate::report::{human_bytes, quantile, Table};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

const TIMEOUT: Duration = Duration::from_secs(300);
const CTX: u64 = 0x7F_0000;

#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// `auto` (shm on one host, ucx or ofi across hosts), `shm`, `ofi` or
    /// `ucx` (the latter two need their cargo features).
    #[arg(long, default_value = "auto",
          value_parser = clap::builder::PossibleValuesParser::new(crate::relaunch::provider_names()))]
    provider: String,
    /// Largest message; sizes go 64 KiB, 1 MiB, 16 MiB, ... up to it.
    #[arg(long, default_value_t = 16 << 20)]
    max_bytes: usize,
    /// Timed calls per size (after one warm-up).
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    /// Chunk size of the pipelined trees.
    #[arg(long, default_value_t = 64 << 10)]
    chunk: usize,
}

pub fn main(args: &RunArgs) -> crate::Outcome {
    catena_fabric::with_provider(&args.provider, Measure(args))?
}

/// [`measure`] on the provider the user named.
struct Measure<'a>(&'a RunArgs);

impl WithProvider for Measure<'_> {
    type Output = crate::Outcome;
    fn run<P: Provider>(self) -> crate::Outcome {
        measure::<P>(self.0)
    }
}

/// A communicator to measure: name, ranks, root, schedule.
struct Subject {
    name: String,
    ranks: Vec<Rank>,
    root: Rank,
    schedule: Schedule,
}

fn subjects(torus: &Torus, size: u32) -> Result<Vec<Subject>> {
    let all: Vec<Rank> = (0..size).collect();
    let but: Vec<Rank> = (0..size.saturating_sub(1)).collect();
    let mut out = Vec::new();
    for (name, ranks) in [("whole job", all), ("all but the last", but)] {
        if ranks.is_empty() {
            continue;
        }
        let order: Vec<Node> = ranks.clone();
        let ours = auto(torus, &order, 0)?;
        out.push(Subject {
            name: format!("{name}: {}", ours.construction),
            ranks: ranks.clone(),
            root: 0,
            schedule: ours,
        });
        out.push(Subject {
            name: format!("{name}: Binomial"),
            ranks,
            root: 0,
            schedule: binomial(torus, &order, 0)?,
        });
    }
    Ok(out)
}

fn byte_at(call: usize, i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 9) as u8 ^ call as u8
}

fn measure<P: Provider>(args: &RunArgs) -> crate::Outcome {
    let t = P::from_env()?;
    let (me, size) = (t.rank(), t.size());
    let torus = Torus::cube_for(size);
    let map = RankMap::row_major(&torus, size, 1)?;
    let sizes: Vec<usize> = (0..)
        .map(|i| (64usize << 10) << (4 * i))
        .take_while(|&s| s <= args.max_bytes)
        .collect();
    let mut rows: Vec<(String, &str, usize, f64)> = Vec::new();
    for (k, s) in subjects(&torus, size)?.iter().enumerate() {
        if !s.ranks.contains(&me) {
            continue;
        }
        let plan = torus_plan(&s.schedule, &map, &s.ranks, s.root, me)?;
        let config = PipelineConfig {
            chunk: args.chunk,
            slots: 4,
        };
        let members = Chain::of_order(me, &s.ranks, CTX + k as u64)?;
        let mut tc = block_on(
            &t,
            TreeCollective::new(&t, &members, plan, config, t.deadline_in(TIMEOUT)),
        )?;
        for &bytes in &sizes {
            for op in [Op::Bcast, Op::Allreduce] {
                let mut times = Vec::new();
                for call in 0..=args.repetitions {
                    let (ms, wrong) =
                        block_on(&t, one_call(&t, &mut tc, s, Algo::Ours, op, bytes, call))?;
                    if wrong > 0 {
                        return Err(format!("{}: {wrong} wrong values at rank {me}", s.name).into());
                    }
                    if call > 0 {
                        times.push(ms);
                    }
                }
                rows.push((
                    s.name.clone(),
                    op_name(op),
                    bytes,
                    quantile(&mut times, 0.5),
                ));
            }
        }
        // The MPI-style baseline once per communicator shape.
        if s.schedule.construction == catena_topo::Construction::Binomial {
            for &bytes in &sizes {
                for op in [Op::Bcast, Op::Allreduce] {
                    let mut times = Vec::new();
                    for call in 0..=args.repetitions {
                        let (ms, wrong) =
                            block_on(&t, one_call(&t, &mut tc, s, Algo::Ring, op, bytes, call))?;
                        if wrong > 0 {
                            return Err(format!("ring: {wrong} wrong values at rank {me}").into());
                        }
                        if call > 0 {
                            times.push(ms);
                        }
                    }
                    let name = s.name.replace("Binomial", "scatter+allgather / ring");
                    rows.push((name, op_name(op), bytes, quantile(&mut times, 0.5)));
                }
            }
        }
    }
    report(&t, &rows)?;
    t.finalize(TIMEOUT)?;
    Ok(0)
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Bcast => "bcast",
        Op::Allreduce => "allreduce",
    }
}

/// One call, timed; the bytes and elements are checked after the clock
/// stops. Returns the milliseconds and how many values came out wrong here.
async fn one_call<T: Transport>(
    t: &T,
    tc: &mut TreeCollective<'_, T>,
    s: &Subject,
    algo: Algo,
    op: Op,
    bytes: usize,
    call: usize,
) -> Result<(f64, usize)> {
    let me = t.rank();
    let deadline = t.deadline_in(TIMEOUT);
    let value = |r: Rank, i: usize| i64::from(r) * 1_000_003 + (i ^ call) as i64;
    let expected: Vec<u8> = (0..bytes).map(|i| byte_at(call, i)).collect();
    let mut data = match me == s.root {
        true => expected.clone(),
        false => vec![0; bytes],
    };
    let mut elements: Vec<i64> = (0..bytes / 8).map(|i| value(me, i)).collect();
    let sum = |a: &mut [i64], b: &[i64]| {
        for (x, y) in a.iter_mut().zip(b) {
            *x = x.wrapping_add(*y);
        }
    };
    let started = Instant::now();
    match (algo, op) {
        (Algo::Ring, Op::Bcast) => {
            scatter_allgather(
                BulkCall {
                    t,
                    ranks: &s.ranks,
                    context: CTX + 0x100,
                    deadline,
                },
                s.root,
                &mut data,
            )
            .await?
        }
        (Algo::Ring, Op::Allreduce) => {
            ring_allreduce(
                BulkCall {
                    t,
                    ranks: &s.ranks,
                    context: CTX + 0x100,
                    deadline,
                },
                &mut elements,
                sum,
            )
            .await?
        }
        (_, Op::Bcast) => tc.bcast(&mut data, deadline).await?,
        (_, Op::Allreduce) => tc.allreduce(&mut elements, sum, deadline).await?,
    }
    let ms = started.elapsed().as_secs_f64() * 1e3;
    let wrong = match op {
        Op::Bcast => data.iter().zip(&expected).filter(|(a, b)| a != b).count(),
        Op::Allreduce => {
            let ranks_sum: i64 = s.ranks.iter().map(|&r| i64::from(r)).sum();
            let p = s.ranks.len() as i64;
            elements
                .iter()
                .enumerate()
                .filter(|&(i, &x)| x != ranks_sum * 1_000_003 + p * (i ^ call) as i64)
                .count()
        }
    };
    Ok((ms, wrong))
}

/// Rank 0 gathers every rank's medians and prints the slowest per row.
fn report<T: Transport + Blocking>(t: &T, rows: &[(String, &str, usize, f64)]) -> Result<()> {
    let encoded: Vec<u8> = rows.iter().flat_map(|r| r.3.to_le_bytes()).collect();
    let deadline = t.deadline_in(TIMEOUT);
    let me = t.rank();
    let all = block_on(t, async {
        t.send(0, CTX + 0x200, 1, &encoded, deadline).await?;
        let mut all = Vec::new();
        if me == 0 {
            for peer in 0..t.size() {
                all.push((
                    peer,
                    t.recv(Some(peer), CTX + 0x200, 1, deadline).await?.data,
                ));
            }
        }
        Ok::<_, catena_fabric::Error>(all)
    })?;
    if me != 0 {
        return Ok(());
    }
    // Rank 0 is in every communicator, so its rows name them all; others
    // report a prefix of the same rows (those they took part in, in order).
    let mut slowest: Vec<f64> = rows.iter().map(|r| r.3).collect();
    for (_, data) in &all {
        let theirs: Vec<f64> = data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
            .collect();
        for (s, v) in slowest.iter_mut().zip(theirs) {
            *s = s.max(v);
        }
    }
    let mut table = Table::new(&["communicator", "op", "bytes", "median_ms", "GB/s"]);
    for (row, ms) in rows.iter().zip(slowest) {
        table.row(vec![
            row.0.clone(),
            row.1.into(),
            human_bytes(row.2),
            format!("{ms:.3}"),
            format!("{:.2}", row.2 as f64 / ms / 1e6),
        ]);
    }
    println!(
        "catena-bench tree run: {} ranks on a {:?} torus, provider {}",
        t.size(),
        Torus::cube_for(t.size()).dims(),
        std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("?")
    );
    table.print();
    Ok(())
}
