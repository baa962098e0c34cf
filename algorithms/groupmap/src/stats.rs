//! One pass over a sorted member list, giving what the representations'
//! analytic size estimates and applicability checks need.

/// Shape of a sorted, distinct member list in a world of `world` ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stats {
    pub world: u32,
    pub len: u32,
    /// Smallest and largest member; both 0 for an empty set.
    pub min: u32,
    pub max: u32,
    /// Maximal intervals of consecutive ranks.
    pub runs: u32,
    /// The common difference when the members form an arithmetic
    /// progression (1 for sets of fewer than two members).
    pub stride: Option<u32>,
}

impl Stats {
    pub(crate) fn of(members: &[u32], world: u32) -> Stats {
        let (min, max) = match (members.first(), members.last()) {
            (Some(&a), Some(&b)) => (a, b),
            _ => (0, 0),
        };
        let mut runs = u32::from(!members.is_empty());
        let mut stride = members.get(1).map_or(Some(1), |&b| Some(b - min));
        for pair in members.windows(2) {
            let gap = pair[1] - pair[0];
            runs += u32::from(gap != 1);
            if stride != Some(gap) {
                stride = None;
            }
        }
        Stats {
            world,
            len: members.len() as u32,
            min,
            max,
            runs,
            stride,
        }
    }

    /// The span `max - min + 1` the members lie in (0 when empty).
    pub(crate) fn span(&self) -> u64 {
        if self.len == 0 {
            0
        } else {
            u64::from(self.max - self.min) + 1
        }
    }
}

/// Bits to write any value below `n` (at least 1).
pub(crate) fn bits_for(n: u64) -> u32 {
    (64 - n.saturating_sub(1).leading_zeros()).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_see_runs_and_strides() {
        let s = Stats::of(&[3, 4, 5, 9, 10], 16);
        assert_eq!((s.len, s.min, s.max, s.runs, s.stride), (5, 3, 10, 2, None));
        assert_eq!(Stats::of(&[2, 5, 8], 9).stride, Some(3));
        assert_eq!(Stats::of(&[7], 9).stride, Some(1));
        assert_eq!(Stats::of(&[], 9).runs, 0);
        assert_eq!(
            (bits_for(1), bits_for(2), bits_for(3), bits_for(1 << 20)),
            (1, 1, 2, 20)
        );
    }
}
