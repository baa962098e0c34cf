//! The provider conformance suite: multi-rank checks that every provider must
//! pass unchanged (shm, ofi, ucx, and the simulator). Each check is an async
//! fn over `T: Transport`, run by every rank of a job; it returns an error
//! naming the first thing that went wrong.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use catena_fabric::{
    wait_until, ContextId, ControlWindows, Error, LocalWindow, Rank, RemoteKey, Result, Signal,
    Time, Transport,
};

const TIMEOUT: Duration = Duration::from_secs(120);
const CTX: ContextId = 0xC0_F0;
const TAG_KEY: u32 = 1;
const TAG_ACK: u32 = 2;
const TAG_BARRIER: u32 = 3;
const TAG_PAST_BARRIER: u32 = 4;

/// The sizes every provider must put byte-exactly.
pub const PUT_SIZES: [usize; 6] = [0, 1, 8, 4096, 1 << 20, 64 << 20];

fn fail(what: impl Into<String>) -> Error {
    Error::Protocol(format!("conformance: {}", what.into()))
}

fn deadline<T: Transport>(t: &T) -> Time {
    t.deadline_in(TIMEOUT)
}

fn right<T: Transport>(t: &T) -> Rank {
    (t.rank() + 1) % t.size()
}

fn left<T: Transport>(t: &T) -> Rank {
    (t.rank() + t.size() - 1) % t.size()
}

