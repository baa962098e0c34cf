//! A chain's node: a distributed doubly-linked list (seed 000, section 2).
//! Each process holds its rank, the group size and three addresses (its own
//! and its neighbours'): O(1). Tree collectives add, on first use, the
//! addresses at distances 2^d on both sides: O(log N).
//!
//! Tags follow call order, as MPI requires of nonblocking collectives: a
//! collective reserves the tags of all the calls it makes on a chain (and
//! the neighbour search, and a split its context id) synchronously when it
//! is called, before its first await, and hands them to its sub-collectives
//! in program order. So collectives called in the same order on every member
//! may run concurrently (their futures joined, polled in any order).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;

use catena_fabric::{ContextId, Rank, Rma, Tag, Time, Transport};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::deadline::check_deadline;
use crate::once::{taken_once, Once};
use crate::{Error, Result};

/// One process's node of a chain.
#[derive(Debug)]
pub struct Chain {
    rank: u32,
    size: u32,
    me: Rank,
    left: Option<Rank>,
    right: Option<Rank>,
    context: ContextId,
    /// Collective calls reserved so far; tags of different calls differ.
    calls: Cell<u32>,
    neighbours: RefCell<Search>,
    /// The neighbour cache of the chain of survivors a recursive doubling
    /// keeps on a chain whose size is no power of two (`doubling.rs`).
    survivors: RefCell<Search>,
}

/// Where a neighbour search of the chain stands (see [`crate::once`]): its
/// tags are reserved by the first call (in call order) that may need it.
type Search = Once<CallTags, Neighbours>;

/// The addresses at distances 1, 2, 4, ... on each side; what tree
/// collectives need. Computed by address forwarding in log2 N rounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Neighbours {
    left: Vec<Rank>,
    right: Vec<Rank>,
}

impl Neighbours {
    /// The addresses at distances 1, 2, 4, ... to the left and the right.
    pub(crate) fn new(left: Vec<Rank>, right: Vec<Rank>) -> Neighbours {
        Neighbours { left, right }
    }

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
    /// Rounds per call; more than any O(log N) collective on 2^32 ranks
    /// needs (a double scan takes at most 32).
    pub(crate) const ROUNDS: u32 = 256;

    /// The tags of the chain's call number `call`: numbers wrap past 2^24
    /// calls, as a chain's own count does.
    pub(crate) fn numbered(call: u32) -> CallTags {
        CallTags {
            base: call.wrapping_mul(Self::ROUNDS),
        }
    }

    /// The tags of call number `call` on a context whose calls the caller
    /// numbers itself (e.g. by a user's tag); `call < 2^24`.
    pub(crate) fn of_call(call: u32) -> CallTags {
        debug_assert!(call < u32::MAX / Self::ROUNDS);
        Self::numbered(call)
    }

    /// The tag of round `round` of this call; past `ROUNDS` an error, never
    /// a tag of another call.
    pub(crate) fn round(self, round: u32) -> Result<Tag> {
        if round >= Self::ROUNDS {
            return Err(Error::Rounds {
                round,
                limit: Self::ROUNDS,
            });
        }
        Ok(self.base.wrapping_add(round))
    }
}

/// Consecutive calls' tags that one collective reserved when it was called,
/// for itself and the sub-collectives it makes on the same chain; it hands
/// them out in program order, the same on every member.
#[derive(Debug)]
pub(crate) struct Calls {
    next: u32,
    left: u32,
}

impl Calls {
    /// The tags of the next call of the reservation.
    pub(crate) fn next(&mut self) -> Result<CallTags> {
        Ok(CallTags {
            base: self.take(1)?.next.wrapping_mul(CallTags::ROUNDS),
        })
    }

    /// The next `calls` calls of the reservation, for a sub-collective.
    pub(crate) fn take(&mut self, calls: u32) -> Result<Calls> {
        if calls > self.left {
            return Err(Error::Rounds {
                round: calls,
                limit: self.left,
            });
        }
        let taken = Calls {
            next: self.next,
            left: calls,
        };
        self.next = self.next.wrapping_add(calls);
        self.left -= calls;
        Ok(taken)
    }
}

/// Which side of a process a partner lies on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    Left,
    Right,
}

/// Reserves the tags of the search `state` stands for, with the next call
/// of `chain`, if no earlier call did.
fn reserve_search(chain: &Chain, state: &RefCell<Search>) {
    Once::reserve(state, || chain.next_call());
}

