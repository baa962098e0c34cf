//! Tagged messages built only on puts, signals and compare-and-swap, so every
//! RMA provider gets them for free. Each pair of ranks that talks shares a
//! connection: on each side a window holding the ring the peer writes into.
//! Connections are made lazily on first contact by claiming a slot in the
//! peer's control window, so a rank that talks to k peers holds O(k) state.
//!
//! A connection carries a byte stream of frames (header + payload) with
//! credit-based flow control, so messages of any size pass through a fixed
//! ring, in order per sender. What a peer writes into our windows is
//! untrusted: a bad value breaks that peer's connection only.

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
/// How long a requester waits before retrying when all of a peer's request
/// slots are taken (many ranks contacting one at once).
const SLOT_RETRY: Duration = Duration::from_micros(100);

/// One rank's end of eager messaging: its control window, its connections
/// by peer and the messages received but not yet matched. A provider holds
/// one and hands it out through [`EagerMessaging`](crate::EagerMessaging).
pub struct Messenger<W> {
    control: W,
    ring_bytes: usize,
    /// Per connection: unreceived bytes past which its ring is not drained
    /// further (unless a receive waits on it), so its sender waits for credit.
    inbox_limit: u64,
    connections: RefCell<FxHashMap<Rank, Connection<W>>>,
    inbox: RefCell<VecDeque<Envelope>>,
    bell_seen: Cell<u64>,
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
    /// Incoming stream: bytes parsed, and bytes whose credit went back.
    consumed: u64,
    returned: u64,
    partial: Option<Envelope>,
    partial_len: usize,
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
    context: ContextId,
    message: Message,
}

impl<W: LocalWindow> Messenger<W> {
    /// `control` must be `CONTROL_WINDOW_BYTES` long and published to peers
    /// (the provider's `control_key`); `ring_bytes` is clamped to a frame
    /// header at least and a window's maximum at most. Holds at most
    /// [`DEFAULT_INBOX_BYTES`] of unreceived messages per peer (see
    /// [`Messenger::with_inbox_bytes`]).
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
            connections: RefCell::new(FxHashMap::default()),
            inbox: RefCell::new(VecDeque::new()),
            bell_seen: Cell::new(0),
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

