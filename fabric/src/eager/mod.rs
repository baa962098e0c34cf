//! Tagged messages built only on puts, signals and compare-and-swap, so every
//! RMA provider gets them for free. Each pair of ranks that talks shares a
//! connection: on each side a window holding the ring the peer writes into.
//! Connections are made lazily on first contact by claiming a slot in the
//! peer's control window, so a rank that talks to k peers holds O(k) state.
//!
//! A connection carries a stream of frames (header + payload, each on
//! whole cache lines) with credit-based flow control, in order per sender.
//! A frame lands whole: its sender's last put stamps its first word, which
//! the receiver polls, so a small message costs the receiver one cache
//! line. Small messages travel inline, through the ring; a message of at
//! least the rendezvous size (or too big for the ring)
//! sends only its header through the ring, and its payload through a
//! second, larger ring of the receiver's (its bulk window, made on the
//! first such message), written straight by the sender's puts in chunks
//! that the receiver copies out as they land, under credit of its own (into
//! the buffer of a receive that waits for it, if it is given one). What
//! a peer writes into our windows is untrusted: a bad value breaks that
//! peer's connection only.

mod connections;
mod transport;
pub mod wire;

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use connections::Connections;
use wire::*;

use crate::{
    wait_until, ContextId, ControlWindows, Error, LocalWindow, Message, PeerWindow, Rank, Received,
    RemoteKey, Result, Rma, Signal, Tag, Time,
};

pub use transport::EagerMessaging;
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
/// Progress drains a connection ahead of its receiver by a ring's worth of
/// unreceived messages (or the inbox bound, if smaller): they are copied
/// out shortly before they are received, into memory the allocator hands
/// round, while the rest wait in the rings. Once nothing was received from
/// the peer for this long (or while a send of this rank waits), it drains
/// up to the inbox bound instead, so that a receiver busy elsewhere, or
/// sending to the same peer, lets the peer go on.
const STALL: Duration = Duration::from_micros(50);

/// How a connection is drained.
#[derive(Clone, Copy)]
enum Drain {
    /// By progress (or a receive that found what it wanted): ahead of the
    /// receiver by a ring's worth, by the inbox bound once it stalls.
    Ahead,
    /// By a receive for (context, tag) that waits on the connection: past
    /// every bound, payloads waiting in the bulk ring making room for what
    /// is behind them, until a message it wants is in (so that it does not
    /// copy out ahead what the next receive would copy just as well).
    Waiting { context: ContextId, tag: Tag },
    /// By a receive into a buffer: as `Waiting`, but leaving a streamed
    /// payload in the bulk ring, for the receive to claim if it wants it.
    Claiming { context: ContextId, tag: Tag },
}

/// A waiting receive asks whether its peer's process still exists every
/// this many pending polls (the question reads a clock).
const PEER_CHECK_POLLS: u32 = 16;

/// One rank's end of eager messaging: its control window, its connections
/// by peer and, in each, the messages received but not yet matched. A
/// provider holds one and hands it out through
/// [`EagerMessaging`]; `W` is its window type, `P` its
/// [`PeerWindow`] (how a connection holds its peer's
/// windows).
pub struct Messenger<W, P> {
    control: W,
    ring_bytes: usize,
    /// Consumed ring bytes worth returning as credit (see
    /// [`credit_batch`]).
    credit_batch: u64,
    /// Messages of at least this many bytes go by rendezvous (see
    /// [`inline_below`]).
    inline_below: usize,
    /// The bulk ring this rank makes for a peer that sends it rendezvous
    /// messages.
    bulk_bytes: usize,
    /// Per connection: unreceived bytes past which its ring is not drained
    /// further (unless a receive waits on it), so its sender waits for credit.
    inbox_limit: u64,
    connections: RefCell<Connections<Connection<W, P>>>,
    bell_seen: Cell<u64>,
    /// Messages completed so far, over all connections: their arrival
    /// order, which a receive from any source follows.
    arrivals: Cell<u64>,
    /// Sends that could not complete at once and wait (for a connection or
    /// credit): while one does, this rank receives nothing, so progress
    /// drains every connection as far as the inbox bound lets it.
    sending: Cell<u32>,
    /// Calls of [`Messenger::progress`] so far, from 1: see
    /// `Connection::looked`.
    progress_rounds: Cell<u64>,
    /// First failure met while making progress, reported by later calls.
    failure: OnceCell<String>,
}

struct Connection<W, P> {
    window: W,
    /// The peer's connection window, resolved once known.
    remote: Option<P>,
    /// Outgoing stream: bytes promised to sends so far, and bytes written.
    reserved: u64,
    written: u64,
    /// The peer's credit word when we last read it (checked then): a send
    /// that fits by it does not read the word again.
    credit_seen: u64,
    /// Outgoing bulk stream (rendezvous payloads), the same way.
    bulk_reserved: u64,
    bulk_written: u64,
    /// The peer's bulk window and its ring size, once it told us.
    bulk_remote: Option<(P, usize)>,
    /// Incoming stream: bytes parsed, and bytes whose credit went back.
    consumed: u64,
    returned: u64,
    /// Our bulk window for this peer, made on its first rendezvous message.
    bulk: Option<W>,
    /// Incoming bulk stream: bytes given to the payloads of parsed frames,
    /// bytes whose ring space is free again (copied out), and bytes whose
    /// credit went back.
    bulk_assigned: u64,
    bulk_consumed: u64,
    bulk_returned: u64,
    /// Payloads of held messages still in the bulk ring (stream position,
    /// length, copied out since), oldest first: a message small enough
    /// waits there until it is received, so that its bytes are copied once,
    /// into the `Vec` the receive returns, when the receiver wants them.
    resident: VecDeque<(u64, usize, bool)>,
    /// The rendezvous message being taken in.
    partial: Option<Partial>,
    /// This peer's messages drained but not yet received, in order.
    inbox: VecDeque<Envelope>,
    /// Messages received from this peer so far, and, while the connection
    /// is held back, that count and when it was first seen so.
    taken: u64,
    stall: Option<(u64, Time)>,
    /// Bytes of this peer's messages drained but not yet received (frame
    /// headers included, so empty messages count too).
    held: u64,
    /// The progress round in which a receive waiting on this peer by name
    /// last looked at the ring ([`Messenger::progress`]): while receives
    /// keep looking and nothing is held, progress leaves the ring to them,
    /// so that a message that lands while the executor makes progress is
    /// still taken straight from the ring, not drained to the heap and
    /// copied again. A receive that stops being polled (a posted request
    /// not tested) stops counting after two rounds, and the ring is drained
    /// as before, so its sender gets credit whatever the rank waits on.
    looked: u64,
    /// A send failed half-way; the stream can no longer be parsed.
    broken: bool,
    /// Why the peer's writes into our windows broke the protocol, if they did:
    /// the connection is dead both ways.
    corrupt: Option<String>,
}

impl<W, P> Connection<W, P> {
    #[inline]
    fn check_intact(&self, peer: Rank) -> Result<()> {
        if self.broken || self.corrupt.is_some() {
            return Err(self.unusable(peer));
        }
        Ok(())
    }

    /// Fails if the peer corrupted its incoming stream or our windows.
    #[inline]
    fn check_sound(&self, peer: Rank) -> Result<()> {
        if self.corrupt.is_some() {
            return Err(self.unusable(peer));
        }
        Ok(())
    }

    /// Why the connection is unusable (it is): corrupt first, then broken.
    #[cold]
    #[inline(never)]
    fn unusable(&self, peer: Rank) -> Error {
        Error::Protocol(match &self.corrupt {
            Some(why) => format!("the connection with rank {peer} is broken: {why}"),
            None => {
                format!("the message stream to rank {peer} broke: an earlier send failed half-way")
            }
        })
    }

    /// Whether nothing of the peer's is held or coming in, and the
    /// connection is sound: then the ring alone tells what is next.
    #[inline(always)]
    fn quiet(&self) -> bool {
        self.inbox.is_empty() && self.partial.is_none() && self.corrupt.is_none()
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

/// What a peer that returned credit never sent broke.
#[cold]
fn excess_credit(peer: Rank) -> Error {
    Error::Protocol(format!("rank {peer} returned credit never sent"))
}

/// Consumed ring bytes worth returning as credit, in a ring of
/// `ring_bytes` (whole frame lines): a quarter ring, on whole frame lines.
fn credit_batch(ring_bytes: usize) -> u64 {
    ((ring_bytes / 4).div_ceil(FRAME_ALIGN) * FRAME_ALIGN) as u64
}

/// The least payload length that goes by rendezvous in a ring of
/// `ring_bytes` (whole frame lines) under a rendezvous `threshold`: the
/// threshold, or less if the frame would not fit the ring (frames land
/// whole). Credit comes back in batches: a frame waits for room while up
/// to a batch less a frame line is consumed but not credited (up to two
/// while the receiver takes message after message without waiting; the
/// rest comes back once it waits, or makes progress, for anything).
fn inline_below(ring_bytes: usize, threshold: usize) -> usize {
    let most = ring_bytes - credit_batch(ring_bytes) as usize + FRAME_ALIGN;
    // A frame spans whole lines and `most` is whole lines, so a payload
    // fits if its header and it do.
    threshold.min(most - FRAME_HEADER_BYTES + 1)
}

/// Free bytes of a ring of `ring_bytes` where `written` bytes were written
/// and `credit` consumed; `None` if the credit is impossible.
fn credit_room(written: u64, credit: u64, ring_bytes: usize) -> Option<usize> {
    let in_flight = written
        .checked_sub(credit)
        .filter(|&f| f <= ring_bytes as u64)?;
    Some(ring_bytes - in_flight as usize)
}

/// Counts one down when dropped.
struct Decrement<'a>(&'a Cell<u32>);

impl Drop for Decrement<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get() - 1);
    }
}

