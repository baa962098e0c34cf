//! `Cheng<M>` (seed 000, section 3.2, after Sack and Gropp): each block of M
//! consecutive processes gathers its items, merged, to its first process;
//! those P = ceil(N/M) leaders sort by Cheng et al.'s exact splitting (a
//! parallel selection finds the P-1 cuts that give each leader exactly its
//! block's share, then one exchange and a merge), and each leader scatters
//! its share back over its block. Leaders hold O(M + P); the others O(1).
//! Selection rounds carry pivots as (color digest, key, parent rank), so
//! their messages do not grow with colors.

use std::cmp::Ordering;

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use super::agreement::Agreed;
use super::bins::FIRST_DERIVED_CALL;
use super::fault::{Fault, Faults};
use super::item::{merge_items, merge_runs, Item, KeyOrder, Run};
use super::mix::mix;
use super::{sorted, Placement};
use crate::call::Call;
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
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    call: Call<'_, T, Calls>,
    me: Option<Item<K>>,
    agreed: Agreed,
    max_items: u32,
    order: KeyOrder<'_, K>,
) -> Result<Option<Placement>> {
    let (t, parent, deadline) = (call.t, call.chain, call.deadline);
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
    let mut faults = Faults::default();
    let run: Run<K> = (me.into_iter().collect(), Fault::NONE);
    let merge = |left, right| merge_runs(left, right, order, &mut faults);
    let gathered = reduce_with(call.on(&block, reserve(&block)), 0, run, merge).await?;
    let shares = match gathered {
        None => None,
        Some((run, fault)) => {
            faults.learn(fault);
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
            let share_start =
                |b: u32| (u64::from(b) * u64::from(max_items)).min(u64::from(members));
            let share = sort(t, &leaders, run, share_start, order, &mut faults, deadline).await?;
            // A fault travels to the block in place of the items.
            let fault = faults.flags();
            let mut slots: Vec<(Option<Item<K>>, Fault)> =
                share.into_iter().map(|i| (Some(i), fault)).collect();
            slots.resize(block_size as usize, (None, fault));
            Some(slots)
        }
    };
    let (slot, fault) = scatter_in(call.on(&block, reserve(&block)), 0, shares).await?;
    faults.learn(fault);
    sorted::place(call, slot, member, faults, true).await
}

/// Sorts the leaders' runs: leader b ends with the items at sorted
/// positions from `share_start(b)` (bM, at most the number of members) up
/// to `share_start(b + 1)`. After a fault that every leader learns of,
/// every leader ends with none; after a panic of the final merge, this
/// leader alone (its block carries the fault on).
async fn sort<T: Transport, K: Wire + Clone>(
    t: &T,
    leaders: &Chain,
    run: Vec<Item<K>>,
    share_start: impl Fn(u32) -> u64,
    order: KeyOrder<'_, K>,
    faults: &mut Faults,
    deadline: Time,
) -> Result<Vec<Item<K>>> {
    let blocks = leaders.size();
    if blocks == 1 {
        return Ok(run);
    }
    let targets: Vec<u64> = (1..blocks).map(&share_start).collect();
    let mut cuts = vec![0];
    cuts.extend(select_cuts(t, leaders, &run, &targets, order, faults, deadline).await?);
    cuts.push(run.len());
    // Whatever the comparator did, the exchange must add up: pieces in
    // order here, and exactly each leader's share over all leaders.
    if cuts.windows(2).any(|w| w[0] > w[1]) {
        faults.learn(Fault::NOT_A_TOTAL_ORDER);
    }
    let below: Vec<u64> = cuts[1..blocks as usize].iter().map(|&c| c as u64).collect();
    let (below, fault) = allreduce(
        t,
        leaders,
        (below, faults.flags()),
        |a, b| (add(&a.0, &b.0), a.1.union(b.1)),
        deadline,
    )
    .await?;
    faults.learn(fault);
    if below != targets {
        faults.learn(Fault::NOT_A_TOTAL_ORDER);
    }
    let addresses: Vec<Rank> = allgather(t, leaders, &leaders.address(), deadline).await?;
    let tag = leaders.next_call().round(0)?;
    if !faults.flags().is_none() {
        return Ok(Vec::new());
    }
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
    // Sorted runs in sender order, merged pairwise: O(M log P), and colors
    // stay in order whatever the key comparator answers.
    let mut runs: Vec<Vec<Item<K>>> = pieces.into_iter().map(|piece| piece.1).collect();
    while runs.len() > 1 {
        let mut merged = Vec::with_capacity(runs.len().div_ceil(2));
        let mut pairs = runs.into_iter();
        while let Some(left) = pairs.next() {
            let Some(right) = pairs.next() else {
                merged.push(left);
                break;
            };
            match faults.absorb(merge_items(left, right, order))? {
                Some(run) => merged.push(run),
                None => return Ok(Vec::new()),
            }
        }
        runs = merged;
    }
    Ok(runs.pop().unwrap_or_default())
}

fn add(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(a, b)| a + b).collect()
}

