//! A hostile rank for eager-messaging tests: it makes first contact with a
//! victim by hand, with raw puts, so it holds the victim's connection window
//! key and can write anything the protocol lets a peer write (ring bytes,
//! frame stamps, credit, reply area, control slots).

// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

use catena_fabric::eager::wire::{
    connection_window_bytes, encode_header, encode_rendezvous_header, slot_at, stamp, BULK_KEY_AT,
    BULK_KEY_LEN_AT, BULK_REPLY_SIGNAL, BULK_RING_AT, BULK_RING_BYTES_AT, BULK_SIGNAL, FRAME_ALIGN,
    REPLY_KEY_AT, REPLY_KEY_LEN_AT, REPLY_SIGNAL, REQUEST_BELL, RING_AT, SLOT_CLAIMED, SLOT_COUNT,
    SLOT_FREE, SLOT_FROM_AT, STAMP_BYTES,
};
use catena_fabric::{
    wait_until, ControlWindows, Error, LocalWindow, Rank, RemoteKey, Result, Rma, Signal, Time,
};
use catena_sim::{EagerRank, SimWindow};

/// One end of a connection made by hand: our window (where the victim
/// writes) and the victim's (where we write, under its ring's rules or not).
pub struct Intruder<'a, 's> {
    pub t: &'a EagerRank<'s>,
    pub victim: Rank,
    pub window: SimWindow<'s>,
    pub victim_window: RemoteKey,
    pub victim_control: RemoteKey,
    /// The victim's ring size.
    pub ring: usize,
    /// Stream bytes written so far into the victim's ring.
    pub written: u64,
    /// The victim's bulk window for us and its ring size, once it told us.
    pub victim_bulk: Option<(RemoteKey, usize)>,
    /// Bulk stream bytes written so far into the victim's bulk ring.
    pub bulk_written: u64,
}

impl<'a, 's> Intruder<'a, 's> {
    /// Claims a request slot of `victim`'s control window, files our window
    /// there and waits for the victim's reply, as an honest rank would.
    pub async fn connect(
        t: &'a EagerRank<'s>,
        victim: Rank,
        ring: usize,
        deadline: Time,
    ) -> Result<Intruder<'a, 's>> {
        let window = t.alloc_window(connection_window_bytes(ring))?;
        let control = t.control_key(victim)?;
        let mine = window.key();
        let mut body = u64::from(t.rank()).to_le_bytes().to_vec();
        body.extend_from_slice(&(mine.as_bytes().len() as u64).to_le_bytes());
        body.extend_from_slice(mine.as_bytes());
        let mut filed = false;
        for slot in 0..SLOT_COUNT {
            let at = slot_at(slot);
            let old = t
                .compare_swap(victim, &control, at, SLOT_FREE, SLOT_CLAIMED, deadline)
                .await?;
            if old == SLOT_FREE {
                t.put_signal(victim, &control, at + SLOT_FROM_AT, &body, bell(at, 1))?;
                t.put_signal(victim, &control, REQUEST_BELL, &[], bell(REQUEST_BELL, 1))?;
                filed = true;
                break;
            }
        }
        if !filed {
            return Err(Error::Protocol("no free request slot".into()));
        }
        wait_until(t, deadline, "the victim's reply", || {
            Ok((window.signal(REPLY_SIGNAL)? >= 1).then_some(()))
        })
        .await?;
        let mut len = [0u8; 8];
        window.read(REPLY_KEY_LEN_AT, &mut len)?;
        let mut key = vec![0u8; u64::from_le_bytes(len) as usize];
        window.read(REPLY_KEY_AT, &mut key)?;
        Ok(Intruder {
            t,
            victim,
            window,
            victim_window: RemoteKey::from_bytes(&key)?,
            victim_control: control,
            ring,
            written: 0,
            victim_bulk: None,
            bulk_written: 0,
        })
    }

    /// Writes `frame` into the victim's ring at our stream position (all
    /// but its stamp word) and stamps it as landed, as an honest sender
    /// does. Ignores credit, so only use it for what fits.
    pub fn stream(&mut self, frame: &[u8]) -> Result<()> {
        self.stream_stamped(frame, stamp(self.written))
    }

    /// [`Intruder::stream`], adding `stamp` to the frame's stamp word
    /// (honest: [`stamp`] of its stream position).
    pub fn stream_stamped(&mut self, frame: &[u8], stamp: u64) -> Result<()> {
        let start = (self.written % self.ring as u64) as usize;
        let mut at = start + STAMP_BYTES;
        for chunk in frame[STAMP_BYTES..].chunks(self.ring) {
            let first = chunk.len().min(self.ring - at);
            self.put(RING_AT + at, &chunk[..first])?;
            self.put(RING_AT, &chunk[first..])?;
            at = (at + chunk.len()) % self.ring;
        }
        let span = frame.len().div_ceil(FRAME_ALIGN) * FRAME_ALIGN;
        self.written = self.written.wrapping_add(span as u64);
        self.signal(RING_AT + start, stamp)
    }