/// Deterministic bytes that differ per (rank, round) and per position.
pub fn pattern(rank: Rank, round: usize, len: usize) -> Vec<u8> {
    let seed = (u64::from(rank) << 32 | round as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    let mut x = seed;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// A dissemination barrier over tagged messages.
pub async fn barrier<T: Transport>(t: &T) -> Result<()> {
    let (rank, size) = (t.rank(), t.size());
    let mut dist = 1;
    while dist < size {
        t.send((rank + dist) % size, CTX, TAG_BARRIER, &[], deadline(t))
            .await?;
        t.recv(
            Some((rank + size - dist) % size),
            CTX,
            TAG_BARRIER,
            deadline(t),
        )
        .await?;
        dist *= 2;
    }
    Ok(())
}

/// Gives `window`'s key to the left neighbour and returns the right one's.
async fn swap_keys_with_neighbours<T: Transport>(t: &T, window: &T::Window) -> Result<RemoteKey> {
    t.send(left(t), CTX, TAG_KEY, window.key().as_bytes(), deadline(t))
        .await?;
    RemoteKey::from_bytes(
        &t.recv(Some(right(t)), CTX, TAG_KEY, deadline(t))
            .await?
            .data,
    )
}

/// Each rank puts every size of `PUT_SIZES` into its right neighbour's window
/// with a signal, or a stamp every other round, onto a word the receiver
/// zeroed; the receiver checks every byte.
pub async fn put_sizes<T: Transport>(t: &T) -> Result<()> {
    let max = *PUT_SIZES.iter().max().expect("sizes");
    let window = t.alloc_window(8 + max)?;
    let target = swap_keys_with_neighbours(t, &window).await?;
    let mut got = vec![0u8; max];
    for (round, &size) in PUT_SIZES.iter().enumerate() {
        let data = pattern(t.rank(), round, size);
        let mark = Signal {
            offset: 0,
            add: round as u64 + 1,
        };
        match round % 2 {
            0 => t.put_signal(right(t), &target, 8, &data, mark)?,
            // In two pieces, split differently each time.
            _ => {
                let (head, tail) = data.split_at(round % (size + 1));
                t.put_stamp(&t.resolve_window(right(t), &target)?, 8, (head, tail), mark)?
            }
        }
        t.wait_signal(&window, 0, round as u64 + 1, deadline(t))
            .await?;
        if window.signal(0)? != round as u64 + 1 {
            return Err(fail(format!(
                "a stamp or signal of round {round} added up wrong"
            )));
        }
        window.set_signal(0, 0)?;
        window.read(8, &mut got[..size])?;
        if got[..size] != pattern(left(t), round, size)[..] {
            return Err(fail(format!(
                "a put of {size} bytes from rank {} landed corrupted",
                left(t)
            )));
        }
        // The next round may overwrite only what was checked.
        t.send(left(t), CTX, TAG_ACK, &[], deadline(t)).await?;
        t.recv(Some(right(t)), CTX, TAG_ACK, deadline(t)).await?;
    }
    Ok(())
}

/// 1024 plain puts to distinct places, then a flush and one signal: all of
/// them must be visible once the signal is.
pub async fn many_puts_in_flight<T: Transport>(t: &T) -> Result<()> {
    const PUTS: usize = 1024;
    const BYTES: usize = 64;
    let window = t.alloc_window(8 + PUTS * BYTES)?;
    let target = swap_keys_with_neighbours(t, &window).await?;
    let data = pattern(t.rank(), 7, PUTS * BYTES);
    // Issue in a scrambled order so that no provider gets away with in-order luck.
    for i in 0..PUTS {
        let slot = (i * 389) % PUTS;
        t.put(
            right(t),
            &target,
            8 + slot * BYTES,
            &data[slot * BYTES..(slot + 1) * BYTES],
        )?;
    }
    t.flush(right(t), deadline(t)).await?;
    t.put_signal(right(t), &target, 0, &[], Signal { offset: 0, add: 1 })?;
    t.wait_signal(&window, 0, 1, deadline(t)).await?;
    let mut got = vec![0u8; PUTS * BYTES];
    window.read(8, &mut got)?;
    if got != pattern(left(t), 7, PUTS * BYTES) {
        return Err(fail(
            "puts issued before a flush and a signal were not all visible",
        ));
    }
    Ok(())
}

/// Signals from every rank add up at rank 0; fetch-and-add hands out unique
/// tickets; exactly one compare-and-swap wins.
pub async fn signals_and_atomics<T: Transport>(t: &T) -> Result<()> {
    const ROUNDS: u64 = 10;
    let (rank, size) = (t.rank(), t.size());
    let window = t.alloc_window(64)?;
    let root_key = if rank == 0 {
        for peer in 1..size {
            t.send(peer, CTX, TAG_KEY, window.key().as_bytes(), deadline(t))
                .await?;
        }
        window.key()
    } else {
        RemoteKey::from_bytes(&t.recv(Some(0), CTX, TAG_KEY, deadline(t)).await?.data)?
    };
    for _ in 0..ROUNDS {
        t.put_signal(
            0,
            &root_key,
            0,
            &[],
            Signal {
                offset: 0,
                add: u64::from(rank) + 1,
            },
        )?;
    }
    let mut last = None;
    for _ in 0..100 {
        let ticket = t.fetch_add(0, &root_key, 8, 1, deadline(t)).await?;
        if last.is_some_and(|l| ticket <= l) {
            return Err(fail(format!("fetch_add returned {ticket} after {last:?}")));
        }
        last = Some(ticket);
    }
    let old = t
        .compare_swap(0, &root_key, 16, 0, u64::from(rank) + 1, deadline(t))
        .await?;
    let won = u8::from(old == 0);
    t.send(0, CTX, TAG_ACK, &[won], deadline(t)).await?;
    if rank == 0 {
        let sum = ROUNDS * u64::from(size) * (u64::from(size) + 1) / 2;
        t.wait_signal(&window, 0, sum, deadline(t)).await?;
        t.wait_signal(&window, 8, 100 * u64::from(size), deadline(t))
            .await?;
        let (signals, tickets) = (window.signal(0)?, window.signal(8)?);
        if signals != sum || tickets != 100 * u64::from(size) {
            return Err(fail(format!(
                "signals {signals} (want {sum}), tickets {tickets}"
            )));
        }
        let mut winners = 0;
        for peer in 0..size {
            let m = t.recv(Some(peer), CTX, TAG_ACK, deadline(t)).await?;
            winners += m
                .data
                .first()
                .ok_or_else(|| fail(format!("empty verdict from rank {peer}")))?;
        }
        let winner = window.signal(16)?;
        if winners != 1 || winner == 0 || winner > u64::from(size) {
            return Err(fail(format!(
                "{winners} compare-and-swaps won, word holds {winner}"
            )));
        }
    }
    barrier(t).await
}

fn message_body(source: Rank, context: ContextId, tag: u32, seq: usize) -> Vec<u8> {
    let mut body = format!("{source}/{context}/{tag}/{seq}/").into_bytes();
    body.extend(pattern(
        source,
        seq * 31 + tag as usize,
        (seq * 97 + tag as usize * 13) % 300,
    ));
    body
}

/// Many senders to one receiver: tags sent in one order and received in
/// another, in order per (sender, tag), two contexts kept apart, a message
/// larger than any ring, and any-source receives.
pub async fn tagged_messages<T: Transport>(t: &T) -> Result<()> {
    const SEQ: usize = 5;
    const BIG: usize = 1 << 20;
    let (rank, size) = (t.rank(), t.size());
    let contexts = [CTX + 1, CTX + 2];
    if rank != 0 {
        for context in contexts {
            for tag in [13, 11, 12] {
                for seq in 0..SEQ {
                    t.send(
                        0,
                        context,
                        tag,
                        &message_body(rank, context, tag, seq),
                        deadline(t),
                    )
                    .await?;
                }
            }
        }
        t.send(0, CTX, 20, &pattern(rank, 99, BIG), deadline(t))
            .await?;
        t.send(0, CTX, 21, &rank.to_le_bytes(), deadline(t)).await?;
    } else {
        for source in (1..size).rev() {
            for context in contexts.iter().rev() {
                for tag in [11, 12, 13] {
                    for seq in 0..SEQ {
                        let m = t.recv(Some(source), *context, tag, deadline(t)).await?;
                        if m.source != source
                            || m.tag != tag
                            || m.data != message_body(source, *context, tag, seq)
                        {
                            return Err(fail(format!(
                                "message {seq} of tag {tag} in context {context} from rank {source} is wrong"
                            )));
                        }
                    }
                }
            }
            if t.recv(Some(source), CTX, 20, deadline(t)).await?.data != pattern(source, 99, BIG) {
                return Err(fail(format!(
                    "the {BIG}-byte message from rank {source} is corrupted"
                )));
            }
        }
        let mut seen = vec![false; size as usize];
        for _ in 1..size {
            let m = t.recv(None, CTX, 21, deadline(t)).await?;
            let claimed =
                u32::from_le_bytes(*m.data.first_chunk().ok_or_else(|| fail("short message"))?);
            if claimed != m.source || std::mem::replace(&mut seen[m.source as usize], true) {
                return Err(fail(format!(
                    "any-source receive got rank {claimed} as rank {}",
                    m.source
                )));
            }
        }
    }
    barrier(t).await
}

/// Every rank contacts every other rank at once (simultaneous first
/// contact in both directions), twice.
pub async fn all_pairs<T: Transport>(t: &T) -> Result<()> {
    let (rank, size) = (t.rank(), t.size());
    for round in 0..2 {
        for peer in (0..size).filter(|&p| p != rank) {
            t.send(
                peer,
                CTX,
                30 + round,
                &pattern(rank, peer as usize, 40),
                deadline(t),
            )
            .await?;
        }
        for peer in (0..size).filter(|&p| p != rank) {
            if t.recv(Some(peer), CTX, 30 + round, deadline(t)).await?.data
                != pattern(peer, rank as usize, 40)
            {
                return Err(fail(format!(
                    "message from rank {peer} in round {round} is wrong"
                )));
            }
        }
    }
    barrier(t).await
}

/// First contact that times out (rank 1's request slots are all held) must
/// leave no trace: once the slots are free, the next send connects.
pub async fn first_contact_retry<T: Transport + ControlWindows>(t: &T) -> Result<()> {
    use catena_fabric::eager::wire::{slot_at, SLOT_CLAIMED, SLOT_COUNT, SLOT_FREE};
    const TAG_DONE: u32 = 50;
    let message = pattern(0, 50, 100);
    match t.rank() {
        0 => {
            let control = t.control_key(1)?;
            for slot in 0..SLOT_COUNT {
                let at = slot_at(slot);
                if t.compare_swap(1, &control, at, SLOT_FREE, SLOT_CLAIMED, deadline(t))
                    .await?
                    != SLOT_FREE
                {
                    return Err(fail(format!("request slot {slot} of rank 1 was taken")));
                }
            }
            let short = t.deadline_in(Duration::from_millis(20));
            expect_err(
                "send while every request slot is held",
                t.send(1, CTX, TAG_DONE, &message, short).await,
                |e| matches!(e, Error::Timeout { .. }),
            )?;
            for slot in 0..SLOT_COUNT {
                t.compare_swap(
                    1,
                    &control,
                    slot_at(slot),
                    SLOT_CLAIMED,
                    SLOT_FREE,
                    deadline(t),
                )
                .await?;
            }
            t.send(1, CTX, TAG_DONE, &message, deadline(t)).await?;
            for rank in 2..t.size() {
                t.send(rank, CTX, TAG_DONE, &[], deadline(t)).await?;
            }
        }
        1 => {
            if t.recv(Some(0), CTX, TAG_DONE, deadline(t)).await?.data != message {
                return Err(fail("the message after a failed first contact is wrong"));
            }
        }
        _ => {
            // Keep out of rank 1's slots until rank 0 is done with them.
            t.recv(Some(0), CTX, TAG_DONE, deadline(t)).await?;
        }
    }
    barrier(t).await
}

/// A send dropped half-way leaves a hole in the stream to its target: later
/// sends there must fail at once with `Protocol`, not wait for their deadline.
pub async fn dropped_send_breaks_the_stream<T: Transport>(t: &T) -> Result<()> {
    const TAG: u32 = 60;
    match t.rank() {
        0 => {
            // Made before the handshake: rank 1's nap must outlast everything
            // between the handshake and the first poll, even on a loaded host.
            let big = pattern(0, 60, 16 << 20);
            t.send(1, CTX, TAG, b"hello", deadline(t)).await?;
            t.recv(Some(1), CTX, TAG, deadline(t)).await?;
            // Rank 1 now sleeps without making progress, so no credit comes back.
            {
                let mut send = std::pin::pin!(t.send(1, CTX, TAG, &big, deadline(t)));
                let first_poll =
                    std::future::poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
                if first_poll.is_ready() {
                    return Err(fail("16 MiB went into a sleeping rank's ring in one poll"));
                }
            }
            let started = t.now();
            let next = t.send(1, CTX, TAG, b"after", deadline(t)).await;
            expect_err("send after a dropped send", next, |e| {
                matches!(e, Error::Protocol(_))
            })?;
            if t.now().saturating_sub(started) > Duration::from_secs(1) {
                return Err(fail("the send after a dropped send waited"));
            }
        }
        1 => {
            t.recv(Some(0), CTX, TAG, deadline(t)).await?;
            t.send(0, CTX, TAG, b"hello", deadline(t)).await?;
            // Long enough that rank 0, descheduled on a loaded CI host, still
            // polls its big send before this rank's finalize drains the ring.
            std::thread::sleep(Duration::from_secs(2));
        }
        _ => {}
    }
    Ok(())
}

/// Receives into buffers between ranks 0 and 1, of every way a message
/// travels (inline, resident in the bulk ring, streamed: posted before the
/// send and after), checked byte for byte with the buffer's tail untouched;
/// a message longer than its buffer is `Truncated` and taken; a receive
/// dropped while a streamed payload lands leaves the next message whole.
pub async fn receive_into_buffers<T: Transport>(t: &T) -> Result<()> {
    const TAG: u32 = 70;
    const READY: u32 = 71;
    const DROPPED: u32 = 72;
    // Inline, resident (a quarter of the default bulk ring at most) and
    // streamed sizes.
    const SIZES: [usize; 5] = [0, 8, 5000, 64 << 10, 3 << 20];
    const BIG: usize = 3 << 20;
    // Longer than a nap takes to land: dropped half-way.
    const HUGE: usize = 32 << 20;
    const NAP: Duration = Duration::from_micros(100);
    match t.rank() {
        0 => {
            // Made first: it goes the moment rank 1 is ready.
            let huge = pattern(0, 30, HUGE);
            for (round, &len) in SIZES.iter().enumerate() {
                t.send(1, CTX, TAG, &pattern(0, round, len), deadline(t))
                    .await?;
            }
            // Streamed into a receive posted first.
            t.recv(Some(1), CTX, READY, deadline(t)).await?;
            t.send(1, CTX, TAG, &pattern(0, 10, BIG), deadline(t))
                .await?;
            // Too long for their buffers, each followed by a small one.
            for (round, len) in [(11, 64 << 10), (12, BIG)] {
                t.send(1, CTX, TAG, &pattern(0, round, len), deadline(t))
                    .await?;
                t.send(1, CTX, TAG, &pattern(0, round + 10, 8), deadline(t))
                    .await?;
            }
            // Into a receive dropped as it lands, then one that must arrive whole.
            t.recv(Some(1), CTX, READY, deadline(t)).await?;
            t.send(1, CTX, DROPPED, &huge, deadline(t)).await?;
            t.send(1, CTX, TAG, &pattern(0, 31, 5000), deadline(t))
                .await?;
        }
        1 => {
            let mut buf = vec![0xEEu8; HUGE + 100];
            let check = |buf: &[u8], got: catena_fabric::Received, round: usize, len: usize| {
                let whole = got.source == 0 && got.tag == TAG && got.len == len;
                if !whole
                    || buf[..len] != pattern(0, round, len)
                    || buf[len..].iter().any(|&b| b != 0xEE)
                {
                    return Err(fail(format!(
                        "the {len}-byte message of round {round} received into a buffer is wrong: {got:?}"
                    )));
                }
                Ok(())
            };
            for (round, &len) in SIZES.iter().enumerate() {
                buf.fill(0xEE);
                // Any source for one of them.
                let source = (round != 2).then_some(0);
                let got = t.recv_into(source, CTX, TAG, &mut buf, deadline(t)).await?;
                check(&buf, got, round, len)?;
            }
            buf.fill(0xEE);
            let posted = t.recv_into(Some(0), CTX, TAG, &mut buf, deadline(t));
            let ready = t.send(0, CTX, READY, &[], deadline(t));
            let (got, ready) = join(posted, ready).await;
            ready?;
            check(&buf, got?, 10, BIG)?;
            for (round, len) in [(11, 64 << 10), (12, BIG)] {
                let mut short = vec![0u8; len - 1];
                let got = t
                    .recv_into(Some(0), CTX, TAG, &mut short, deadline(t))
                    .await;
                expect_err(
                    "a receive into a short buffer",
                    got,
                    |e| matches!(e, Error::Truncated { from: 0, len: l, room } if *l == len && *room == len - 1),
                )?;
                buf.fill(0xEE);
                let got = t
                    .recv_into(Some(0), CTX, TAG, &mut buf, deadline(t))
                    .await?;
                check(&buf, got, round + 10, 8)?;
            }
            // Dropped after a nap, most likely with its payload half in (if
            // not, the message waits in the stream, or it came in whole).
            t.send(0, CTX, READY, &[], deadline(t)).await?;
            let dropped = t.recv_into(Some(0), CTX, DROPPED, &mut buf, deadline(t));
            let nap = wait_until(t, t.deadline_in(NAP), "a nap", || Ok(None::<()>));
            if let Some(got) = first_of(dropped, nap).await {
                got?;
            }
            buf.fill(0xEE);
            let got = t
                .recv_into(Some(0), CTX, TAG, &mut buf, deadline(t))
                .await?;
            check(&buf, got, 31, 5000)?;
        }
        _ => {}
    }
    barrier(t).await
}

/// Polls both futures until `a` is done (its output) or `b` is (`None`).
async fn first_of<A: Future, B: Future>(a: A, b: B) -> Option<A::Output> {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    std::future::poll_fn(|cx| match a.as_mut().poll(cx) {
        Poll::Ready(v) => Poll::Ready(Some(v)),
        Poll::Pending => b.as_mut().poll(cx).map(|_| None),
    })
    .await
}

/// Polls both futures until both are done.
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (std::pin::pin!(a), std::pin::pin!(b));
    let (mut x, mut y) = (None, None);
    std::future::poll_fn(|cx| {
        if x.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                x = Some(v);
            }
        }
        if y.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                y = Some(v);
            }
        }
        match x.is_some() && y.is_some() {
            true => Poll::Ready((x.take().expect("done"), y.take().expect("done"))),
            false => Poll::Pending,
        }
    })
    .await
}

