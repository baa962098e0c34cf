//! `catena-bench tree sim`: broadcast and allreduce times on the simulated
//! torus (routed links, schedules' routes pinned) for each case, message
//! size and algorithm: our schedule, the binomial tree (pipelined with the
//! same engine), and scatter+allgather / ring allreduce. Every byte is
//! checked at every member.

use std::cell::Cell;
use std::time::Duration;

use catena_algorithms::chain::{ring_allreduce_stream, scatter_allgather_stream, BulkCall, Chain};
use catena_algorithms::{torus_plan, PipelineConfig, TreeCollective};
use catena_fabric::{Rank, Rma, Time};
use catena_sim::{Routed, Sim, SimRank};
use catena_topo::{check, Members, RankMap, Schedule, Topology, Torus};

use super::cases::{Case, Group};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Algo {
    /// The case's own construction (Auto, or the disjoint chains).
    Ours,
    /// The binomial tree over ranks, through the same pipelined engine.
    Binomial,
    /// Scatter + ring allgather; ring reduce-scatter + allgather.
    Ring,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Op {
    Bcast,
    Allreduce,
}

/// The chunk that balances pipeline fill against per-chunk overhead for
/// `stages` store-and-forward stages: √(M·α·B/S) with α ≈ 2 µs and B =
/// 425 B/µs (BG/P), a power of two in 1 KiB..=256 KiB.
pub fn chunk_for(bytes: usize, stages: u32) -> usize {
    let ideal = (bytes as f64 * 2.0 * 425.0 / f64::from(stages.max(1))).sqrt();
    let pow = 1usize << (ideal.max(1.0).log2().floor() as u32);
    pow.clamp(1 << 10, 256 << 10)
}

fn byte_at(i: usize) -> u8 {
    (i as u8).wrapping_mul(31) ^ (i >> 9) as u8
}

fn wrapping_sum(acc: &mut [i64], other: &[i64]) {
    for (x, y) in acc.iter_mut().zip(other) {
        *x = x.wrapping_add(*y);
    }
}

fn element(rank: Rank, i: usize) -> i64 {
    i64::from(rank) * 1_000_003 + i as i64
}

/// One simulated call: its virtual time from the first member's start to
/// the last member's end.
pub fn run(torus: &Torus, case: &Case, algo: Algo, op: Op, bytes: usize) -> Result<Duration> {
    let ranks = torus.nodes();
    let map = RankMap::row_major(torus, ranks, 1)?;
    let mut model = Routed::new(torus.clone(), 1);
    let schedule = |g| schedule_of(g, algo);
    let mut chunks = Vec::new();
    for g in &case.groups {
        if algo != Algo::Ring {
            model.pin_schedule(schedule(g))?;
        }
        let members = Members::new(torus, g.order.iter().copied())?;
        let checked = check(torus, &members, schedule(g), &[])?;
        let share = bytes / schedule(g).colours.len();
        chunks.push(chunk_for(share, checked.stages));
    }
    let group_of = |rank: Rank| case.groups.iter().position(|g| g.ranks().contains(&rank));
    let bad = Cell::new(0usize);
    let sim = Sim::new(ranks, model);
    let (results, _) = sim.run(
        async |t: &SimRank<'_>| -> Result<Option<(Time, Time)>, String> {
            let Some(gi) = group_of(t.rank()) else {
                return Ok(None);
            };
            let g = &case.groups[gi];
            let deadline = t.deadline_in(Duration::from_secs(3600));
            let ctx = 0x7E_0000 + gi as u64;
            let members = g.ranks();
            let ranks_sum: i64 = members.iter().map(|&r| i64::from(r)).sum();
            let p = members.len() as i64;
            let mut sink = |offset: usize, data: &[u8]| {
                let wrong = data
                    .iter()
                    .enumerate()
                    .filter(|(i, &b)| b != byte_at(offset + i))
                    .count();
                bad.set(bad.get() + wrong);
            };
            let mut source = |offset: usize, out: &mut [u8]| {
                for (i, b) in out.iter_mut().enumerate() {
                    *b = byte_at(offset + i);
                }
            };
            let me = t.rank();
            let mut contribution = |offset: usize, out: &mut [i64]| {
                for (i, x) in out.iter_mut().enumerate() {
                    *x = element(me, offset + i);
                }
            };
            let mut result = |offset: usize, data: &[i64]| {
                let wrong = data
                    .iter()
                    .enumerate()
                    .filter(|(i, &x)| x != ranks_sum * 1_000_003 + p * (offset + i) as i64)
                    .count();
                bad.set(bad.get() + wrong);
            };
            let elements = bytes / 8;
            let e = |e: catena_algorithms::Error| e.to_string();
            let start;
            if algo == Algo::Ring {
                start = t.now();
                match op {
                    Op::Bcast => {
                        scatter_allgather_stream(
                            BulkCall {
                                t,
                                ranks: members,
                                context: ctx,
                                deadline,
                            },
                            g.root,
                            bytes,
                            &mut source,
                            &mut sink,
                        )
                        .await
                    }
                    Op::Allreduce => {
                        ring_allreduce_stream(
                            BulkCall {
                                t,
                                ranks: members,
                                context: ctx,
                                deadline,
                            },
                            elements,
                            &mut contribution,
                            wrapping_sum,
                            &mut result,
                        )
                        .await
                    }
                }
                .map_err(|e| e.to_string())?;
            } else {
                let plan = torus_plan(schedule(g), &map, members, g.root, me).map_err(e)?;
                let config = PipelineConfig {
                    chunk: chunks[gi],
                    slots: 4,
                };
                let chain = Chain::of_order(me, members, ctx).map_err(e)?;
                let mut tc = TreeCollective::new(t, &chain, plan, config, deadline)
                    .await
                    .map_err(e)?;
                start = t.now();
                match op {
                    Op::Bcast => tc.bcast_stream(bytes, source, sink, deadline).await,
                    Op::Allreduce => {
                        tc.allreduce_stream(elements, contribution, wrapping_sum, result, deadline)
                            .await
                    }
                }
                .map_err(e)?;
            }
            Ok(Some((start, t.now())))
        },
    )?;
    let mut spans = Vec::new();
    for (rank, r) in results.into_iter().enumerate() {
        if let Some(span) = r.map_err(|e| format!("rank {rank}: {e}"))? {
            spans.push(span);
        }
    }
    if bad.get() > 0 {
        return Err(format!("{} wrong values at the members", bad.get()).into());
    }
    let start = spans.iter().map(|s| s.0).min().ok_or("no members")?;
    let end = spans.iter().map(|s| s.1).max().ok_or("no members")?;
    Ok(Duration::from_nanos(end.0 - start.0))
}

/// The schedule a group runs under `algo` (the ring pins none).
fn schedule_of(g: &Group, algo: Algo) -> &Schedule {
    match algo {
        Algo::Ours => &g.ours,
        _ => &g.binomial,
    }
}
