//! A messenger's connections by peer, the one looked up last kept at hand:
//! a receive and the send that answers it (a ping-pong, a chain's step)
//! find theirs without hashing (about 30 instructions each, on the path
//! from a frame's arrival to the reply's store).

use std::cell::Cell;

use indexmap::IndexMap;
use rustc_hash::FxBuildHasher;

use crate::Rank;

/// Values by rank in an `IndexMap` (a dense list indexed by a hash map),
/// with the position of the last one found remembered. O(connections)
/// memory, as a plain map.
pub(super) struct Connections<C> {
    map: IndexMap<Rank, C, FxBuildHasher>,
    /// The position of the last value found. Checked against the rank
    /// asked for, so a removal that moved entries leaves it merely stale.
    last: Cell<usize>,
}

impl<C> Connections<C> {
    pub(super) fn new() -> Connections<C> {
        Connections {
            map: IndexMap::default(),
            last: Cell::new(0),
        }
    }

    /// The position of `rank`'s value, the last one found first.
    #[inline(always)]
    fn find(&self, rank: Rank) -> Option<usize> {
        let last = self.last.get();
        if self.map.get_index(last).is_some_and(|(r, _)| *r == rank) {
            return Some(last);
        }
        let found = self.map.get_index_of(&rank)?;
        self.last.set(found);
        Some(found)
    }

    #[inline(always)]
    pub(super) fn get(&self, rank: Rank) -> Option<&C> {
        let i = self.find(rank)?;
        self.map.get_index(i).map(|(_, value)| value)
    }

    #[inline(always)]
    pub(super) fn get_mut(&mut self, rank: Rank) -> Option<&mut C> {
        let i = self.find(rank)?;
        self.map.get_index_mut(i).map(|(_, value)| value)
    }

    pub(super) fn contains(&self, rank: Rank) -> bool {
        self.map.contains_key(&rank)
    }

    /// Adds `rank`'s value, or replaces it.
    pub(super) fn insert(&mut self, rank: Rank, value: C) {
        self.map.insert(rank, value);
    }

    pub(super) fn remove(&mut self, rank: Rank) -> Option<C> {
        self.map.swap_remove(&rank)
    }

    pub(super) fn len(&self) -> usize {
        self.map.len()
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (Rank, &C)> {
        self.map.iter().map(|(rank, value)| (*rank, value))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (Rank, &mut C)> {
        self.map.iter_mut().map(|(rank, value)| (*rank, value))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &C> {
        self.map.values()
    }
}

impl<C> std::ops::Index<Rank> for Connections<C> {
    type Output = C;

    /// `rank`'s value; panics where there is none.
    fn index(&self, rank: Rank) -> &C {
        self.get(rank).expect("a connection with the rank")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Inserts, replacements, removals and lookups in a mixed order, each
    /// checked against a `BTreeMap` doing the same: the remembered
    /// position, stale after a removal moved the last entry, must never
    /// give another rank's value.
    #[test]
    fn agrees_with_a_map() {
        let mut connections = Connections::new();
        let mut reference = BTreeMap::new();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for step in 0..20_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let rank = (x % 24) as Rank;
            match x >> 60 {
                0..=5 => {
                    connections.insert(rank, step);
                    reference.insert(rank, step);
                }
                6..=8 => assert_eq!(connections.remove(rank), reference.remove(&rank)),
                9..=11 => {
                    if let Some(value) = connections.get_mut(rank) {
                        *value += 1;
                    }
                    if let Some(value) = reference.get_mut(&rank) {
                        *value += 1;
                    }
                }
                _ => assert_eq!(connections.get(rank), reference.get(&rank)),
            }
            assert_eq!(connections.len(), reference.len());
            assert_eq!(connections.contains(rank), reference.contains_key(&rank));
        }
        let mut all: Vec<_> = connections.iter().map(|(r, v)| (r, *v)).collect();
        all.sort();
        assert_eq!(all, reference.into_iter().collect::<Vec<_>>());
    }
}