fn expect_err<V: std::fmt::Debug>(
    what: &str,
    got: Result<V>,
    want: impl Fn(&Error) -> bool,
) -> Result<()> {
    match got {
        Err(e) if want(&e) => Ok(()),
        other => Err(fail(format!("{what}: got {other:?}"))),
    }
}

/// Host memory: every rank writes a pattern and stores a flag into a region
/// of each of its host peers' arenas (and its own), then waits for its own
/// flags and reads what landed; bad offsets and ranks fail with the right
/// error and write nothing. Then every rank offers a buffer of its own and
/// its host peers copy a slice of it out byte-exactly (or are told they
/// cannot); a handle never offered, or an offset past any address, is
/// refused, never read.
pub async fn host_memory<T: Transport>(t: &T) -> Result<()> {
    const TAG_REGION: u32 = 5;
    const SLOT: u64 = 128;
    const DATA: usize = 112;
    let peers = t.host_ranks().to_vec();
    let me = peers.iter().position(|&r| r == t.rank()).ok_or_else(|| {
        fail(format!(
            "rank {} is not among its host's ranks {peers:?}",
            t.rank()
        ))
    })?;
    let region = t.host_alloc(64 + SLOT as usize * peers.len(), 0)?;
    if t.host_load(&t.host_peer(t.rank())?, region.at)? != 1 {
        return Err(fail("a new region's users count is not 1"));
    }
    for &p in peers.iter().filter(|&&p| p != t.rank()) {
        t.send(p, CTX, TAG_REGION, &region.at.to_le_bytes(), deadline(t))
            .await?;
    }
    for (i, &p) in peers.iter().enumerate() {
        let at = match p == t.rank() {
            true => region.at,
            false => {
                let got = t.recv(Some(p), CTX, TAG_REGION, deadline(t)).await?.data;
                u64::from_le_bytes(got.try_into().map_err(|_| fail("a region offset"))?)
            }
        };
        let peer = t.host_peer(p)?;
        let slot = at + 64 + SLOT * me as u64;
        t.host_write(&peer, slot, &pattern(t.rank(), i, DATA))?;
        t.host_store(&peer, slot + DATA as u64, u64::from(t.rank()) + 1)?;
    }
    let own = t.host_peer(t.rank())?;
    for (i, &p) in peers.iter().enumerate() {
        let slot = region.at + 64 + SLOT * i as u64;
        let flag = catena_fabric::wait_until(t, deadline(t), "a host store", || {
            Ok(Some(t.host_load(&own, slot + DATA as u64)?).filter(|&v| v != 0))
        })
        .await?;
        let mut got = vec![0; DATA];
        t.host_read(&own, slot, &mut got)?;
        if flag != u64::from(p) + 1 || got != pattern(p, me, DATA) {
            return Err(fail(format!("host memory from rank {p}: flag {flag}")));
        }
    }
    t.host_set(&own, region.at + 8, 0xC0FFEE)?;
    if t.host_load(&own, region.at + 8)? != 0xC0FFEE {
        return Err(fail("a word set in host memory reads back otherwise"));
    }
    let oob = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    expect_err(
        "a host write at a huge offset",
        t.host_write(&own, u64::MAX - 2, &[1; 4]),
        oob,
    )?;
    expect_err(
        "a host read at a huge offset",
        t.host_read(&own, u64::MAX - 8, &mut [0; 64]),
        oob,
    )?;
    expect_err("a host load at a huge offset", t.host_load(&own, !7), oob)?;
    let misaligned = |e: &Error| matches!(e, Error::Misaligned { .. });
    expect_err(
        "a misaligned host store",
        t.host_store(&own, region.at + 4, 1),
        misaligned,
    )?;
    let invalid = |e: &Error| matches!(e, Error::InvalidRank { .. });
    expect_err(
        "host memory of a rank past the end",
        t.host_peer(t.size()).map(drop),
        invalid,
    )?;
    if let Some(away) = (0..t.size()).find(|r| !peers.contains(r)) {
        let elsewhere = |e: &Error| matches!(e, Error::NotOnHost { .. });
        expect_err(
            "host memory of another host",
            t.host_peer(away).map(drop),
            elsewhere,
        )?;
    }
    const TAG_OFFER: u32 = 6;
    let offered = pattern(t.rank(), 99, 4096);
    let offer = t.host_offer(&offered);
    for &p in peers.iter().filter(|&&p| p != t.rank()) {
        let handle = offer.map_or(Vec::new(), |h| h.to_le_bytes().to_vec());
        t.send(p, CTX, TAG_OFFER, &handle, deadline(t)).await?;
    }
    let mut offers = Vec::new();
    for &p in peers.iter().filter(|&&p| p != t.rank()) {
        let got = t.recv(Some(p), CTX, TAG_OFFER, deadline(t)).await?.data;
        let Ok(handle) = <[u8; 8]>::try_from(got) else {
            continue;
        };
        let (handle, peer) = (u64::from_le_bytes(handle), t.host_peer(p)?);
        offers.push((p, handle));
        let mut slice = vec![0; 1000];
        if t.host_copy_from(&peer, handle, 17, &mut slice)?
            && slice != pattern(p, 99, 4096)[17..1017]
        {
            return Err(fail(format!(
                "a single copy from rank {p} is not what it offered"
            )));
        }
        for (forged, at) in [(u64::MAX - 4096, 0), (handle, u64::MAX - 8)] {
            if let Ok(true) = t.host_copy_from(&peer, forged, at, &mut slice) {
                return Err(fail(format!(
                    "a single copy from rank {p} at {forged:#x} + {at} read something"
                )));
            }
        }
    }
    // Every peer is done with this rank's region (and offer) once it
    // passed the barrier; its count goes to zero and the allocator may
    // reuse it.
    barrier(t).await?;
    if let Some(handle) = offer {
        t.host_withdraw(handle);
    }
    // A withdrawn offer is not copied from, though its memory still holds
    // the same bytes (each rank keeps them until every peer has looked).
    barrier(t).await?;
    for (p, handle) in offers {
        let mut slice = vec![0; 1000];
        if let Ok(true) = t.host_copy_from(&t.host_peer(p)?, handle, 17, &mut slice) {
            return Err(fail(format!(
                "a single copy from rank {p}'s withdrawn offer read something"
            )));
        }
    }
    barrier(t).await?;
    t.host_add(&own, region.at, u64::MAX)?;
    t.host_release(region);
    Ok(())
}

