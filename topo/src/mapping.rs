//! Where ranks run: a rank-to-node map, row-major with several ranks per
//! node (computed, O(1)), or an explicit list read from a user's file (one
//! line per rank: a node's coordinates).

use crate::{Node, Topology, Torus};

/// Which node of a torus each rank of a job runs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RankMap {
    /// Rank r on node r / `per_node`.
    RowMajor {
        /// How many ranks the job has.
        ranks: u32,
        /// Ranks sharing one node (at least 1).
        per_node: u32,
    },
    /// Rank r on `nodes[r]`.
    List(Vec<Node>),
}

impl RankMap {
    /// `ranks` ranks, `per_node` to a node, filling nodes in row-major order.
    pub fn row_major(torus: &Torus, ranks: u32, per_node: u32) -> Result<RankMap, String> {
        if per_node == 0 {
            return Err("a node holds at least one rank".into());
        }
        if ranks.div_ceil(per_node) > torus.nodes() {
            return Err(format!(
                "{ranks} ranks at {per_node} a node need {} nodes; the torus has {}",
                ranks.div_ceil(per_node),
                torus.nodes()
            ));
        }
        Ok(RankMap::RowMajor { ranks, per_node })
    }

    /// Rank r on `nodes[r]`; several ranks may share a node.
    pub fn from_list(torus: &Torus, nodes: Vec<Node>) -> Result<RankMap, String> {
        if let Some((rank, node)) = nodes.iter().enumerate().find(|(_, &n)| n >= torus.nodes()) {
            return Err(format!(
                "rank {rank} is on node {node}, outside the torus of {} nodes",
                torus.nodes()
            ));
        }
        Ok(RankMap::List(nodes))
    }

    /// One line per rank, in rank order: the node's coordinates separated by
    /// blanks or commas. Blank lines and `#` comments are skipped.
    pub fn parse(torus: &Torus, text: &str) -> Result<RankMap, String> {
        let dims = torus.dims();
        let mut nodes = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let coords = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<u32>())
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| format!("line {}: {e}: {line:?}", i + 1))?;
            if coords.len() != dims.len() || coords.iter().zip(dims).any(|(&c, &d)| c >= d) {
                return Err(format!(
                    "line {}: {line:?} is not a coordinate of a {dims:?} torus",
                    i + 1
                ));
            }
            nodes.push(torus.node(&coords));
        }
        RankMap::from_list(torus, nodes)
    }

    /// How many ranks the map places.
    pub fn ranks(&self) -> u32 {
        match self {
            RankMap::RowMajor { ranks, .. } => *ranks,
            RankMap::List(nodes) => nodes.len() as u32,
        }
    }

    /// The node rank `rank` runs on; `None` past the last rank.
    pub fn node(&self, rank: u32) -> Option<Node> {
        match self {
            RankMap::RowMajor { ranks, per_node } => (rank < *ranks).then(|| rank / per_node),
            RankMap::List(nodes) => nodes.get(rank as usize).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_are_read_and_checked() {
        let t = Torus::new(&[2, 3]).unwrap();
        let m = RankMap::row_major(&t, 12, 2).unwrap();
        assert_eq!(
            (m.node(0), m.node(5), m.node(11), m.node(12)),
            (Some(0), Some(2), Some(5), None)
        );
        assert!(RankMap::row_major(&t, 13, 2).is_err());
        assert!(RankMap::row_major(&t, 1, 0).is_err());
        let m = RankMap::parse(&t, "# rank: x y\n1 2\n\n0,0  # the first node\n1 2\n").unwrap();
        assert_eq!(m, RankMap::List(vec![5, 0, 5]));
        assert!(RankMap::parse(&t, "2 0\n").unwrap_err().contains("line 1"));
        assert!(RankMap::parse(&t, "0 0 0\n").is_err());
        assert!(RankMap::parse(&t, "0 x\n").is_err());
        assert!(RankMap::from_list(&t, vec![6]).is_err());
    }
}
