//! What sort-based split algorithms move around: one member's packed color,
//! key and parent rank, compared color first, then key, then parent rank
//! (ties broken by parent rank, as `MPI_Comm_split` does).

use std::cmp::Ordering;

use catena_fabric::Rank;
use serde::{Deserialize, Serialize};

use crate::error::user_code;
use crate::Result;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Item<K> {
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
    pub(crate) fn cmp_by(&self, other: &Item<K>, order: KeyOrder<'_, K>) -> Result<Ordering> {
        let by_color = self.color.cmp(&other.color);
        if by_color != Ordering::Equal {
            return Ok(by_color);
        }
        let by_key = match (&self.key, &other.key) {
            (Some(a), Some(b)) => user_code("the key comparator", || order(a, b))?,
            _ => Ordering::Equal,
        };
        Ok(by_key.then(self.parent_rank.cmp(&other.parent_rank)))
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

/// Sorts `items` with the user's order, a panicking comparator included.
pub(crate) fn sort_items<K>(items: &mut [Item<K>], order: KeyOrder<'_, K>) -> Result<()> {
    let mut failure = None;
    items.sort_by(|a, b| match a.cmp_by(b, order) {
        Ok(o) => o,
        Err(e) => {
            failure.get_or_insert(e);
            Ordering::Equal
        }
    });
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
