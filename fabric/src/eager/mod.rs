//! Tagged messages built only on puts, signals and compare-and-swap, so every
//! RMA provider gets them for free. Each pair of ranks that talks shares a
//! connection: on each side a window holding the ring the peer writes into.
//! Connections are made lazily on first contact by claiming a slot in the
//! peer's control window, so a rank that talks to k peers holds O(k) state.
//!
//! A connection carries a byte stream of frames (header + payload) with
//! credit-based flow control, in order per sender. Small messages travel
//! inline, through the ring; a message of at least the rendezvous size
//! sends only its header through the ring, and its payload through a
//! second, larger ring of the receiver's (its bulk window, made on the
//! first such message), written straight by the sender's puts in chunks
//! that the receiver copies out as they land, under credit of its own. What
//! a peer writes into our windows is untrusted: a bad value breaks that
//! peer's connection only.

pub mod wire;

use std::cell::{Cell, RefCell};
use std::collections::hash_map::Entry;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;
use std::time::Duration;

use wire::*;

use crate::{
    wait_until, ContextId, ControlWindows, Error, LocalWindow, Message, Rank, RemoteKey, Result,
    Rma, Signal, Tag, Time,
};

pub use wire::CONTROL_WINDOW_BYTES;

/// Default size of each per-peer ring.
pub const DEFAULT_RING_BYTES: usize = 64 * 1024;
/// Default bound on the bytes of unreceived messages held per peer.
pub const DEFAULT_INBOX_BYTES: usize = 64 << 20;
/// Default size from which a message goes by rendezvous (its payload
/// through the receiver's bulk window) rather than inline through the ring.
pub const DEFAULT_RENDEZVOUS_BYTES: usize = 16 * 1024;
/// Default size of the bulk ring a receiver makes for a peer that sends it
/// rendezvous messages.
pub const DEFAULT_BULK_BYTES: usize = 1 << 20;
/// How long a requester waits before retrying when all of a peer's request
/// slots are taken (many ranks contacting one at once).
const SLOT_RETRY: Duration = Duration::from_micros(100);
/// Frames up to this size are put together on the stack and written by one
/// put (with the ring's wrap, two).
const SMALL_FRAME_BYTES: usize = 256;
/// A waiting receive asks whether its peer's process still exists every
/// this many pending polls (the question reads a clock).
const PEER_CHECK_POLLS: u32 = 16;

/// One rank's end of eager messaging: its control window, its connections
/// by peer and, in each, the messages received but not yet matched. A
/// provider holds one and hands it out through
/// [`EagerMessaging`](crate::EagerMessaging).
pub struct Messenger<W> {
    control: W,
    ring_bytes: usize,
    /// Messages of at least this many bytes go by rendezvous.
    rendezvous_bytes: usize,
    /// The bulk ring this rank makes for a peer that sends it rendezvous
    /// messages.
    bulk_bytes: usize,
    /// Per connection: unreceived bytes past which its ring is not drained
    /// further (unless a receive waits on it), so its sender waits for credit.
    inbox_limit: u64,
    connections: RefCell<FxHashMap<Rank, Connection<W>>>,
    bell_seen: Cell<u64>,
    /// Messages completed so far, over all connections: their arrival
    /// order, which a receive from any source follows.
    arrivals: Cell<u64>,
    /// First failure met while making progress, reported by later calls.
    failure: RefCell<Option<String>>,
}

struct Connection<W> {
    window: W,
    /// The peer's connection window, once known.
    remote: Option<RemoteKey>,
    /// Outgoing stream: bytes promised to sends so far, and bytes written.
    reserved: u64,
    written: u64,
    /// Outgoing bulk stream (rendezvous payloads), the same way.
    bulk_reserved: u64,
    bulk_written: u64,
    /// The peer's bulk window and its ring size, once it told us.
    bulk_remote: Option<(RemoteKey, usize)>,
    /// Incoming stream: bytes parsed, and bytes whose credit went back.
    consumed: u64,
    returned: u64,
    /// Our bulk window for this peer, made on its first rendezvous message.
    bulk: Option<W>,
    /// Incoming bulk stream: bytes copied out, and bytes whose credit went
    /// back.
    bulk_consumed: u64,
    bulk_returned: u64,
    /// The message being taken in.
    partial: Option<Partial>,
    /// This peer's messages drained but not yet received, in order.
    inbox: VecDeque<Envelope>,
    /// Bytes of this peer's messages drained but not yet received (frame
    /// headers included, so empty messages count too).
    held: u64,
    /// A send failed half-way; the stream can no longer be parsed.
    broken: bool,
    /// Why the peer's writes into our windows broke the protocol, if they did:
    /// the connection is dead both ways.
    corrupt: Option<String>,
}

impl<W> Connection<W> {
    fn check_intact(&self, peer: Rank) -> Result<()> {
        self.check_sound(peer)?;
        if self.broken {
            return Err(Error::Protocol(format!(
                "the message stream to rank {peer} broke: an earlier send failed half-way"
            )));
        }
        Ok(())
    }

    /// Fails if the peer corrupted its incoming stream or our windows.
    fn check_sound(&self, peer: Rank) -> Result<()> {
        match &self.corrupt {
            Some(why) => Err(Error::Protocol(format!(
                "the connection with rank {peer} is broken: {why}"
            ))),
            None => Ok(()),
        }
    }

    /// Removes this peer's first held message with (context, tag).
    fn take(&mut self, context: ContextId, tag: Tag) -> Option<Message> {
        let i = self
            .inbox
            .iter()
            .position(|e| e.context == context && e.message.tag == tag)?;
        let message = self.inbox.remove(i).expect("found above").message;
        // Saturating: a connection forgotten on a failed first contact and
        // made again holds none of the old one's messages.
        self.held = self.held.saturating_sub(frame_bytes(message.data.len()));
        Some(message)
    }