/// Marks a connection broken unless disarmed (a send that did not finish).
struct BreakOnDrop<'a, W, P> {
    connections: &'a RefCell<Connections<Connection<W, P>>>,
    target: Rank,
    armed: bool,
}

impl<W, P> Drop for BreakOnDrop<'_, W, P> {
    fn drop(&mut self) {
        if self.armed {
            if let Some(conn) = self.connections.borrow_mut().get_mut(self.target) {
                conn.broken = true;
            }
        }
    }
}

/// A receive into a buffer that may hold a claim on the payload at the
/// head of its peer's stream: dropped while it does, it leaves the rest of
/// that payload to be thrown away as it lands.
struct Claim<'a, W, P> {
    connections: &'a RefCell<Connections<Connection<W, P>>>,
    peer: Rank,
    held: Cell<bool>,
}

impl<W, P> Drop for Claim<'_, W, P> {
    fn drop(&mut self) {
        if !self.held.get() {
            return;
        }
        let mut conns = self.connections.borrow_mut();
        let partial = conns.get_mut(self.peer).and_then(|c| c.partial.as_mut());
        if let Some(partial) = partial {
            if let Payload::Claimed { at, copied } = partial.payload {
                partial.payload = Payload::Discarded {
                    at,
                    skipped: copied,
                };
            }
        }
    }
}

struct Envelope {
    /// Completed as the messenger's `arrival`-th message.
    arrival: u64,
    context: ContextId,
    message: Message,
    /// Where its payload still is in the bulk ring (stream position,
    /// length), instead of in `message`.
    resident: Option<(u64, usize)>,
}

/// What a look at the head of a peer's stream found.
enum Parsed {
    /// No frame (or the inbox bound holds it back).
    Nothing,
    /// An inline message, whole.
    Whole(Envelope),
    /// A rendezvous message, now the partial one.
    Begun,
}

/// What the fast path of a receive found.
enum Direct<M> {
    /// Nothing has landed.
    Nothing,
    /// The message it wanted, as the receive takes it.
    Taken(M),
    /// Something else, for the general path.
    Other,
}

/// How a direct receive takes the payload of the frame at the head of the
/// ring (whose header and first line [`Messenger::head_frame`] read): into
/// a new `Vec` ([`ToVec`]) or the caller's buffer ([`ToBuf`]). A trait,
/// not a closure, so that it is inlined into the receive.
trait DirectTake {
    type Taken;
    fn take<W: LocalWindow, P: PeerWindow>(
        self,
        messenger: &Messenger<W, P>,
        peer: Rank,
        conn: &Connection<W, P>,
        header: &Header,
        line: &[u8; FRAME_ALIGN],
    ) -> Result<Self::Taken>;
}

/// The payload into a new `Vec`, as [`Messenger::recv`] returns it.
struct ToVec;

impl DirectTake for ToVec {
    type Taken = Message;

    #[inline(always)]
    fn take<W: LocalWindow, P: PeerWindow>(
        self,
        messenger: &Messenger<W, P>,
        peer: Rank,
        conn: &Connection<W, P>,
        header: &Header,
        line: &[u8; FRAME_ALIGN],
    ) -> Result<Message> {
        Ok(Message {
            source: peer,
            tag: header.tag,
            data: messenger.inline_payload(conn, header, line)?,
        })
    }
}

/// The payload into the caller's buffer, as [`Messenger::recv_into`]
/// takes it: one longer than the buffer is `Truncated` (the message
/// taken, nothing written).
struct ToBuf<'b>(&'b mut [u8]);

impl DirectTake for ToBuf<'_> {
    type Taken = Result<Received>;

    #[inline(always)]
    fn take<W: LocalWindow, P: PeerWindow>(
        self,
        messenger: &Messenger<W, P>,
        peer: Rank,
        conn: &Connection<W, P>,
        header: &Header,
        line: &[u8; FRAME_ALIGN],
    ) -> Result<Result<Received>> {
        messenger.inline_payload_into(peer, conn, header, line, self.0)
    }
}

/// A rendezvous message being taken in: its header is parsed, its payload
/// lands in the bulk ring.
struct Partial {
    envelope: Envelope,
    /// Payload bytes announced (fits in memory, checked).
    len: usize,
    payload: Payload,
}

/// Where a partial (rendezvous) message's payload comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Payload {
    /// From bulk stream position `at`, copied into the message as it lands.
    Streamed { at: u64 },
    /// From bulk stream position `at`, left in the bulk ring until received.
    Resident { at: u64 },
    /// From bulk stream position `at`, copied by a receive straight into
    /// its buffer as it lands; `copied` bytes so far.
    Claimed { at: u64, copied: usize },
    /// From bulk stream position `at`, thrown away as it lands (its receive
    /// was dropped half-way); `skipped` bytes so far.
    Discarded { at: u64, skipped: usize },
}

impl Payload {
    /// Whether it frees its ring space as it lands (it is larger than a
    /// resident one), so bulk credit goes back in batches meanwhile.
    fn streams(self) -> bool {
        !matches!(self, Payload::Resident { .. })
    }
}

/// The largest payload left in a bulk ring of `bulk_bytes` until received:
/// a quarter, so that the ring has room for the next ones meanwhile.
fn resident_max(bulk_bytes: usize) -> usize {
    bulk_bytes / 4
}

/// What a streamed payload of `len` bytes reserves when its first bytes
/// land: all of it up to this (pages are taken only as bytes are written),
/// so it is not copied on growing; beyond, it grows as bytes land.
const STREAM_RESERVE: usize = 64 << 20;

impl<W: LocalWindow, P> Connection<W, P> {
    /// Ring bytes free for our stream to the peer, by the credit it returned
    /// (its word, checked: it may not return more than we sent).
    #[inline(always)]
    fn room(&mut self, peer: Rank, ring_bytes: usize) -> Result<usize> {
        let credit = self.window.signal(CREDIT_SIGNAL)?;
        match credit_room(self.written, credit, ring_bytes) {
            Some(room) => {
                self.credit_seen = credit;
                Ok(room)
            }
            None => Err(excess_credit(peer)),
        }
    }

    /// Whether `span` more bytes fit by the credit last read: credit only
    /// grows, so what fitted then fits now (a peer that lowers its word
    /// would have us write over its own ring's unread frames, nothing else).
    #[inline(always)]
    fn fits_by_credit_seen(&self, span: u64, ring_bytes: usize) -> bool {
        credit_room(self.written, self.credit_seen, ring_bytes).is_some_and(|r| r as u64 >= span)
    }

    /// The first held message with (context, tag).
    fn find(&self, context: ContextId, tag: Tag) -> Option<usize> {
        self.inbox
            .iter()
            .position(|e| e.context == context && e.message.tag == tag)
    }

    /// Removes held message `i`, copying its payload out of the bulk ring
    /// (of `bulk_bytes`) if it is still there.
    fn remove(&mut self, i: usize, bulk_bytes: usize) -> Message {
        let envelope = self.inbox.remove(i).expect("a held message");
        self.taken += 1;
        let mut message = envelope.message;
        if let Some((at, len)) = envelope.resident {
            message.data = self.copy_out(at, len, bulk_bytes);
        }
        // Saturating: a connection forgotten on a failed first contact and
        // made again holds none of the old one's messages.
        self.held = self.held.saturating_sub(frame_bytes(message.data.len()));
        message
    }

    /// Removes held message `i` into `buf`, straight from the bulk ring if
    /// its payload is still there; a payload longer than `buf` is removed
    /// and refused.
    fn remove_into(&mut self, i: usize, buf: &mut [u8], bulk_bytes: usize) -> Result<Received> {
        let resident = self.inbox[i].resident;
        let (source, tag) = (self.inbox[i].message.source, self.inbox[i].message.tag);
        match resident {
            Some((at, len)) if len <= buf.len() => {
                self.inbox[i].resident = None;
                self.copy_out_into(at, &mut buf[..len], bulk_bytes);
                self.remove(i, bulk_bytes);
                self.held = self.held.saturating_sub(len as u64);
                Ok(Received { source, tag, len })
            }
            _ => self.remove(i, bulk_bytes).copy_into(buf),
        }
    }

    /// Copies the resident payload at bulk stream position `at` out of the
    /// bulk ring, and frees its ring space (with that of the payloads
    /// before it that were copied out already).
    fn copy_out(&mut self, at: u64, len: usize, bulk_bytes: usize) -> Vec<u8> {
        let mut data = Vec::with_capacity(len);
        let bulk = self
            .bulk
            .as_ref()
            .expect("resident payloads are in the bulk window");
        append_ring(bulk, (BULK_RING_AT, bulk_bytes), at, len, &mut data)
            .expect("a resident payload lies in the bulk ring");
        self.free_resident(at);
        data
    }

