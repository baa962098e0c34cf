//! The one-sided variants. Each source learns the windows of the targets it
//! has not met (once per plan), reserves room at each target with one
//! `fetch_add` on its counter (all in flight at once: one round trip), and
//! the processes agree that no one failed and every reservation fits; then
//! each source puts its run for each target straight into the target's
//! receive window with one `put_signal`, and each target waits until the
//! elements it counted have landed. A run with a chunk header (every run of
//! `PutStable`, which the target sorts by source; a long run to a process
//! of the same host, which the header says is offered, `pull`) is placed
//! where its header says.

use bytemuck::Pod;
use catena_fabric::{LocalWindow, Rank, Signal, Transport};

use super::outcome::Outcome;
use super::pull::Offered;
use super::route::{Routed, Run};
use super::sparse::{signal, ABANDONED};
use super::window::{Layout, Peer, HEADER_BYTES};
use super::{AlltoallPlan, Landing, PlanCall};
use crate::call::Call;
use crate::error::user_code;
use crate::groupmap::GroupMap;
use crate::join::{join, join_all, while_serving};
use crate::scan::allreduce_in;
use crate::{Error, Result};

/// The most bytes a visiting exchange reads out of its window at a time:
/// a piece stays in L1 while the visitor reads it.
const VISIT_PIECE_BYTES: usize = 16 << 10;

