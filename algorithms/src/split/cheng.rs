//! `Cheng<M>` (seed 000, section 3.2, after Sack and Gropp): each block of M
//! consecutive processes gathers its items, merged, to its first process;
//! those P = ceil(N/M) leaders sort by Cheng et al.'s exact splitting (a
//! parallel selection finds the P-1 cuts that give each leader exactly its
//! block's share, then one exchange and a merge), and each leader scatters
//! its share back over its block. Leaders hold O(M + P); the others O(1).

use std::cmp::Ordering;

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use super::agreement::Agreed;
use super::bins::FIRST_DERIVED_CALL;
use super::item::{merge_items, sort_items, Item, KeyOrder};
use super::{sorted, Placement};
use crate::chain::{Calls, Chain};
use crate::codec::Wire;
use crate::scan::allreduce;
use crate::tree::{allgather, reduce_with, reserve, scatter_in};
use crate::Result;

/// Where the block chains and the leaders' chain count their calls.
const BLOCK_CALLS: u32 = FIRST_DERIVED_CALL;
const LEADER_CALLS: u32 = 2 * FIRST_DERIVED_CALL;

/// Takes `sorted::CALLS` of `calls` on a parent whose neighbour search is
/// reserved; the block and leader chains are its alone.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    t: &T,
    parent: &Chain,
    calls: Calls,
    me: Option<Item<K>>,
    agreed: Agreed,
    max_items: u32,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Option<Placement>> {
    let (members, context) = (agreed.members, agreed.context);
    let (n, p) = (parent.size(), parent.rank());
    let blocks = n.div_ceil(max_items);
    let block_index = p / max_items;
    let first = block_index * max_items;
    let block_size = max_items.min(n - first);
    let in_block = p - first;
    let block = Chain::from_links(
        in_block,
        block_size,
        parent.address(),
        parent.left().filter(|_| in_block > 0),
        parent.right().filter(|_| in_block + 1 < block_size),
        context,
    )?
    .counting_calls_from(BLOCK_CALLS);
    // Leaders are M = 2^d ranks apart: the neighbour cache reaches them.
    let nb = parent.reserved_neighbours(t, deadline).await?;
    let member = me.is_some();
    let run: Vec<Item<K>> = me.into_iter().collect();
    let merge = |left, right| merge_items(left, right, order);
    let gathered = reduce_with(t, &block, reserve(&block), 0, run, merge, deadline).await?;
    let shares = match gathered {
        None => None,
        Some(run) => {
            let d = max_items.trailing_zeros();
            let leaders = Chain::from_links(
                block_index,
                blocks,
                parent.address(),
                nb.left(d).filter(|_| block_index > 0),
                nb.right(d).filter(|_| block_index + 1 < blocks),
                context,
            )?
            .counting_calls_from(LEADER_CALLS);
            let share = sort(t, &leaders, run, members, max_items, order, deadline).await?;
            let mut slots: Vec<Option<Item<K>>> = share.into_iter().map(Some).collect();
            slots.resize(block_size as usize, None);
            Some(slots)
        }
    };
    let slot = scatter_in(t, &block, reserve(&block), 0, shares, deadline).await?;
    sorted::place(t, parent, calls, slot, member, deadline).await
}

/// Sorts the leaders' runs: leader b ends with the items at sorted
/// positions [bM, (b+1)M) of the `members` items.
async fn sort<T: Transport, K: Wire + Clone>(
    t: &T,
    leaders: &Chain,
    run: Vec<Item<K>>,
    members: u32,
    max_items: u32,
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Vec<Item<K>>> {
    let blocks = leaders.size();
    if blocks == 1 {
        return Ok(run);
    }
    let share_start = |b: u32| (u64::from(b) * u64::from(max_items)).min(u64::from(members));
    let targets: Vec<u64> = (1..blocks).map(share_start).collect();
    let mut cuts = vec![0];
    cuts.extend(select_cuts(t, leaders, &run, &targets, order, deadline).await?);
    cuts.push(run.len());
    let addresses: Vec<Rank> = allgather(t, leaders, &leaders.address(), deadline).await?;
    let tag = leaders.next_call().round(0)?;
    let me = leaders.rank();
    let mut pieces: Vec<(u32, Vec<Item<K>>)> = Vec::new();
    for (c, piece) in cuts.windows(2).map(|w| &run[w[0]..w[1]]).enumerate() {
        let c = c as u32;
        if c == me {
            pieces.push((c, piece.to_vec()));
        } else if !piece.is_empty() {
            let message = (me, piece);
            leaders
                .send(t, addresses[c as usize], tag, &message, deadline)
                .await?;
        }
    }
    let share = (share_start(me + 1) - share_start(me)) as usize;
    let mut received: usize = pieces.iter().map(|piece| piece.1.len()).sum();
    while received < share {
        let piece: (u32, Vec<Item<K>>) = leaders.recv_any(t, tag, deadline).await?;
        received += piece.1.len();
        pieces.push(piece);
    }
    pieces.sort_by_key(|piece| piece.0);
    // Runs in sender order: the sort merges them.
    let mut share: Vec<Item<K>> = pieces.into_iter().flat_map(|piece| piece.1).collect();
    sort_items(&mut share, order)?;
    Ok(share)
}

/// A leader's candidate pivot for one cut, drawn uniformly from its active
/// items; the allreduce keeps one of them with probability proportional to
/// each leader's active count (Efraimidis and Spirakis' weighted sampling),
/// so the pivot is uniform over all active items.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Proposal<K> {
    score: f64,
    leader: u32,
    pivot: Item<K>,
}

