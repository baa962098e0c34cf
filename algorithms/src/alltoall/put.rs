//! The one-sided variants. Each source learns the windows of the targets it
//! has not met (once per plan), reserves room at each target with one
//! `fetch_add` on its counter (all in flight at once: one round trip), and
//! the processes agree that no one failed and every reservation fits; then
//! each source puts its run for each target straight into the target's
//! receive window with one `put_signal`, and each target waits until the
//! elements it counted have landed. `PutStable` adds a chunk header per
//! (source, target), which the target sorts by source before copying out.

use bytemuck::Pod;
use catena_fabric::{LocalWindow, Rank, Signal, Transport};

use super::outcome::Outcome;
use super::route::{Routed, Run};
use super::sparse::{signal, ABANDONED};
use super::window::{Layout, Peer, HEADER_BYTES};
use super::{AlltoallPlan, PlanCall};
use crate::call::Call;
use crate::groupmap::GroupMap;
use crate::join::{join, join_all, while_serving};
use crate::scan::allreduce_in;
use crate::{Error, Result};

/// Room one source holds at one target for this call.
pub(super) struct Reservation {
    pub(super) run: Run,
    pub(super) world: Rank,
    pub(super) peer: Peer,
    /// The first element reserved.
    pub(super) base: u64,
    /// The header slot reserved (stable puts).
    pub(super) slot: u64,
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Learns the windows of new targets, reserves room at every target,
    /// and agrees on the outcome with every process; yields the
    /// reservations, or the error every process returns (nothing moved).
    pub(super) async fn reserve(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        local: Result<()>,
        routed: &Routed<E>,
        slots: bool,
    ) -> Result<Vec<Reservation>> {
        let t = self.comm.transport();
        let receiver = self.window();
        let context = self.comm.context();
        let (parity, deadline) = (call.parity, call.deadline);
        let runs = &routed.runs;
        let worlds = runs
            .iter()
            .map(|run| map.select(run.target))
            .collect::<Result<Vec<Rank>, _>>()?;
        let work = async {
            receiver
                .learn(t, context, call.exchange, worlds.iter().copied(), deadline)
                .await?;
            let reserved = self.reserve_runs(call, runs, &worlds, slots).await?;
            let mut outcome = Outcome::of_local(self.comm.rank(), &local);
            for r in &reserved {
                // Fits: elements base.. below the target's capacity (so at
                // most min(capacity, size) chunks: a slot each).
                let end = r.base.checked_add(r.run.count as u64);
                if end.is_none_or(|end| end > r.peer.capacity) {
                    outcome = outcome.overflowing(r.run.target);
                }
            }
            let agreed = allreduce_in(
                Call::new(t, self.comm.chain(), call.agree, deadline),
                outcome,
                Outcome::merge,
            )
            .await?;
            Ok((agreed, reserved))
        };
        let serving = receiver.serve(t, context, call.exchange, deadline);
        let (agreed, reserved) = while_serving(work, serving).await?;
        let required = receiver.window.signal(Layout::counter(parity))?;
        let failed = match (local, agreed.error(required, self.capacity as u64)) {
            (Ok(()), None) => return Ok(reserved),
            (Err(own), _) => own,
            (Ok(()), Some(error)) => error,
        };
        receiver.reset(parity)?;
        Err(failed)
    }