/// Bad puts fail at the origin with the right error and write nothing.
pub async fn bad_input<T: Transport>(t: &T) -> Result<()> {
    let size = t.size();
    let window = t.alloc_window(64)?;
    let target = swap_keys_with_neighbours(t, &window).await?;
    let r = right(t);
    let oob = |e: &Error| matches!(e, Error::OutOfBounds { .. });
    expect_err("put past the end", t.put(r, &target, 60, &[1; 8]), oob)?;
    expect_err(
        "put at a huge offset",
        t.put(r, &target, usize::MAX - 2, &[1; 4]),
        oob,
    )?;
    let past = Signal { offset: 64, add: 1 };
    expect_err(
        "signal word past the end",
        t.put_signal(r, &target, 0, &[1; 8], past),
        oob,
    )?;
    let crooked = Signal { offset: 3, add: 1 };
    let misaligned = |e: &Error| matches!(e, Error::Misaligned { .. });
    expect_err(
        "misaligned signal word",
        t.put_signal(r, &target, 0, &[1; 8], crooked),
        misaligned,
    )?;
    expect_err(
        "misaligned atomic",
        t.fetch_add(r, &target, 4, 1, deadline(t)).await,
        misaligned,
    )?;
    let invalid = |e: &Error| matches!(e, Error::InvalidRank { .. });
    expect_err(
        "put to a rank past the end",
        t.put(size, &target, 0, &[1]),
        invalid,
    )?;
    expect_err(
        "send to a rank past the end",
        t.send(size + 7, CTX, 1, &[1], deadline(t)).await,
        invalid,
    )?;
    expect_err(
        "recv from a rank past the end",
        t.recv(Some(size), CTX, 1, deadline(t)).await,
        invalid,
    )?;
    expect_err(
        "a window of a rank past the end resolved",
        t.resolve_window(size, &target).map(drop),
        invalid,
    )?;
    // Stamped puts through a resolved window are checked as puts are, the
    // stamp word and both pieces together.
    let resolved = t.resolve_window(r, &target)?;
    let stamp = |offset| Signal { offset, add: 1 };
    let pieces: (&[u8], &[u8]) = (&[1; 24], &[2; 8]);
    expect_err(
        "stamped put past the end",
        t.put_stamp(&resolved, 40, pieces, stamp(0)),
        oob,
    )?;
    expect_err(
        "stamped put whose second piece passes the end",
        t.put_stamp(&resolved, 8, (&[1; 24], &[2; 40]), stamp(0)),
        oob,
    )?;
    expect_err(
        "stamp word past the end",
        t.put_stamp(&resolved, 8, pieces, stamp(64)),
        oob,
    )?;
    expect_err(
        "misaligned stamp word",
        t.put_stamp(&resolved, 8, pieces, stamp(4)),
        misaligned,
    )?;
    let too_large = |e: &Error| matches!(e, Error::WindowTooLarge { .. });
    for len in [catena_fabric::bounds::MAX_WINDOW_BYTES + 1, usize::MAX] {
        let made = t.alloc_window(len).map(drop);
        expect_err("a window near usize::MAX", made, too_large)?;
    }
    let garbage = RemoteKey::from_bytes(b"not a key")?;
    let bad_key = |e: &Error| matches!(e, Error::InvalidKey(_));
    expect_err(
        "put with a garbage key",
        t.put(r, &garbage, 0, &[1]),
        bad_key,
    )?;
    // Every rank's window has the same shape; only the owner in the key tells
    // them apart, and a key sent to the wrong rank must not write anywhere.
    let misdirected = t.put(r, &window.key(), 0, &[1; 8]);
    expect_err("put with another rank's key", misdirected, bad_key)?;
    expect_err(
        "a key longer than allowed",
        RemoteKey::from_bytes(&[0; 1000]),
        bad_key,
    )?;

    let started = t.now();
    let timeout = t
        .recv(
            Some(r),
            CTX + 9,
            1,
            t.deadline_in(Duration::from_millis(50)),
        )
        .await;
    expect_err("recv of a message never sent", timeout, |e| {
        matches!(e, Error::Timeout { .. })
    })?;
    let waited = t.now().saturating_sub(started);
    if waited < Duration::from_millis(50) || waited > Duration::from_secs(10) {
        return Err(fail(format!("a 50 ms deadline returned after {waited:?}")));
    }

    barrier(t).await?;
    let mut mine = [0u8; 64];
    window.read(0, &mut mine)?;
    if mine != [0; 64] {
        return Err(fail("a failed put wrote into the target window"));
    }
    barrier(t).await
}

