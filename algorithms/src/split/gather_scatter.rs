//! GatherScatter: items travel up the chain's binomial tree to rank 0, each
//! step merging two sorted runs (O(N) time at the root instead of a sort),
//! and every process's placement comes back down by a scatter. O(N) memory
//! at the root; a baseline.

use catena_fabric::{Time, Transport};

use super::item::{merge_items, Item, KeyOrder};
use super::sorted::placements;
use super::Placement;
use crate::chain::{Calls, Chain};
use crate::codec::Wire;
use crate::tree::{reduce_with, scatter_in};
use crate::Result;

/// Takes two of `calls`, on a parent whose neighbour search is reserved.
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    t: &T,
    parent: &Chain,
    mut calls: Calls,
    me: Option<Item<K>>,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Option<Placement>> {
    let run: Vec<Item<K>> = me.into_iter().collect();
    let merge = |left, right| merge_items(left, right, order);
    let sorted = reduce_with(t, parent, calls.next()?, 0, run, merge, deadline).await?;
    let by_parent_rank = sorted.map(|sorted| {
        let mut out = vec![None; parent.size() as usize];
        for (item, placement) in sorted.iter().zip(placements(&sorted)) {
            out[item.parent_rank as usize] = Some(placement);
        }
        out
    });
    scatter_in(t, parent, calls.next()?, 0, by_parent_rank, deadline).await
}
