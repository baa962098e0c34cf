//! A plan's receive window, what sources reserve space in and put into:
//! its layout, and the keys of peers' windows, learned lazily (one request
//! and reply per new peer, all at once) and kept for later calls, so a
//! process holds O(k) keys for the k peers it ever sends to, never P.

use std::cell::RefCell;

use catena_fabric::{wait_until, ContextId, LocalWindow, Rank, RemoteKey, Rma, Time, Transport};
use rustc_hash::FxHashMap;

use crate::chain::CallTags;
use crate::join::join_all;
use crate::{Error, Result};

/// Per parity of the call number: elements reserved so far (sources'
/// `fetch_add`), elements landed (their puts' signals), and chunk headers
/// reserved (stable puts). Two of each, so a source that is one call ahead
/// never touches the words this process is still reading.
const COUNTER: [usize; 2] = [0, 8];
const LANDED: [usize; 2] = [16, 24];
const CHUNKS: [usize; 2] = [32, 40];
/// Sparse plans: sources' reports (and their faults) and targets' verdicts.
const REPORTS: [usize; 2] = [48, 56];
const VERDICTS: [usize; 2] = [64, 72];
/// What signal-only puts write: its contents are never read.
const SCRATCH: usize = 80;
/// Elements put after this process could not copy them from where their
/// source offered them (`pull`).
const REFILLED: [usize; 2] = [88, 96];
const HEADERS_AT: usize = 128;

/// Bytes of a chunk header: source rank, first element, count, and where
/// the elements are (in the window, or offered: the handle).
pub(crate) const HEADER_BYTES: usize = 40;

/// Where everything lies in a receive window of `capacity` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Room for one chunk header per source that can reach this process
    /// (every run of a stable call, offered runs of any call): each chunk
    /// holds an element, so min(capacity, group size) suffice.
    slots: usize,
    element: usize,
    capacity: usize,
}

impl Layout {
    pub(crate) fn new(capacity: usize, element: usize, size: u32) -> Result<Layout> {
        let layout = Layout {
            slots: capacity.min(size as usize),
            element,
            capacity,
        };
        match layout.checked_len() {
            Some(len) if len <= catena_fabric::bounds::MAX_WINDOW_BYTES => Ok(layout),
            _ => Err(Error::InvalidArgument(format!(
                "a receive capacity of {capacity} elements of {element} bytes exceeds the \
                 largest window ({} bytes)",
                catena_fabric::bounds::MAX_WINDOW_BYTES
            ))),
        }
    }

    fn checked_len(&self) -> Option<usize> {
        let headers = self.slots.checked_mul(HEADER_BYTES)?;
        let data = self.capacity.checked_mul(self.element)?;
        HEADERS_AT.checked_add(headers)?.checked_add(data)
    }

    pub(crate) fn len(&self) -> usize {
        HEADERS_AT + self.slots * HEADER_BYTES + self.capacity * self.element
    }

    pub(crate) fn counter(parity: usize) -> usize {
        COUNTER[parity]
    }

    pub(crate) fn landed(parity: usize) -> usize {
        LANDED[parity]
    }

    pub(crate) fn chunks(parity: usize) -> usize {
        CHUNKS[parity]
    }

    pub(crate) fn reports(parity: usize) -> usize {
        REPORTS[parity]
    }

    pub(crate) fn verdicts(parity: usize) -> usize {
        VERDICTS[parity]
    }

    pub(crate) fn scratch() -> usize {
        SCRATCH
    }

    pub(crate) fn refilled(parity: usize) -> usize {
        REFILLED[parity]
    }

    /// Chunk headers the window holds.
    pub(crate) fn slots(&self) -> usize {
        self.slots
    }

    pub(crate) fn header_at(&self, slot: usize) -> usize {
        HEADERS_AT + slot * HEADER_BYTES
    }

    /// The byte offset of element `index` (below the capacity).
    pub(crate) fn element_at(&self, index: usize) -> usize {
        HEADERS_AT + self.slots * HEADER_BYTES + index * self.element
    }
}

/// What a source needs of a target: its window's key and how many
/// elements it may receive per call (its plan's capacity).
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    pub(crate) key: RemoteKey,
    pub(crate) capacity: u64,
}

impl Peer {
    fn encode(&self) -> Vec<u8> {
        let mut bytes = self.capacity.to_le_bytes().to_vec();
        bytes.extend_from_slice(self.key.as_bytes());
        bytes
    }