/// Where a provider's key keeps the window length and the remote base, as
/// (tag byte, key length) -> (length at, base at), for the forgeries of
/// [`forged_keys`]. Keys of other layouts get only the flipped bytes.
fn key_fields(key: &[u8]) -> Option<(usize, Option<usize>)> {
    match (key.first()?, key.len()) {
        (b'O' | b'U', _) => Some((9, Some(17))),
        (b'S', 17) => Some((9, None)),
        (b'S', 25) => Some((13, None)),
        _ => None,
    }
}

/// Keys that were corrupted or forged, by one flipped byte anywhere, a
/// larger length or a shifted base, are refused at the origin (`InvalidKey`;
/// `WindowFreed` where the change names a window that does not exist, on
/// providers whose keys carry no tag) and write nothing: not into the
/// window, nor into the windows made beside it.
pub async fn forged_keys<T: Transport>(t: &T) -> Result<()> {
    const LEN: usize = 4096;
    let before = t.alloc_window(LEN)?;
    let window = t.alloc_window(LEN)?;
    let after = t.alloc_window(LEN)?;
    let target = swap_keys_with_neighbours(t, &window).await?;
    let r = right(t);
    let refused = |e: &Error| matches!(e, Error::InvalidKey(_) | Error::WindowFreed { .. });
    let real = target.as_bytes();
    for at in 0..real.len() {
        let mut bytes = real.to_vec();
        bytes[at] ^= 0xFF;
        let forged = RemoteKey::from_bytes(&bytes)?;
        let what = format!("put with byte {at} of the key flipped");
        expect_err(&what, t.put(r, &forged, 0, &[0xAB; 8]), refused)?;
        let what = format!("fetch_add with byte {at} of the key flipped");
        expect_err(
            &what,
            t.fetch_add(r, &forged, 0, 1, deadline(t)).await,
            refused,
        )?;
    }
    if let Some((len_at, base_at)) = key_fields(real) {
        let mut longer = real.to_vec();
        longer[len_at..len_at + 8].copy_from_slice(&(2 * LEN as u64).to_le_bytes());
        let longer = RemoteKey::from_bytes(&longer)?;
        expect_err(
            "put past the end through a key claiming a longer window",
            t.put(r, &longer, LEN, &[0xAB; 8]),
            refused,
        )?;
        if let Some(base_at) = base_at {
            let mut shifted = real.to_vec();
            let base = u64::from_le_bytes(real[base_at..base_at + 8].try_into().expect("8"));
            shifted[base_at..base_at + 8].copy_from_slice(&(base + 8).to_le_bytes());
            let shifted = RemoteKey::from_bytes(&shifted)?;
            expect_err(
                "put through a key with a shifted base",
                t.put(r, &shifted, LEN - 8, &[0xAB; 8]),
                refused,
            )?;
        }
    }
    barrier(t).await?;
    let mut mine = vec![0u8; LEN];
    for (name, w) in [
        ("window", &window),
        ("window before", &before),
        ("window after", &after),
    ] {
        w.read(0, &mut mine)?;
        if mine.iter().any(|&b| b != 0) {
            return Err(fail(format!("a forged key wrote into the {name}")));
        }
    }
    barrier(t).await
}