    /// The arrival number of this peer's first held message with
    /// (context, tag).
    fn first_arrival(&self, context: ContextId, tag: Tag) -> Option<u64> {
        self.inbox
            .iter()
            .find(|e| e.context == context && e.message.tag == tag)
            .map(|e| e.arrival)
    }
}

/// Free bytes of a ring of `ring_bytes` where `written` bytes were written
/// and `credit` consumed; `None` if the credit is impossible.
fn credit_room(written: u64, credit: u64, ring_bytes: usize) -> Option<usize> {
    let in_flight = written
        .checked_sub(credit)
        .filter(|&f| f <= ring_bytes as u64)?;
    Some(ring_bytes - in_flight as usize)
}

/// Marks a connection broken unless disarmed (a send that did not finish).
struct BreakOnDrop<'a, W> {
    connections: &'a RefCell<FxHashMap<Rank, Connection<W>>>,
    target: Rank,
    armed: bool,
}

impl<W> Drop for BreakOnDrop<'_, W> {
    fn drop(&mut self) {
        if self.armed {
            if let Some(conn) = self.connections.borrow_mut().get_mut(&self.target) {
                conn.broken = true;
            }
        }
    }
}

struct Envelope {
    /// Completed as the messenger's `arrival`-th message.
    arrival: u64,
    context: ContextId,
    message: Message,
}

/// A message being taken in: its header is parsed, its payload lands.
struct Partial {
    envelope: Envelope,
    /// Payload bytes announced (fits in memory, checked).
    len: usize,
    /// Whether the payload comes through the bulk stream.
    rendezvous: bool,
}

impl<W: LocalWindow> Connection<W> {
    /// Ring bytes free for our stream to the peer, by the credit it returned
    /// (its word, checked: it may not return more than we sent).
    fn room(&self, peer: Rank, ring_bytes: usize) -> Result<usize> {
        let credit = self.window.signal(CREDIT_SIGNAL)?;
        credit_room(self.written, credit, ring_bytes)
            .ok_or_else(|| Error::Protocol(format!("rank {peer} returned credit never sent")))
    }
}

impl<W: LocalWindow> Messenger<W> {
    /// `control` must be `CONTROL_WINDOW_BYTES` long and published to peers
    /// (the provider's `control_key`); `ring_bytes` is clamped to a frame
    /// header at least and a window's maximum at most. Holds at most
    /// [`DEFAULT_INBOX_BYTES`] of unreceived messages per peer (see
    /// [`Messenger::with_inbox_bytes`]) and sends messages of
    /// [`DEFAULT_RENDEZVOUS_BYTES`] or more by rendezvous (see
    /// [`Messenger::with_rendezvous`]).
    pub fn new(control: W, ring_bytes: usize) -> Messenger<W> {
        Messenger {
            control,
            inbox_limit: DEFAULT_INBOX_BYTES as u64,
            // Within what a connection window can hold, so that its length
            // (RING_AT + ring) cannot overflow.
            ring_bytes: ring_bytes.clamp(
                FRAME_HEADER_BYTES,
                crate::bounds::MAX_WINDOW_BYTES - RING_AT,
            ),
            rendezvous_bytes: DEFAULT_RENDEZVOUS_BYTES,
            bulk_bytes: DEFAULT_BULK_BYTES,
            connections: RefCell::new(FxHashMap::default()),
            bell_seen: Cell::new(0),
            arrivals: Cell::new(0),
            failure: RefCell::new(None),
        }
    }

    /// Bounds the unreceived messages held per peer to about `bytes`: past
    /// it, that peer's ring is left undrained (so its sends wait for credit)
    /// until they are received or a receive waits for that peer. One
    /// unreceived message of any size is always let in (and a message
    /// begun is finished), so even a bound of 0 lets one send precede its
    /// receive.
    pub fn with_inbox_bytes(mut self, bytes: usize) -> Messenger<W> {
        self.inbox_limit = bytes as u64;
        self
    }

    /// Sends messages of `threshold` bytes or more by rendezvous: their
    /// header through the ring, their payload straight into a bulk window
    /// the receiver makes for this rank on the first one, whose ring holds
    /// `bulk_bytes` (clamped to at least 1 byte and to a window's maximum).
    /// `usize::MAX` sends every message inline; any threshold is sound.
    pub fn with_rendezvous(mut self, threshold: usize, bulk_bytes: usize) -> Messenger<W> {
        self.rendezvous_bytes = threshold;
        self.bulk_bytes = bulk_bytes.clamp(1, crate::bounds::MAX_WINDOW_BYTES - BULK_RING_AT);
        self
    }

    /// Bytes of unreceived messages held, over all peers (frame headers
    /// included).
    pub fn inbox_bytes(&self) -> u64 {
        self.connections.borrow().values().map(|c| c.held).sum()
    }

    /// The window peers claim request slots in on first contact.
    pub fn control_window(&self) -> &W {
        &self.control
    }

    /// Peers this rank holds a connection with.
    pub fn connection_count(&self) -> usize {
        self.connections.borrow().len()
    }

    /// Peers this rank made a bulk window for (they sent it rendezvous
    /// messages).
    pub fn bulk_window_count(&self) -> usize {
        let conns = self.connections.borrow();
        conns.values().filter(|c| c.bulk.is_some()).count()
    }