/// Room one source holds at one target for this call.
pub(super) struct Reservation {
    pub(super) run: Run,
    pub(super) world: Rank,
    pub(super) peer: Peer,
    /// The first element reserved.
    pub(super) base: u64,
    /// The chunk header slot reserved, if the run has a header.
    pub(super) slot: Option<u64>,
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
        slot: impl Fn(&Run, Rank) -> bool,
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
            let reserved = self.reserve_runs(call, runs, &worlds, slot).await?;
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
    /// slots for the runs `slot` picks), all in flight at once.
    pub(super) async fn reserve_runs(
        &self,
        call: &PlanCall,
        runs: &[Run],
        worlds: &[Rank],
        slot: impl Fn(&Run, Rank) -> bool,
    ) -> Result<Vec<Reservation>> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (me, parity, deadline) = (t.rank(), call.parity, call.deadline);
        let reserving = runs.iter().zip(worlds).map(|(&run, &world)| {
            let slotted = slot(&run, world);
            async move {
                let peer = receiver.peer(world, me);
                let count = run.count as u64;
                let counter = Layout::counter(parity);
                let base = t.fetch_add(world, &peer.key, counter, count, deadline);
                let (base, slot) = if slotted {
                    let chunk = t.fetch_add(world, &peer.key, Layout::chunks(parity), 1, deadline);
                    let (base, chunk) =
                        join(async { Ok(base.await?) }, async { Ok(chunk.await?) }).await?;
                    (base, Some(chunk))
                } else {
                    (base.await?, None)
                };
                Ok(Reservation {
                    run,
                    world,
                    peer,
                    base,
                    slot,
                })
            }
        });
        join_all(reserving).await
    }

    /// [`super::Variant::Put`] and [`super::Variant::PutStable`].
    pub(super) async fn put(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        local: Result<()>,
        routed: &mut Routed<E>,
        landing: Landing<'_, E>,
    ) -> Result<usize> {
        let t = self.comm.transport();
        let receiver = self.window();
        let (parity, size) = (call.parity, std::mem::size_of::<E>());
        // A visit reads what landed in the window: nothing is offered for
        // a copy into a buffer.
        let visiting = matches!(landing, Landing::Visit(_));
        let offers = |run: &Run, world: Rank| !visiting && self.offers(run, world);
        let slot = |run: &Run, world: Rank| self.stable || offers(run, world);
        let (reserved, verdict) = match &self.peers {
            Some(peers) => {
                self.reserve_among(call, map, local, routed, peers, slot)
                    .await?
            }
            None => (self.reserve(call, map, local, routed, slot).await?, Ok(())),
        };
        if let Err(failed) = verdict {
            return self.abandon(call, map, &reserved, failed).await;
        }
        let (landed, me) = (Layout::landed(parity), t.rank());
        let mut offered = Offered::new(t);
        // Its own run a process copies straight from staging to `recv`.
        let mut own = None;
        for (i, r) in reserved.iter().enumerate() {
            let run = &routed.staging[r.run.start..r.run.start + r.run.count];
            let header = Header {
                source: self.comm.rank() as u64,
                base: r.base,
                count: run.len() as u64,
                offer: None,
            };
            if r.world == me {
                own = Some(Own {
                    slot: r.slot,
                    header,
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
            let Some(slot) = r.slot else {
                t.put_signal(r.world, &r.peer.key, at, bytes, signal)?;
                continue;
            };
            let offer = match offers(&r.run, r.world) {
                true => offered.offer(i, bytes),
                false => None,
            };
            if offer.is_none() {
                t.put(r.world, &r.peer.key, at, bytes)?;
            }
            let header = Header { offer, ..header }.to_bytes();
            let at = layout.header_at(slot as usize);
            t.put_signal(r.world, &r.peer.key, at, &header, signal)?;
        }
        let window = &receiver.window;
        let total = window.signal(Layout::counter(parity))?;
        let from_peers = total.saturating_sub(own.as_ref().map_or(0, |o| o.header.count));
        let what = "elements to land";
        let abandoned = receiver
            .wait(t, landed, what, call.deadline, landed_all(from_peers))
            .await?;
        if abandoned {
            // This process's own targets answer before its staging may
            // change.
            self.decline_offers(call, map, &[]).await?;
            self.settle(call, &offered, &reserved, &routed.staging)
                .await?;
            receiver.reset(parity)?;
            return Err(Error::Neighbourhood(
                "a listed source abandoned the call".into(),
            ));
        }
        let total = self.received_count(total)?;
        let layout = &receiver.layout;
        let chunks = window.signal(Layout::chunks(parity))?;
        let recv = match landing {
            Landing::Buffer(recv) => recv,
            Landing::Visit(visit) => {
                let visited = match chunks {
                    0 => self.visit_landed(total, own.as_ref(), &mut routed.piece, visit),
                    _ => {
                        // The sources that offered learn this process takes
                        // nothing (rather than time out); the mismatch is
                        // the error, whatever the declines meet.
                        let _ = self.decline_offers(call, map, &[]).await;
                        Err(Error::Mismatch {
                            what: format!(
                                "the kind of exchange: {chunks} chunk headers reached a \
                                 visiting one"
                            ),
                        })
                    }
                };
                receiver.reset(parity)?;
                return visited.map(|()| total);
            }
        };
        let out = &mut recv[..total];
        let own_elements = own.as_ref().map_or(&[][..], |o| o.elements);
        let chunks = read_chunks(window, layout, chunks, own, total)?;
        // Offered runs are copied and answered first, then the answers to
        // this process's offers awaited: a process waits for nothing while
        // its sources may wait for it.
        let mut refused = Vec::new();
        let mut answered = Vec::new();
        let taken = async {
            for piece in place(chunks, self.stable, total)? {
                let into = &mut out[piece.at..piece.at + piece.count];
                match piece.lies {
                    Lies::Window => {
                        let at = layout.element_at(piece.base);
                        window.read(at, bytemuck::cast_slice_mut(into))?;
                    }
                    Lies::Own => into.copy_from_slice(own_elements),
                    Lies::Offered(handle) => {
                        let source = u32::try_from(piece.source).map_err(|_| bad_header(&piece))?;
                        let world = map.select(source)?;
                        if !self.pull(call, world, handle, into).await? {
                            refused.push(piece);
                        }
                        answered.push(source);
                    }
                }
            }
            Ok::<_, Error>(())
        };
        if let Err(failed) = taken.await {
            // The sources still waiting for an answer learn that this
            // process takes nothing more (rather than time out), and its
            // own targets answer before its staging may change; what
            // failed here is the error, whatever these meet.
            let _ = self.decline_offers(call, map, &answered).await;
            let _ = self
                .settle(call, &offered, &reserved, &routed.staging)
                .await;
            return Err(failed);
        }
        self.settle(call, &offered, &reserved, &routed.staging)
            .await?;
        let missing: u64 = refused.iter().map(|p| p.count as u64).sum();
        if missing > 0 {
            let (word, what) = (Layout::refilled(parity), "refused runs to land");
            let ready = |value: u64| (value >= missing).then_some(());
            receiver.wait(t, word, what, call.deadline, ready).await?;
            for p in refused {
                let into = bytemuck::cast_slice_mut(&mut out[p.at..p.at + p.count]);
                window.read(layout.element_at(p.base), into)?;
            }
        }
        receiver.reset(parity)?;
        Ok(total)
    }
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Hands `visit` the `total` elements that landed: this process's own
    /// run where it lies in staging, the others read out of the window
    /// into `piece` (the plan's, reused), a piece small enough to stay in
    /// cache at a time.
    fn visit_landed(
        &self,
        total: usize,
        own: Option<&Own<'_, E>>,
        piece: &mut Vec<E>,
        visit: &mut dyn FnMut(&[E]),
    ) -> Result<()> {
        let receiver = self.window();
        let (own_at, own) = own.map_or((total as u64, &[][..]), |o| (o.header.base, o.elements));
        let own_at = usize::try_from(own_at).unwrap_or(usize::MAX);
        if own_at.checked_add(own.len()).is_none_or(|end| end > total) {
            // The count word said less than this process reserved itself.
            return Err(Error::Mismatch {
                what: format!("{total} elements received, fewer than reserved"),
            });
        }
        let per_piece = (VISIT_PIECE_BYTES / size_of::<E>()).max(1);
        piece.clear();
        piece.resize(per_piece.min(total - own.len()), E::zeroed());
        for range in [0..own_at, own_at + own.len()..total] {
            for first in range.clone().step_by(per_piece) {
                let piece = &mut piece[..per_piece.min(range.end - first)];
                let at = receiver.layout.element_at(first);
                receiver.window.read(at, bytemuck::cast_slice_mut(piece))?;
                user_code("an exchange's visitor", || visit(piece))?;
            }
        }
        for piece in own.chunks(per_piece) {
            user_code("an exchange's visitor", || visit(piece))?;
        }
        Ok(())
    }

    /// Leaves a neighbourhood call that failed here after reserving: each
    /// target counts this process's elements as landed (and learns it was
    /// abandoned), and this process waits for its own sources the same way,
    /// so no late put reaches the window in a later call.
    async fn abandon(
        &self,
        call: &PlanCall,
        map: &GroupMap,
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
        self.decline_offers(call, map, &[]).await?;
        receiver.reset(call.parity)?;
        Err(failed)
    }

    /// Tells each source that offered this process a run in a call that
    /// failed here, once every source's run is accounted for, that it
    /// takes none; but those `answered` already.
    async fn decline_offers(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        answered: &[u32],
    ) -> Result<()> {
        let receiver = self.window();
        let (window, layout) = (&receiver.window, &receiver.layout);
        let chunks = window.signal(Layout::chunks(call.parity))?;
        let unanswered = offering_sources(window, layout, chunks).filter(|s| !answered.contains(s));
        for source in unanswered {
            self.decline(call, map.select(source)?).await?;
        }
        Ok(())
    }
}

/// Whether `count` elements counted in a landed word have landed or been
/// abandoned, and then whether any source abandoned the call.
fn landed_all(count: u64) -> impl Fn(u64) -> Option<bool> {
    move |value| (value % ABANDONED >= count).then_some(value >= ABANDONED)
}

/// A process's run for itself: its header slot, where its header says it
/// lies, and the elements.
struct Own<'a, E> {
    slot: Option<u64>,
    header: Header,
    elements: &'a [E],
}

/// A chunk header, as it lies in the target's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Header {
    source: u64,
    base: u64,
    count: u64,
    /// The handle of the source's offer of the elements (`pull`), or
    /// `None`: in the window from `base`.
    offer: Option<u64>,
}