/// A freed window's key (a stale key) writes nothing, whatever the owner
/// allocates after it (new windows of the same size, likely at the same
/// address, after 100 more allocated and freed): every put, put_signal,
/// atomic and flush through it ends by its deadline with `WindowFreed`, or
/// with `Ok` where the provider keeps freed windows as tombstones
/// (docs/providers.md, "Keys": ofi and UCX, where the operation acts on the
/// pages of a window still in quarantine). The new windows stay zero and
/// the transport keeps working.
pub async fn stale_keys<T: Transport>(t: &T) -> Result<()> {
    const LEN: usize = 4096;
    const NEW_WINDOWS: usize = 4;
    // Below the 128 freed windows ofi and UCX keep in quarantine.
    const CHURN: usize = 100;
    let short = || t.deadline_in(Duration::from_millis(300));
    let freed = |e: &Error| matches!(e, Error::WindowFreed { rank } if *rank == right(t));
    let ok_or_freed = |what: &str, got: Result<()>| match got {
        Ok(()) => Ok(()),
        Err(e) if freed(&e) => Ok(()),
        other => Err(fail(format!("{what}: got {other:?}"))),
    };
    let window = t.alloc_window(LEN)?;
    let stale = swap_keys_with_neighbours(t, &window).await?;
    // Resolved while the window lives, as a connection holds its peer's.
    let resolved = t.resolve_window(right(t), &stale)?;
    barrier(t).await?;
    drop(window);
    // Frees of windows too large for the freed one's place, which the new
    // windows below would then take.
    for _ in 0..CHURN {
        drop(t.alloc_window(4 * LEN)?);
    }
    let fresh = (0..NEW_WINDOWS)
        .map(|_| t.alloc_window(LEN))
        .collect::<Result<Vec<_>>>()?;
    barrier(t).await?;
    let r = right(t);
    for round in 0..3 {
        let what = format!("put with a stale key (round {round})");
        ok_or_freed(&what, t.put(r, &stale, 0, &[0xAB; 8]))?;
        let what = format!("large put with a stale key (round {round})");
        ok_or_freed(&what, t.put(r, &stale, 0, &[0xCD; LEN]))?;
        let what = format!("put_signal with a stale key (round {round})");
        let signal = Signal { offset: 8, add: 1 };
        ok_or_freed(&what, t.put_signal(r, &stale, 16, &[0xEF; 8], signal))?;
        let what = format!("fetch_add with a stale key (round {round})");
        ok_or_freed(&what, t.fetch_add(r, &stale, 0, 1, short()).await.map(drop))?;
        let what = format!("compare_swap with a stale key (round {round})");
        let swapped = t.compare_swap(r, &stale, 0, 0, 1, short()).await;
        ok_or_freed(&what, swapped.map(drop))?;
        let what = format!("stamped put into a freed window (round {round})");
        let stamp = Signal { offset: 24, add: 1 };
        let pieces: (&[u8], &[u8]) = (&[0x5A; 8], &[0xA5; 8]);
        ok_or_freed(&what, t.put_stamp(&resolved, 32, pieces, stamp))?;
        let what = format!("a stale key resolved (round {round})");
        ok_or_freed(&what, t.resolve_window(r, &stale).map(drop))?;
        let what = format!("flush after stale puts (round {round})");
        ok_or_freed(&what, t.flush(r, short()).await)?;
    }
    barrier(t).await?;
    let mut mine = vec![0u8; LEN];
    for (i, w) in fresh.iter().enumerate() {
        w.read(0, &mut mine)?;
        if mine.iter().any(|&b| b != 0) {
            return Err(fail(format!(
                "a stale key wrote into window {i} allocated after the free"
            )));
        }
    }
    // The stale operations broke nothing: a put through a live key lands.
    let live = swap_keys_with_neighbours(t, &fresh[0]).await?;
    let data = pattern(t.rank(), 16, 64);
    t.put_signal(r, &live, 64, &data, Signal { offset: 0, add: 1 })?;
    t.wait_signal(&fresh[0], 0, 1, deadline(t)).await?;
    fresh[0].read(64, &mut mine[..64])?;
    if mine[..64] != pattern(left(t), 16, 64)[..] {
        return Err(fail("a put after stale ones landed corrupted"));
    }
    barrier(t).await
}