    /// [`Connection::copy_out`] into `buf` (`len` bytes long).
    fn copy_out_into(&mut self, at: u64, buf: &mut [u8], bulk_bytes: usize) {
        let bulk = self
            .bulk
            .as_ref()
            .expect("resident payloads are in the bulk window");
        read_ring(bulk, (BULK_RING_AT, bulk_bytes), at, buf)
            .expect("a resident payload lies in the bulk ring");
        self.free_resident(at);
    }

    /// Marks the resident payload at `at` copied out, and frees the ring
    /// space of those copied out from the oldest on.
    fn free_resident(&mut self, at: u64) {
        // The first one not copied yet: empty payloads share a position.
        if let Some(range) = self.resident.iter_mut().find(|r| r.0 == at && !r.2) {
            range.2 = true;
        }
        while let Some(&(at, len, true)) = self.resident.front() {
            self.bulk_consumed = at + len as u64;
            self.resident.pop_front();
        }
    }

    /// Copies held payloads out of the bulk ring into their messages,
    /// oldest first, while `more` says so.
    fn spill(&mut self, bulk_bytes: usize, mut more: impl FnMut(&Self) -> bool) {
        let mut i = 0;
        while i < self.inbox.len() && !self.resident.is_empty() && more(self) {
            if let Some((at, len)) = self.inbox[i].resident.take() {
                let data = self.copy_out(at, len, bulk_bytes);
                self.inbox[i].message.data = data;
            }
            i += 1;
        }
    }
}

/// The future of [`Messenger::send`]. Written out, not an `async fn`: its
/// first poll writes a message that need not wait straight from the
/// fields its caller filled in. An `async fn` first copies its arguments
/// out of those fields, just stored one by one, in wider loads that the
/// core cannot serve from the stores: it waits for them to reach the
/// cache (`perf` put an eighth of a small message's send and receive to
/// itself there).
pub struct SendFuture<'a, W, P, R> {
    messenger: &'a Messenger<W, P>,
    rma: &'a R,
    target: Rank,
    context: ContextId,
    tag: Tag,
    data: &'a [u8],
    deadline: Time,
    /// A send that must wait (for a connection, its turn or credit): on
    /// the heap, so that the common case's future stays small.
    waiting: Option<Pin<Box<dyn Future<Output = Result<()>> + 'a>>>,
    /// Polled again once finished, it would send twice: it panics, as an
    /// `async fn`'s future does.
    finished: bool,
}

impl<'a, W, P, R> Future for SendFuture<'a, W, P, R>
where
    W: LocalWindow,
    P: PeerWindow,
    R: ControlWindows<Window = W, PeerWindow = P>,
{
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = self.get_mut();
        assert!(!this.finished, "a send's future polled after it finished");
        let polled = this.poll_send(cx);
        this.finished = polled.is_ready();
        polled
    }
}

impl<'a, W, P, R> SendFuture<'a, W, P, R>
where
    W: LocalWindow,
    P: PeerWindow,
    R: ControlWindows<Window = W, PeerWindow = P>,
{
    #[inline(always)]
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if self.waiting.is_none() {
            let (messenger, rma) = (self.messenger, self.rma);
            let (target, context, tag, data) = (self.target, self.context, self.tag, self.data);
            check_rank(rma, target)?;
            messenger.check_failure()?;
            let rendezvous = messenger.goes_by_rendezvous(data.len());
            if !rendezvous && messenger.try_send_now(rma, target, context, tag, data)? {
                return Poll::Ready(Ok(()));
            }
            let waiting = messenger.send_waiting(rma, target, context, tag, data, self.deadline);
            self.waiting = Some(Box::pin(waiting));
        }
        self.waiting.as_mut().expect("set above").as_mut().poll(cx)
    }
}

impl<W: LocalWindow, P: PeerWindow> Messenger<W, P> {
    /// `control` must be `CONTROL_WINDOW_BYTES` long and published to peers
    /// (the provider's `control_key`); `ring_bytes` is rounded down to whole
    /// frame lines ([`FRAME_ALIGN`]), one at least and a window's maximum at
    /// most. A message whose frame would not fit the ring goes by rendezvous. Holds at most
    /// [`DEFAULT_INBOX_BYTES`] of unreceived messages per peer (see
    /// [`Messenger::with_inbox_bytes`]) and sends messages of
    /// [`DEFAULT_RENDEZVOUS_BYTES`] or more by rendezvous (see
    /// [`Messenger::with_rendezvous`]).
    pub fn new(control: W, ring_bytes: usize) -> Messenger<W, P> {
        // Within what a connection window can hold, so that its length
        // (RING_AT + ring) cannot overflow.
        let ring_bytes = ring_bytes.clamp(FRAME_ALIGN, crate::bounds::MAX_WINDOW_BYTES - RING_AT)
            / FRAME_ALIGN
            * FRAME_ALIGN;
        Messenger {
            control,
            inbox_limit: DEFAULT_INBOX_BYTES as u64,
            ring_bytes,
            credit_batch: credit_batch(ring_bytes),
            inline_below: inline_below(ring_bytes, DEFAULT_RENDEZVOUS_BYTES),
            bulk_bytes: DEFAULT_BULK_BYTES,
            connections: RefCell::new(Connections::new()),
            bell_seen: Cell::new(0),
            arrivals: Cell::new(0),
            sending: Cell::new(0),
            progress_rounds: Cell::new(1),
            failure: OnceCell::new(),
        }
    }

    /// Bounds the unreceived messages held per peer to about `bytes`: past
    /// it, that peer's ring is left undrained (so its sends wait for credit)
    /// until they are received or a receive waits for that peer. One
    /// unreceived message of any size is always let in (and a message
    /// begun is finished), so even a bound of 0 lets one send precede its
    /// receive.
    pub fn with_inbox_bytes(mut self, bytes: usize) -> Messenger<W, P> {
        self.inbox_limit = bytes as u64;
        self
    }

    /// Sends messages of `threshold` bytes or more by rendezvous: their
    /// header through the ring, their payload straight into a bulk window
    /// the receiver makes for this rank on the first one, whose ring holds
    /// `bulk_bytes` (clamped to at least 1 byte and to a window's maximum).
    /// `usize::MAX` sends every message inline that fits the ring; any
    /// threshold is sound.
    pub fn with_rendezvous(mut self, threshold: usize, bulk_bytes: usize) -> Messenger<W, P> {
        self.inline_below = inline_below(self.ring_bytes, threshold);
        self.bulk_bytes = bulk_bytes.clamp(1, crate::bounds::MAX_WINDOW_BYTES - BULK_RING_AT);
        self
    }

