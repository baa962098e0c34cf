//! What sort-based split algorithms move around: one member's packed color,
//! its digest, key and parent rank, compared by color (digest first, then
//! bytes), then key, then parent rank (ties broken by parent rank, as
//! `MPI_Comm_split` does).

use std::cmp::Ordering;

use catena_fabric::Rank;
use serde::{Deserialize, Serialize};

use super::fault::{Fault, Faults};
use super::mix::digest;
use crate::error::user_code;
use crate::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Item<K> {
    /// The digest of `color`: colors order by it first, so a comparison
    /// needs the bytes only when digests are equal.
    pub digest: u64,
    /// The color as packed bytes: equal colors pack equal. Groups do not
    /// depend on how colors order, only on which are equal.
    pub color: Vec<u8>,
    /// `None` when the split does not reorder.
    pub key: Option<K>,
    pub parent_rank: u32,
    pub address: Rank,
}

/// The user's key order.
pub(crate) type KeyOrder<'a, K> = &'a dyn Fn(&K, &K) -> Ordering;

impl<K> Item<K> {
    pub(crate) fn new(color: Vec<u8>, key: Option<K>, parent_rank: u32, address: Rank) -> Item<K> {
        Item {
            digest: digest(&color),
            color,
            key,
            parent_rank,
            address,
        }
    }

    pub(crate) fn cmp_by(&self, other: &Item<K>, order: KeyOrder<'_, K>) -> Result<Ordering> {
        let by_color = self
            .digest
            .cmp(&other.digest)
            .then_with(|| self.color.cmp(&other.color));
        if by_color != Ordering::Equal {
            return Ok(by_color);
        }
        self.cmp_key_by(other.key.as_ref(), other.parent_rank, order)
    }

    /// The order of items of equal color: by key, then parent rank.
    pub(crate) fn cmp_key_by(
        &self,
        key: Option<&K>,
        parent_rank: u32,
        order: KeyOrder<'_, K>,
    ) -> Result<Ordering> {
        let by_key = match (&self.key, key) {
            (Some(a), Some(b)) => user_code("the key comparator", || order(a, b))?,
            _ => Ordering::Equal,
        };
        Ok(by_key.then(self.parent_rank.cmp(&parent_rank)))
    }
}

/// `None` (a non-member's empty slot) sorts after every item.
pub(crate) fn cmp_slots<K>(
    a: &Option<Item<K>>,
    b: &Option<Item<K>>,
    order: KeyOrder<'_, K>,
) -> Result<Ordering> {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp_by(b, order),
        (Some(_), None) => Ok(Ordering::Less),
        (None, Some(_)) => Ok(Ordering::Greater),
        (None, None) => Ok(Ordering::Equal),
    }
}

/// Sorts `items` with the user's order, a panicking comparator included,
/// and one the standard sort finds is not a total order (it panics).
pub(crate) fn sort_items<K>(items: &mut [Item<K>], order: KeyOrder<'_, K>) -> Result<()> {
    let mut failure = None;
    user_code("the key comparator", || {
        items.sort_by(|a, b| match a.cmp_by(b, order) {
            Ok(o) => o,
            Err(e) => {
                failure.get_or_insert(e);
                Ordering::Equal
            }
        })
    })?;
    failure.map_or(Ok(()), Err)
}

/// Merges two sorted runs.
pub(crate) fn merge_items<K>(
    left: Vec<Item<K>>,
    right: Vec<Item<K>>,
    order: KeyOrder<'_, K>,
) -> Result<Vec<Item<K>>> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut l, mut r) = (left.into_iter().peekable(), right.into_iter().peekable());
    while let (Some(a), Some(b)) = (l.peek(), r.peek()) {
        if a.cmp_by(b, order)? == Ordering::Greater {
            out.extend(r.next());
        } else {
            out.extend(l.next());
        }
    }
    out.extend(l);
    out.extend(r);
    Ok(out)
}

/// A sorted run on its way up a gather, or the fault that emptied it.
pub(crate) type Run<K> = (Vec<Item<K>>, Fault);

/// Merges two runs of a gather: a fault in either, or a panic of the
/// comparator here (recorded in `faults`), travels on instead of the items.
pub(crate) fn merge_runs<K>(
    left: Run<K>,
    right: Run<K>,
    order: KeyOrder<'_, K>,
    faults: &mut Faults,
) -> Result<Run<K>> {
    let fault = left.1.union(right.1);
    if !fault.is_none() {
        return Ok((Vec::new(), fault));
    }
    Ok(match faults.absorb(merge_items(left.0, right.0, order))? {
        Some(merged) => (merged, Fault::NONE),
        None => (Vec::new(), Fault::PANICKED),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn the_standard_sorts_total_order_panic_becomes_user_code() {
        let mut items: Vec<Item<u32>> = (0..64u32)
            .map(|i| Item::new(vec![1], Some(i * 7 % 64), i, i))
            .collect();
        // An answer per pair, unrelated to the reverse pair's.
        let order = |a: &u32, b: &u32| match (a.wrapping_mul(31) ^ b).count_ones() % 3 {
            0 => Ordering::Equal,
            1 => Ordering::Less,
            _ => Ordering::Greater,
        };
        let got = sort_items(&mut items, &order);
        assert!(
            matches!(&got, Err(Error::UserCode { message, .. }) if message.contains("total order")),
            "{got:?}"
        );
        // No item lost or duplicated.
        let mut ranks: Vec<u32> = items.iter().map(|i| i.parent_rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..64).collect::<Vec<_>>());
    }
}