    /// Sends a framed message to `target` over `rma`, connecting first if
    /// needed and waiting for credit until `deadline`; backs
    /// [`Transport::send`](crate::Transport::send).
    pub async fn send<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &[u8],
        deadline: Time,
    ) -> Result<()> {
        check_rank(rma, target)?;
        self.check_failure()?;
        let rendezvous = data.len() >= self.rendezvous_bytes;
        if !rendezvous && self.try_send_now(rma, target, context, tag, data)? {
            return Ok(());
        }
        self.connect(rma, target, deadline).await?;
        let (header, payload) = if rendezvous {
            (encode_rendezvous_header(data.len(), context, tag), &[][..])
        } else {
            (encode_header(data.len(), context, tag), data)
        };
        let frame_len = (FRAME_HEADER_BYTES + payload.len()) as u64;
        let (start, bulk_start) = {
            let mut conns = self.connections.borrow_mut();
            let conn = conns.get_mut(&target).expect("connected above");
            conn.check_intact(target)?;
            conn.reserved += frame_len;
            let bulk_start = conn.bulk_reserved;
            if rendezvous {
                conn.bulk_reserved += data.len() as u64;
            }
            (conn.reserved - frame_len, bulk_start)
        };
        // From here on the streams have a hole until the frame (and its
        // bulk payload) are written: if this send fails or is dropped, the
        // connection is broken for good.
        let mut guard = BreakOnDrop {
            connections: &self.connections,
            target,
            armed: true,
        };
        self.write_frame(rma, target, start, &header, payload, deadline)
            .await?;
        if rendezvous {
            self.write_bulk(rma, target, bulk_start, data, deadline)
                .await?;
        }
        guard.armed = false;
        Ok(())
    }

    /// Writes an inline message at once if its connection is made, no
    /// earlier send to the peer still waits and the ring has room: the
    /// common case, with no future to wait in, no copy on the heap and one
    /// put for a small message. `Ok(false)` if it must wait.
    fn try_send_now<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &[u8],
    ) -> Result<bool> {
        let mut conns = self.connections.borrow_mut();
        let Some(conn) = conns.get_mut(&target) else {
            return Ok(false);
        };
        if conn.remote.is_none() || conn.written != conn.reserved {
            return Ok(false);
        }
        conn.check_intact(target)?;
        let len = FRAME_HEADER_BYTES + data.len();
        let room = conn.room(target, self.ring_bytes);
        if blame(conn, room)? < len {
            return Ok(false);
        }
        let remote = conn.remote.as_ref().expect("checked above");
        let header = encode_header(data.len(), context, tag);
        let pos = conn.written;
        let written = if len <= SMALL_FRAME_BYTES {
            let mut frame = [0u8; SMALL_FRAME_BYTES];
            frame[..FRAME_HEADER_BYTES].copy_from_slice(&header);
            frame[FRAME_HEADER_BYTES..len].copy_from_slice(data);
            let parts = [&frame[..len], &[][..]];
            let ring = (RING_AT, self.ring_bytes, RING_SIGNAL);
            write_span(rma, target, remote, ring, pos, parts, 0, len)
        } else {
            let ring = (RING_AT, self.ring_bytes, RING_SIGNAL);
            write_span(rma, target, remote, ring, pos, [&header, data], 0, len)
        };
        conn.reserved += len as u64;
        match written {
            Ok(()) => {
                conn.written += len as u64;
                Ok(true)
            }
            // Some bytes may be in the ring and none is announced: the
            // stream has a hole, as for a send dropped half-way.
            Err(e) => {
                conn.broken = true;
                Err(e)
            }
        }
    }

    /// Writes the frame `header` + `payload` at stream position `start` as
    /// ring credit allows.
    async fn write_frame<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        start: u64,
        header: &[u8; FRAME_HEADER_BYTES],
        payload: &[u8],
        deadline: Time,
    ) -> Result<()> {
        let total = FRAME_HEADER_BYTES + payload.len();
        let mut sent = 0usize;
        while sent < total {
            let pos = start + sent as u64;
            sent += wait_until(rma, deadline, "ring credit from a receiver", || {
                let mut conns = self.connections.borrow_mut();
                let conn = connection(&mut conns, target)?;
                conn.check_intact(target)?;
                // Earlier sends to this peer go first; then we need free ring bytes.
                if conn.written != pos {
                    return Ok(None);
                }
                let room = conn.room(target, self.ring_bytes);
                let room = blame(conn, room)?;
                if room == 0 {
                    return Ok(None);
                }
                let chunk = room.min(total - sent);
                let remote = conn.remote.as_ref().expect("connected");
                let ring = (RING_AT, self.ring_bytes, RING_SIGNAL);
                write_span(
                    rma,
                    target,
                    remote,
                    ring,
                    pos,
                    [header, payload],
                    sent,
                    chunk,
                )?;
                conn.written += chunk as u64;
                Ok(Some(chunk))
            })
            .await?;
        }
        Ok(())
    }

    /// Writes a rendezvous payload at bulk stream position `start`, in
    /// chunks into the peer's bulk window as its credit allows; learns that
    /// window from the peer's reply first.
    async fn write_bulk<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        start: u64,
        data: &[u8],
        deadline: Time,
    ) -> Result<()> {
        let mut sent = 0usize;
        while sent < data.len() {
            let pos = start + sent as u64;
            sent += wait_until(rma, deadline, "bulk credit from a receiver", || {
                let mut conns = self.connections.borrow_mut();
                let conn = connection(&mut conns, target)?;
                conn.check_intact(target)?;
                if conn.bulk_written != pos {
                    return Ok(None);
                }
                if conn.bulk_remote.is_none() {
                    let learnt = learn_bulk_window(rma, target, conn);
                    if !blame(conn, learnt)? {
                        return Ok(None);
                    }
                }
                let bulk_bytes = conn.bulk_remote.as_ref().expect("learnt").1;
                let credit = conn.window.signal(BULK_CREDIT_SIGNAL)?;
                let room = credit_room(conn.bulk_written, credit, bulk_bytes).ok_or_else(|| {
                    Error::Protocol(format!("rank {target} returned bulk credit never sent"))
                });
                let room = blame(conn, room)?;
                // Chunks of a quarter ring: the receiver copies one out
                // while the next lands.
                let chunk = room.min(data.len() - sent).min(bulk_bytes.div_ceil(4));
                if chunk == 0 {
                    return Ok(None);
                }
                let remote = &conn.bulk_remote.as_ref().expect("learnt").0;
                let bulk = (BULK_RING_AT, bulk_bytes, BULK_SIGNAL);
                let payload = [&data[sent..], &[]];
                match write_span(rma, target, remote, bulk, pos, payload, 0, chunk) {
                    Ok(()) => {}
                    // The window and its size are the peer's word: a put
                    // into it that is refused means the peer lied.
                    Err(
                        e @ (Error::InvalidKey(_)
                        | Error::OutOfBounds { .. }
                        | Error::Misaligned { .. }
                        | Error::WindowFreed { .. }),
                    ) => {
                        let why = format!("rank {target}'s bulk window refused a put: {e}");
                        return blame(conn, Err(Error::Protocol(why)));
                    }
                    Err(e) => return Err(e),
                }
                conn.bulk_written += chunk as u64;
                Ok(Some(chunk))
            })
            .await?;
        }
        Ok(())
    }

    /// Waits until `deadline` for the first message matching (source,
    /// context, tag); backs
    /// [`Transport::recv`](crate::Transport::recv).
    pub async fn recv<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        deadline: Time,
    ) -> Result<Message> {
        if let Some(source) = source {
            check_rank(rma, source)?;
        }
        let mut pending = 0u32;
        wait_until(rma, deadline, "a message", move || {
            self.check_failure()?;
            let found = match source {
                Some(source) => self.recv_from(rma, source, context, tag)?,
                None => self.recv_any(rma, context, tag),
            };
            if found.is_some() {
                return Ok(found);
            }
            pending = pending.wrapping_add(1);
            if let Some(source) = source {
                // A dead peer is PeerGone (asked every so often: it reads a
                // clock), even if that broke its connection.
                if pending % PEER_CHECK_POLLS == 0 {
                    rma.check_peer(source)?;
                }
            }
            Ok(None)
        })
        .await
    }

    /// One look for a message from `source`: held ones first, then what has
    /// landed, drained past the inbox bound (a receive that waits lifts it
    /// for the connection it could match on, so no bound hides the message
    /// it wants).
    fn recv_from<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        source: Rank,
        context: ContextId,
        tag: Tag,
    ) -> Result<Option<Message>> {
        let mut conns = self.connections.borrow_mut();
        let Some(conn) = conns.get_mut(&source) else {
            return Ok(None);
        };
        if let Some(message) = self.take_and_refill(rma, source, conn, context, tag) {
            return Ok(Some(message));
        }
        self.serve_or_break(rma, source, conn, u64::MAX);
        if let Some(message) = conn.take(context, tag) {
            return Ok(Some(message));
        }
        if conn.corrupt.is_some() {
            // A dead peer is PeerGone, even if that broke its connection.
            rma.check_peer(source)?;
            conn.check_sound(source)?;
        }
        Ok(None)
    }

    /// One look for a message from any peer: the first to arrive of those
    /// held, else what has landed on any connection, drained past the
    /// inbox bound.
    fn recv_any<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        context: ContextId,
        tag: Tag,
    ) -> Option<Message> {
        let mut conns = self.connections.borrow_mut();
        for drain in [false, true] {
            if drain {
                for (&peer, conn) in conns.iter_mut() {
                    self.serve_or_break(rma, peer, conn, u64::MAX);
                }
            }
            let first = conns
                .iter()
                .filter_map(|(&peer, c)| Some((c.first_arrival(context, tag)?, peer)))
                .min();
            if let Some((_, peer)) = first {
                let conn = conns.get_mut(&peer).expect("found above");
                return self.take_and_refill(rma, peer, conn, context, tag);
            }
        }
        None
    }

    /// Takes the peer's first held message with (context, tag), and if the
    /// inbox bound held the peer back, drains its ring into the room left
    /// at once: nothing else might make progress for that sender.
    fn take_and_refill<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W>,
        context: ContextId,
        tag: Tag,
    ) -> Option<Message> {
        let held_back = conn.held >= self.inbox_limit;
        let message = conn.take(context, tag)?;
        if held_back {
            self.serve_or_break(rma, peer, conn, self.inbox_limit);
        }
        Some(message)
    }

    /// Accepts connection requests, takes in replies, drains rings into the
    /// inbox and returns credits.
    pub fn progress<R: ControlWindows<Window = W>>(&self, rma: &R) {
        if let Err(e) = self.try_progress(rma) {
            self.failure
                .borrow_mut()
                .get_or_insert_with(|| e.to_string());
        }
    }

    fn try_progress<R: ControlWindows<Window = W>>(&self, rma: &R) -> Result<()> {
        self.accept_requests(rma)?;
        let mut conns = self.connections.borrow_mut();
        for (&peer, conn) in conns.iter_mut() {
            self.serve_or_break(rma, peer, conn, self.inbox_limit);
        }
        Ok(())
    }

    /// [`Messenger::serve_connection`], marking the connection broken on an
    /// error (a broken one is left alone): an error is this peer's alone.
    fn serve_or_break<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W>,
        limit: u64,
    ) {
        if conn.corrupt.is_none() {
            if let Err(e) = self.serve_connection(rma, peer, conn, limit) {
                conn.corrupt = Some(e.to_string());
            }
        }
    }

    /// Takes in the peer's reply, drains its ring (and bulk ring) up to
    /// `limit` unreceived bytes and returns credit.
    fn serve_connection<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W>,
        limit: u64,
    ) -> Result<()> {
        if conn.remote.is_none() && conn.window.signal(REPLY_SIGNAL)? >= 1 {
            conn.remote = Some(read_key(&conn.window, REPLY_KEY_LEN_AT, REPLY_KEY_AT)?);
        }
        self.drain(rma, peer, conn, limit)?;
        // Credit goes back once what it frees is worth a put: a quarter of
        // the ring, an eighth of the bulk ring (the sender's chunks are a
        // quarter: one is copied out while the next lands), or the rest of
        // a rendezvous payload once it is in.
        let Some(remote) = &conn.remote else {
            return Ok(());
        };
        let owed = conn.consumed - conn.returned;
        if owed >= (self.ring_bytes / 4) as u64 {
            let signal = Signal {
                offset: CREDIT_SIGNAL,
                add: owed,
            };
            rma.put_signal(peer, remote, CREDIT_SIGNAL, &[], signal)?;
            conn.returned = conn.consumed;
        }
        let owed = conn.bulk_consumed - conn.bulk_returned;
        let between = !conn.partial.as_ref().is_some_and(|p| p.rendezvous);
        if owed > 0 && (between || owed >= (self.bulk_bytes / 8) as u64) {
            let signal = Signal {
                offset: BULK_CREDIT_SIGNAL,
                add: owed,
            };
            rma.put_signal(peer, remote, BULK_CREDIT_SIGNAL, &[], signal)?;
            conn.bulk_returned = conn.bulk_consumed;
        }
        Ok(())
    }

    fn accept_requests<R: ControlWindows<Window = W>>(&self, rma: &R) -> Result<()> {
        let bell = self.control.signal(REQUEST_BELL)?;
        if bell == self.bell_seen.get() {
            return Ok(());
        }
        self.bell_seen.set(bell);
        for slot in 0..SLOT_COUNT {
            let at = slot_at(slot);
            if self.control.signal(at)? != SLOT_FILLED {
                continue;
            }
            let mut from = [0u8; 8];
            self.control.read(at + SLOT_FROM_AT, &mut from)?;
            let key = read_key(&self.control, at + SLOT_KEY_LEN_AT, at + SLOT_KEY_AT);
            self.control.set_signal(at, SLOT_FREE)?;
            let from = u64::from_le_bytes(from);
            let from = Rank::try_from(from).ok().filter(|&r| r < rma.size());
            // Anyone may write a slot, so a corrupt request names nobody we
            // could blame: it is dropped, and an honest requester whose slot
            // was overwritten times out at its deadline.
            if let (Some(from), Ok(key)) = (from, key) {
                self.accept(rma, from, key)?;
            }
        }
        Ok(())
    }

    /// Records `from`'s window and replies with ours (creating it if this
    /// is first contact; on simultaneous contact both sides keep one window).
    /// A request that contradicts the window we know for `from`, or whose
    /// reply cannot be delivered, is dropped and changes nothing; only
    /// failing to make a window of our own is an error.
    fn accept<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        from: Rank,
        key: RemoteKey,
    ) -> Result<()> {
        // Never stream into a control window: a forger who names another
        // rank would have us write over that rank's request slots.
        if rma.control_key(from).is_ok_and(|control| control == key) {
            return Ok(());
        }
        let mut conns = self.connections.borrow_mut();
        let (conn, created) = match conns.entry(from) {
            Entry::Occupied(e) => (e.into_mut(), false),
            Entry::Vacant(e) => (e.insert(self.new_connection(rma)?), true),
        };
        // An honest repeat (simultaneous contact) names the same window.
        let learnt = match &conn.remote {
            Some(known) if *known != key => return Ok(()),
            Some(_) => false,
            None => true,
        };
        let mine = conn.window.key();
        let mut reply = Vec::with_capacity(8 + mine.as_bytes().len());
        reply.extend_from_slice(&(mine.as_bytes().len() as u64).to_le_bytes());
        reply.extend_from_slice(mine.as_bytes());
        let replied = rma.put_signal(
            from,
            &key,
            REPLY_KEY_LEN_AT,
            &reply,
            Signal {
                offset: REPLY_SIGNAL,
                add: 1,
            },
        );
        if replied.is_err() {
            if created {
                conns.remove(&from);
            }
        } else if learnt {
            conn.remote = Some(key);
        }
        Ok(())
    }

    fn new_connection<R: ControlWindows<Window = W>>(&self, rma: &R) -> Result<Connection<W>> {
        Ok(Connection {
            window: rma.alloc_window(connection_window_bytes(self.ring_bytes))?,
            remote: None,
            reserved: 0,
            written: 0,
            bulk_reserved: 0,
            bulk_written: 0,
            bulk_remote: None,
            consumed: 0,
            returned: 0,
            bulk: None,
            bulk_consumed: 0,
            bulk_returned: 0,
            partial: None,
            inbox: VecDeque::new(),
            held: 0,
            broken: false,
            corrupt: None,
        })
    }

    /// Makes sure a connection to `target` exists, asking for one if needed.
    async fn connect<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        deadline: Time,
    ) -> Result<()> {
        let first_contact = {
            let mut conns = self.connections.borrow_mut();
            match conns.get(&target) {
                Some(conn) if conn.remote.is_some() => return Ok(()),
                Some(_) => false,
                None => {
                    conns.insert(target, self.new_connection(rma)?);
                    true
                }
            }
        };
        if first_contact {
            if let Err(e) = self.request(rma, target, deadline).await {
                // Unless the peer contacted us meanwhile, nobody knows our
                // window: forget it, so that the next send asks again.
                let mut conns = self.connections.borrow_mut();
                if conns.get(&target).is_some_and(|c| c.remote.is_none()) {
                    conns.remove(&target);
                }
                return Err(e);
            }
        }
        wait_until(rma, deadline, "a connection to a peer", || {
            let conns = self.connections.borrow();
            let conn = conns.get(&target).ok_or_else(|| {
                Error::Protocol(format!("the connection to rank {target} was dropped"))
            })?;
            // A corrupt reply never gives a window: fail now, not at the deadline.
            conn.check_sound(target)?;
            Ok(conn.remote.is_some().then_some(()))
        })
        .await
    }

    /// Claims a slot in `target`'s control window and files our key there.
    async fn request<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        deadline: Time,
    ) -> Result<()> {
        let control = rma.control_key(target)?;
        let mine = self.connections.borrow()[&target].window.key();
        let mut body = Vec::with_capacity(16 + mine.as_bytes().len());
        body.extend_from_slice(&u64::from(rma.rank()).to_le_bytes());
        body.extend_from_slice(&(mine.as_bytes().len() as u64).to_le_bytes());
        body.extend_from_slice(mine.as_bytes());
        let first = rma.rank() as usize % SLOT_COUNT;
        loop {
            for i in 0..SLOT_COUNT {
                if self.connections.borrow()[&target].remote.is_some() {
                    // The peer contacted us meanwhile and we answered it.
                    return Ok(());
                }
                let at = slot_at((first + i) % SLOT_COUNT);
                let old = rma
                    .compare_swap(target, &control, at, SLOT_FREE, SLOT_CLAIMED, deadline)
                    .await?;
                if old == SLOT_FREE {
                    rma.put_signal(
                        target,
                        &control,
                        at + SLOT_FROM_AT,
                        &body,
                        Signal { offset: at, add: 1 },
                    )?;
                    let bell = Signal {
                        offset: REQUEST_BELL,
                        add: 1,
                    };
                    return rma.put_signal(target, &control, REQUEST_BELL, &[], bell);
                }
            }
            let retry_at = rma.deadline_in(SLOT_RETRY).min(deadline);
            match wait_until(rma, retry_at, "a free request slot", || Ok(None::<()>)).await {
                Err(Error::Timeout { .. }) if rma.now() < deadline => continue,
                Err(e) => return Err(e),
                Ok(()) => unreachable!("the condition never holds"),
            }
        }
    }

    /// Moves every complete message that has landed into the peer's inbox,
    /// starting no new message once the connection holds `limit`
    /// unreceived bytes (and at least one message).
    /// The ring signals and frame headers are the peer's word: they are
    /// checked against the credit we gave before anything is read or
    /// allocated.
    fn drain<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W>,
        limit: u64,
    ) -> Result<()> {
        let landed = conn.window.signal(RING_SIGNAL)?;
        // Credit lets the peer have at most a ring beyond what we returned
        // (returned <= consumed, so once landed >= consumed this cannot wrap).
        if landed < conn.consumed || landed - conn.returned > self.ring_bytes as u64 {
            return Err(Error::Protocol(format!(
                "rank {peer} claims {landed} bytes landed in a {}-byte ring \
                 where {} were consumed and {} credited",
                self.ring_bytes, conn.consumed, conn.returned
            )));
        }
        loop {
            match &conn.partial {
                Some(partial) if partial.rendezvous => {
                    if !self.drain_bulk(peer, conn)? {
                        return Ok(());
                    }
                }
                Some(_) => {
                    // At most a ring, checked above.
                    let available = (landed - conn.consumed) as usize;
                    if available == 0 {
                        return Ok(());
                    }
                    let partial = conn.partial.as_mut().expect("partial");
                    let data = &mut partial.envelope.message.data;
                    let take = (partial.len - data.len()).min(available);
                    grow(data, take, partial.len, peer)?;
                    let ring = (RING_AT, self.ring_bytes);
                    append_ring(&conn.window, ring, conn.consumed, take, data)?;
                    conn.consumed += take as u64;
                    conn.held += take as u64;
                }
                None => {
                    let available = (landed - conn.consumed) as usize;
                    // One unreceived message is always let in, so a send
                    // before a receive (an exchange) works under any bound.
                    if available < FRAME_HEADER_BYTES || (conn.held > 0 && conn.held >= limit) {
                        return Ok(());
                    }
                    let mut bytes = [0u8; FRAME_HEADER_BYTES];
                    read_ring(
                        &conn.window,
                        RING_AT,
                        self.ring_bytes,
                        conn.consumed,
                        &mut bytes,
                    )?;
                    let header = decode_header(&bytes).ok_or_else(|| {
                        Error::Protocol(format!("rank {peer} sent a frame of no known kind"))
                    })?;
                    // A payload a Vec can hold; its memory is taken only as
                    // bytes land, so a lying length costs nothing up front.
                    let len = usize::try_from(header.len)
                        .ok()
                        .filter(|&l| l <= isize::MAX as usize - FRAME_HEADER_BYTES)
                        .ok_or_else(|| {
                            Error::Protocol(format!(
                                "rank {peer} framed a {}-byte message",
                                header.len
                            ))
                        })?;
                    if header.rendezvous && conn.bulk.is_none() {
                        // Its sender knows our window, so we know its own
                        // (the reply or its request went before its
                        // frames); if that is still on its way, the frame
                        // waits for the next look.
                        if conn.remote.is_none() {
                            return Ok(());
                        }
                        self.make_bulk_window(rma, peer, conn)?;
                    }
                    conn.consumed += FRAME_HEADER_BYTES as u64;
                    conn.held += frame_bytes(0);
                    let mut data = Vec::new();
                    if !header.rendezvous {
                        // A small message that has landed whole is read at once.
                        let take = len.min(available - FRAME_HEADER_BYTES);
                        grow(&mut data, take, len, peer)?;
                        let ring = (RING_AT, self.ring_bytes);
                        append_ring(&conn.window, ring, conn.consumed, take, &mut data)?;
                        conn.consumed += take as u64;
                        conn.held += take as u64;
                    }
                    conn.partial = Some(Partial {
                        envelope: Envelope {
                            arrival: 0,
                            context: header.context,
                            message: Message {
                                source: peer,
                                tag: header.tag,
                                data,
                            },
                        },
                        len,
                        rendezvous: header.rendezvous,
                    });
                }
            }
            if conn
                .partial
                .as_ref()
                .is_some_and(|p| p.envelope.message.data.len() == p.len)
            {
                let mut envelope = conn.partial.take().expect("partial").envelope;
                envelope.arrival = self.arrivals.get();
                self.arrivals.set(envelope.arrival + 1);
                conn.inbox.push_back(envelope);
            }
        }
    }

    /// Copies what has landed of the rendezvous payload being taken in out
    /// of the bulk ring; true once it is complete.
    fn drain_bulk(&self, peer: Rank, conn: &mut Connection<W>) -> Result<bool> {
        let bulk = conn.bulk.as_ref().expect("made on the rendezvous frame");
        let landed = bulk.signal(BULK_SIGNAL)?;
        if landed < conn.bulk_consumed || landed - conn.bulk_returned > self.bulk_bytes as u64 {
            return Err(Error::Protocol(format!(
                "rank {peer} claims {landed} bytes landed in a {}-byte bulk ring \
                 where {} were consumed and {} credited",
                self.bulk_bytes, conn.bulk_consumed, conn.bulk_returned
            )));
        }
        let partial = conn.partial.as_mut().expect("a rendezvous message");
        let data = &mut partial.envelope.message.data;
        // At most a bulk ring, checked above.
        let take = (partial.len - data.len()).min((landed - conn.bulk_consumed) as usize);
        if take > 0 {
            grow(data, take, partial.len, peer)?;
            let ring = (BULK_RING_AT, self.bulk_bytes);
            append_ring(bulk, ring, conn.bulk_consumed, take, data)?;
            conn.bulk_consumed += take as u64;
            conn.held += take as u64;
        }
        Ok(data.len() == partial.len)
    }

    /// Makes our bulk window for `peer` (its first rendezvous frame asks
    /// for it) and tells the peer its key and ring size.
    fn make_bulk_window<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W>,
    ) -> Result<()> {
        let window = rma
            .alloc_window(bulk_window_bytes(self.bulk_bytes))
            .map_err(|e| {
                Error::Protocol(format!(
                    "no bulk window for rank {peer}'s rendezvous messages: {e}"
                ))
            })?;
        let key = window.key();
        let mut reply = Vec::with_capacity(16 + key.as_bytes().len());
        reply.extend_from_slice(&(key.as_bytes().len() as u64).to_le_bytes());
        reply.extend_from_slice(&(self.bulk_bytes as u64).to_le_bytes());
        reply.extend_from_slice(key.as_bytes());
        let remote = conn.remote.as_ref().expect("checked by the caller");
        let signal = Signal {
            offset: BULK_REPLY_SIGNAL,
            add: 1,
        };
        rma.put_signal(peer, remote, BULK_KEY_LEN_AT, &reply, signal)?;
        conn.bulk = Some(window);
        Ok(())
    }

    fn check_failure(&self) -> Result<()> {
        match &*self.failure.borrow() {
            Some(why) => Err(Error::Protocol(why.clone())),
            None => Ok(()),
        }
    }
}