    /// One `fetch_add` on each target's counter (and one on its chunk
    /// slots where `slots`), all in flight at once.
    pub(super) async fn reserve_runs(
        &self,
        call: &PlanCall,
        runs: &[Run],
        worlds: &[Rank],
        slots: bool,
    ) -> Result<Vec<Reservation>> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (me, parity, deadline) = (t.rank(), call.parity, call.deadline);
        let reserving = runs.iter().zip(worlds).map(|(&run, &world)| async move {
            let peer = receiver.peer(world, me);
            let count = run.count as u64;
            let counter = Layout::counter(parity);
            let base = t.fetch_add(world, &peer.key, counter, count, deadline);
            let (base, slot) = if slots {
                let chunk = t.fetch_add(world, &peer.key, Layout::chunks(parity), 1, deadline);
                join(async { Ok(base.await?) }, async { Ok(chunk.await?) }).await?
            } else {
                (base.await?, 0)
            };
            Ok(Reservation {
                run,
                world,
                peer,
                base,
                slot,
            })
        });
        join_all(reserving).await
    }

    /// [`super::Variant::Put`] and [`super::Variant::PutStable`].
    pub(super) async fn put(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        local: Result<()>,
        routed: &Routed<E>,
        recv: &mut [E],
    ) -> Result<usize> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (parity, size) = (call.parity, std::mem::size_of::<E>());
        let (reserved, verdict) = match &self.peers {
            Some(peers) => self.reserve_among(call, map, local, routed, peers).await?,
            None => (
                self.reserve(call, map, local, routed, self.stable).await?,
                Ok(()),
            ),
        };
        if let Err(failed) = verdict {
            return self.abandon(call, &reserved, failed).await;
        }
        let (landed, me) = (Layout::landed(parity), t.rank());
        // Its own run a process copies straight from staging to `recv`.
        let mut own = None;
        for r in &reserved {
            let run = &routed.staging[r.run.start..r.run.start + r.run.count];
            if r.world == me {
                own = Some(Own {
                    slot: r.slot as usize,
                    header: Header {
                        source: self.comm.rank() as u64,
                        base: r.base,
                        count: run.len() as u64,
                    },
                    elements: run,
                });
                continue;
            }
            let layout = Layout::new(r.peer.capacity as usize, size, self.comm.size())?;
            let bytes: &[u8] = bytemuck::cast_slice(run);
            let at = layout.element_at(r.base as usize);
            let signal = Signal {
                offset: landed,
                add: r.run.count as u64,
            };
            if self.stable {
                t.put(r.world, &r.peer.key, at, bytes)?;
                let header = Header {
                    source: self.comm.rank() as u64,
                    base: r.base,
                    count: r.run.count as u64,
                };
                let at = layout.header_at(r.slot as usize);
                t.put_signal(r.world, &r.peer.key, at, &header.to_bytes(), signal)?;
            } else {
                t.put_signal(r.world, &r.peer.key, at, bytes, signal)?;
            }
        }
        let window = &receiver.window;
        let total = window.signal(Layout::counter(parity))?;
        let from_peers = total.saturating_sub(own.as_ref().map_or(0, |o| o.header.count));
        let what = "elements to land";
        if receiver
            .wait(t, landed, what, call.deadline, landed_all(from_peers))
            .await?
        {
            receiver.reset(parity)?;
            return Err(Error::Neighbourhood(
                "a listed source abandoned the call".into(),
            ));
        }
        let total = self.received_count(total)?;
        let out = &mut recv[..total];
        let layout = &receiver.layout;
        if self.stable {
            let chunks = window.signal(Layout::chunks(parity))?;
            copy_in_source_order(window, layout, chunks, own, out)?;
        } else {
            // The window around the own run, which never went through it.
            let (at, own) = own.map_or((total, &[][..]), |o| (o.header.base as usize, o.elements));
            if at.checked_add(own.len()).is_none_or(|end| end > total) {
                return Err(Error::Mismatch {
                    what: format!("the receive count: {total}, below this process's own run"),
                });
            }
            let (before, rest) = out.split_at_mut(at);
            let (mine, after) = rest.split_at_mut(own.len());
            window.read(layout.element_at(0), bytemuck::cast_slice_mut(before))?;
            mine.copy_from_slice(own);
            let past = layout.element_at(at + own.len());
            window.read(past, bytemuck::cast_slice_mut(after))?;
        }
        receiver.reset(parity)?;
        Ok(total)
    }
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Leaves a neighbourhood call that failed here after reserving: each
    /// target counts this process's elements as landed (and learns it was
    /// abandoned), and this process waits for its own sources the same way,
    /// so no late put reaches the window in a later call.
    async fn abandon(
        &self,
        call: &PlanCall,
        reserved: &[Reservation],
        failed: Error,
    ) -> Result<usize> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (landed, me) = (Layout::landed(call.parity), t.rank());
        let mut own = 0;
        for r in reserved {
            let count = r.run.count as u64;
            if r.world == me {
                own = count;
            } else {
                signal(t, &r.peer, r.world, landed, count | ABANDONED)?;
            }
        }
        let window = &receiver.window;
        let total = window.signal(Layout::counter(call.parity))?;
        let (what, count) = ("elements to land", total.saturating_sub(own));
        receiver
            .wait(t, landed, what, call.deadline, landed_all(count))
            .await?;
        receiver.reset(call.parity)?;
        Err(failed)
    }
}

