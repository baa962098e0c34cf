//! `PMI_process_mapping`, the job attribute in which Hydra and Slurm say
//! which node each rank runs on, read into this rank's host and its ranks
//! without building a table of the job.
//!
//! The value is `(vector,(start,nodes,ranks),...)`: each block gives
//! `ranks` consecutive ranks to each of `nodes` nodes from `start`; the
//! blocks repeat in turn until every rank has a node (so `(vector,(0,2,1))`
//! deals four ranks round robin to nodes 0 and 1).

use crate::bootstrap::Placement;
use crate::{Error, Rank, Result};

/// Blocks a mapping may hold (Slurm writes one per distinct layout run).
const MAX_BLOCKS: usize = 4096;

/// One `(start, nodes, ranks)` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    start: u32,
    nodes: u32,
    ranks: u32,
}

/// Where the ranks of a job of `size` run by `mapping`, seen from `rank`.
pub(crate) fn placement(mapping: &str, rank: Rank, size: u32) -> Result<Placement> {
    let blocks = parse(mapping)?;
    // Ranks are dealt block by block until all have a node: one pass finds
    // this rank's node, the next collects the ranks that share it.
    let mut node_of_rank = None;
    let mut hosts = 0u32;
    let mut local_ranks = Vec::new();
    for pass in 0..2 {
        let mut next: u64 = 0;
        'deal: loop {
            for block in &blocks {
                for node in block.start..block.start.saturating_add(block.nodes) {
                    hosts = hosts.max(node.saturating_add(1));
                    let first = next;
                    next += u64::from(block.ranks);
                    let dealt = first..next.min(u64::from(size));
                    if pass == 0 && dealt.contains(&u64::from(rank)) {
                        node_of_rank = Some(node);
                    }
                    if pass == 1 && node_of_rank == Some(node) {
                        local_ranks.extend(dealt.map(|r| r as Rank));
                    }
                    if next >= u64::from(size) {
                        break 'deal;
                    }
                }
            }
        }
    }
    if node_of_rank.is_none() {
        return Err(bad(mapping, "places no rank here"));
    }
    Ok(Placement {
        hosts: hosts.min(size),
        local_ranks,
    })
}

fn parse(mapping: &str) -> Result<Vec<Block>> {
    let body = mapping
        .trim()
        .strip_prefix("(vector,")
        .and_then(|rest| rest.strip_suffix(')'))
        .ok_or_else(|| bad(mapping, "is not (vector,...)"))?;
    let mut blocks = Vec::new();
    for part in body.split("),").map(|p| p.trim_end_matches(')')) {
        let numbers: Vec<u32> = part
            .strip_prefix('(')
            .ok_or_else(|| bad(mapping, "has a block without its parenthesis"))?
            .split(',')
            .map(|n| n.trim().parse())
            .collect::<std::result::Result<_, _>>()
            .map_err(|_| bad(mapping, "has a block that is not three numbers"))?;
        let [start, nodes, ranks] = numbers[..] else {
            return Err(bad(mapping, "has a block that is not three numbers"));
        };
        if nodes == 0 || ranks == 0 {
            return Err(bad(mapping, "has an empty block"));
        }
        blocks.push(Block {
            start,
            nodes,
            ranks,
        });
        if blocks.len() > MAX_BLOCKS {
            return Err(bad(mapping, "has too many blocks"));
        }
    }
    Ok(blocks)
}

fn bad(mapping: &str, why: &str) -> Error {
    let shown: String = mapping.chars().take(80).collect();
    Error::Bootstrap(format!("PMI_process_mapping {shown:?} {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(mapping: &str, rank: Rank, size: u32) -> (u32, Vec<Rank>) {
        let p = placement(mapping, rank, size).unwrap();
        (p.hosts, p.local_ranks)
    }

    #[test]
    fn blocks_and_round_robin_mappings_place_ranks() {
        // Hydra, one node of 8.
        assert_eq!(local("(vector,(0,1,8))", 5, 8), (1, (0..8).collect()));
        // Two nodes of 3 ranks in blocks, the last short.
        assert_eq!(local("(vector,(0,2,3))", 4, 5), (2, vec![3, 4]));
        assert_eq!(local("(vector,(0,2,3))", 0, 5), (2, vec![0, 1, 2]));
        // Round robin over two nodes, repeated.
        assert_eq!(local("(vector,(0,2,1))", 3, 6), (2, vec![1, 3, 5]));
        // Blocks of different shapes.
        assert_eq!(local("(vector,(0,1,2),(1,2,1))", 3, 4), (3, vec![3]));
    }

    #[test]
    fn garbage_is_a_typed_error() {
        for bad in [
            "",
            "(vector)",
            "(vector,(0,1))",
            "(vector,(0,0,1))",
            "(vector,(a,1,1))",
            "vector,(0,1,1)",
            "(vector,0,1,1)",
        ] {
            let err = placement(bad, 0, 4).unwrap_err();
            assert!(
                err.to_string().contains("PMI_process_mapping"),
                "{bad}: {err}"
            );
        }
        let many = format!("(vector,{})", vec!["(0,1,1)"; MAX_BLOCKS + 1].join(","));
        assert!(placement(&many, 0, 4).is_err());
        // A huge count ends when every rank is dealt.
        assert_eq!(local("(vector,(0,4000000000,1))", 2, 3).1, vec![2]);
    }
}