/// Windows allocated and freed in a loop hold bounded memory: 20,000
/// windows of 64 KiB, one after the other, add less than 64 MiB of address
/// space (1.3 GB if nothing freed were reused), 16 MiB resident and 200
/// descriptors (UCX's posix segments each hold one). Run alone in a
/// process: it reads the process's own figures.
pub fn freed_windows_are_bounded<T: Transport>(t: &T) -> Result<()> {
    const WINDOWS: usize = 20_000;
    const LEN: usize = 64 << 10;
    let status = |field: &str| -> Result<u64> {
        let text = std::fs::read_to_string("/proc/self/status").map_err(|source| Error::Io {
            context: "reading /proc/self/status".into(),
            source,
        })?;
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kib| kib << 10)
            .ok_or_else(|| fail(format!("no {field} in /proc/self/status")))
    };
    let descriptors = || std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let before = (status("VmSize:")?, status("VmRSS:")?, descriptors());
    for i in 0..WINDOWS {
        let window = t.alloc_window(LEN)?;
        // Touch it, as a program would.
        window.write(LEN - 8, &(i as u64).to_le_bytes())?;
    }
    let after = (status("VmSize:")?, status("VmRSS:")?, descriptors());
    let grown = |a: u64, b: u64| a.saturating_sub(b) >> 20;
    let (space, resident) = (grown(after.0, before.0), grown(after.1, before.1));
    let fds = after.2.saturating_sub(before.2);
    if space >= 64 || resident >= 16 || fds >= 200 {
        return Err(fail(format!(
            "{WINDOWS} windows of {LEN} B allocated and freed added {space} MiB of address \
             space, {resident} MiB resident, {fds} descriptors"
        )));
    }
    Ok(())
}

