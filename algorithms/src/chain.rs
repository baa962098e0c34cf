//! A group as a chain: a distributed doubly-linked list (seed 000, section 2).
//! Each process holds its rank, the group size and three addresses (its own
//! and its neighbours'): O(1). Tree collectives add, on first use, the
//! addresses at distances 2^d on both sides: O(log N).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU32, Ordering};

use catena_fabric::{ContextId, Rank, Rma, Tag, Time, Transport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{decode, encode};
use crate::{Error, Result};

/// Context ids from this one up are handed out to new groups (one above the
/// highest any member uses); ids below it are the caller's (e.g. for
/// [`Chain::world`]).
pub const FIRST_ALLOCATED_CONTEXT: ContextId = 0x4000_0000;

/// The highest context id this process has handed out.
static LAST_CONTEXT: AtomicU32 = AtomicU32::new(FIRST_ALLOCATED_CONTEXT);

/// The highest context id this process uses; a new group takes one above the
/// maximum of this over its members (an allreduce), so it clashes with no
/// group any member is in.
pub(crate) fn highest_context() -> ContextId {
    LAST_CONTEXT.load(Ordering::Relaxed)
}

/// Records that this process now uses `context`.
pub(crate) fn claim_context(context: ContextId) {
    LAST_CONTEXT.fetch_max(context, Ordering::Relaxed);
}

/// One process's node of a chain.
#[derive(Debug)]
pub struct Chain {
    rank: u32,
    size: u32,
    me: Rank,
    left: Option<Rank>,
    right: Option<Rank>,
    context: ContextId,
    /// Collective calls made so far; tags of different calls differ.
    calls: Cell<u32>,
    neighbours: RefCell<Option<Rc<Neighbours>>>,
}

/// The addresses at distances 1, 2, 4, ... on each side; what tree
/// collectives need. Computed by address forwarding in log2 N rounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Neighbours {
    left: Vec<Rank>,
    right: Vec<Rank>,
}

impl Neighbours {
    /// The address of group rank `rank - 2^d`, if there is one.
    pub fn left(&self, d: u32) -> Option<Rank> {
        self.left.get(d as usize).copied()
    }

    /// The address of group rank `rank + 2^d`, if there is one.
    pub fn right(&self, d: u32) -> Option<Rank> {
        self.right.get(d as usize).copied()
    }

    /// Bytes held on the heap.
    pub fn heap_bytes(&self) -> usize {
        (self.left.capacity() + self.right.capacity()) * std::mem::size_of::<Rank>()
    }
}

/// The tags of one collective call: rounds of it use `base + round`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CallTags {
    base: Tag,
}

impl CallTags {
    /// Rounds per call; more than any O(log N) collective on 2^32 ranks needs.
    const ROUNDS: u32 = 256;

    /// The tag of round `round` of this call; `round` must be below `ROUNDS`.
    pub(crate) fn round(self, round: u32) -> Tag {
        debug_assert!(round < Self::ROUNDS);
        self.base.wrapping_add(round)
    }
}

impl Chain {
    /// Every process of the job, in rank order.
    pub fn world<T: Rma + ?Sized>(t: &T, context: ContextId) -> Chain {
        let (rank, size) = (t.rank(), t.size());
        Chain::from_links(
            rank,
            size,
            rank,
            rank.checked_sub(1),
            (rank + 1 < size).then_some(rank + 1),
            context,
        )
        .expect("the job's own rank and size make a valid chain")
    }