const IN_WINDOW: u64 = 0;
const OFFERED: u64 = 1;

impl Header {
    fn to_bytes(self) -> [u8; HEADER_BYTES] {
        let (kind, handle) = self.offer.map_or((IN_WINDOW, 0), |h| (OFFERED, h));
        let mut bytes = [0; HEADER_BYTES];
        let words = [self.source, self.base, self.count, kind, handle];
        for (to, word) in bytes.chunks_exact_mut(8).zip(words) {
            to.copy_from_slice(&word.to_le_bytes());
        }
        bytes
    }

    /// A header a peer wrote: a kind it does not know is an error.
    fn from_bytes(bytes: &[u8; HEADER_BYTES]) -> Result<Header> {
        let word = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8"));
        let offer = match word(3) {
            IN_WINDOW => None,
            OFFERED => Some(word(4)),
            kind => {
                return Err(Error::Mismatch {
                    what: format!("a chunk header of kind {kind}"),
                })
            }
        };
        Ok(Header {
            source: word(0),
            base: word(1),
            count: word(2),
            offer,
        })
    }
}

/// The sources that offered runs among the first `chunks` headers of a
/// call that failed: what a peer wrote that is not an offer is passed over.
fn offering_sources<'w>(
    window: &'w impl LocalWindow,
    layout: &'w Layout,
    chunks: u64,
) -> impl Iterator<Item = u32> + 'w {
    (0..chunks.min(layout.slots() as u64)).filter_map(|slot| {
        let mut bytes = [0; HEADER_BYTES];
        window
            .read(layout.header_at(slot as usize), &mut bytes)
            .ok()?;
        let header = Header::from_bytes(&bytes).ok()?;
        header.offer?;
        u32::try_from(header.source).ok()
    })
}