    /// Sends a framed message to `target` over `rma`, connecting first if
    /// needed and waiting for ring credit until `deadline`; backs
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
        self.connect(rma, target, deadline).await?;
        let mut frame = Vec::with_capacity(FRAME_HEADER_BYTES + data.len());
        frame.extend_from_slice(&encode_header(data.len(), context, tag));
        frame.extend_from_slice(data);
        let start = {
            let mut conns = self.connections.borrow_mut();
            let conn = conns.get_mut(&target).expect("connected above");
            conn.check_intact(target)?;
            conn.reserved += frame.len() as u64;
            conn.reserved - frame.len() as u64
        };
        // From here on the stream has a hole until the frame is written: if
        // this send fails or is dropped, the connection is broken for good.
        let mut guard = BreakOnDrop {
            connections: &self.connections,
            target,
            armed: true,
        };
        self.write_frame(rma, target, start, &frame, deadline)
            .await?;
        guard.armed = false;
        Ok(())
    }

    /// Writes `frame` at stream position `start` as ring credit allows.
    async fn write_frame<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        target: Rank,
        start: u64,
        frame: &[u8],
        deadline: Time,
    ) -> Result<()> {
        let mut sent = 0usize;
        while sent < frame.len() {
            let pos = start + sent as u64;
            let (remote, room) = wait_until(rma, deadline, "ring credit from a receiver", || {
                let conns = self.connections.borrow();
                let conn = &conns[&target];
                conn.check_intact(target)?;
                // Earlier sends to this peer go first; then we need free ring bytes.
                if conn.written != pos {
                    return Ok(None);
                }
                let credit = conn.window.signal(CREDIT_SIGNAL)?;
                let in_flight = conn
                    .written
                    .checked_sub(credit)
                    .filter(|&f| f <= self.ring_bytes as u64)
                    .ok_or_else(|| {
                        Error::Protocol(format!("rank {target} returned credit never sent"))
                    })?;
                let room = self.ring_bytes as u64 - in_flight;
                Ok((room > 0).then(|| (conn.remote.clone().expect("connected"), room as usize)))
            })
            .await?;
            let chunk = room.min(frame.len() - sent);
            let [(a_at, a_len), (b_at, b_len)] = ring_pieces(pos, chunk, self.ring_bytes)
                .ok_or_else(|| Error::Protocol(format!("a {chunk}-byte chunk exceeds the ring")))?;
            let signal = Signal {
                offset: RING_SIGNAL,
                add: chunk as u64,
            };
            if b_len == 0 {
                rma.put_signal(
                    target,
                    &remote,
                    RING_AT + a_at,
                    &frame[sent..sent + a_len],
                    signal,
                )?;
            } else {
                rma.put(target, &remote, RING_AT + a_at, &frame[sent..sent + a_len])?;
                let b = &frame[sent + a_len..sent + a_len + b_len];
                rma.put_signal(target, &remote, RING_AT + b_at, b, signal)?;
            }
            self.connections
                .borrow_mut()
                .get_mut(&target)
                .expect("connected")
                .written += chunk as u64;
            sent += chunk;
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
        wait_until(rma, deadline, "a message", || {
            self.check_failure()?;
            if let Some(message) = self.take_match(rma, source, context, tag) {
                return Ok(Some(message));
            }
            // A receive that waits lifts the inbox bound of the connections
            // it could match on, so no bound can hide the message it wants.
            self.drain_waited_on(rma, source);
            if let Some(message) = self.take_match(rma, source, context, tag) {
                return Ok(Some(message));
            }
            if let Some(source) = source {
                // A dead peer is PeerGone, even if that broke its connection.
                rma.check_peer(source)?;
                if let Some(conn) = self.connections.borrow().get(&source) {
                    conn.check_sound(source)?;
                }
            }
            Ok(None)
        })
        .await
    }

    /// Removes the first inbox message matching (source, context, tag), and
    /// drains its sender's ring into the room it leaves at once: nothing
    /// else might make progress for a sender held back by the bound.
    fn take_match<R: ControlWindows<Window = W>>(
        &self,
        rma: &R,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
    ) -> Option<Message> {
        let message = {
            let mut inbox = self.inbox.borrow_mut();
            let i = inbox.iter().position(|e| {
                e.context == context
                    && e.message.tag == tag
                    && source.is_none_or(|s| s == e.message.source)
            })?;
            inbox.remove(i).expect("found above").message
        };
        let peer = message.source;
        if let Some(conn) = self.connections.borrow_mut().get_mut(&peer) {
            // Saturating: a connection forgotten on a failed first contact
            // and made again holds none of the old one's messages.
            conn.held = conn.held.saturating_sub(frame_bytes(message.data.len()));
            self.serve_or_break(rma, peer, conn, self.inbox_limit);
        }
        Some(message)
    }

    /// Serves, past the inbox bound, the connection with `source` (every
    /// connection if `None`) where the bound holds it back; progress, and
    /// each receive that makes room, serve the others.
    fn drain_waited_on<R: ControlWindows<Window = W>>(&self, rma: &R, source: Option<Rank>) {
        let mut conns = self.connections.borrow_mut();
        for (&peer, conn) in conns.iter_mut() {
            if source.is_none_or(|s| s == peer) && conn.held >= self.inbox_limit {
                self.serve_or_break(rma, peer, conn, u64::MAX);
            }
        }
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

    /// Takes in the peer's reply, drains its ring up to `limit` unreceived
    /// bytes and returns credit.
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
        self.drain(peer, conn, limit)?;
        let owed = conn.consumed - conn.returned;
        if owed >= (self.ring_bytes / 4) as u64 {
            if let Some(remote) = &conn.remote {
                let signal = Signal {
                    offset: CREDIT_SIGNAL,
                    add: owed,
                };
                rma.put_signal(peer, remote, CREDIT_SIGNAL, &[], signal)?;
                conn.returned = conn.consumed;
            }
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
            consumed: 0,
            returned: 0,
            partial: None,
            partial_len: 0,
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

    /// Moves every complete frame that has landed into the inbox, starting
    /// no new message once the connection holds `limit` unreceived bytes
    /// (and at least one message).
    /// The ring signal and frame headers are the peer's word: they are
    /// checked against the credit we gave before anything is read or
    /// allocated.
    fn drain(&self, peer: Rank, conn: &mut Connection<W>, limit: u64) -> Result<()> {
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
        while conn.consumed < landed {
            // At most a ring, checked above.
            let available = (landed - conn.consumed) as usize;
            match &mut conn.partial {
                None => {
                    // One unreceived message is always let in, so a send
                    // before a receive (an exchange) works under any bound.
                    if available < FRAME_HEADER_BYTES || (conn.held > 0 && conn.held >= limit) {
                        break;
                    }
                    let mut header = [0u8; FRAME_HEADER_BYTES];
                    self.read_ring(conn, &mut header)?;
                    let (len, context, tag) = decode_header(&header);
                    // A payload a Vec can hold; its memory is taken only as
                    // bytes land, so a lying length costs nothing up front.
                    conn.partial_len = usize::try_from(len)
                        .ok()
                        .filter(|&l| l <= isize::MAX as usize - FRAME_HEADER_BYTES)
                        .ok_or_else(|| {
                            Error::Protocol(format!("rank {peer} framed a {len}-byte message"))
                        })?;
                    conn.held += frame_bytes(0);
                    conn.partial = Some(Envelope {
                        context,
                        message: Message {
                            source: peer,
                            tag,
                            data: Vec::new(),
                        },
                    });
                }
                Some(envelope) => {
                    let mut data = std::mem::take(&mut envelope.message.data);
                    let old = data.len();
                    let take = (conn.partial_len - old).min(available);
                    data.try_reserve(take).map_err(|_| {
                        Error::Protocol(format!(
                            "no memory for {} bytes of a message from rank {peer}",
                            old + take
                        ))
                    })?;
                    data.resize(old + take, 0);
                    self.read_ring(conn, &mut data[old..])?;
                    conn.held += take as u64;
                    conn.partial.as_mut().expect("partial").message.data = data;
                }
            }
            if conn
                .partial
                .as_ref()
                .is_some_and(|e| e.message.data.len() == conn.partial_len)
            {
                self.inbox
                    .borrow_mut()
                    .push_back(conn.partial.take().expect("partial"));
            }
        }
        Ok(())
    }

    /// Copies the next `buf.len()` stream bytes out of the ring.
    fn read_ring(&self, conn: &mut Connection<W>, buf: &mut [u8]) -> Result<()> {
        let [(a_at, a_len), (b_at, b_len)] = ring_pieces(conn.consumed, buf.len(), self.ring_bytes)
            .ok_or_else(|| {
                Error::Protocol(format!("a {}-byte read exceeds the ring", buf.len()))
            })?;
        conn.window.read(RING_AT + a_at, &mut buf[..a_len])?;
        conn.window
            .read(RING_AT + b_at, &mut buf[a_len..a_len + b_len])?;
        conn.consumed += buf.len() as u64;
        Ok(())
    }

    fn check_failure(&self) -> Result<()> {
        match &*self.failure.borrow() {
            Some(why) => Err(Error::Protocol(why.clone())),
            None => Ok(()),
        }
    }
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
    RemoteKey::from_bytes(&key)
}