/// What a proposal carries of its pivot: a fixed size whatever the color's
/// (its digest stands for it), so a round's messages do not grow with colors.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Pivot<K> {
    digest: u64,
    key: Option<K>,
    parent_rank: u32,
}

impl<K> Pivot<K> {
    fn of(item: &Item<K>) -> Pivot<K>
    where
        K: Clone,
    {
        Pivot {
            digest: item.digest,
            key: item.key.clone(),
            parent_rank: item.parent_rank,
        }
    }

    /// How `item` orders against this pivot: by digest, then key and parent
    /// rank (the bytes of colors of equal digest are not compared; the
    /// placement step catches the rare colors that collide).
    fn cmp_item(&self, item: &Item<K>, order: KeyOrder<'_, K>) -> Result<Ordering> {
        match item.digest.cmp(&self.digest) {
            Ordering::Equal => item.cmp_key_by(self.key.as_ref(), self.parent_rank, order),
            by_digest => Ok(by_digest),
        }
    }
}

/// A leader's candidate pivot for one cut, drawn uniformly from its active
/// items; the allreduce keeps one of them with probability proportional to
/// each leader's active count (Efraimidis and Spirakis' weighted sampling),
/// so the pivot is uniform over all active items.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Proposal<K> {
    score: f64,
    leader: u32,
    pivot: Pivot<K>,
}

/// For each target position, the index in `run` where the items of global
/// sorted position >= target begin. Every item whose global position is
/// known to lie below the target sits below `lo`, above it at `hi` or later;
/// each round halves the active items in between, in expectation. Under a
/// total order every round lowers the potential (unresolved cuts plus their
/// active items, over all leaders); a round that does not ends the search
/// on every leader with `NOT_A_TOTAL_ORDER`, as does a fault any leader
/// reports: then the cuts returned are meaningless.
async fn select_cuts<T: Transport, K: Wire + Clone>(
    t: &T,
    leaders: &Chain,
    run: &[Item<K>],
    targets: &[u64],
    order: KeyOrder<'_, K>,
    faults: &mut Faults,
    deadline: Time,
) -> Result<Vec<usize>> {
    let mut lo = vec![0; targets.len()];
    let mut hi = vec![run.len(); targets.len()];
    let mut cuts: Vec<Option<usize>> = vec![None; targets.len()];
    let me = leaders.rank();
    let mut last_potential = u64::MAX;
    for round in 0u64.. {
        let proposing = faults.flags().is_none();
        let proposals: Vec<Option<Proposal<K>>> = (0..targets.len())
            .map(|j| {
                let active = hi[j] - lo[j];
                (proposing && cuts[j].is_none() && active > 0).then(|| {
                    let r = mix(round, j as u64, u64::from(me));
                    let u = ((r >> 11) + 1) as f64 / (1u64 << 53) as f64;
                    Proposal {
                        score: u.ln() / active as f64,
                        leader: me,
                        pivot: Pivot::of(&run[lo[j] + (mix(r, 0, 0) % active as u64) as usize]),
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
                (None, Some(p)) if faults.flags().is_none() => {
                    if let Some(found) = faults.absorb(bounds_of(run, &p.pivot, order))? {
                        bounds[j] = found;
                        below[j] = found.0 as u64;
                    }
                }
                (None, Some(_)) => {}
            }
        }
        if cuts.iter().all(Option::is_some) {
            break;
        }
        let potential: u64 = (0..targets.len())
            .filter(|&j| cuts[j].is_none())
            .map(|j| 1 + (hi[j] - lo[j]) as u64)
            .sum();
        let (below, potential, fault) = allreduce(
            t,
            leaders,
            (below, potential, faults.flags()),
            |a, b| (add(&a.0, &b.0), a.1 + b.1, a.2.union(b.2)),
            deadline,
        )
        .await?;
        faults.learn(fault);
        if potential >= last_potential {
            faults.learn(Fault::NOT_A_TOTAL_ORDER);
        }
        // Every leader knows the same faults now, and stops alike.
        if !faults.flags().is_none() {
            return Ok(vec![0; targets.len()]);
        }
        last_potential = potential;
        for j in 0..targets.len() {
            if cuts[j].is_some() {
                continue;
            }
            let (lower, upper) = bounds[j];
            // Ranges only shrink, even under a comparator that is not a
            // total order (the potential check then ends the search).
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

/// Where `pivot` falls in `run`: the first index whose item is not below
/// it, and the index after the pivot itself if `run` holds it.
fn bounds_of<K>(
    run: &[Item<K>],
    pivot: &Pivot<K>,
    order: KeyOrder<'_, K>,
) -> Result<(usize, usize)> {
    let (mut lo, mut hi) = (0, run.len());
    while lo < hi {
        let mid = (lo + hi) / 2;
        if pivot.cmp_item(&run[mid], order)? == Ordering::Less {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    let holds = lo < run.len() && pivot.cmp_item(&run[lo], order)? == Ordering::Equal;
    Ok((lo, lo + usize::from(holds)))
}