    /// Whether a message of `len` bytes goes by rendezvous.
    #[inline(always)]
    fn goes_by_rendezvous(&self, len: usize) -> bool {
        len >= self.inline_below
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
    pub fn send<'a, R: ControlWindows<Window = W, PeerWindow = P>>(
        &'a self,
        rma: &'a R,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &'a [u8],
        deadline: Time,
    ) -> SendFuture<'a, W, P, R> {
        SendFuture {
            messenger: self,
            rma,
            target,
            context,
            tag,
            data,
            deadline,
            waiting: None,
            finished: false,
        }
    }

    /// [`Messenger::send`] of a message that cannot be written at once: it
    /// connects first if needed, and waits for its turn and credit.
    async fn send_waiting<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &[u8],
        deadline: Time,
    ) -> Result<()> {
        let rendezvous = self.goes_by_rendezvous(data.len());
        self.sending.set(self.sending.get() + 1);
        let _sending = Decrement(&self.sending);
        self.connect(rma, target, deadline).await?;
        let (header, payload) = if rendezvous {
            (encode_rendezvous_header(data.len(), context, tag), &[][..])
        } else {
            (encode_header(data.len(), context, tag), data)
        };
        let frame_len = span_of(payload.len());
        let (start, bulk_start) = {
            let mut conns = self.connections.borrow_mut();
            let conn = conns.get_mut(target).expect("connected above");
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
    #[inline(always)]
    fn try_send_now<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &[u8],
    ) -> Result<bool> {
        let mut conns = self.connections.borrow_mut();
        let Some(conn) = conns.get_mut(target) else {
            return Ok(false);
        };
        if conn.remote.is_none() || conn.written != conn.reserved {
            return Ok(false);
        }
        conn.check_intact(target)?;
        let len = FRAME_HEADER_BYTES + data.len();
        let span = span_of(data.len());
        if !conn.fits_by_credit_seen(span, self.ring_bytes) {
            match conn.room(target, self.ring_bytes) {
                Ok(room) if (room as u64) < span => return Ok(false),
                Ok(_) => {}
                Err(e) => return blame(conn, Err(e)),
            }
        }
        let remote = conn.remote.as_ref().expect("checked above");
        let pos = conn.written;
        let at = ring_offset(pos, self.ring_bytes);
        let written = if at + len <= self.ring_bytes {
            // The common case: one put of the header (but its stamp, set
            // last), put together here, and the payload, from where it is.
            let header = header_after_stamp(data.len(), context, tag);
            let at = RING_AT + at;
            let pieces = (&header[..], data);
            rma.put_stamp(remote, at + STAMP_BYTES, pieces, stamp_at(at, pos))
        } else {
            let header = encode_header(data.len(), context, tag);
            write_frame_now(rma, remote, self.ring_bytes, pos, &header, data)
        };
        conn.reserved += span;
        match written {
            Ok(()) => {
                conn.written += span;
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

    /// Writes the frame `header` + `payload` at stream position `start` once
    /// ring credit allows it whole.
    async fn write_frame<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        target: Rank,
        start: u64,
        header: &[u8; FRAME_HEADER_BYTES],
        payload: &[u8],
        deadline: Time,
    ) -> Result<()> {
        let span = span_of(payload.len());
        wait_until(rma, deadline, "ring credit from a receiver", || {
            let mut conns = self.connections.borrow_mut();
            let conn = connection(&mut conns, target)?;
            conn.check_intact(target)?;
            // Earlier sends to this peer go first; then we need room for
            // the whole frame (it fits the ring: larger ones are rendezvous).
            if conn.written != start {
                return Ok(None);
            }
            let room = conn.room(target, self.ring_bytes);
            if (blame(conn, room)? as u64) < span {
                return Ok(None);
            }
            let remote = conn.remote.as_ref().expect("connected");
            write_frame_now(rma, remote, self.ring_bytes, start, header, payload)?;
            conn.written += span;
            Ok(Some(()))
        })
        .await
    }

    /// Writes a rendezvous payload at bulk stream position `start`, in
    /// chunks into the peer's bulk window as its credit allows; learns that
    /// window from the peer's reply first.
    async fn write_bulk<R: ControlWindows<Window = W, PeerWindow = P>>(
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
                let bulk = (BULK_RING_AT, bulk_bytes);
                let landed = Last::Signal(Signal {
                    offset: BULK_SIGNAL,
                    add: chunk as u64,
                });
                let payload = [&data[sent..], &[]];
                match write_span(rma, remote, bulk, pos, payload, chunk, landed) {
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
    pub async fn recv<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        deadline: Time,
    ) -> Result<Message> {
        if let Some(source) = source {
            check_rank(rma, source)?;
            self.check_failure()?;
            if let Some(message) = self.take_landed(rma, source, context, tag, ToVec) {
                return Ok(message);
            }
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

    /// Waits until `deadline` for the first message matching (source,
    /// context, tag) and takes it into `buf`; backs
    /// [`Transport::recv_into`](crate::Transport::recv_into). From a named
    /// source, a rendezvous payload that has not begun to land elsewhere is
    /// copied from the bulk ring straight into `buf` as it lands.
    pub async fn recv_into<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        buf: &mut [u8],
        deadline: Time,
    ) -> Result<Received> {
        let Some(source) = source else {
            let message = self.recv(rma, None, context, tag, deadline).await?;
            return message.copy_into(buf);
        };
        check_rank(rma, source)?;
        self.check_failure()?;
        if let Some(received) = self.take_landed(rma, source, context, tag, ToBuf(buf)) {
            return received;
        }
        // Dropped while it holds a claim, the receive leaves the rest of
        // the payload to be thrown away as it lands.
        let claim = Claim {
            connections: &self.connections,
            peer: source,
            held: Cell::new(false),
        };
        let mut pending = 0u32;
        wait_until(rma, deadline, "a message", || {
            self.check_failure()?;
            if let Some(received) = self.recv_into_from(rma, source, context, tag, buf, &claim)? {
                return Ok(Some(received));
            }
            pending = pending.wrapping_add(1);
            if pending % PEER_CHECK_POLLS == 0 {
                rma.check_peer(source)?;
            }
            Ok(None)
        })
        .await
    }

    /// One look of [`Messenger::recv_into`]: as [`Messenger::recv_from`],
    /// but a wanted streamed payload at the head of the stream is claimed
    /// (if it fits `buf`) before anything streams it to the heap.
    #[inline(always)]
    fn recv_into_from<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        source: Rank,
        context: ContextId,
        tag: Tag,
        buf: &mut [u8],
        claim: &Claim<'_, W, P>,
    ) -> Result<Option<Received>> {
        let mut conns = self.connections.borrow_mut();
        let Some(conn) = conns.get_mut(source) else {
            return Ok(None);
        };
        conn.looked = self.progress_rounds.get();
        if conn.quiet() && !claim.held.get() {
            // Nothing held, claimed nor coming in: the ring alone tells.
            match self.take_direct(rma, source, conn, context, tag, ToBuf(buf)) {
                Direct::Nothing => return Ok(None),
                Direct::Taken(received) => return received.map(Some),
                Direct::Other => {}
            }
        }
        self.recv_into_held(rma, source, conn, context, tag, buf, claim)
    }

    /// [`Messenger::recv_into_from`] past the ring's head: a claim held,
    /// messages held, or one coming in.
    #[allow(clippy::too_many_arguments)]
    fn recv_into_held<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        source: Rank,
        conn: &mut Connection<W, P>,
        context: ContextId,
        tag: Tag,
        buf: &mut [u8],
        claim: &Claim<'_, W, P>,
    ) -> Result<Option<Received>> {
        if claim.held.get() {
            return self.take_claimed(rma, source, conn, buf, claim);
        }
        let modes = [
            Drain::Ahead,
            Drain::Claiming { context, tag },
            Drain::Waiting { context, tag },
        ];
        for mode in modes {
            self.serve_or_break(rma, source, conn, mode);
            let into = |c: &mut Connection<W, P>, i| c.remove_into(i, buf, self.bulk_bytes);
            if let Some(received) = self.take_and_refill(rma, source, conn, context, tag, into) {
                return received.map(Some);
            }
            let claimable = conn.partial.as_ref().is_some_and(|p| {
                let message = &p.envelope;
                matches!(p.payload, Payload::Streamed { .. })
                    && (message.context, message.message.tag) == (context, tag)
                    && message.message.data.is_empty()
                    && p.len <= buf.len()
            });
            if claimable && conn.corrupt.is_none() {
                // The payloads held in the ring before it go to the heap:
                // the claimed one frees ring space as it is copied.
                conn.spill(self.bulk_bytes, |_| true);
                let partial = conn.partial.as_mut().expect("claimable");
                let Payload::Streamed { at } = partial.payload else {
                    unreachable!("claimable")
                };
                partial.payload = Payload::Claimed { at, copied: 0 };
                claim.held.set(true);
                return self.take_claimed(rma, source, conn, buf, claim);
            }
        }
        if conn.corrupt.is_some() {
            // A dead peer is PeerGone, even if that broke its connection.
            rma.check_peer(source)?;
            conn.check_sound(source)?;
        }
        Ok(None)
    }

    /// Copies what has landed of the claimed payload at the head of the
    /// peer's stream into `buf`; the message once it is whole.
    fn take_claimed<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        buf: &mut [u8],
        claim: &Claim<'_, W, P>,
    ) -> Result<Option<Received>> {
        conn.check_sound(peer)?;
        let taken = self.copy_claimed(peer, conn, buf);
        let taken = blame(conn, taken)?;
        if let Some(received) = taken {
            claim.held.set(false);
            conn.taken += 1;
            conn.held = conn.held.saturating_sub(frame_bytes(0));
            // What is behind it comes in, as a receive that waits would.
            self.serve_or_break(rma, peer, conn, Drain::Ahead);
            conn.check_sound(peer)?;
            return Ok(Some(received));
        }
        let credited = self.return_credit(rma, peer, conn);
        blame(conn, credited)?;
        Ok(None)
    }

    /// [`Messenger::take_claimed`]'s copy: the message, once whole.
    fn copy_claimed(
        &self,
        peer: Rank,
        conn: &mut Connection<W, P>,
        buf: &mut [u8],
    ) -> Result<Option<Received>> {
        let landed = self.bulk_landed(peer, conn)?;
        let bulk = conn.bulk.as_ref().expect("made on the rendezvous frame");
        let partial = conn.partial.as_mut().expect("a claimed message");
        let Payload::Claimed { at, copied } = &mut partial.payload else {
            unreachable!("a claimed message")
        };
        let pos = *at + *copied as u64;
        let take = (partial.len - *copied).min(landed.saturating_sub(pos) as usize);
        if take > 0 {
            let ring = (BULK_RING_AT, self.bulk_bytes);
            read_ring(bulk, ring, pos, &mut buf[*copied..*copied + take])?;
            *copied += take;
            conn.bulk_consumed = pos + take as u64;
        }
        if *copied < partial.len {
            return Ok(None);
        }
        let partial = conn.partial.take().expect("a claimed message");
        Ok(Some(Received {
            source: peer,
            tag: partial.envelope.message.tag,
            len: partial.len,
        }))
    }

    /// One look for a message from `source`: held ones first, then what has
    /// landed, drained past the inbox bound (a receive that waits lifts it
    /// for the connection it could match on, so no bound hides the message
    /// it wants).
    #[inline(always)]
    fn recv_from<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        source: Rank,
        context: ContextId,
        tag: Tag,
    ) -> Result<Option<Message>> {
        let mut conns = self.connections.borrow_mut();
        let Some(conn) = conns.get_mut(source) else {
            return Ok(None);
        };
        conn.looked = self.progress_rounds.get();
        if conn.quiet() {
            // Nothing held nor coming in: the ring alone tells.
            match self.take_direct(rma, source, conn, context, tag, ToVec) {
                Direct::Nothing => return Ok(None),
                Direct::Taken(message) => return Ok(Some(message)),
                Direct::Other => {}
            }
        }
        // What has landed comes in first, within the bound, even if a match
        // is held: receiving then frees one message as draining makes the
        // next, so the allocator hands the same memory round rather than
        // a batch of fresh pages each time the inbox runs dry.
        let whole = |c: &mut Connection<W, P>, i| c.remove(i, self.bulk_bytes);
        self.serve_or_break(rma, source, conn, Drain::Ahead);
        if let Some(message) = self.take_and_refill(rma, source, conn, context, tag, whole) {
            return Ok(Some(message));
        }
        self.serve_or_break(rma, source, conn, Drain::Waiting { context, tag });
        if let Some(message) = self.take_and_refill(rma, source, conn, context, tag, whole) {
            return Ok(Some(message));
        }
        if conn.corrupt.is_some() {
            // A dead peer is PeerGone, even if that broke its connection.
            rma.check_peer(source)?;
            conn.check_sound(source)?;
        }
        Ok(None)
    }

    /// A receive's first look, before it sets up to wait: the message
    /// straight from the ring, taken by `how`, if it is the next of
    /// `source`'s stream and has landed, and nothing of `source`'s is held
    /// (see [`Messenger::take_direct`]); `None` for the general path.
    #[inline(always)]
    fn take_landed<R: ControlWindows<Window = W, PeerWindow = P>, T: DirectTake>(
        &self,
        rma: &R,
        source: Rank,
        context: ContextId,
        tag: Tag,
        how: T,
    ) -> Option<T::Taken> {
        let mut conns = self.connections.borrow_mut();
        let conn = conns.get_mut(source)?;
        if !conn.quiet() {
            return None;
        }
        match self.take_direct(rma, source, conn, context, tag, how) {
            Direct::Taken(taken) => Some(taken),
            Direct::Nothing | Direct::Other => None,
        }
    }

    /// Takes the next message of the peer's stream straight from the ring
    /// by `how` (into a `Vec`, or the caller's buffer), if it is an inline
    /// one with (context, tag) that has landed (nothing may be held or
    /// partial): the common case of a receive, with no inbox, which reads
    /// one cache line for a small message. A frame that breaks the
    /// protocol breaks the connection, which the general path reports.
    #[inline(always)]
    fn take_direct<R: ControlWindows<Window = W, PeerWindow = P>, T: DirectTake>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        context: ContextId,
        tag: Tag,
        how: T,
    ) -> Direct<T::Taken> {
        let mut line = [0u8; FRAME_ALIGN];
        let (header, span) = match self.direct_head(peer, conn, context, tag, &mut line) {
            Direct::Taken(head) => head,
            Direct::Nothing => {
                // The receive waits now: the time to return what the
                // direct receives before it left owing.
                self.credit_or_break(rma, peer, conn);
                return Direct::Nothing;
            }
            Direct::Other => return Direct::Other,
        };
        match how.take(self, peer, conn, &header, &line) {
            Ok(taken) => {
                self.took_direct(rma, peer, conn, span);
                Direct::Taken(taken)
            }
            Err(e) => {
                conn.corrupt = Some(e.to_string());
                Direct::Other
            }
        }
    }

    /// The header and span of the frame at the head of the peer's stream,
    /// its first line read into `line`, if it is an inline one with
    /// (context, tag) that has landed.
    #[inline(always)]
    fn direct_head(
        &self,
        peer: Rank,
        conn: &mut Connection<W, P>,
        context: ContextId,
        tag: Tag,
        line: &mut [u8; FRAME_ALIGN],
    ) -> Direct<(Header, u64)> {
        match self.head_frame(peer, conn, line) {
            Ok(Some((header, span))) => {
                if header.rendezvous || header.context != context || header.tag != tag {
                    return Direct::Other;
                }
                Direct::Taken((header, span))
            }
            Ok(None) => Direct::Nothing,
            Err(e) => {
                conn.corrupt = Some(e.to_string());
                Direct::Other
            }
        }
    }

    /// Counts the head frame (`span` ring bytes) taken by a direct receive.
    /// The credit it frees goes back when a receive next finds the ring
    /// empty ([`Messenger::take_direct`]), or when progress serves the
    /// connection: a batch zeroes a quarter ring's lines and signals the
    /// peer, which a reply sent right after this receive would otherwise
    /// wait behind (in an 8 B ping-pong, once every 256 messages).
    /// A receiver that keeps finding messages returns it at once from two
    /// batches owed, so a sender that streams keeps half a ring of room.
    #[inline(always)]
    fn took_direct<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        span: u64,
    ) {
        conn.consumed += span;
        conn.taken += 1;
        if conn.consumed - conn.returned >= 2 * self.credit_batch {
            self.credit_or_break(rma, peer, conn);
        }
    }

    /// [`Messenger::return_credit`] from a direct receive, whose message
    /// (if any) is in: what failed was telling the peer, which breaks the
    /// connection for what follows.
    #[inline(always)]
    fn credit_or_break<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
    ) {
        if let Err(e) = self.return_credit(rma, peer, conn) {
            conn.corrupt = Some(e.to_string());
        }
    }

    /// The header of the frame at the head of the peer's stream (position
    /// `consumed`) and the ring bytes it spans, once it has landed, with
    /// the frame's first line read into `line`; `None` while its stamp is
    /// 0. Stamp and header are the peer's word: another stamp, a frame of
    /// no known kind, or one past the credit we gave break the protocol.
    #[inline(always)]
    fn head_frame(
        &self,
        peer: Rank,
        conn: &Connection<W, P>,
        line: &mut [u8; FRAME_ALIGN],
    ) -> Result<Option<(Header, u64)>> {
        let ring = self.ring_bytes as u64;
        if conn.consumed - conn.returned >= ring {
            // No credit for a frame there yet: the line still holds the
            // last lap's (it is zeroed when credit goes back).
            return Ok(None);
        }
        let at = RING_AT + ring_offset(conn.consumed, self.ring_bytes);
        let stamped = conn.window.signal(at)?;
        if stamped == 0 {
            return Ok(None);
        }
        if stamped != stamp(conn.consumed) {
            return Err(Error::Protocol(format!(
                "rank {peer} stamped the frame at stream position {} with {stamped}",
                conn.consumed
            )));
        }
        // The line is whole within the ring: frames start on line bounds.
        conn.window
            .read(at + STAMP_BYTES, &mut line[STAMP_BYTES..])?;
        let header = (&line[..FRAME_HEADER_BYTES]).try_into().expect("a header");
        let header = decode_header(header)
            .ok_or_else(|| Error::Protocol(format!("rank {peer} sent a frame of no known kind")))?;
        let span = match header.rendezvous {
            true => frame_span(0),
            false => frame_span(header.len),
        };
        // Credit lets the peer have at most a ring beyond what we returned.
        span.and_then(|span| conn.consumed.checked_add(span))
            .filter(|&end| end - conn.returned <= ring)
            .ok_or_else(|| {
                Error::Protocol(format!(
                    "rank {peer} framed a {}-byte message past its credit in a {ring}-byte ring",
                    header.len
                ))
            })?;
        Ok(Some((header, span.expect("checked above"))))
    }

    /// The payload of the inline frame at the head of the peer's stream,
    /// `header` and first `line` of which [`Messenger::head_frame`] read.
    #[inline(always)]
    fn inline_payload(
        &self,
        conn: &Connection<W, P>,
        header: &Header,
        line: &[u8; FRAME_ALIGN],
    ) -> Result<Vec<u8>> {
        // Within the ring's credit, checked by head_frame.
        let len = header.len as usize;
        if FRAME_HEADER_BYTES + len <= FRAME_ALIGN {
            return Ok(line[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len].to_vec());
        }
        let mut data = Vec::with_capacity(len);
        let at = conn.consumed + FRAME_HEADER_BYTES as u64;
        append_ring(&conn.window, (RING_AT, self.ring_bytes), at, len, &mut data)?;
        Ok(data)
    }

    /// [`Messenger::inline_payload`] copied into `buf`, as a receive into a
    /// buffer delivers it: a payload longer than `buf` is `Truncated`
    /// (the message taken, nothing written).
    #[inline(always)]
    fn inline_payload_into(
        &self,
        peer: Rank,
        conn: &Connection<W, P>,
        header: &Header,
        line: &[u8; FRAME_ALIGN],
        buf: &mut [u8],
    ) -> Result<Result<Received>> {
        let (len, room) = (header.len as usize, buf.len());
        let Some(out) = buf.get_mut(..len) else {
            return Ok(Err(Error::Truncated {
                from: peer,
                len,
                room,
            }));
        };
        if FRAME_HEADER_BYTES + len <= FRAME_ALIGN {
            out.copy_from_slice(&line[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len]);
        } else {
            let at = conn.consumed + FRAME_HEADER_BYTES as u64;
            read_ring(&conn.window, (RING_AT, self.ring_bytes), at, out)?;
        }
        Ok(Ok(Received {
            source: peer,
            tag: header.tag,
            len,
        }))
    }

    /// One look for a message from any peer: the first to arrive of those
    /// held, else what has landed on any connection, drained past the
    /// inbox bound.
    fn recv_any<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        context: ContextId,
        tag: Tag,
    ) -> Option<Message> {
        let mut conns = self.connections.borrow_mut();
        for drain in [false, true] {
            if drain {
                for (peer, conn) in conns.iter_mut() {
                    self.serve_or_break(rma, peer, conn, Drain::Waiting { context, tag });
                }
            }
            let first = conns
                .iter()
                .filter_map(|(peer, c)| Some((c.first_arrival(context, tag)?, peer)))
                .min();
            if let Some((_, peer)) = first {
                let conn = conns.get_mut(peer).expect("found above");
                let whole = |c: &mut Connection<W, P>, i| c.remove(i, self.bulk_bytes);
                return self.take_and_refill(rma, peer, conn, context, tag, whole);
            }
        }
        None
    }

    /// Takes the peer's first held message with (context, tag) by `take`
    /// (given its place in the inbox), and if the inbox bound held the peer
    /// back, drains its ring into the room left at once: nothing else might
    /// make progress for that sender.
    fn take_and_refill<R: ControlWindows<Window = W, PeerWindow = P>, M>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        context: ContextId,
        tag: Tag,
        take: impl FnOnce(&mut Connection<W, P>, usize) -> M,
    ) -> Option<M> {
        let held_back = conn.held >= self.inbox_limit.min(self.ring_bytes as u64);
        let i = conn.find(context, tag)?;
        let message = take(conn, i);
        if held_back {
            self.serve_or_break(rma, peer, conn, Drain::Ahead);
        } else if conn.corrupt.is_none() {
            // Copying a resident payload out freed bulk ring space.
            if let Err(e) = self.return_credit(rma, peer, conn) {
                conn.corrupt = Some(e.to_string());
            }
        }
        Some(message)
    }

    /// Accepts connection requests, takes in replies, drains rings into the
    /// inbox and returns credits.
    pub fn progress<R: ControlWindows<Window = W, PeerWindow = P>>(&self, rma: &R) {
        if let Err(e) = self.try_progress(rma) {
            // The first failure is the one reported.
            let _ = self.failure.set(e.to_string());
        }
    }

    fn try_progress<R: ControlWindows<Window = W, PeerWindow = P>>(&self, rma: &R) -> Result<()> {
        self.accept_requests(rma)?;
        let round = self.progress_rounds.get();
        self.progress_rounds.set(round + 1);
        let mut conns = self.connections.borrow_mut();
        for (peer, conn) in conns.iter_mut() {
            // A receive that looked at the peer in this round or the last
            // drains it as it needs to and returns its credit; its reply is
            // in. (One round of slack: an executor may make progress twice
            // between two looks of a receive it keeps polling.)
            let watched = round - conn.looked <= 1 && conn.quiet() && conn.remote.is_some();
            if !watched {
                self.serve_or_break(rma, peer, conn, Drain::Ahead);
            }
        }
        Ok(())
    }

    /// [`Messenger::serve_connection`], marking the connection broken on an
    /// error (a broken one is left alone): an error is this peer's alone.
    fn serve_or_break<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        mode: Drain,
    ) {
        if conn.corrupt.is_none() {
            if let Err(e) = self.serve_connection(rma, peer, conn, mode) {
                conn.corrupt = Some(e.to_string());
            }
        }
    }

    /// Takes in the peer's reply, drains its ring (and bulk ring) as far as
    /// `mode` lets it and returns credit.
    fn serve_connection<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        mode: Drain,
    ) -> Result<()> {
        if conn.remote.is_none() && conn.window.signal(REPLY_SIGNAL)? >= 1 {
            let key = read_key(&conn.window, REPLY_KEY_LEN_AT, REPLY_KEY_AT)?;
            conn.remote = Some(rma.resolve_window(peer, &key)?);
        }
        // Ahead of the receiver, a connection is drained a ring's worth
        // (messages small enough wait in the rings, larger ones are not
        // streamed into the heap) unless this rank waits in a send or has
        // received nothing from the peer for a while: then it is drained
        // eagerly, up to the inbox bound.
        let read_ahead = self.inbox_limit.min(self.ring_bytes as u64);
        let half = (self.bulk_bytes / 2) as u64;
        let bulk_landed = match &conn.bulk {
            Some(bulk) if !conn.resident.is_empty() => bulk.signal(BULK_SIGNAL)?,
            _ => 0,
        };
        let pressed = |c: &Connection<W, P>| bulk_landed.saturating_sub(c.bulk_consumed) > half;
        let eager = match mode {
            Drain::Waiting { .. } | Drain::Claiming { .. } => {
                // A receive that waits on the peer is taking its messages:
                // the connection is not stalled, however long that takes.
                conn.stall = None;
                true
            }
            Drain::Ahead => {
                let streaming = conn
                    .partial
                    .as_ref()
                    .is_some_and(|p| matches!(p.payload, Payload::Streamed { .. }));
                let held_back = conn.held >= read_ahead || streaming || pressed(conn);
                held_back && (self.sending.get() > 0 || self.stalled(rma, conn))
            }
        };
        let (limit, want) = match (mode, eager) {
            (Drain::Waiting { context, tag } | Drain::Claiming { context, tag }, _) => {
                (u64::MAX, Some((context, tag)))
            }
            (Drain::Ahead, true) => (self.inbox_limit, None),
            (Drain::Ahead, false) => (read_ahead, None),
        };
        let stream = eager && !matches!(mode, Drain::Claiming { .. });
        self.drain(rma, peer, conn, limit, stream, want)?;
        // Payloads waiting in the bulk ring, once eager, fill it no more
        // than half, so that the sender has room to go on (and a waiting
        // receive reaches what is behind them): the oldest go to the heap.
        if eager && !conn.resident.is_empty() && pressed(conn) {
            conn.spill(self.bulk_bytes, pressed);
        }
        self.return_credit(rma, peer, conn)
    }

    /// Whether nothing was received from this connection for [`STALL`]
    /// while it was held back (asked only then: it reads a clock); until
    /// then, asks to be woken when that time comes.
    fn stalled<R: Rma>(&self, rma: &R, conn: &mut Connection<W, P>) -> bool {
        let now = rma.now();
        let since = match conn.stall {
            Some((taken, since)) if taken == conn.taken => since,
            _ => {
                conn.stall = Some((conn.taken, now));
                now
            }
        };
        let stalled = now.saturating_sub(since) >= STALL;
        if !stalled {
            rma.wake_at(since.saturating_add(STALL));
        }
        stalled
    }

    /// Returns credit once what it frees is worth a put: a quarter of the
    /// ring (its lines' stamp words zeroed first), an eighth of the bulk ring (the sender's chunks are a quarter:
    /// one is copied out while the next lands), or all freed bulk bytes
    /// when no streamed payload is coming in.
    #[inline(always)]
    fn return_credit<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
    ) -> Result<()> {
        // Most receives owe too little to return anything.
        if conn.consumed - conn.returned < self.credit_batch
            && conn.bulk_consumed == conn.bulk_returned
        {
            return Ok(());
        }
        self.send_credit(rma, peer, conn)
    }

    /// [`Messenger::return_credit`] once some credit is owed.
    #[inline(never)]
    fn send_credit<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
    ) -> Result<()> {
        let Some(remote) = &conn.remote else {
            return Ok(());
        };
        let owed = conn.consumed - conn.returned;
        if owed >= self.credit_batch {
            // The stamps of the next lap's frames land on these lines: each
            // line's first word is 0 again before the peer may write there
            // (the lines are zeroed whole: a few wide stores a line).
            let ring = (RING_AT, self.ring_bytes);
            zero_ring(&conn.window, ring, conn.returned, owed as usize)?;
            let signal = Signal {
                offset: CREDIT_SIGNAL,
                add: owed,
            };
            rma.put_signal(peer, remote.key(), CREDIT_SIGNAL, &[], signal)?;
            conn.returned = conn.consumed;
        }
        let owed = conn.bulk_consumed - conn.bulk_returned;
        let streaming = conn.partial.as_ref().is_some_and(|p| p.payload.streams());
        if owed > 0 && (!streaming || owed >= (self.bulk_bytes / 8) as u64) {
            let signal = Signal {
                offset: BULK_CREDIT_SIGNAL,
                add: owed,
            };
            rma.put_signal(peer, remote.key(), BULK_CREDIT_SIGNAL, &[], signal)?;
            conn.bulk_returned = conn.bulk_consumed;
        }
        Ok(())
    }

    fn accept_requests<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
    ) -> Result<()> {
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
    fn accept<R: ControlWindows<Window = W, PeerWindow = P>>(
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
        let created = !conns.contains(from);
        if created {
            conns.insert(from, self.new_connection(rma)?);
        }
        let conn = conns.get_mut(from).expect("inserted above");
        // An honest repeat (simultaneous contact) names the same window.
        let learnt = match &conn.remote {
            Some(known) if *known.key() != key => return Ok(()),
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
        // The key took a put, so it resolves as well.
        match replied.and_then(|()| rma.resolve_window(from, &key)) {
            Err(_) if created => drop(conns.remove(from)),
            Err(_) => {}
            Ok(window) if learnt => conn.remote = Some(window),
            Ok(_) => {}
        }
        Ok(())
    }

    fn new_connection<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
    ) -> Result<Connection<W, P>> {
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
            bulk_assigned: 0,
            bulk_consumed: 0,
            bulk_returned: 0,
            resident: VecDeque::new(),
            partial: None,
            inbox: VecDeque::new(),
            taken: 0,
            stall: None,
            held: 0,
            looked: 0,
            credit_seen: 0,
            broken: false,
            corrupt: None,
        })
    }

    /// Makes sure a connection to `target` exists, asking for one if needed.
    async fn connect<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        target: Rank,
        deadline: Time,
    ) -> Result<()> {
        let first_contact = {
            let mut conns = self.connections.borrow_mut();
            match conns.get(target) {
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
                if conns.get(target).is_some_and(|c| c.remote.is_none()) {
                    conns.remove(target);
                }
                return Err(e);
            }
        }
        wait_until(rma, deadline, "a connection to a peer", || {
            let conns = self.connections.borrow();
            let conn = conns.get(target).ok_or_else(|| {
                Error::Protocol(format!("the connection to rank {target} was dropped"))
            })?;
            // A corrupt reply never gives a window: fail now, not at the deadline.
            conn.check_sound(target)?;
            Ok(conn.remote.is_some().then_some(()))
        })
        .await
    }

    /// Claims a slot in `target`'s control window and files our key there.
    async fn request<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        target: Rank,
        deadline: Time,
    ) -> Result<()> {
        let control = rma.control_key(target)?;
        let mine = self.connections.borrow()[target].window.key();
        let mut body = Vec::with_capacity(16 + mine.as_bytes().len());
        body.extend_from_slice(&u64::from(rma.rank()).to_le_bytes());
        body.extend_from_slice(&(mine.as_bytes().len() as u64).to_le_bytes());
        body.extend_from_slice(mine.as_bytes());
        let first = rma.rank() as usize % SLOT_COUNT;
        loop {
            for i in 0..SLOT_COUNT {
                if self.connections.borrow()[target].remote.is_some() {
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
    /// unreceived bytes (and at least one message) or once one with the
    /// (context, tag) in `want` is in, and copying a streamed payload into
    /// the heap only if `stream`.
    /// Stamps, frame headers and the bulk signal are the peer's word: they
    /// are checked against the credit we gave before anything is read or
    /// allocated.
    fn drain<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        limit: u64,
        stream: bool,
        want: Option<(ContextId, Tag)>,
    ) -> Result<()> {
        loop {
            let envelope = match &conn.partial {
                // Its receive copies it.
                Some(Partial {
                    payload: Payload::Claimed { .. },
                    ..
                }) => return Ok(()),
                Some(Partial {
                    payload: Payload::Discarded { .. },
                    ..
                }) => {
                    if !self.discard_bulk(peer, conn)? {
                        return Ok(());
                    }
                    continue;
                }
                Some(_) => {
                    if !self.drain_bulk(peer, conn, stream)? {
                        return Ok(());
                    }
                    conn.partial.take().expect("partial").envelope
                }
                None => match self.parse_frame(rma, peer, conn, limit)? {
                    Parsed::Nothing => return Ok(()),
                    Parsed::Begun => continue,
                    Parsed::Whole(envelope) => envelope,
                },
            };
            let wanted = want == Some((envelope.context, envelope.message.tag));
            self.hold(conn, envelope);
            if wanted {
                return Ok(());
            }
        }
    }

    /// Holds a message taken in whole until it is received, numbered in
    /// arrival order.
    fn hold(&self, conn: &mut Connection<W, P>, mut envelope: Envelope) {
        envelope.arrival = self.arrivals.get();
        self.arrivals.set(envelope.arrival + 1);
        conn.inbox.push_back(envelope);
    }

    /// Takes the frame at the head of the peer's stream, if it has landed
    /// and the connection holds less than `limit` unreceived bytes (or no
    /// message): an inline message whole, or the header of a rendezvous
    /// one, whose payload becomes the partial message.
    fn parse_frame<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
        limit: u64,
    ) -> Result<Parsed> {
        // One unreceived message is always let in, so a send before a
        // receive (an exchange) works under any bound.
        if conn.held > 0 && conn.held >= limit {
            return Ok(Parsed::Nothing);
        }
        let mut line = [0u8; FRAME_ALIGN];
        let Some((header, span)) = self.head_frame(peer, conn, &mut line)? else {
            return Ok(Parsed::Nothing);
        };
        let envelope = |data| Envelope {
            arrival: 0,
            context: header.context,
            message: Message {
                source: peer,
                tag: header.tag,
                data,
            },
            resident: None,
        };
        if !header.rendezvous {
            let data = self.inline_payload(conn, &header, &line)?;
            conn.consumed += span;
            conn.held += frame_bytes(data.len());
            return Ok(Parsed::Whole(envelope(data)));
        }
        // A payload a Vec can hold; its memory is taken only as bytes land,
        // so a lying length costs nothing up front.
        let len = usize::try_from(header.len)
            .ok()
            .filter(|&l| l <= isize::MAX as usize - FRAME_HEADER_BYTES)
            .ok_or_else(|| {
                Error::Protocol(format!("rank {peer} framed a {}-byte message", header.len))
            })?;
        if conn.bulk.is_none() {
            // Its sender knows our window, so we know its own (the reply or
            // its request went before its frames); if that is still on its
            // way, the frame waits for the next look.
            if conn.remote.is_none() {
                return Ok(Parsed::Nothing);
            }
            self.make_bulk_window(rma, peer, conn)?;
        }
        let at = conn.bulk_assigned;
        conn.bulk_assigned = at.checked_add(len as u64).ok_or_else(|| {
            Error::Protocol(format!("rank {peer} framed more than 2^64 bulk bytes"))
        })?;
        let payload = if len <= resident_max(self.bulk_bytes) {
            Payload::Resident { at }
        } else {
            Payload::Streamed { at }
        };
        conn.consumed += span;
        conn.held += frame_bytes(0);
        conn.partial = Some(Partial {
            envelope: envelope(Vec::new()),
            len,
            payload,
        });
        Ok(Parsed::Begun)
    }

    /// Takes in what has landed of the rendezvous payload of the partial
    /// message: copies a streamed one out of the bulk ring (if `stream`),
    /// or sees a resident one complete there. True once the payload is
    /// complete.
    fn drain_bulk(&self, peer: Rank, conn: &mut Connection<W, P>, stream: bool) -> Result<bool> {
        let landed = self.bulk_landed(peer, conn)?;
        let streamed = conn
            .partial
            .as_ref()
            .is_some_and(|p| matches!(p.payload, Payload::Streamed { .. }));
        if streamed && stream && !conn.resident.is_empty() {
            // A streamed payload frees its ring space as it is copied out:
            // the payloads waiting before it in the ring go to the heap.
            conn.spill(self.bulk_bytes, |_| true);
        }
        let bulk = conn.bulk.as_ref().expect("made on the rendezvous frame");
        let partial = conn.partial.as_mut().expect("a rendezvous message");
        match partial.payload {
            Payload::Resident { at } => {
                // At most a quarter ring, so `at + len` is within a ring
                // of what was consumed.
                let end = at + partial.len as u64;
                if landed < end {
                    return Ok(false);
                }
                partial.envelope.resident = Some((at, partial.len));
                conn.resident.push_back((at, partial.len, false));
                conn.held += partial.len as u64;
                Ok(true)
            }
            Payload::Streamed { .. } if !stream => Ok(false),
            Payload::Claimed { .. } | Payload::Discarded { .. } => {
                unreachable!("drain takes these apart")
            }
            Payload::Streamed { at } => {
                let data = &mut partial.envelope.message.data;
                let pos = at + data.len() as u64;
                // Nothing waits before a streamed payload in the ring, so
                // what is consumed is where it continues; at most a ring.
                let take = (partial.len - data.len()).min(landed.saturating_sub(pos) as usize);
                if take > 0 {
                    let upfront = partial.len.min(STREAM_RESERVE);
                    grow(data, take, partial.len, upfront, peer)?;
                    let ring = (BULK_RING_AT, self.bulk_bytes);
                    append_ring(bulk, ring, pos, take, data)?;
                    conn.bulk_consumed = pos + take as u64;
                    conn.held += take as u64;
                }
                Ok(data.len() == partial.len)
            }
        }
    }

    /// Bytes of the peer's bulk stream that have landed in our bulk ring:
    /// its word, checked against what we consumed and credited.
    fn bulk_landed(&self, peer: Rank, conn: &Connection<W, P>) -> Result<u64> {
        let bulk = conn.bulk.as_ref().expect("made on the rendezvous frame");
        let landed = bulk.signal(BULK_SIGNAL)?;
        if landed < conn.bulk_consumed || landed - conn.bulk_returned > self.bulk_bytes as u64 {
            return Err(Error::Protocol(format!(
                "rank {peer} claims {landed} bytes landed in a {}-byte bulk ring \
                 where {} were consumed and {} credited",
                self.bulk_bytes, conn.bulk_consumed, conn.bulk_returned
            )));
        }
        Ok(landed)
    }

    /// Throws away what has landed of the discarded payload at the head of
    /// the peer's stream; true once it is all gone (and the message with
    /// it).
    fn discard_bulk(&self, peer: Rank, conn: &mut Connection<W, P>) -> Result<bool> {
        let landed = self.bulk_landed(peer, conn)?;
        let partial = conn.partial.as_mut().expect("a discarded message");
        let Payload::Discarded { at, skipped } = &mut partial.payload else {
            unreachable!("a discarded message")
        };
        let pos = *at + *skipped as u64;
        let skip = (partial.len - *skipped).min(landed.saturating_sub(pos) as usize);
        *skipped += skip;
        conn.bulk_consumed = pos + skip as u64;
        if *skipped < partial.len {
            return Ok(false);
        }
        conn.partial = None;
        conn.taken += 1;
        conn.held = conn.held.saturating_sub(frame_bytes(0));
        Ok(true)
    }

    /// Makes our bulk window for `peer` (its first rendezvous frame asks
    /// for it) and tells the peer its key and ring size.
    fn make_bulk_window<R: ControlWindows<Window = W, PeerWindow = P>>(
        &self,
        rma: &R,
        peer: Rank,
        conn: &mut Connection<W, P>,
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
        let remote = conn.remote.as_ref().expect("checked by the caller").key();
        let signal = Signal {
            offset: BULK_REPLY_SIGNAL,
            add: 1,
        };
        rma.put_signal(peer, remote, BULK_KEY_LEN_AT, &reply, signal)?;
        conn.bulk = Some(window);
        Ok(())
    }

    #[inline]
    fn check_failure(&self) -> Result<()> {
        match self.failure.get() {
            Some(why) => Err(Error::Protocol(why.clone())),
            None => Ok(()),
        }
    }
}

/// `read`, a reading of words the peer writes into our window: an error
/// there is the peer's doing and breaks its connection both ways.
fn blame<W, P, T>(conn: &mut Connection<W, P>, read: Result<T>) -> Result<T> {
    if let Err(e) = &read {
        conn.corrupt.get_or_insert_with(|| e.to_string());
    }
    read
}

/// The connection with `peer`, which a send that reserved its place in it
/// can count on (one is only forgotten before its peer knew it).
fn connection<W, P>(
    conns: &mut Connections<Connection<W, P>>,
    peer: Rank,
) -> Result<&mut Connection<W, P>> {
    conns
        .get_mut(peer)
        .ok_or_else(|| Error::Protocol(format!("the connection to rank {peer} was dropped")))
}

/// Takes in the peer's bulk window (key and ring size) once its reply has
/// landed; false while it has not. The reply is the peer's word: its key
/// may name neither its control window (we would write over its request
/// slots) nor its connection window (we would write over our own stream),
/// and its ring must fit in a window.
fn learn_bulk_window<
    W: LocalWindow,
    P: PeerWindow,
    R: ControlWindows<Window = W, PeerWindow = P>,
>(
    rma: &R,
    peer: Rank,
    conn: &mut Connection<W, P>,
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
    if key == control || conn.remote.as_ref().is_some_and(|r| *r.key() == key) {
        return Err(Error::Protocol(format!(
            "rank {peer} offered one of its other windows as its bulk window"
        )));
    }
    // As a put into it that is refused (see `write_bulk`): the peer lied.
    let window = rma.resolve_window(peer, &key).map_err(|e| {
        Error::Protocol(format!(
            "rank {peer} offered a bulk window that does not resolve: {e}"
        ))
    })?;
    conn.bulk_remote = Some((window, bulk_bytes));
    Ok(true)
}

/// Writes the frame `header` + `payload` at stream position `pos` of the
/// peer's ring of `ring_bytes` in its window `key` (the caller holds credit
/// for all of it): all but its stamp, which the signal of the last put
/// sets, so the frame is seen only once it has landed whole.
fn write_frame_now<R: Rma + ?Sized>(
    rma: &R,
    window: &R::PeerWindow,
    ring_bytes: usize,
    pos: u64,
    header: &[u8; FRAME_HEADER_BYTES],
    payload: &[u8],
) -> Result<()> {
    let at = RING_AT + ring_offset(pos, ring_bytes);
    let body = [&header[STAMP_BYTES..], payload];
    let len = FRAME_HEADER_BYTES - STAMP_BYTES + payload.len();
    let ring = (RING_AT, ring_bytes);
    let stamped = Last::Stamp(stamp_at(at, pos));
    write_span(
        rma,
        window,
        ring,
        pos + STAMP_BYTES as u64,
        body,
        len,
        stamped,
    )
}

/// The signal that stamps the frame at stream position `pos`, window
/// offset `at`, as landed (its stamp word is 0 until then).
fn stamp_at(at: usize, pos: u64) -> Signal {
    Signal {
        offset: at,
        add: stamp(pos),
    }
}

/// The ring bytes a frame of `len` payload bytes takes (a rendezvous
/// frame's payload is not in the ring: 0); `len` is at most a ring.
fn span_of(len: usize) -> u64 {
    frame_span(len as u64).expect("a frame's payload fits a ring")
}

/// What the last put of a [`write_span`] does besides its data.
enum Last {
    /// Adds to a signal word (the bulk stream's landed bytes).
    Signal(Signal),
    /// Stamps a frame (see [`Rma::put_stamp`]).
    Stamp(Signal),
}

/// Writes the first `len` bytes of `parts` (one byte string, in pieces) at
/// stream position `pos` of the peer's ring `(ring_at, ring_bytes)` in its
/// `window`, wrapping at the ring's end; the last put does `last`. `len`
/// is at most a ring.
fn write_span<R: Rma + ?Sized>(
    rma: &R,
    window: &R::PeerWindow,
    (ring_at, ring_bytes): (usize, usize),
    pos: u64,
    parts: [&[u8]; 2],
    len: usize,
    last_op: Last,
) -> Result<()> {
    debug_assert!(len > 0 && len <= ring_bytes);
    // (ring offset, bytes): the bytes wrap at most once, so each part gives
    // at most two pieces and both together at most three.
    let mut pieces: [(usize, &[u8]); 4] = [(0, &[]); 4];
    let mut count = 0;
    let mut at = ring_offset(pos, ring_bytes);
    let mut left = len;
    for part in parts {
        let mut bytes = &part[..part.len().min(left)];
        left -= bytes.len();
        while !bytes.is_empty() {
            let first = bytes.len().min(ring_bytes - at);
            pieces[count] = (at, &bytes[..first]);
            count += 1;
            bytes = &bytes[first..];
            at = if at + first == ring_bytes {
                0
            } else {
                at + first
            };
        }
        if left == 0 {
            break;
        }
    }
    let (last, rest) = pieces[..count]
        .split_last()
        .expect("at least one byte to write");
    let (target, key) = (window.target(), window.key());
    for (at, bytes) in rest {
        rma.put(target, key, ring_at + at, bytes)?;
    }
    let (at, bytes) = (ring_at + last.0, last.1);
    match last_op {
        Last::Signal(signal) => rma.put_signal(target, key, at, bytes, signal),
        Last::Stamp(stamp) => rma.put_stamp(window, at, (&[], bytes), stamp),
    }
}

/// Zeroes the `len` bytes at stream position `pos` of the ring
/// `(ring_at, ring_bytes)` of `window`; `len` is at most a ring.
fn zero_ring<W: LocalWindow>(
    window: &W,
    (ring_at, ring_bytes): (usize, usize),
    pos: u64,
    len: usize,
) -> Result<()> {
    static ZEROS: [u8; 4096] = [0; 4096];
    let mut at = ring_offset(pos, ring_bytes);
    let mut left = len;
    while left > 0 {
        let n = left.min(ring_bytes - at).min(ZEROS.len());
        window.write(ring_at + at, &ZEROS[..n])?;
        left -= n;
        at = if at + n == ring_bytes { 0 } else { at + n };
    }
    Ok(())
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

/// Reads the `buf.len()` bytes at stream position `pos` of the ring
/// `(ring_at, ring_bytes)` of `window` into `buf`.
fn read_ring<W: LocalWindow>(
    window: &W,
    (ring_at, ring_bytes): (usize, usize),
    pos: u64,
    buf: &mut [u8],
) -> Result<()> {
    let len = buf.len();
    let [(a_at, a_len), (b_at, _)] = ring_pieces(pos, len, ring_bytes)
        .ok_or_else(|| Error::Protocol(format!("a {len}-byte read exceeds the ring")))?;
    let (first, second) = buf.split_at_mut(a_len);
    window.read(ring_at + a_at, first)?;
    if !second.is_empty() {
        window.read(ring_at + b_at, second)?;
    }
    Ok(())
}

/// Makes room for `take` more payload bytes in `data`, a message of `len`
/// bytes, reserving at least `upfront` (at most `len`) on the first: then
/// capacity grows with what has landed (at least doubling, never past
/// `len`), so a lying length costs memory only as bytes land.
fn grow(data: &mut Vec<u8>, take: usize, len: usize, upfront: usize, peer: Rank) -> Result<()> {
    let need = data.len() + take;
    if need > data.capacity() {
        let want = need
            .max(data.capacity().saturating_mul(2))
            .max(upfront)
            .min(len);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The rendezvous bound as a closed form, against the frame-by-frame
    /// rule it replaces: from the threshold on, or where the frame would
    /// not fit the ring less an uncredited batch (fails with the bound one
    /// off either way).
    #[test]
    fn messages_go_by_rendezvous_where_their_frame_would_not_fit() {
        for ring in [64, 128, 192, 1024, 4096, 64 * 1000, 1 << 16] {
            let most = (ring - credit_batch(ring) as usize + FRAME_ALIGN) as u64;
            for threshold in [0, 1, 31, 32, 33, 100, 4000, 16 << 10, usize::MAX] {
                let bound = inline_below(ring, threshold);
                for len in (0..ring + 3 * FRAME_ALIGN).chain([usize::MAX - 40, usize::MAX]) {
                    let by_frame =
                        len >= threshold || frame_span(len as u64).is_none_or(|span| span > most);
                    assert_eq!(
                        len >= bound,
                        by_frame,
                        "ring {ring}, threshold {threshold}, len {len}"
                    );
                }
            }
        }
    }
}