/// `read`, a reading of words the peer writes into our window: an error
/// there is the peer's doing and breaks its connection both ways.
fn blame<W, T>(conn: &mut Connection<W>, read: Result<T>) -> Result<T> {
    if let Err(e) = &read {
        conn.corrupt.get_or_insert_with(|| e.to_string());
    }
    read
}

/// The connection with `peer`, which a send that reserved its place in it
/// can count on (one is only forgotten before its peer knew it).
fn connection<W>(
    conns: &mut FxHashMap<Rank, Connection<W>>,
    peer: Rank,
) -> Result<&mut Connection<W>> {
    conns
        .get_mut(&peer)
        .ok_or_else(|| Error::Protocol(format!("the connection to rank {peer} was dropped")))
}

/// Takes in the peer's bulk window (key and ring size) once its reply has
/// landed; false while it has not. The reply is the peer's word: its key
/// may name neither its control window (we would write over its request
/// slots) nor its connection window (we would write over our own stream),
/// and its ring must fit in a window.
fn learn_bulk_window<W: LocalWindow, R: ControlWindows<Window = W>>(
    rma: &R,
    peer: Rank,
    conn: &mut Connection<W>,
) -> Result<bool> {
    if conn.window.signal(BULK_REPLY_SIGNAL)? == 0 {
        return Ok(false);
    }
    let key = read_key(&conn.window, BULK_KEY_LEN_AT, BULK_KEY_AT)?;
    let mut bytes = [0u8; 8];
    conn.window.read(BULK_RING_BYTES_AT, &mut bytes)?;
    let bulk_bytes = usize::try_from(u64::from_le_bytes(bytes))
        .ok()
        .filter(|b| (1..=crate::bounds::MAX_WINDOW_BYTES - BULK_RING_AT).contains(b))
        .ok_or_else(|| Error::Protocol(format!("rank {peer} offered a bulk ring of {bytes:?}")))?;
    let control = rma.control_key(peer)?;
    if key == control || conn.remote.as_ref() == Some(&key) {
        return Err(Error::Protocol(format!(
            "rank {peer} offered one of its other windows as its bulk window"
        )));
    }
    conn.bulk_remote = Some((key, bulk_bytes));
    Ok(true)
}