/// `victim` dies (through `die`) after a barrier; every other rank's waits,
/// on the victim and on anything else, must end with `PeerGone` in 10 s.
pub async fn peer_killed<T: Transport>(t: &T, victim: Rank, die: impl FnOnce()) -> Result<()> {
    let window = t.alloc_window(8)?;
    barrier(t).await?;
    // The victim dies only once every survivor is past the barrier: a death
    // seen while a slow survivor is still in it would fail the barrier instead
    // of the waits this check is about.
    if t.rank() == victim {
        for _ in 1..t.size() {
            t.recv(None, CTX, TAG_PAST_BARRIER, deadline(t)).await?;
        }
        die();
        return Err(fail("the victim survived"));
    }
    t.send(victim, CTX, TAG_PAST_BARRIER, &[], deadline(t))
        .await?;
    let started = t.now();
    let gone = |e: &Error| matches!(e, Error::PeerGone { .. });
    let from_victim = t.recv(Some(victim), CTX, 40, deadline(t)).await;
    expect_err("recv from a killed rank", from_victim, gone)?;
    expect_err(
        "wait on a signal once a rank died",
        t.wait_signal(&window, 0, 1, deadline(t)).await,
        gone,
    )?;
    let waited = t.now().saturating_sub(started);
    if waited > Duration::from_secs(10) {
        return Err(fail(format!("noticing a killed rank took {waited:?}")));
    }
    Ok(())
}

/// The checks that run on every provider, by name, so a test file can list
/// them per provider and starter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// [`put_sizes`]: puts of every size in `PUT_SIZES` arrive byte-exactly.
    PutSizes,
    /// [`many_puts_in_flight`]: a signal after a flush covers 1024 puts.
    ManyPutsInFlight,
    /// [`signals_and_atomics`]: signals add up, fetch-add and
    /// compare-and-swap hand out unique results.
    SignalsAndAtomics,
    /// [`tagged_messages`]: matching by source, context and tag, in order.
    TaggedMessages,
    /// [`all_pairs`]: simultaneous first contact between every pair of ranks.
    AllPairs,
    /// [`bad_input`]: bad puts fail at the origin with the right error.
    BadInput,
    /// [`forged_keys`]: corrupted and forged keys are refused, write nothing.
    ForgedKeys,
    /// [`stale_keys`]: a freed window's key writes nothing, atomics on it
    /// are `WindowFreed`.
    StaleKeys,
    /// [`first_contact_retry`]: a timed-out first contact leaves no trace.
    FirstContactRetry,
    /// [`dropped_send_breaks_the_stream`]: later sends fail with `Protocol`.
    DroppedSendBreaksTheStream,
    /// [`host_memory`]: host peers write, store and read in each other's
    /// arenas; bad offsets and ranks are refused.
    HostMemory,
    /// [`receive_into_buffers`]: receives into buffers, byte-exact; too
    /// long is `Truncated`; a dropped one breaks nothing.
    ReceiveIntoBuffers,
    /// The checks of [`SUITE`] one after another (for starters where a job
    /// per check costs too much, like `mpiexec`).
    Suite,
}

/// The checks `Check::Suite` runs, in order: all but those that need a job
/// of their own (first contact must be first; a broken stream stays broken).
pub const SUITE: [Check; 10] = [
    Check::PutSizes,
    Check::ManyPutsInFlight,
    Check::SignalsAndAtomics,
    Check::TaggedMessages,
    Check::AllPairs,
    Check::BadInput,
    Check::ForgedKeys,
    Check::StaleKeys,
    Check::HostMemory,
    Check::ReceiveIntoBuffers,
];

/// Runs `check` on this rank.
pub async fn run<T: Transport + ControlWindows>(t: &T, check: Check) -> Result<()> {
    match check {
        Check::PutSizes => put_sizes(t).await,
        Check::ManyPutsInFlight => many_puts_in_flight(t).await,
        Check::SignalsAndAtomics => signals_and_atomics(t).await,
        Check::TaggedMessages => tagged_messages(t).await,
        Check::AllPairs => all_pairs(t).await,
        Check::BadInput => bad_input(t).await,
        Check::ForgedKeys => forged_keys(t).await,
        Check::StaleKeys => stale_keys(t).await,
        Check::FirstContactRetry => first_contact_retry(t).await,
        Check::DroppedSendBreaksTheStream => dropped_send_breaks_the_stream(t).await,
        Check::HostMemory => host_memory(t).await,
        Check::ReceiveIntoBuffers => receive_into_buffers(t).await,
        Check::Suite => {
            for check in SUITE {
                Box::pin(run(t, check))
                    .await
                    .map_err(|e| fail(format!("{check:?}: {e}")))?;
            }
            Ok(())
        }
    }
}