    /// A chain node from its parts; the ends must match the rank.
    pub fn from_links(
        rank: u32,
        size: u32,
        me: Rank,
        left: Option<Rank>,
        right: Option<Rank>,
        context: ContextId,
    ) -> Result<Chain> {
        if rank >= size {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} in a chain of {size}"
            )));
        }
        if left.is_some() != (rank > 0) || right.is_some() != (rank + 1 < size) {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} of {size} with left {left:?} and right {right:?}: \
                 only the ends lack a neighbour"
            )));
        }
        Ok(Chain {
            rank,
            size,
            me,
            left,
            right,
            context,
            calls: Cell::new(0),
            neighbours: RefCell::new(None),
        })
    }

    /// This process's position in the chain, `0..size`.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of processes in the chain.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// This process's address (world rank).
    pub fn address(&self) -> Rank {
        self.me
    }

    /// The address of group rank `rank - 1`.
    pub fn left(&self) -> Option<Rank> {
        self.left
    }

    /// The address of group rank `rank + 1`.
    pub fn right(&self) -> Option<Rank> {
        self.right
    }

    /// The communication context that keeps this chain's messages apart
    /// from every other group's.
    pub fn context(&self) -> ContextId {
        self.context
    }

    /// Bytes this node holds beyond its fixed size (the neighbour cache).
    pub fn heap_bytes(&self) -> usize {
        self.neighbours
            .borrow()
            .as_ref()
            .map_or(0, |n| n.heap_bytes())
    }

    /// How many collective calls were made on this node.
    pub(crate) fn calls_made(&self) -> u32 {
        self.calls.get()
    }

    /// A chain derived from another continues its count of calls, so its
    /// tags differ from those of calls its members made before.
    pub(crate) fn counting_calls_from(self, calls: u32) -> Chain {
        self.calls.set(calls);
        self
    }

    /// Starts a collective call: its tags.
    pub(crate) fn next_call(&self) -> CallTags {
        let call = self.calls.get();
        self.calls.set(call.wrapping_add(1));
        CallTags {
            base: call.wrapping_mul(CallTags::ROUNDS),
        }
    }

    /// The addresses at distances 2^d (collective: every member calls it at
    /// the same point, as tree collectives do; later calls use the cache).
    pub async fn neighbours<T: Transport>(&self, t: &T, deadline: Time) -> Result<Rc<Neighbours>> {
        if let Some(found) = self.neighbours.borrow().as_ref() {
            return Ok(found.clone());
        }
        let found = Rc::new(self.find_neighbours(t, deadline).await?);
        *self.neighbours.borrow_mut() = Some(found.clone());
        Ok(found)
    }

    async fn find_neighbours<T: Transport>(&self, t: &T, deadline: Time) -> Result<Neighbours> {
        let tags = self.next_call();
        let mut found = Neighbours::default();
        let (mut left, mut right) = (self.left, self.right);
        let mut round = 0;
        while left.is_some() || right.is_some() {
            found.left.extend(left);
            found.right.extend(right);
            // My partner on one side is the next partner of the one on the other.
            if let Some(r) = right {
                self.send(t, r, tags.round(round), &left, deadline).await?;
            }
            if let Some(l) = left {
                self.send(t, l, tags.round(round), &right, deadline).await?;
            }
            if let Some(l) = left {
                left = self.recv(t, l, tags.round(round), deadline).await?;
            }
            if let Some(r) = right {
                right = self.recv(t, r, tags.round(round), deadline).await?;
            }
            round += 1;
        }
        Ok(found)
    }

    /// Sends `value` to `to` within this chain's context.
    pub(crate) async fn send<T: Transport, V: Serialize + ?Sized>(
        &self,
        t: &T,
        to: Rank,
        tag: Tag,
        value: &V,
        deadline: Time,
    ) -> Result<()> {
        let bytes = encode(value, "a chain message")?;
        self.send_bytes(t, to, tag, &bytes, deadline).await
    }

    pub(crate) async fn send_bytes<T: Transport>(
        &self,
        t: &T,
        to: Rank,
        tag: Tag,
        bytes: &[u8],
        deadline: Time,
    ) -> Result<()> {
        Ok(t.send(to, self.context, tag, bytes, deadline).await?)
    }

    /// Receives the value `from` sent with `tag` within this chain's context.
    pub(crate) async fn recv<T: Transport, V: DeserializeOwned>(
        &self,
        t: &T,
        from: Rank,
        tag: Tag,
        deadline: Time,
    ) -> Result<V> {
        decode(
            &self.recv_bytes(t, from, tag, deadline).await?,
            "a chain message",
        )
    }

    /// Receives a value sent with `tag` by any member.
    pub(crate) async fn recv_any<T: Transport, V: DeserializeOwned>(
        &self,
        t: &T,
        tag: Tag,
        deadline: Time,
    ) -> Result<V> {
        let message = t.recv(None, self.context, tag, deadline).await?;
        decode(&message.data, "a chain message")
    }

    pub(crate) async fn recv_bytes<T: Transport>(
        &self,
        t: &T,
        from: Rank,
        tag: Tag,
        deadline: Time,
    ) -> Result<Vec<u8>> {
        Ok(t.recv(Some(from), self.context, tag, deadline).await?.data)
    }
}