    /// A peer's reply; what it says is checked where it is used (the
    /// provider checks keys, sources bound puts by the capacity).
    fn decode(bytes: &[u8]) -> Result<Peer> {
        let (capacity, key) = bytes.split_at_checked(8).ok_or_else(|| Error::Mismatch {
            what: format!("a window reply: {} bytes", bytes.len()),
        })?;
        Ok(Peer {
            capacity: u64::from_le_bytes(capacity.try_into().expect("8 bytes")),
            key: RemoteKey::from_bytes(key)?,
        })
    }
}

/// This process's receive window and what it learned of its peers'.
pub(crate) struct Receiver<W> {
    pub(crate) window: W,
    pub(crate) layout: Layout,
    /// The plan's capacity, told to sources (a Sendrecv window holds none).
    capacity: u64,
    peers: RefCell<FxHashMap<Rank, Peer>>,
}

impl<W: LocalWindow> Receiver<W> {
    pub(crate) fn new<T: Rma<Window = W>>(
        t: &T,
        layout: Layout,
        capacity: usize,
    ) -> Result<Receiver<W>> {
        let window = t.alloc_window(layout.len())?;
        Ok(Receiver {
            window,
            layout,
            capacity: capacity as u64,
            peers: RefCell::default(),
        })
    }

    /// What this process knows of world rank `peer` (learned before).
    pub(crate) fn peer(&self, peer: Rank, me: Rank) -> Peer {
        if peer == me {
            return self.me();
        }
        self.peers.borrow()[&peer].clone()
    }

    fn me(&self) -> Peer {
        Peer {
            key: self.window.key(),
            capacity: self.capacity,
        }
    }

    /// Peers whose keys this process holds.
    pub(crate) fn known_peers(&self) -> usize {
        self.peers.borrow().len()
    }

    /// Learns the keys of the `peers` not known yet: all requests at once,
    /// then every reply (each peer answers from its [`Receiver::serve`]).
    pub(crate) async fn learn<T: Transport<Window = W>>(
        &self,
        t: &T,
        context: ContextId,
        tags: CallTags,
        peers: impl Iterator<Item = Rank>,
        deadline: Time,
    ) -> Result<()> {
        let missing: Vec<Rank> = {
            let known = self.peers.borrow();
            peers
                .filter(|p| *p != t.rank() && !known.contains_key(p))
                .collect()
        };
        let (request, reply) = (tags.round(0)?, tags.round(1)?);
        let asks = missing.iter().map(|&peer| async move {
            t.send(peer, context, request, &[], deadline).await?;
            let answer = t.recv(Some(peer), context, reply, deadline).await?;
            Ok((peer, Peer::decode(&answer.data)?))
        });
        let learned = join_all(asks).await?;
        self.peers.borrow_mut().extend(learned);
        Ok(())
    }

    /// Answers key requests until dropped: run beside the call's own work
    /// until its status step is done, after which no peer asks any more
    /// (each asks before it enters that step).
    pub(crate) async fn serve<T: Transport<Window = W>>(
        &self,
        t: &T,
        context: ContextId,
        tags: CallTags,
        deadline: Time,
    ) -> Result<()> {
        let (request, reply) = (tags.round(0)?, tags.round(1)?);
        let me = self.me().encode();
        loop {
            let asked = t.recv(None, context, request, deadline).await?;
            t.send(asked.source, context, reply, &me, deadline).await?;
        }
    }

    /// Waits until the signal word `word` of this window satisfies `ready`.
    pub(crate) async fn wait<T: Transport<Window = W>, R>(
        &self,
        t: &T,
        word: usize,
        what: &'static str,
        deadline: Time,
        ready: impl Fn(u64) -> Option<R>,
    ) -> Result<R> {
        let value = wait_until(t, deadline, what, || Ok(ready(self.window.signal(word)?)));
        Ok(value.await?)
    }

    /// Clears the words of a finished call's parity for the call after next.
    pub(crate) fn reset(&self, parity: usize) -> Result<()> {
        let words = [COUNTER, LANDED, CHUNKS, REPORTS, VERDICTS, REFILLED].map(|w| w[parity]);
        for word in words {
            self.window.set_signal(word, 0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_that_overflow_are_refused() {
        let layout = Layout::new(1000, 64, 16).unwrap();
        assert_eq!(layout.len(), 128 + 16 * 40 + 64_000);
        assert_eq!(layout.element_at(0), 128 + 16 * 40);
        assert!(Layout::new(usize::MAX / 2, 64, 16).is_err());
        assert!(Layout::new(1 << 40, 1, 4).is_err());
    }
}