/// Writes bytes `from..from + len` of `parts` (one byte string, in pieces)
/// at stream position `pos` of the peer's ring `(ring_at, ring_bytes,
/// signal)` in its window `key`, wrapping at the ring's end; the last put
/// adds `len` to the ring's signal word. `len` is at most a ring.
#[allow(clippy::too_many_arguments)]
fn write_span<R: Rma + ?Sized>(
    rma: &R,
    target: Rank,
    key: &RemoteKey,
    (ring_at, ring_bytes, signal): (usize, usize, usize),
    pos: u64,
    parts: [&[u8]; 2],
    from: usize,
    len: usize,
) -> Result<()> {
    debug_assert!(len > 0 && len <= ring_bytes);
    // (ring offset, bytes): the bytes wrap at most once, so each part gives
    // at most two pieces and both together at most three.
    let mut pieces: [(usize, &[u8]); 4] = [(0, &[]); 4];
    let mut count = 0;
    let mut at = (pos % ring_bytes as u64) as usize;
    let (mut skip, mut left) = (from, len);
    for part in parts {
        if skip >= part.len() {
            skip -= part.len();
            continue;
        }
        let mut bytes = &part[skip..part.len().min(skip + left)];
        skip = 0;
        left -= bytes.len();
        while !bytes.is_empty() {
            let first = bytes.len().min(ring_bytes - at);
            pieces[count] = (at, &bytes[..first]);
            count += 1;
            bytes = &bytes[first..];
            at = (at + first) % ring_bytes;
        }
        if left == 0 {
            break;
        }
    }
    let (last, rest) = pieces[..count]
        .split_last()
        .expect("at least one byte to write");
    for (at, bytes) in rest {
        rma.put(target, key, ring_at + at, bytes)?;
    }
    let add = Signal {
        offset: signal,
        add: len as u64,
    };
    rma.put_signal(target, key, ring_at + last.0, last.1, add)
}