/// For each target position, the index in `run` where the items of global
/// sorted position >= target begin. Every item whose global position is
/// known to lie below the target sits below `lo`, above it at `hi` or later;
/// each round halves the active items in between, in expectation.
async fn select_cuts<T: Transport, K: Wire + Clone>(
    t: &T,
    leaders: &Chain,
    run: &[Item<K>],
    targets: &[u64],
    order: KeyOrder<'_, K>,
    deadline: Time,
) -> Result<Vec<usize>> {
    let mut lo = vec![0; targets.len()];
    let mut hi = vec![run.len(); targets.len()];
    let mut cuts: Vec<Option<usize>> = vec![None; targets.len()];
    let me = leaders.rank();
    for round in 0u64.. {
        let proposals: Vec<Option<Proposal<K>>> = (0..targets.len())
            .map(|j| {
                let active = hi[j] - lo[j];
                (cuts[j].is_none() && active > 0).then(|| {
                    let r = mix(round, j as u64, u64::from(me));
                    let u = ((r >> 11) + 1) as f64 / (1u64 << 53) as f64;
                    Proposal {
                        score: u.ln() / active as f64,
                        leader: me,
                        pivot: run[lo[j] + (mix(r, 0, 0) % active as u64) as usize].clone(),
                    }
                })
            })
            .collect();
        let pivots = allreduce(
            t,
            leaders,
            proposals,
            |a, b| {
                a.iter()
                    .zip(b)
                    .map(|(a, b)| match (a, b) {
                        (Some(a), Some(b)) => {
                            let a_wins = a
                                .score
                                .total_cmp(&b.score)
                                .then(a.leader.cmp(&b.leader))
                                .is_gt();
                            Some(if a_wins { a.clone() } else { b.clone() })
                        }
                        (a, b) => a.clone().or_else(|| b.clone()),
                    })
                    .collect()
            },
            deadline,
        )
        .await?;
        let mut below = vec![0u64; targets.len()];
        let mut bounds = vec![(0, 0); targets.len()];
        for j in 0..targets.len() {
            match (&cuts[j], &pivots[j]) {
                (Some(_), _) => {}
                // No active item anywhere: the cut is where the active range closed.
                (None, None) => cuts[j] = Some(lo[j]),
                (None, Some(p)) => {
                    let lower = lower_bound(run, &p.pivot, order)?;
                    let holds =
                        lower < run.len() && run[lower].cmp_by(&p.pivot, order)? == Ordering::Equal;
                    bounds[j] = (lower, lower + usize::from(holds));
                    below[j] = lower as u64;
                }
            }
        }
        if cuts.iter().all(Option::is_some) {
            break;
        }
        let below = allreduce(
            t,
            leaders,
            below,
            |a, b| a.iter().zip(b).map(|(a, b)| a + b).collect(),
            deadline,
        )
        .await?;
        for j in 0..targets.len() {
            if cuts[j].is_some() {
                continue;
            }
            let (lower, upper) = bounds[j];
            // Ranges only shrink, even under a comparator that is not a
            // total order (the deadline then ends the search).
            match below[j].cmp(&targets[j]) {
                Ordering::Equal => cuts[j] = Some(lower),
                Ordering::Less => lo[j] = upper.clamp(lo[j], hi[j]),
                Ordering::Greater => hi[j] = lower.clamp(lo[j], hi[j]),
            }
        }
    }
    Ok(cuts
        .into_iter()
        .map(|c| c.expect("every cut found"))
        .collect())
}

/// The first index of `run` whose item is not below `x`.
fn lower_bound<K>(run: &[Item<K>], x: &Item<K>, order: KeyOrder<'_, K>) -> Result<usize> {
    let (mut lo, mut hi) = (0, run.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if run[mid].cmp_by(x, order)? == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// SplitMix64 of three words: a deterministic stream per (round, cut, leader).
fn mix(a: u64, b: u64, c: u64) -> u64 {
    let mut z = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b.wrapping_mul(0xD1B5_4A32_D192_ED03))
        .wrapping_add(c.wrapping_mul(0x8CB9_2BA7_2F3D_8DD7))
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