    /// An honest frame of `data`.
    pub fn frame(context: u64, tag: u32, data: &[u8]) -> Vec<u8> {
        let mut frame = encode_header(data.len(), context, tag).to_vec();
        frame.extend_from_slice(data);
        frame
    }

    /// The header of a rendezvous frame (its payload goes in the bulk
    /// stream).
    pub fn rendezvous_header(context: u64, tag: u32, len: usize) -> Vec<u8> {
        encode_rendezvous_header(len, context, tag).to_vec()
    }

    /// Waits until `deadline` for the victim's bulk window (it makes one on
    /// our first rendezvous frame) and records it.
    pub async fn await_bulk_window(&mut self, deadline: Time) -> Result<()> {
        let window = &self.window;
        wait_until(self.t, deadline, "the victim's bulk window", || {
            Ok((window.signal(BULK_REPLY_SIGNAL)? >= 1).then_some(()))
        })
        .await?;
        let word = |at: usize| -> Result<u64> {
            let mut bytes = [0u8; 8];
            self.window.read(at, &mut bytes)?;
            Ok(u64::from_le_bytes(bytes))
        };
        let mut key = vec![0u8; word(BULK_KEY_LEN_AT)? as usize];
        self.window.read(BULK_KEY_AT, &mut key)?;
        let bulk_bytes = word(BULK_RING_BYTES_AT)? as usize;
        self.victim_bulk = Some((RemoteKey::from_bytes(&key)?, bulk_bytes));
        Ok(())
    }

    /// Writes `bytes` into the victim's bulk ring at our bulk stream
    /// position and announces `announced` landed bytes (honest:
    /// `bytes.len()`). Ignores credit, so only use it for what fits.
    pub fn stream_bulk(&mut self, bytes: &[u8], announced: u64) -> Result<()> {
        let (key, ring) = self.victim_bulk.clone().expect("the victim's bulk window");
        let mut at = (self.bulk_written % ring as u64) as usize;
        for chunk in bytes.chunks(ring) {
            let first = chunk.len().min(ring - at);
            for (offset, piece) in [(at, &chunk[..first]), (0, &chunk[first..])] {
                if !piece.is_empty() {
                    self.t
                        .put(self.victim, &key, BULK_RING_AT + offset, piece)?;
                }
            }
            at = (at + chunk.len()) % ring;
        }
        self.bulk_written = self.bulk_written.wrapping_add(bytes.len() as u64);
        let add = bell(BULK_SIGNAL, announced);
        self.t.put_signal(self.victim, &key, BULK_SIGNAL, &[], add)
    }

    /// Writes a bulk window reply into the victim's connection window, as
    /// the victim's peer does when the victim first sends it a rendezvous
    /// message: a key (of `key_len` announced bytes) and a ring size.
    pub fn reply_bulk(&self, key: &[u8], key_len: u64, ring: u64) -> Result<()> {
        let mut reply = key_len.to_le_bytes().to_vec();
        reply.extend_from_slice(&ring.to_le_bytes());
        reply.extend_from_slice(key);
        self.t.put_signal(
            self.victim,
            &self.victim_window,
            BULK_KEY_LEN_AT,
            &reply,
            bell(BULK_REPLY_SIGNAL, 1),
        )
    }

    /// A raw put into the victim's connection window.
    pub fn put(&self, offset: usize, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        self.t.put(self.victim, &self.victim_window, offset, data)
    }

    /// Adds `add` to the signal word at `offset` of the victim's connection
    /// window.
    pub fn signal(&self, offset: usize, add: u64) -> Result<()> {
        self.t.put_signal(
            self.victim,
            &self.victim_window,
            offset,
            &[],
            bell(offset, add),
        )
    }

    /// A raw put, with an optional signal add, into the victim's control
    /// window.
    pub fn put_control(&self, offset: usize, data: &[u8], add: Option<(usize, u64)>) -> Result<()> {
        match add {
            Some((at, add)) => self.t.put_signal(
                self.victim,
                &self.victim_control,
                offset,
                data,
                bell(at, add),
            ),
            None if data.is_empty() => Ok(()),
            None => self.t.put(self.victim, &self.victim_control, offset, data),
        }
    }
}

fn bell(offset: usize, add: u64) -> Signal {
    Signal { offset, add }
}
