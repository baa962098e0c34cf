//! From a torus schedule (`catena_topo`, over nodes) to this process's
//! [`TreePlan`] (over ranks): one leader rank per node takes the node's
//! place in every colour; the node's other ranks hang off their leader.

use catena_fabric::Rank;
use catena_topo::{RankMap, Schedule};
use rustc_hash::FxHashMap;

use super::{TreePlace, TreePlan};
use crate::{Error, Result};

/// `me`'s plan in the sub-communicator of `ranks` whose broadcast tree over
/// their nodes is `schedule`. `root` leads its node; every other node is
/// led by its first rank in `ranks`. Built once per communicator: O(|ranks|)
/// time, and the plan kept is O(colours + local ranks).
pub fn torus_plan(
    schedule: &Schedule,
    map: &RankMap,
    ranks: &[Rank],
    root: Rank,
    me: Rank,
) -> Result<TreePlan> {
    let node_of = |rank: Rank| {
        map.node(rank).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "rank {rank} is not in the rank map of {} ranks",
                map.ranks()
            ))
        })
    };
    if !ranks.contains(&me) || !ranks.contains(&root) {
        return Err(Error::InvalidArgument(format!(
            "rank {me} or root {root} is not in the sub-communicator"
        )));
    }
    let mut leaders = FxHashMap::default();
    leaders.insert(node_of(root)?, root);
    for &rank in ranks {
        leaders.entry(node_of(rank)?).or_insert(rank);
    }
    let root_node = node_of(root)?;
    match schedule.root() {
        Some(node) if node == root_node => {}
        Some(node) => {
            return Err(Error::InvalidArgument(format!(
            "the schedule is rooted at node {node}, the root rank {root} runs on node {root_node}"
        )))
        }
        None => return Err(Error::InvalidArgument("the schedule has no colours".into())),
    }
    let my_node = node_of(me)?;
    let leader = leaders[&my_node];
    let leader_of = |node| {
        leaders.get(&node).copied().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "the schedule reaches node {node}, where no member runs"
            ))
        })
    };
    let colours = if me != leader {
        let place = TreePlace {
            parent: Some(leader),
            children: Vec::new(),
        };
        vec![place; schedule.colours.len()]
    } else {
        let locals: Vec<Rank> = ranks
            .iter()
            .copied()
            .filter(|&r| r != me && map.node(r) == Some(my_node))
            .collect();
        let places = schedule.places(my_node);
        if my_node != root_node && places.iter().any(|p| p.parent.is_none()) {
            return Err(Error::InvalidArgument(format!(
                "rank {me} runs on node {my_node}, which the schedule does not reach"
            )));
        }
        places
            .into_iter()
            .map(|place| {
                let mut children = place
                    .children
                    .into_iter()
                    .map(leader_of)
                    .collect::<Result<Vec<_>>>()?;
                children.extend(&locals);
                Ok(TreePlace {
                    parent: place.parent.map(leader_of).transpose()?,
                    children,
                })
            })
            .collect::<Result<Vec<_>>>()?
    };
    Ok(TreePlan {
        colours,
        concurrent_allreduce: schedule.concurrent_allreduce,
    })
}