/// Copies `buf.len()` bytes at stream position `pos` out of the ring at
/// `ring_at` of `window`.
fn read_ring<W: LocalWindow>(
    window: &W,
    ring_at: usize,
    ring_bytes: usize,
    pos: u64,
    buf: &mut [u8],
) -> Result<()> {
    let [(a_at, a_len), (b_at, b_len)] = ring_pieces(pos, buf.len(), ring_bytes)
        .ok_or_else(|| Error::Protocol(format!("a {}-byte read exceeds the ring", buf.len())))?;
    window.read(ring_at + a_at, &mut buf[..a_len])?;
    window.read(ring_at + b_at, &mut buf[a_len..a_len + b_len])
}

/// Appends the `len` bytes at stream position `pos` of the ring
/// `(ring_at, ring_bytes)` of `window` to `data`.
fn append_ring<W: LocalWindow>(
    window: &W,
    (ring_at, ring_bytes): (usize, usize),
    pos: u64,
    len: usize,
    data: &mut Vec<u8>,
) -> Result<()> {
    let [(a_at, a_len), (b_at, b_len)] = ring_pieces(pos, len, ring_bytes)
        .ok_or_else(|| Error::Protocol(format!("a {len}-byte read exceeds the ring")))?;
    window.read_append(ring_at + a_at, a_len, data)?;
    if b_len > 0 {
        window.read_append(ring_at + b_at, b_len, data)?;
    }
    Ok(())
}

