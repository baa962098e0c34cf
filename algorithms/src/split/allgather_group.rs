//! AllgatherGroup: every process gathers every item over the chain and sorts
//! its own group locally, as MPI libraries do today: O(N) memory and
//! O(N log N) time per process, the baseline the scalable algorithms beat.

use catena_fabric::{Time, Transport};

use super::item::{sort_items, Item, KeyOrder};
use super::sorted::placements;
use super::Placement;
use crate::chain::{Calls, Chain};
use crate::codec::{encode, Wire};
use crate::tree::allgather_in;
use crate::Result;

/// The calls it makes on `chain` (an allgather), whose neighbour search
/// must be reserved too.
pub(crate) const CALLS: u32 = 2;

pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    t: &T,
    chain: &Chain,
    mut calls: Calls,
    me: Option<Item<K>>,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Option<Placement>> {
    let tags = [calls.next()?, calls.next()?];
    let mine = encode(&me, "an allgather value")?;
    let all: Vec<Option<Item<K>>> = allgather_in(t, chain, tags, mine, deadline).await?;
    let Some(mine) = me else {
        return Ok(None);
    };
    let mut group: Vec<Item<K>> = all
        .into_iter()
        .flatten()
        .filter(|i| i.color == mine.color)
        .collect();
    sort_items(&mut group, order)?;
    let at = group
        .iter()
        .position(|i| i.parent_rank == mine.parent_rank)
        .expect("this process's own item is in its group");
    Ok(Some(placements(&group)[at]))
}
