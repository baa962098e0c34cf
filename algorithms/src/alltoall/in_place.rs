//! In place: the elements received replace those sent, in the caller's
//! `Vec`, with bounded extra memory: each round routes the next block of at
//! most the plan's capacity, each target takes at most its capacity per
//! round (a source learns from its reservation how much fit and keeps the
//! rest for the next round), and rounds go on until every process is done.
//! Extra memory: the plan's window and one block of staging. Unstable.

use bytemuck::Pod;
use catena_fabric::{LocalWindow, Rank, Signal, Transport};
use serde::{Deserialize, Serialize};

use super::outcome::Outcome;
use super::route::Emit;
use super::window::Layout;
use super::{AlltoallPlan, PlanCall, Variant};
use crate::call::Call;
use crate::groupmap::GroupMap;
use crate::join::while_serving;
use crate::scan::allreduce_in;
use crate::{Error, Result};

/// Rounds one call may take: with the plan's capacity at least the
/// elements one process holds or receives, two or three suffice.
pub(super) const ROUNDS: u32 = 256;

/// What a round's agreement carries: the faults, and whether any process
/// still holds elements to send.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
struct Round {
    outcome: Outcome,
    more: bool,
}

impl Round {
    fn merge(a: &Round, b: &Round) -> Round {
        Round {
            outcome: Outcome::merge(&a.outcome, &b.outcome),
            more: a.more || b.more,
        }
    }
}