/// Whether `count` elements counted in a landed word have landed or been
/// abandoned, and then whether any source abandoned the call.
fn landed_all(count: u64) -> impl Fn(u64) -> Option<bool> {
    move |value| (value % ABANDONED >= count).then_some(value >= ABANDONED)
}

/// A process's run for itself: its reservation, and the elements.
struct Own<'a, E> {
    slot: usize,
    header: Header,
    elements: &'a [E],
}

/// A stable put's chunk header, as it lies in the target's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    source: u64,
    base: u64,
    count: u64,
}

impl Header {
    fn to_bytes(self) -> [u8; HEADER_BYTES] {
        let mut bytes = [0; HEADER_BYTES];
        for (i, word) in [self.source, self.base, self.count].into_iter().enumerate() {
            bytes[8 * i..8 * i + 8].copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    fn from_bytes(bytes: &[u8; HEADER_BYTES]) -> Header {
        let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8"));
        Header {
            source: word(0),
            base: word(1),
            count: word(2),
        }
    }
}

/// Copies the `chunks` chunks of a stable call out of the window in source
/// order: one pass, after sorting the headers. Headers are a peer's
/// writing: they must tile the `out.len()` elements received exactly.
fn copy_in_source_order<E: Pod>(
    window: &impl LocalWindow,
    layout: &Layout,
    chunks: u64,
    own: Option<Own<'_, E>>,
    out: &mut [E],
) -> Result<()> {
    let bad = |why: String| Error::Mismatch {
        what: format!("a stable alltoall's chunk headers: {why}"),
    };
    let chunks = usize::try_from(chunks)
        .ok()
        .filter(|&c| c <= out.len())
        .ok_or_else(|| bad(format!("{chunks} chunks for {} elements", out.len())))?;
    let own_slot = own.as_ref().map(|o| o.slot);
    let mut headers = Vec::with_capacity(chunks);
    for slot in (0..chunks).filter(|&s| Some(s) != own_slot) {
        let mut bytes = [0; HEADER_BYTES];
        window.read(layout.header_at(slot), &mut bytes)?;
        headers.push(Header::from_bytes(&bytes));
    }
    headers.extend(own.as_ref().map(|o| o.header));
    headers.sort_unstable_by_key(|h| h.source);
    let mut at = 0usize;
    for h in &headers {
        let (base, count) = (h.base as usize, h.count as usize);
        let fits = base.checked_add(count).is_some_and(|end| end <= out.len());
        if !fits || at + count > out.len() {
            return Err(bad(format!("{h:?} for {} elements", out.len())));
        }
        let into = &mut out[at..at + count];
        match &own {
            Some(o) if o.header == *h => into.copy_from_slice(o.elements),
            _ => window.read(layout.element_at(base), bytemuck::cast_slice_mut(into))?,
        }
        at += count;
    }
    if at != out.len() {
        return Err(bad(format!("{at} elements listed of {}", out.len())));
    }
    Ok(())
}
