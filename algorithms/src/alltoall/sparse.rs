//! The neighbourhood form of the put variants (MPI's neighbourhood
//! collectives, ZMPI's proclists): a plan that knows the group ranks it
//! may send to and receive from replaces the agreement allreduce by one
//! report to each listed target and one verdict to each listed source, so
//! a call costs O(k) messages and no log P rounds. Errors reach the
//! neighbourhood only: a process fails where it, a listed target, or a
//! source of one of its targets failed; processes further away go on.

use bytemuck::Pod;
use catena_fabric::{LocalWindow, Rank, Signal, Transport};

use super::put::Reservation;
use super::route::{Routed, Run};
use super::window::{Layout, Peer};
use super::{AlltoallPlan, PlanCall};
use crate::groupmap::GroupMap;
use crate::join::while_serving;
use crate::{Error, Result};

/// The group ranks a plan may send to and receive from. Every listed edge
/// must be listed at both ends (checked when the plan is made).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Peers {
    /// Ranks that may send to this process (itself included if it does).
    pub sources: Vec<u32>,
    /// Ranks this process may send to.
    pub targets: Vec<u32>,
}

/// Reports and verdicts pack three counts into one signal word, as
/// signals only add: how many came, how many had a fault, how many
/// found no room.
const FIELD_BITS: u32 = 21;
const FIELD: u64 = (1 << FIELD_BITS) - 1;

fn packed(fault: bool, overflow: bool) -> u64 {
    1 + (u64::from(fault) << FIELD_BITS) + (u64::from(overflow) << (2 * FIELD_BITS))
}

fn field(word: u64, i: u32) -> u64 {
    (word >> (i * FIELD_BITS)) & FIELD
}

/// Set in a landed signal's add by a source that abandons the call: its
/// reserved elements count as landed, so the target's wait ends, and the
/// target learns the call failed.
pub(super) const ABANDONED: u64 = 1 << 48;

impl Peers {
    /// Sorted, without repeats, every rank inside a group of `size`.
    pub(super) fn checked(mut self, size: u32) -> Result<Peers> {
        for list in [&mut self.sources, &mut self.targets] {
            list.sort_unstable();
            list.dedup();
            if let Some(&bad) = list.iter().find(|&&r| r >= size) {
                return Err(Error::InvalidArgument(format!(
                    "a neighbour rank {bad} outside the group of {size}"
                )));
            }
            if list.len() as u64 >= FIELD {
                return Err(Error::InvalidArgument(format!(
                    "{} neighbours; a plan lists fewer than 2^21",
                    list.len()
                )));
            }
        }
        Ok(self)
    }

