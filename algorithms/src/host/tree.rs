//! k-nomial trees over a team's members rooted at member 0, in which every
//! subtree is a contiguous run of members, so an ordered reduction keeps
//! rank order; a radix of at least the team's size is the flat tree. Trees
//! rooted elsewhere are these, rotated (for broadcasts, where order does
//! not matter).

/// The parent of `v` in the radix-`radix` tree: `v` with its lowest
/// non-zero base-`radix` digit cleared.
pub(crate) fn parent(v: u32, radix: u32) -> Option<u32> {
    if v == 0 {
        return None;
    }
    let (v, radix) = (u64::from(v), u64::from(radix));
    let mut unit = 1u64;
    while (v / unit) % radix == 0 {
        unit *= radix;
    }
    Some((v - (v / unit) % radix * unit) as u32)
}

/// The children of `v` among `0..n`, in increasing order: `v + j r^l` for
/// every power `r^l` below `v`'s lowest non-zero digit's, `j` in `1..r`.
pub(crate) fn children(v: u32, n: u32, radix: u32) -> impl Iterator<Item = u32> {
    let (v64, n64, r) = (u64::from(v), u64::from(n), u64::from(radix.max(2)));
    let mut span = 1u64;
    while v64 != 0 && (v64 / span) % r == 0 {
        span *= r;
    }
    let limit = if v == 0 { u64::MAX } else { span };
    std::iter::successors(Some(1u64), move |&unit| unit.checked_mul(r))
        .take_while(move |&unit| unit < limit && v64 + unit < n64)
        .flat_map(move |unit| (1..r).map(move |j| v64 + j * unit))
        .filter(move |&c| c < n64)
        .map(|c| c as u32)
}

/// Where the subtree of `v` among `0..n` ends: it is `v..subtree_end`,
/// `v`'s lowest non-zero digit's power of `radix` long (all of `0..n` for
/// the root), cut at `n`.
pub(crate) fn subtree_end(v: u32, n: u32, radix: u32) -> u32 {
    if v == 0 {
        return n;
    }
    let (v64, r) = (u64::from(v), u64::from(radix.max(2)));
    let mut span = 1u64;
    while (v64 / span) % r == 0 {
        span *= r;
    }
    (v64 + span).min(u64::from(n)) as u32
}

/// Member `m` as seen from a tree rooted at `root` (which becomes 0).
pub(crate) fn virtual_of(m: u32, root: u32, n: u32) -> u32 {
    (m + n - root) % n
}

/// The member at virtual place `v` of a tree rooted at `root`.
pub(crate) fn member_of(v: u32, root: u32, n: u32) -> u32 {
    (v + root) % n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member but the root has one parent, which lists it among its
    /// children; subtrees are contiguous runs in increasing order.
    #[test]
    fn trees_are_consistent_and_contiguous() {
        for n in 1..70 {
            for radix in [2, 3, 4, 8, 64, 1024] {
                let mut covered = vec![0u32; n as usize];
                for v in 0..n {
                    let kids: Vec<u32> = children(v, n, radix).collect();
                    assert!(kids.windows(2).all(|w| w[0] < w[1]), "{n} {radix} {v}");
                    for &c in &kids {
                        assert_eq!(parent(c, radix), Some(v), "{n} {radix} {c}");
                        covered[c as usize] += 1;
                    }
                    // The subtree of v is v and its children's subtrees,
                    // in order: the next child starts where the last ended.
                    let mut end = v + 1;
                    for &c in &kids {
                        assert_eq!(c, end, "{n} {radix} {v}: gap before {c}");
                        end = subtree_end_by_children(c, n, radix);
                    }
                    assert_eq!(subtree_end(v, n, radix), end, "{n} {radix} {v}");
                }
                assert!(covered[0] == 0 && covered[1..].iter().all(|&c| c == 1));
            }
        }
    }

    fn subtree_end_by_children(v: u32, n: u32, radix: u32) -> u32 {
        children(v, n, radix)
            .last()
            .map_or(v + 1, |c| subtree_end_by_children(c, n, radix))
    }

    #[test]
    fn flat_when_the_radix_covers_the_team() {
        assert_eq!(children(0, 5, 8).collect::<Vec<_>>(), [1, 2, 3, 4]);
        assert_eq!(children(3, 5, 8).count(), 0);
        assert_eq!(children(0, 16, 4).collect::<Vec<_>>(), [1, 2, 3, 4, 8, 12]);
        assert_eq!(children(4, 16, 4).collect::<Vec<_>>(), [5, 6, 7]);
    }
}
