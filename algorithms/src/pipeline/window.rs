//! The window: for each tree edge at this process, a ring of slots the peer
//! puts chunks into and two signal words, one counting those chunks and one
//! counting the credits the peer returns for the chunks sent to it.

use std::fmt;

use catena_fabric::LocalWindow;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Bytes before each slot's chunk: room for a call's [`Header`].
pub(super) const HEADER: usize = 24;
const WORD: usize = 8;

/// Where, in one end's window, the other end of an edge puts things.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Endpoint {
    /// The slot ring the other end puts its chunks into.
    pub ring: usize,
    /// The signal word those puts add 1 to.
    pub arrived: usize,
    /// The signal word the other end adds 1 to for each chunk it consumed
    /// of those this end sent it.
    pub credits: usize,
}

/// The ring geometry every process of a plan shares.
#[derive(Clone, Copy, Debug)]
pub(super) struct Rings {
    pub slots: u64,
    /// Bytes of chunk data per slot.
    pub chunk: usize,
}

impl Rings {
    /// The offset of the slot that chunk `seq` of a sequence occupies.
    pub(crate) fn slot(&self, ring: usize, seq: u64) -> usize {
        // Below `slots`, which fits in usize (the window was allocated).
        let index = (seq % self.slots) as usize;
        ring + index * (HEADER + self.chunk)
    }
}

/// Hands out endpoints: the signal words first, so they are aligned, then
/// the rings.
pub(super) struct Layout {
    next_word: usize,
    next_ring: usize,
    ring_bytes: usize,
    len: usize,
}

impl Layout {
    /// Room for `edges` endpoints whose rings have `slots` slots of `chunk` bytes.
    pub(crate) fn new(edges: usize, slots: usize, chunk: usize) -> Result<Layout> {
        let too_big = || {
            Error::InvalidArgument(format!(
                "a window for {edges} tree edges of {slots} slots of {chunk} bytes is too large"
            ))
        };
        let ring_bytes = chunk
            .checked_add(HEADER)
            .and_then(|slot| slot.checked_mul(slots))
            .ok_or_else(too_big)?;
        let words = edges.checked_mul(2 * WORD).ok_or_else(too_big)?;
        let len = ring_bytes
            .checked_mul(edges)
            .and_then(|rings| rings.checked_add(words))
            .ok_or_else(too_big)?;
        Ok(Layout {
            next_word: 0,
            next_ring: words,
            ring_bytes,
            len,
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn endpoint(&mut self) -> Endpoint {
        let endpoint = Endpoint {
            ring: self.next_ring,
            arrived: self.next_word,
            credits: self.next_word + WORD,
        };
        self.next_word += 2 * WORD;
        self.next_ring += self.ring_bytes;
        endpoint
    }
}

/// What the first chunk of each call carries on every edge, so that
/// processes making different calls fail instead of misreading each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub reduce: bool,
    /// Bytes per element.
    pub element: usize,
    /// Elements in the whole message.
    pub len: usize,
}

impl Header {
    pub(crate) fn to_bytes(self) -> [u8; HEADER] {
        let words = [u64::from(self.reduce), self.element as u64, self.len as u64];
        bytemuck::cast(words.map(u64::to_le))
    }

    /// The header at `offset` of `window`, as a peer put it there.
    pub(crate) fn read(window: &impl LocalWindow, offset: usize) -> Result<Header> {
        let mut bytes = [0; HEADER];
        window.read(offset, &mut bytes)?;
        let [reduce, element, len] = bytemuck::cast::<_, [u64; 3]>(bytes).map(u64::from_le);
        // Sizes that do not fit this process's usize cannot equal its own.
        Ok(Header {
            reduce: reduce != 0,
            element: usize::try_from(element).unwrap_or(usize::MAX),
            len: usize::try_from(len).unwrap_or(usize::MAX),
        })
    }
}

impl fmt::Display for Header {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reduce {
            write!(
                f,
                "an allreduce of {} elements of {} bytes",
                self.len, self.element
            )
        } else {
            write!(f, "a broadcast of {} bytes", self.len)
        }
    }
}
