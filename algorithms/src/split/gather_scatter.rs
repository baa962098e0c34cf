//! GatherScatter: items travel up the chain's binomial tree to rank 0, each
//! step merging two sorted runs (O(N) time at the root instead of a sort),
//! and every process's placement comes back down by a scatter. O(N) memory
//! at the root; a baseline. A comparator fault travels up in place of the
//! items and comes back down to every process.

use catena_fabric::Transport;

use super::fault::{Fault, Faults};
use super::item::{merge_runs, Item, KeyOrder, Run};
use super::sorted::placements;
use super::Placement;
use crate::call::Call;
use crate::chain::Calls;
use crate::codec::Wire;
use crate::tree::{reduce_with, scatter_in};
use crate::{Error, Result};

/// Takes two of `calls`, on a parent whose neighbour search is reserved.
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    mut call: Call<'_, T, Calls>,
    me: Option<Item<K>>,
    order: KeyOrder<'_, K>,
) -> Result<Option<Placement>> {
    let parent = call.chain;
    let mut faults = Faults::default();
    let run: Run<K> = (me.into_iter().collect(), Fault::NONE);
    let merge = |left, right| merge_runs(left, right, order, &mut faults);
    let sorted = reduce_with(call.next()?, 0, run, merge).await?;
    let by_parent_rank = match sorted {
        None => None,
        Some((sorted, fault)) => {
            let mut out = vec![(None, fault); parent.size() as usize];
            for (item, placement) in sorted.iter().zip(placements(&sorted)) {
                // A parent rank comes from a peer's message: never an index
                // unchecked (the others then end at their deadline).
                let slot = out
                    .get_mut(item.parent_rank as usize)
                    .ok_or_else(|| Error::Codec {
                        action: "decode",
                        what: "a gathered item",
                        message: format!(
                            "parent rank {} in a chain of {}",
                            item.parent_rank,
                            parent.size()
                        ),
                    })?;
                slot.0 = Some(placement);
            }
            Some(out)
        }
    };
    let (placement, fault) = scatter_in(call.next()?, 0, by_parent_rank).await?;
    faults.learn(fault);
    faults.check()?;
    Ok(placement)
}