/// Where a chunk's elements are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lies {
    /// In the window, from the chunk's base.
    Window,
    /// In this process's own staging.
    Own,
    /// In the source's memory, offered by this handle.
    Offered(u64),
}

/// A chunk, and where in the receive buffer it goes.
#[derive(Clone, Copy, Debug)]
struct Piece {
    at: usize,
    source: u64,
    base: usize,
    count: usize,
    lies: Lies,
}

fn bad_header(piece: &Piece) -> Error {
    Error::Mismatch {
        what: format!("a chunk header: {piece:?}"),
    }
}

/// The call's chunks with a header (every one of a stable call, offered
/// ones of any), this process's own run among them, each checked to lie
/// within the `total` elements received.
fn read_chunks<E>(
    window: &impl LocalWindow,
    layout: &Layout,
    chunks: u64,
    own: Option<Own<'_, E>>,
    total: usize,
) -> Result<Vec<Piece>> {
    // Each chunk holds an element and has a slot: past either, the count
    // is a peer's garbage, and slots past the last would be element bytes.
    let chunks = usize::try_from(chunks)
        .ok()
        .filter(|&c| c <= total && c <= layout.slots())
        .ok_or_else(|| Error::Mismatch {
            what: format!(
                "{chunks} chunk headers for {total} elements in {} slots",
                layout.slots()
            ),
        })?;
    let own_slot = own.as_ref().and_then(|o| o.slot);
    let mut pieces = Vec::with_capacity(chunks + 1);
    for slot in (0..chunks as u64).filter(|&s| Some(s) != own_slot) {
        let mut bytes = [0; HEADER_BYTES];
        window.read(layout.header_at(slot as usize), &mut bytes)?;
        let h = Header::from_bytes(&bytes)?;
        pieces.push((h, h.offer.map_or(Lies::Window, Lies::Offered)));
    }
    pieces.extend(own.map(|o| (o.header, Lies::Own)));
    pieces
        .into_iter()
        .map(|(h, lies)| {
            let piece = Piece {
                at: 0,
                source: h.source,
                base: usize::try_from(h.base).unwrap_or(usize::MAX),
                count: usize::try_from(h.count).unwrap_or(usize::MAX),
                lies,
            };
            match piece.base.checked_add(piece.count) {
                Some(end) if end <= total => Ok(piece),
                _ => Err(bad_header(&piece)),
            }
        })
        .collect()
}