/// Where a call stands in the caller's buffer: `data[..output]` received,
/// `data[output..output + gap]` free, the rest still to send.
struct Regions {
    output: usize,
    gap: usize,
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// The rounds of [`AlltoallPlan::iexchange_in_place`], with the plan
    /// locked; `calls` holds two calls' tags per round. Round r uses the
    /// window words of parity `first + r`; the call reserved two parities,
    /// so the next call on the plan takes `first`'s again, and the last
    /// round has the other (an even number of rounds, one more, empty, if
    /// need be): consecutive steps always alternate.
    // The borrow of `routed` is the plan's lock for the whole call (`lock`).
    #[allow(clippy::await_holding_refcell_ref)]
    pub(super) async fn in_place(
        &self,
        mut calls: crate::chain::Calls,
        first: u64,
        deadline: catena_fabric::Time,
        map: &GroupMap,
        data: &mut Vec<E>,
        mut route: impl FnMut(&E, &mut Emit<'_, E>),
    ) -> Result<()> {
        if self.variant != Variant::Put || self.peers.is_some() {
            return Err(Error::InvalidArgument(
                "in place runs on a Put plan without neighbour lists".into(),
            ));
        }
        let mut routed = self.lock()?;
        routed.clear();
        let (t, me) = (self.comm.transport(), self.comm.rank());
        let receiver = self.window();
        let block = self.capacity.max(1);
        let mut at = Regions { output: 0, gap: 0 };
        let mut local = Ok(());
        for round in 0u32.. {
            if round == ROUNDS {
                return Err(Error::Rounds {
                    round,
                    limit: ROUNDS,
                });
            }
            let call = PlanCall {
                exchange: calls.next()?,
                agree: calls.next()?,
                parity: ((first + u64::from(round)) % 2) as usize,
                sort: None,
                deadline,
            };
            // The next block leaves once the last one has.
            let unsent = data.len() - at.output - at.gap;
            if routed.runs.is_empty() && unsent > 0 && local.is_ok() {
                let start = at.output + at.gap;
                let taken = unsent.min(block);
                let size = self.comm.size();
                local = routed.route(&data[start..start + taken], size, me, &mut route);
                at.gap += taken;
                // Its own run a process keeps where its block was, as far
                // as it fits (copies can outnumber the elements); the rest
                // goes through the window like any other run.
                let routed = &mut *routed;
                if let Some(own) = routed.runs.iter_mut().find(|r| r.target == me) {
                    let kept = own.count.min(at.gap);
                    let out = &mut data[at.output..at.output + kept];
                    out.copy_from_slice(&routed.staging[own.start..own.start + kept]);
                    (own.start, own.count) = (own.start + kept, own.count - kept);
                    at.output += kept;
                    at.gap -= kept;
                }
                routed.runs.retain(|r| r.count > 0);
            }
            let runs = if local.is_ok() {
                routed.runs.clone()
            } else {
                Vec::new()
            };
            let worlds = runs
                .iter()
                .map(|r| map.select(r.target))
                .collect::<Result<Vec<Rank>, _>>()?;
            let context = self.comm.context();
            let work = async {
                receiver
                    .learn(t, context, call.exchange, worlds.iter().copied(), deadline)
                    .await?;
                let reserved = self
                    .reserve_runs(&call, &runs, &worlds, |_, _| false)
                    .await?;
                // What each target took: the part of the run below its capacity.
                let taken: Vec<usize> = reserved
                    .iter()
                    .map(|r| {
                        r.peer
                            .capacity
                            .saturating_sub(r.base)
                            .min(r.run.count as u64) as usize
                    })
                    .collect();
                let left = reserved.iter().zip(&taken).any(|(r, &k)| k < r.run.count);
                let unsent = data.len() - at.output - at.gap;
                let mine = Round {
                    outcome: Outcome::of_local(me, &local),
                    more: left || unsent > 0,
                };
                let chain = self.comm.chain();
                let agreed = allreduce_in(
                    Call::new(t, chain, call.agree, deadline),
                    mine,
                    Round::merge,
                );
                Ok((agreed.await?, reserved, taken))
            };
            let serving = receiver.serve(t, context, call.exchange, deadline);
            let (agreed, reserved, taken) = while_serving(work, serving).await?;
            let parity = call.parity;
            if let Some(error) = agreed.outcome.error(0, self.capacity as u64) {
                receiver.reset(parity)?;
                return Err(local.err().unwrap_or(error));
            }
            // Put what fits; the rest of each run waits for the next round.
            let landed = Layout::landed(parity);
            let size = std::mem::size_of::<E>();
            for (r, &fits) in reserved.iter().zip(&taken) {
                if fits == 0 {
                    continue;
                }
                let layout = Layout::new(r.peer.capacity as usize, size, self.comm.size())?;
                let run = &routed.staging[r.run.start..r.run.start + fits];
                let signal = Signal {
                    offset: landed,
                    add: fits as u64,
                };
                let at = layout.element_at(r.base as usize);
                t.put_signal(r.world, &r.peer.key, at, bytemuck::cast_slice(run), signal)?;
            }
            routed.keep_unsent(taken);
            let window = &receiver.window;
            let counted = window.signal(Layout::counter(parity))?;
            let arrived = counted.min(self.capacity as u64);
            let what = "elements to land";
            receiver
                .wait(t, landed, what, deadline, |v| (v >= arrived).then_some(()))
                .await?;
            let arrived = arrived as usize;
            if arrived > at.gap {
                // Room for the output (more arrived than left so far): the
                // unsent elements move back. By an eighth at least, so a
                // process that receives much more than it sends grows its
                // buffer a few times, not once per round.
                let grow = (arrived - at.gap).max(data.len() / 8);
                let (from, end) = (at.output + at.gap, data.len());
                data.reserve_exact(grow);
                data.resize(end + grow, E::zeroed());
                data.copy_within(from..end, from + grow);
                at.gap += grow;
            }
            let out = &mut data[at.output..at.output + arrived];
            window.read(receiver.layout.element_at(0), bytemuck::cast_slice_mut(out))?;
            at.output += arrived;
            at.gap -= arrived;
            receiver.reset(parity)?;
            if !agreed.more && round % 2 == 1 {
                break;
            }
        }
        data.truncate(at.output);
        Ok(())
    }
}
