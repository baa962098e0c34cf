//! Hash and Hash64 (seed 000, section 3.3): each iteration hashes the packed
//! color into one of `BINS` bins and splits the chain into one chain per bin
//! (`bins`), so processes of one color always stay together. Iterations stop when a
//! chain holds one color (checked by an allreduce when an iteration did not
//! shorten it). O(BINS) memory per process, O(log N) rounds per iteration.
//! Hash64 hands chains shorter than 64 to AllgatherGroup; a reorder ends
//! with Bitonic on each single-color chain.

use catena_fabric::{Time, Transport};

use super::agreement::Agreed;
use super::bins::split_by_bin;
use super::item::{Item, KeyOrder};
use super::{allgather_group, bitonic, sorted, Placement};
use crate::call::Call;
use crate::chain::{Calls, Chain};
use crate::codec::Wire;
use crate::scan::allreduce;
use crate::tree::reserve;
use crate::Result;

/// Bins per iteration (a 4-bit region of the hash).
const BINS: usize = 16;
const BIN_BITS: u32 = BINS.trailing_zeros();
/// After this many iterations a chain that still mixes colors (persistent
/// hash collisions) is finished by Bitonic.
const MAX_ITERATIONS: u32 = 32;

/// Jenkins' one-at-a-time hash of `color` rotated by `iteration` bytes,
/// seeded with the iteration, masked to the iteration's 4-bit region.
fn bin(color: &[u8], iteration: u32) -> usize {
    let rotate = if color.is_empty() {
        0
    } else {
        iteration as usize % color.len()
    };
    let (tail, head) = color.split_at(rotate);
    let mut h = iteration;
    for &b in head.iter().chain(tail) {
        h = h.wrapping_add(u32::from(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h = h.wrapping_add(h << 15);
    let shift = (iteration * BIN_BITS) % (32 - BIN_BITS + 1);
    ((h >> shift) as usize) & (BINS - 1)
}

/// Whether every process of `chain` has this color.
async fn one_color<T: Transport>(
    t: &T,
    chain: &Chain,
    color: &[u8],
    deadline: Time,
) -> Result<bool> {
    let range = (color.to_vec(), color.to_vec());
    let (lo, hi) = allreduce(
        t,
        chain,
        range,
        |a, b| (a.0.clone().min(b.0.clone()), a.1.clone().max(b.1.clone())),
        deadline,
    )
    .await?;
    Ok(lo == hi)
}

/// Takes one of `calls` on the parent; the chains it derives reserve their
/// own calls as it goes (they are its alone).
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    mut call: Call<'_, T, Calls>,
    me: Option<Item<K>>,
    agreed: Agreed,
    order: KeyOrder<'_, K>,
    serial_below: Option<u32>,
) -> Result<Option<Placement>> {
    let (t, parent, deadline) = (call.t, call.chain, call.deadline);
    // Iteration 0 also separates members from non-members (an extra bin).
    let first_bin = me.as_ref().map_or(BINS, |i| bin(&i.color, 0));
    let mut chain = split_by_bin(call.next()?, first_bin, BINS + 1, agreed.context)
        .await?
        .chain;
    let Some(item) = me else {
        return Ok(None);
    };
    let mut iteration = 1;
    let mut previous_size = parent.size();
    while agreed.split && chain.size() > 1 {
        if serial_below.is_some_and(|below| chain.size() < below) {
            return serially(t, &chain, item, order, deadline).await;
        }
        if chain.size() == previous_size && one_color(t, &chain, &item.color, deadline).await? {
            break;
        }
        if iteration == MAX_ITERATIONS {
            // Colors that collide under every hash: sort them apart.
            return by_bitonic(t, &chain, item, order, deadline).await;
        }
        previous_size = chain.size();
        let mine = bin(&item.color, iteration);
        let call = Call::new(t, &chain, chain.next_call(), deadline);
        chain = split_by_bin(call, mine, BINS, agreed.context).await?.chain;
        iteration += 1;
    }
    if agreed.reorder && chain.size() > 1 {
        if serial_below.is_some_and(|below| chain.size() < below) {
            return serially(t, &chain, item, order, deadline).await;
        }
        return by_bitonic(t, &chain, item, order, deadline).await;
    }
    Ok(Some(Placement {
        rank: chain.rank(),
        size: chain.size(),
        left: chain.left(),
        right: chain.right(),
    }))
}

/// Finishes a chain serially (AllgatherGroup).
async fn serially<T: Transport, K: Wire + Clone>(
    t: &T,
    chain: &Chain,
    item: Item<K>,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Option<Placement>> {
    chain.reserve_neighbours();
    let calls = chain.reserve(allgather_group::CALLS);
    allgather_group::place(Call::new(t, chain, calls, deadline), Some(item), order).await
}

/// Sorts a chain by Bitonic and places its members.
async fn by_bitonic<T: Transport, K: Wire + Clone>(
    t: &T,
    chain: &Chain,
    item: Item<K>,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Option<Placement>> {
    let sort = Call::new(t, chain, reserve(chain), deadline);
    let (slot, faults) = bitonic::sort(sort, Some(item), order).await?;
    let calls = Call::new(t, chain, chain.reserve(sorted::CALLS), deadline);
    sorted::place(calls, slot, true, faults, true).await
}