    /// What one process adds to the check that every edge is listed at both
    /// ends: (targets - sources, XOR of edge hashes); all zero when summed.
    pub(super) fn balance(&self, me: u32) -> (i64, u64) {
        let edge = |s: u32, t: u32| {
            let x = (u64::from(s) << 32 | u64::from(t)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            x ^ (x >> 29)
        };
        let out = self.targets.iter().fold(0, |h, &t| h ^ edge(me, t));
        let into = self.sources.iter().fold(0, |h, &s| h ^ edge(s, me));
        (
            self.targets.len() as i64 - self.sources.len() as i64,
            out ^ into,
        )
    }
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Learns the neighbours' windows, reserves room at the targets, tells
    /// every listed target what this process found, gives every listed
    /// source this process's verdict and waits for its targets'. Yields the
    /// reservations and whether this process may deliver.
    pub(super) async fn reserve_among(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        mut local: Result<()>,
        routed: &Routed<E>,
        peers: &Peers,
        slot: impl Fn(&Run, Rank) -> bool,
    ) -> Result<(Vec<Reservation>, Result<()>)> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (context, parity, deadline) = (self.comm.context(), call.parity, call.deadline);
        if let Some(run) = routed
            .runs
            .iter()
            .find(|r| peers.targets.binary_search(&r.target).is_err())
        {
            local = local.and(Err(Error::InvalidArgument(format!(
                "an element routed to rank {}, which is not among the plan's targets",
                run.target
            ))));
        }
        let runs = if local.is_ok() { &routed.runs[..] } else { &[] };
        let worlds = |ranks: &[u32]| -> Result<Vec<Rank>> {
            Ok(ranks
                .iter()
                .map(|&r| map.select(r))
                .collect::<Result<_, _>>()?)
        };
        let (sources, targets) = (worlds(&peers.sources)?, worlds(&peers.targets)?);
        let run_worlds = worlds(&runs.iter().map(|r| r.target).collect::<Vec<_>>())?;
        let window = &receiver.window;
        let work = async {
            let mut everyone: Vec<Rank> = sources.iter().chain(&targets).copied().collect();
            everyone.sort_unstable();
            everyone.dedup();
            receiver
                .learn(t, context, call.exchange, everyone.into_iter(), deadline)
                .await?;
            let reserved = self.reserve_runs(call, runs, &run_worlds, slot).await?;
            let me = t.rank();
            let reports = targets.iter().map(|&world| {
                let overflow = reserved.iter().any(|r| {
                    r.world == world
                        && r.base
                            .checked_add(r.run.count as u64)
                            .is_none_or(|end| end > r.peer.capacity)
                });
                let add = packed(local.is_err(), overflow);
                signal(
                    t,
                    &receiver.peer(world, me),
                    world,
                    Layout::reports(parity),
                    add,
                )
            });
            reports.collect::<Result<()>>()?;
            let all_sources = sources.len() as u64;
            let reported = receiver
                .wait(
                    t,
                    Layout::reports(parity),
                    "neighbours' reports",
                    deadline,
                    counted(all_sources),
                )
                .await?;
            let counter = window.signal(Layout::counter(parity))?;
            let refuse_fault = field(reported, 1) > 0;
            let refuse_room = field(reported, 2) > 0 || counter > self.capacity as u64;
            let add = packed(refuse_fault, refuse_room);
            let verdicts = sources.iter().map(|&world| {
                signal(
                    t,
                    &receiver.peer(world, me),
                    world,
                    Layout::verdicts(parity),
                    add,
                )
            });
            verdicts.collect::<Result<()>>()?;
            let all_targets = targets.len() as u64;
            let judged = receiver
                .wait(
                    t,
                    Layout::verdicts(parity),
                    "neighbours' verdicts",
                    deadline,
                    counted(all_targets),
                )
                .await?;
            Ok((reserved, counter, refuse_fault, refuse_room, judged))
        };
        let serving = receiver.serve(t, context, call.exchange, deadline);
        let (reserved, counter, refuse_fault, refuse_room, judged) =
            while_serving(work, serving).await?;
        let verdict = local.and_then(|()| {
            if refuse_room {
                return Err(Error::ReceiveOverflow {
                    required: counter,
                    capacity: self.capacity as u64,
                    process: self.comm.rank(),
                });
            }
            if refuse_fault {
                return Err(Error::Neighbourhood(
                    "a listed source failed locally".into(),
                ));
            }
            if field(judged, 1) + field(judged, 2) > 0 {
                return Err(Error::Neighbourhood(
                    "a listed target refused the call (no room, or a fault among its sources)"
                        .into(),
                ));
            }
            Ok(())
        });
        Ok((reserved, verdict))
    }
}

/// Adds `add` to the signal word `word` of `world`'s window by a put of
/// eight ignored bytes.
pub(super) fn signal<T: Transport>(
    t: &T,
    peer: &Peer,
    world: Rank,
    word: usize,
    add: u64,
) -> Result<()> {
    let signal = Signal { offset: word, add };
    t.put_signal(world, &peer.key, Layout::scratch(), &[0; 8], signal)?;
    Ok(())
}

/// Whether the count field of a packed word has reached `count`.
fn counted(count: u64) -> impl Fn(u64) -> Option<u64> {
    move |value| (field(value, 0) >= count).then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_add_up_and_edges_balance() {
        let word = packed(false, false) + packed(true, false) + packed(true, true);
        assert_eq!((field(word, 0), field(word, 1), field(word, 2)), (3, 2, 1));
        // A ring of 4: each sends to its right and itself.
        let peers = |me: u32| Peers {
            sources: vec![(me + 3) % 4, me],
            targets: vec![(me + 1) % 4, me],
        };
        let (mut diff, mut hash) = (0, 0);
        for me in 0..4 {
            let (d, h) = peers(me).balance(me);
            (diff, hash) = (diff + d, hash ^ h);
        }
        assert_eq!((diff, hash), (0, 0));
        let one_sided = Peers {
            sources: vec![],
            targets: vec![1],
        };
        assert_ne!(one_sided.balance(0), (0, 0));
        assert!(Peers::default().checked(4).is_ok());
        assert!(one_sided.clone().checked(1).is_err());
    }
}