/// The neighbours on `chain` that the search `state` stands for found,
/// searching with the reserved tags if no call has started to, else
/// waiting for the call that did.
async fn searched<T: Transport>(
    state: &RefCell<Search>,
    chain: &Chain,
    t: &T,
    deadline: Time,
) -> Result<Rc<Neighbours>> {
    let wait = (
        "a concurrent call's neighbour search",
        search_failed as fn() -> Error,
    );
    taken_once(state, t, deadline, wait, |tags| {
        chain.find_neighbours(t, tags, deadline)
    })
    .await
}

fn search_failed() -> Error {
    Error::Mismatch {
        what: "the chain's shape: its neighbour search failed in a concurrent call".into(),
    }
}

/// What each message of address forwarding carries besides its payload:
/// the sender's rank and size as it sees them, and the address it forwards.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(crate) struct Hop {
    rank: u32,
    size: u32,
    next: Option<Rank>,
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

    /// The node of process `me` in the chain of `order` (world ranks in
    /// chain order), by a scan of the list: for tests and small fixed
    /// groups; a scalable program makes groups by split or create_group.
    pub fn of_order(me: Rank, order: &[Rank], context: ContextId) -> Result<Chain> {
        let rank = order.iter().position(|&w| w == me).ok_or_else(|| {
            Error::InvalidArgument(format!("process {me} is not in the chain's order"))
        })?;
        let size = u32::try_from(order.len())
            .map_err(|_| Error::InvalidArgument("a chain of 2^32 or more".into()))?;
        let at = |r: Option<usize>| r.and_then(|r| order.get(r).copied());
        Chain::from_links(
            rank as u32,
            size,
            me,
            at(rank.checked_sub(1)),
            at(Some(rank + 1)),
            context,
        )
    }

    /// A chain node from its parts; the ends must match the rank, and the
    /// links must name two other processes. Whether the members' links
    /// agree with each other only the members together can tell: every
    /// collective checks it as it goes, and a chain whose links disagree
    /// fails with `Error::Mismatch` (or `Timeout` where a partner never
    /// answers) on every member by its deadline.
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
        if left == Some(me) || right == Some(me) || (left.is_some() && left == right) {
            return Err(Error::InvalidArgument(format!(
                "process {me} with left {left:?} and right {right:?}: \
                 a chain's links name two other processes"
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
            neighbours: RefCell::new(Once::Unreserved),
            survivors: RefCell::new(Once::Unreserved),
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

    /// This node with its neighbour cache already filled (from a group map
    /// every member holds), so no call ever searches: every member of the
    /// chain must be made so, or none.
    pub(crate) fn with_neighbours(self, found: Neighbours) -> Chain {
        *self.neighbours.borrow_mut() = Once::Done(Rc::new(found));
        self
    }

    /// Bytes this node holds beyond its fixed size (the neighbour cache).
    pub fn heap_bytes(&self) -> usize {
        [&self.neighbours, &self.survivors]
            .iter()
            .map(|search| search.borrow().done().map_or(0, |n| n.heap_bytes()))
            .sum()
    }

    /// How many collective calls were reserved on this node.
    pub(crate) fn calls_made(&self) -> u32 {
        self.calls.get()
    }

    /// A chain derived from another continues its count of calls, so its
    /// tags differ from those of calls its members made before.
    pub(crate) fn counting_calls_from(self, calls: u32) -> Chain {
        self.calls.set(calls);
        self
    }

    /// Reserves the tags of `calls` consecutive calls. A collective calls
    /// this synchronously when it is called, before its first await, so
    /// calls get their tags in call order however their futures are polled.
    pub(crate) fn reserve(&self, calls: u32) -> Calls {
        let next = self.calls.get();
        self.calls.set(next.wrapping_add(calls));
        Calls { next, left: calls }
    }

    /// Reserves the tags of one call (see [`Chain::reserve`]).
    pub(crate) fn next_call(&self) -> CallTags {
        CallTags::numbered(self.reserve(1).next)
    }

    /// Reserves the tags of the neighbour search if no earlier call did; a
    /// collective that may need [`Chain::reserved_neighbours`] calls this
    /// when it is called.
    pub(crate) fn reserve_neighbours(&self) {
        reserve_search(self, &self.neighbours);
    }

    /// Reserves the tags of the survivors' neighbour search if no earlier
    /// call did (see [`Chain::reserved_survivors`]).
    pub(crate) fn reserve_survivors(&self) {
        reserve_search(self, &self.survivors);
    }

    /// The neighbour cache of `survivors`, a chain this member keeps among
    /// some of this chain's members (the same on every call), searching for
    /// it with the reserved tags if no call has started to.
    pub(crate) async fn reserved_survivors<T: Transport>(
        &self,
        t: &T,
        survivors: &Chain,
        deadline: Time,
    ) -> Result<Rc<Neighbours>> {
        searched(&self.survivors, survivors, t, deadline).await
    }

    /// The addresses at distances 2^d (collective: every member calls it at
    /// the same point in its sequence of calls, as tree collectives do; later
    /// calls use the cache).
    pub fn neighbours<'a, T: Transport>(
        &'a self,
        t: &'a T,
        deadline: Time,
    ) -> impl Future<Output = Result<Rc<Neighbours>>> + 'a {
        self.reserve_neighbours();
        self.reserved_neighbours(t, deadline)
    }

    /// The neighbours, searching for them with the reserved tags if no call
    /// has started to, else waiting for the call that did.
    pub(crate) async fn reserved_neighbours<T: Transport>(
        &self,
        t: &T,
        deadline: Time,
    ) -> Result<Rc<Neighbours>> {
        searched(&self.neighbours, self, t, deadline).await
    }

    async fn find_neighbours<T: Transport>(
        &self,
        t: &T,
        tags: CallTags,
        deadline: Time,
    ) -> Result<Neighbours> {
        let mut found = Neighbours::default();
        let (mut left, mut right) = (self.left, self.right);
        let mut round = 0;
        // At most 32 rounds: check_hop keeps `left` set only while
        // rank >= 2^round, `right` only while rank + 2^round < size.
        while left.is_some() || right.is_some() {
            check_deadline(t, deadline, "the neighbour search")?;
            let tag = tags.round(round)?;
            found.left.extend(left);
            found.right.extend(right);
            // My partner on one side is the next partner of the one on the other.
            if let Some(r) = right {
                self.send(t, r, tag, &self.hop(left), deadline).await?;
            }
            if let Some(l) = left {
                self.send(t, l, tag, &self.hop(right), deadline).await?;
            }
            if let Some(l) = left {
                let hop = self.recv(t, l, tag, deadline).await?;
                left = self.check_hop(hop, round, Side::Left)?;
            }
            if let Some(r) = right {
                let hop = self.recv(t, r, tag, deadline).await?;
                right = self.check_hop(hop, round, Side::Right)?;
            }
            round += 1;
        }
        Ok(found)
    }

    /// This process's header of an address-forwarding message that passes
    /// on `next`.
    pub(crate) fn hop(&self, next: Option<Rank>) -> Hop {
        Hop {
            rank: self.rank,
            size: self.size,
            next,
        }
    }

    /// Checks the header that the partner 2^`round` ranks to the `side`
    /// sent in that round; returns the address it forwards, the partner
    /// 2^(round+1) away, which exists exactly when the chain has that rank.
    ///
    /// This is how a broken chain is detected: links that do not agree
    /// pairwise (a partner that is not the rank it should be, or sees
    /// another size) fail here on both partners; a ring has no ends, so its
    /// ranks cannot all agree pairwise; and as a rank's partners exist only
    /// while `rank ± 2^round` lies in `0..size`, no loop over rounds runs
    /// more than 32 times. A member whose broken links make a partner never
    /// answer gets `Timeout` at its deadline instead.
    pub(crate) fn check_hop(&self, hop: Hop, round: u32, side: Side) -> Result<Option<Rank>> {
        let (rank, size) = (u64::from(self.rank), u64::from(self.size));
        let distance = 1u64 << round;
        let step = |from: u64| match side {
            Side::Left => from.checked_sub(distance),
            Side::Right => Some(from + distance).filter(|&r| r < size),
        };
        let expected = step(rank);
        let forwards = expected.and_then(step).is_some();
        if expected != Some(u64::from(hop.rank))
            || hop.size != self.size
            || hop.next.is_some() != forwards
        {
            return Err(Error::Mismatch {
                what: format!(
                    "the chain's shape: rank {} of {} heard from rank {} of {} where it \
                     expected rank {}, {distance} to its {side:?}",
                    self.rank,
                    self.size,
                    hop.rank,
                    hop.size,
                    expected.map_or("none".into(), |e| e.to_string()),
                ),
            });
        }
        Ok(hop.next)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_past_the_calls_tags_is_an_error() {
        let chain = Chain::from_links(0, 2, 0, None, Some(1), 1).expect("a valid node");
        let tags = chain.next_call();
        assert!(tags.round(CallTags::ROUNDS - 1).is_ok());
        assert!(matches!(
            tags.round(CallTags::ROUNDS),
            Err(Error::Rounds {
                round: 256,
                limit: 256
            })
        ));
        let mut calls = chain.reserve(2);
        assert!(calls.take(3).is_err(), "more calls than reserved");
        let (first, second) = (calls.next().unwrap(), calls.next().unwrap());
        assert_eq!(
            second.round(0).unwrap() - first.round(0).unwrap(),
            CallTags::ROUNDS
        );
        assert!(calls.next().is_err(), "a third call of two");
    }
}