/// Makes room for `take` more payload bytes in `data`, a message of `len`
/// bytes: capacity grows with what has landed (at least doubling, never
/// past `len`), so a lying length costs memory only as bytes land.
fn grow(data: &mut Vec<u8>, take: usize, len: usize, peer: Rank) -> Result<()> {
    let need = data.len() + take;
    if need > data.capacity() {
        let want = need.max(data.capacity().saturating_mul(2)).min(len);
        data.try_reserve_exact(want - data.len()).map_err(|_| {
            Error::Protocol(format!(
                "no memory for {need} bytes of a message from rank {peer}"
            ))
        })?;
    }
    Ok(())
}

/// What a message of `len` payload bytes counts against the inbox bound.
fn frame_bytes(len: usize) -> u64 {
    (FRAME_HEADER_BYTES + len) as u64
}

fn check_rank<R: Rma + ?Sized>(rma: &R, rank: Rank) -> Result<()> {
    if rank >= rma.size() {
        return Err(Error::InvalidRank {
            rank,
            size: rma.size(),
        });
    }
    Ok(())
}

fn read_key<W: LocalWindow>(window: &W, len_at: usize, key_at: usize) -> Result<RemoteKey> {
    let mut len = [0u8; 8];
    window.read(len_at, &mut len)?;
    let len = usize::try_from(u64::from_le_bytes(len)).unwrap_or(usize::MAX);
    if len > crate::key::MAX_KEY_BYTES {
        return Err(Error::Protocol(format!("a peer sent a key of {len} bytes")));
    }
    let mut key = vec![0u8; len];
    window.read(key_at, &mut key)?;
    RemoteKey::from_bytes(&key).map_err(|e| Error::Protocol(format!("a peer sent a bad key: {e}")))
}
