//! Which ranks of a job each of its hosts runs: dealt in turn, as
//! `mpiexec -hosts` places them, or in consecutive blocks, as Slurm's block
//! distribution and a host file filled host by host do (where the
//! collectives that fold in rank order take two levels).

use catena_fabric::Rank;

/// How a job's ranks are spread over its hosts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Placement {
    /// Rank r on host r mod hosts.
    #[default]
    Cyclic,
    /// Consecutive ranks on each host, the first `ranks mod hosts` hosts
    /// one more than the others.
    Block,
}

impl Placement {
    /// The ranks host `host` of `hosts` runs, of a job of `ranks` (none
    /// where there are no hosts).
    pub fn ranks_of(self, host: u32, hosts: u32, ranks: u32) -> Vec<Rank> {
        if hosts == 0 {
            return Vec::new();
        }
        match self {
            Placement::Cyclic => (host..ranks).step_by(hosts as usize).collect(),
            Placement::Block => {
                let first = |h: u32| h * (ranks / hosts) + h.min(ranks % hosts);
                (first(host)..first(host + 1)).collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_runs_on_one_host() {
        for placement in [Placement::Cyclic, Placement::Block] {
            for hosts in 1..6 {
                for ranks in 0..20 {
                    let mut all: Vec<Rank> = (0..hosts)
                        .flat_map(|h| placement.ranks_of(h, hosts, ranks))
                        .collect();
                    all.sort_unstable();
                    assert_eq!(all, (0..ranks).collect::<Vec<_>>(), "{placement:?}");
                }
            }
        }
    }

    #[test]
    fn blocks_are_consecutive_and_even() {
        let blocks: Vec<_> = (0..3).map(|h| Placement::Block.ranks_of(h, 3, 8)).collect();
        assert_eq!(blocks, [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]);
        let dealt: Vec<_> = (0..3)
            .map(|h| Placement::Cyclic.ranks_of(h, 3, 8))
            .collect();
        assert_eq!(dealt, [vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]);
        for placement in [Placement::Cyclic, Placement::Block] {
            assert!(placement.ranks_of(0, 0, 8).is_empty());
        }
    }
}
