//! Sorted member sets as maximal intervals of consecutive ranks, and the
//! set operations on them: how group operations on huge groups (a world of
//! 2^32 - 1 ranks without one rank) take memory of their result's size
//! rather than of their operands' member lists.

/// Consecutive ranks `first..=last`.
pub(crate) type Span = (u32, u32);

/// The maximal spans of increasing, distinct `members`.
pub(crate) fn coalesce(members: impl Iterator<Item = u32>) -> impl Iterator<Item = Span> {
    let mut members = members.peekable();
    std::iter::from_fn(move || {
        let first = members.next()?;
        let mut last = first;
        while let Some(&next) = members.peek() {
            if u64::from(next) != u64::from(last) + 1 {
                break;
            }
            last = next;
            members.next();
        }
        Some((first, last))
    })
}

/// Ranks in `spans`.
pub(crate) fn count(spans: &[Span]) -> u64 {
    spans
        .iter()
        .map(|&(first, last)| u64::from(last - first) + 1)
        .sum()
}

/// The ranks in `a` or `b` that `keep(in a, in b)` accepts, as maximal
/// spans, in one sweep over both: O(spans), whatever they hold.
pub(crate) fn merge(
    a: impl Iterator<Item = Span>,
    b: impl Iterator<Item = Span>,
    keep: impl Fn(bool, bool) -> bool,
) -> Vec<Span> {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    let mut out: Vec<Span> = Vec::new();
    // Every rank below `at` is decided.
    let mut at: u64 = 0;
    loop {
        while a.peek().is_some_and(|&(_, last)| u64::from(last) < at) {
            a.next();
        }
        while b.peek().is_some_and(|&(_, last)| u64::from(last) < at) {
            b.next();
        }
        let (next_a, next_b) = (a.peek().copied(), b.peek().copied());
        if next_a.is_none() && next_b.is_none() {
            return out;
        }
        // Membership at `at`, and where it next changes.
        let state = |span: Option<Span>| match span {
            Some((first, last)) if u64::from(first) <= at => (true, u64::from(last) + 1),
            Some((first, _)) => (false, u64::from(first)),
            None => (false, u64::MAX),
        };
        let ((in_a, change_a), (in_b, change_b)) = (state(next_a), state(next_b));
        let until = change_a.min(change_b);
        if keep(in_a, in_b) {
            let (first, last) = (at as u32, (until - 1) as u32);
            match out.last_mut() {
                Some(prev) if u64::from(prev.1) + 1 == at => prev.1 = last,
                _ => out.push((first, last)),
            }
        }
        at = until;
    }
}

/// The world ranks at the group positions `positions` (sorted, disjoint
/// spans of positions, each below the group's size) of the group whose
/// members are `members`, as maximal spans.
pub(crate) fn at_positions(members: impl Iterator<Item = Span>, positions: &[Span]) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    let mut wanted = positions.iter().copied().peekable();
    // Positions before the current span of members.
    let mut before: u64 = 0;
    for (first, last) in members {
        let end = before + u64::from(last - first) + 1;
        while let Some(&(from, to)) = wanted.peek() {
            let (from, to) = (u64::from(from), u64::from(to));
            if from >= end {
                break;
            }
            let (lo, hi) = (from.max(before), to.min(end - 1));
            let world = |p: u64| first + (p - before) as u32;
            match out.last_mut() {
                Some(prev) if u64::from(prev.1) + 1 == u64::from(world(lo)) => prev.1 = world(hi),
                _ => out.push((world(lo), world(hi))),
            }
            if to < end {
                wanted.next();
            } else {
                break;
            }
        }
        before = end;
    }
    out
}

/// The smallest rank that two of `spans` (in any order) share, if any.
pub(crate) fn first_overlap(spans: &mut [Span]) -> Option<u32> {
    spans.sort_unstable();
    let mut reach: Option<u32> = None;
    for &(first, last) in spans.iter() {
        if reach.is_some_and(|r| first <= r) {
            return Some(first);
        }
        reach = Some(reach.map_or(last, |r| r.max(last)));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn spans_of(set: &BTreeSet<u32>) -> Vec<Span> {
        coalesce(set.iter().copied()).collect()
    }

    fn ranks_of(spans: &[Span]) -> BTreeSet<u32> {
        spans.iter().flat_map(|&(f, l)| f..=l).collect()
    }

    fn set() -> impl Strategy<Value = BTreeSet<u32>> {
        prop::collection::btree_set(
            prop_oneof![0u32..64, (u32::MAX - 64)..u32::MAX, Just(u32::MAX)],
            0..40,
        )
    }

    proptest! {
        /// Spans are maximal, and each operation agrees with the same one
        /// on plain sets.
        #[test]
        fn merges_agree_with_plain_sets(a in set(), b in set()) {
            let (sa, sb) = (spans_of(&a), spans_of(&b));
            prop_assert_eq!(ranks_of(&sa), a.clone());
            prop_assert!(sa.windows(2).all(|p| u64::from(p[0].1) + 1 < u64::from(p[1].0)));
            type Keep = fn(bool, bool) -> bool;
            let ops: [(Keep, BTreeSet<u32>); 3] = [
                (|x, y| x || y, a.union(&b).copied().collect()),
                (|x, y| x && y, a.intersection(&b).copied().collect()),
                (|x, y| x && !y, a.difference(&b).copied().collect()),
            ];
            for (keep, expected) in ops {
                let merged = merge(sa.iter().copied(), sb.iter().copied(), keep);
                prop_assert_eq!(&merged, &spans_of(&expected));
                prop_assert_eq!(count(&merged), expected.len() as u64);
            }
        }

        /// Positions pick the members a plain list would.
        #[test]
        fn positions_pick_what_a_list_picks(a in set(), picks in set()) {
            let list: Vec<u32> = a.iter().copied().collect();
            let picks: BTreeSet<u32> = picks.into_iter().filter(|&p| (p as usize) < list.len()).collect();
            let picked = at_positions(spans_of(&a).into_iter(), &spans_of(&picks));
            let expected: BTreeSet<u32> = picks.iter().map(|&p| list[p as usize]).collect();
            prop_assert_eq!(picked, spans_of(&expected));
        }
    }

    #[test]
    fn the_first_overlap_is_the_smallest_shared_rank() {
        assert_eq!(first_overlap(&mut [(5, 9), (0, 3)]), None);
        assert_eq!(first_overlap(&mut [(5, 9), (0, 30), (40, 41)]), Some(5));
        assert_eq!(first_overlap(&mut [(0, 10), (20, 30), (10, 12)]), Some(10));
        assert_eq!(
            first_overlap(&mut [(0, u32::MAX), (u32::MAX, u32::MAX)]),
            Some(u32::MAX)
        );
    }
}
