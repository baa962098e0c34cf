//! AllgatherGroup: every process gathers every item over the chain and sorts
//! its own group locally, as MPI libraries do today: O(N) memory and
//! O(N log N) time per process, the baseline the scalable algorithms beat.
//! Members order their group each on their own, so one allreduce checks that
//! their links agree (a comparator may answer differently on each process)
//! and spreads any comparator fault.

use catena_fabric::{Rank, Transport};

use super::fault::{Fault, Faults};
use super::item::{sort_items, Item, KeyOrder};
use super::mix::mix;
use super::sorted::placements;
use super::Placement;
use crate::call::Call;
use crate::chain::Calls;
use crate::codec::{encode, Wire};
use crate::scan::allreduce_in;
use crate::tree::allgather_in;
use crate::Result;

/// The calls it makes on `chain` (an allgather, then an allreduce), whose
/// neighbour search must be reserved too.
pub(crate) const CALLS: u32 = 3;

pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    mut call: Call<'_, T, Calls>,
    me: Option<Item<K>>,
    order: KeyOrder<'_, K>,
) -> Result<Option<Placement>> {
    let tags = [call.tags.next()?, call.tags.next()?];
    let mine = encode(&me, "an allgather value")?;
    let all: Vec<Option<Item<K>>> = allgather_in(call.on(call.chain, tags), mine).await?;
    let mut faults = Faults::default();
    let mut placement = None;
    if let Some(mine) = me {
        let mut group: Vec<Item<K>> = all
            .into_iter()
            .flatten()
            .filter(|i| i.color == mine.color)
            .collect();
        if faults.absorb(sort_items(&mut group, order))?.is_some() {
            let at = group
                .iter()
                .position(|i| i.parent_rank == mine.parent_rank)
                .expect("this process's own item is in its group");
            placement = Some(placements(&group)[at]);
        }
    }
    let claims = placement.map_or(0, |p| link_claims(call.chain.address(), &p));
    let (balance, fault) = allreduce_in(call.next()?, (claims, faults.flags()), |a, b| {
        (a.0.wrapping_add(b.0), a.1.union(b.1))
    })
    .await?;
    faults.learn(fault);
    if balance != 0 {
        faults.learn(Fault::NOT_A_TOTAL_ORDER);
    }
    faults.check()?;
    Ok(placement)
}

/// A link `from` (rank `rank` of `size`) -> `to` (rank `rank` + 1).
fn link(from: Rank, rank: u32, to: Rank, size: u32) -> u64 {
    let ends = u64::from(from) << 32 | u64::from(to);
    let place = u64::from(rank) << 32 | u64::from(size);
    mix(ends, place, 0x6c69_6e6b)
}

/// What `me` at `p` claims: its right link, minus the right link its left
/// neighbour must claim. Over a group the claims cancel exactly when every
/// link is claimed from both ends with agreeing ranks and sizes, which
/// (ends being checked by `Chain::from_links`) makes each group one chain.
fn link_claims(me: Rank, p: &Placement) -> u64 {
    let right = p.right.map_or(0, |r| link(me, p.rank, r, p.size));
    let left = p.left.map_or(0, |l| link(l, p.rank - 1, me, p.size));
    right.wrapping_sub(left)
}