/// Where each chunk goes in a receive buffer of `total` elements: a
/// stable call's one after the other in source order (they must tile the
/// buffer); otherwise each at its base, and the window's elements around
/// them (they must not overlap).
fn place(mut chunks: Vec<Piece>, stable: bool, total: usize) -> Result<Vec<Piece>> {
    let mut at = 0;
    if stable {
        chunks.sort_unstable_by_key(|c| c.source);
        for c in &mut chunks {
            (c.at, at) = (at, at + c.count);
            if at > total {
                return Err(bad_header(c));
            }
        }
        if at != total {
            return Err(Error::Mismatch {
                what: format!("chunk headers listing {at} elements of {total}"),
            });
        }
        return Ok(chunks);
    }
    chunks.sort_unstable_by_key(|c| c.base);
    let mut pieces = Vec::with_capacity(2 * chunks.len() + 1);
    let gap = |from: usize, to: usize| Piece {
        at: from,
        source: 0,
        base: from,
        count: to - from,
        lies: Lies::Window,
    };
    for c in chunks {
        if c.base < at {
            return Err(bad_header(&c));
        }
        if c.base > at {
            pieces.push(gap(at, c.base));
        }
        pieces.push(Piece { at: c.base, ..c });
        at = c.base + c.count;
    }
    if at < total {
        pieces.push(gap(at, total));
    }
    Ok(pieces)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(source: u64, base: usize, count: usize, lies: Lies) -> Piece {
        Piece {
            at: 0,
            source,
            base,
            count,
            lies,
        }
    }

    fn spans(pieces: &[Piece]) -> Vec<(usize, usize, Lies)> {
        pieces.iter().map(|p| (p.at, p.count, p.lies)).collect()
    }

    #[test]
    fn unstable_chunks_lie_at_their_base_with_the_window_around_them() {
        let chunks = vec![chunk(3, 6, 2, Lies::Offered(9)), chunk(1, 2, 3, Lies::Own)];
        let pieces = place(chunks, false, 10).unwrap();
        let window = Lies::Window;
        assert_eq!(
            spans(&pieces),
            [
                (0, 2, window),
                (2, 3, Lies::Own),
                (5, 1, window),
                (6, 2, Lies::Offered(9)),
                (8, 2, window)
            ]
        );
        assert_eq!(
            spans(&place(Vec::new(), false, 4).unwrap()),
            [(0, 4, window)]
        );
    }

    #[test]
    fn stable_chunks_tile_the_buffer_in_source_order() {
        let chunks = vec![
            chunk(2, 0, 3, Lies::Window),
            chunk(0, 3, 1, Lies::Offered(5)),
        ];
        let pieces = place(chunks, true, 4).unwrap();
        assert_eq!(
            spans(&pieces),
            [(0, 1, Lies::Offered(5)), (1, 3, Lies::Window)]
        );
    }

    #[test]
    fn chunks_that_overlap_or_do_not_tile_are_refused() {
        let overlapping = vec![chunk(0, 0, 3, Lies::Own), chunk(1, 2, 2, Lies::Offered(1))];
        assert!(place(overlapping, false, 8).is_err());
        let short = vec![chunk(0, 0, 3, Lies::Own)];
        assert!(place(short.clone(), true, 4).is_err());
        assert!(place(short, true, 2).is_err());
    }

    /// A window in plain memory, as the copy-out reads one.
    struct Plain(std::cell::RefCell<Vec<u8>>);

    impl LocalWindow for Plain {
        fn key(&self) -> catena_fabric::RemoteKey {
            unreachable!("never shipped")
        }

        fn len(&self) -> usize {
            self.0.borrow().len()
        }

        fn read(&self, offset: usize, buf: &mut [u8]) -> catena_fabric::Result<()> {
            buf.copy_from_slice(&self.0.borrow()[offset..offset + buf.len()]);
            Ok(())
        }

        fn write(&self, offset: usize, data: &[u8]) -> catena_fabric::Result<()> {
            self.0.borrow_mut()[offset..offset + data.len()].copy_from_slice(data);
            Ok(())
        }

        fn signal(&self, offset: usize) -> catena_fabric::Result<u64> {
            let mut word = [0; 8];
            self.read(offset, &mut word)?;
            Ok(u64::from_le_bytes(word))
        }

        fn set_signal(&self, offset: usize, value: u64) -> catena_fabric::Result<()> {
            self.write(offset, &value.to_le_bytes())
        }
    }

    #[test]
    fn a_chunk_count_past_the_header_slots_is_refused() {
        // 2 processes: 2 slots, then 100 elements a count could reach into.
        let layout = Layout::new(100, 4, 2).unwrap();
        let window = Plain(std::cell::RefCell::new(vec![0; layout.len()]));
        let header = Header {
            source: 1,
            base: 0,
            count: 3,
            offer: Some(7),
        };
        window
            .write(layout.header_at(1), &header.to_bytes())
            .unwrap();
        let read = |chunks| read_chunks::<u32>(&window, &layout, chunks, None, 100);
        let pieces = read(2).unwrap();
        assert_eq!(pieces[1].lies, Lies::Offered(7));
        assert!(read(3).is_err());
        assert!(read(u64::MAX).is_err());
    }

    #[test]
    fn headers_round_trip_and_unknown_kinds_are_refused() {
        for offer in [None, Some(0), Some(u64::MAX)] {
            let header = Header {
                source: 7,
                base: 1 << 40,
                count: 3,
                offer,
            };
            assert_eq!(Header::from_bytes(&header.to_bytes()).unwrap(), header);
        }
        let mut bytes = [0; HEADER_BYTES];
        bytes[24] = 2;
        assert!(Header::from_bytes(&bytes).is_err());
    }
}
