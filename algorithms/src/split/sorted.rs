//! From a sorted distribution to new chains (seed 000, section 3.2): the
//! process at position i of the parent chain holds the i-th item (non-members'
//! empty slots last). Neighbouring items tell where groups begin and end, a
//! segmented double scan gives ranks and sizes, and one message takes each
//! member its placement. The same double scan certifies the sort (neighbours
//! in order, every member's item held exactly once) and spreads any fault,
//! so a bad comparator fails every process here, alike.

use catena_fabric::{Rank, Transport};
use serde::{Deserialize, Serialize};

use super::fault::{Fault, Faults};
use super::item::Item;
use super::mix::{digest, mix};
use super::Placement;
use crate::call::Call;
use crate::chain::Calls;
use crate::scan::double_scan_in;
use crate::Result;

/// A run length that restarts where a group starts (left to right) or ends
/// (right to left).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Run {
    /// The run restarts at this position.
    boundary: bool,
    count: u32,
    /// Faults seen over the whole scanned range (not restarted).
    fault: Fault,
    /// Over the whole scanned range: the members' fingerprints minus the
    /// fingerprints of the items held; zero when each is held once.
    balance: u64,
}

/// Combines runs `a` then `b` left to right: the count restarts at `b`'s
/// boundary; faults and balances cover both.
fn after(a: &Run, b: &Run) -> Run {
    Run {
        boundary: b.boundary || a.boundary,
        count: if b.boundary {
            b.count
        } else {
            a.count + b.count
        },
        fault: a.fault.union(b.fault),
        balance: a.balance.wrapping_add(b.balance),
    }
}

/// An owner's fingerprint in the balance.
fn fingerprint(address: Rank) -> u64 {
    mix(u64::from(address), 0x006f_776e_6572, 0)
}

/// What the pair (left neighbour's slot, this slot) says about the sort:
/// empty slots last, colors in (digest, bytes) order. Descending digests
/// mean the comparator broke the sort; descending bytes under equal digests,
/// that Cheng met two colors with equal digests.
fn order_fault(left: &Option<(Vec<u8>, Rank)>, mine: &Option<Item<impl Sized>>) -> Fault {
    match (left, mine) {
        (None, Some(_)) => Fault::NOT_A_TOTAL_ORDER,
        (Some((color, _)), Some(item)) => {
            let left_digest = digest(color);
            match left_digest.cmp(&item.digest) {
                std::cmp::Ordering::Greater => Fault::NOT_A_TOTAL_ORDER,
                std::cmp::Ordering::Equal if *color > item.color => Fault::COLORS_COLLIDE,
                _ => Fault::NONE,
            }
        }
        _ => Fault::NONE,
    }
}

/// The calls it makes on its chain.
pub(crate) const CALLS: u32 = 2;

/// Places every member from the sorted `slot` this process holds; returns
/// this process's placement if it is a `member`. `faults` are what the sort
/// saw here; `digest_sorted` says the sort ordered colors by (digest,
/// bytes), which is then checked. Any fault anywhere fails every process.
pub(crate) async fn place<T: Transport, K>(
    mut call: Call<'_, T, Calls>,
    slot: Option<Item<K>>,
    member: bool,
    mut faults: Faults,
    digest_sorted: bool,
) -> Result<Option<Placement>> {
    let (t, parent, deadline) = (call.t, call.chain, call.deadline);
    let tags = call.tags.next()?;
    // Each position tells its neighbours its item's color and owner.
    let mine: Option<(&[u8], Rank)> = slot.as_ref().map(|i| (i.color.as_slice(), i.address));
    for side in [parent.left(), parent.right()].into_iter().flatten() {
        parent
            .send(t, side, tags.round(0)?, &mine, deadline)
            .await?;
    }
    let mut next = [None, None];
    for (got, side) in next.iter_mut().zip([parent.left(), parent.right()]) {
        if let Some(side) = side {
            let theirs: Option<(Vec<u8>, Rank)> =
                parent.recv(t, side, tags.round(0)?, deadline).await?;
            *got = theirs;
        }
    }
    let [left, right] = next;
    if digest_sorted && parent.left().is_some() {
        faults.learn(order_fault(&left, &slot));
    }
    let mut balance = 0u64;
    if member {
        balance = balance.wrapping_add(fingerprint(parent.address()));
    }
    if let Some(item) = &slot {
        balance = balance.wrapping_sub(fingerprint(item.address));
    }
    let same_group = |other: &Option<(Vec<u8>, Rank)>| match (other, &slot) {
        (Some((color, address)), Some(item)) if *color == item.color => Some(*address),
        _ => None,
    };
    let (left, right) = (same_group(&left), same_group(&right));
    let mine = |boundary| Run {
        boundary,
        count: u32::from(slot.is_some()),
        fault: faults.flags(),
        balance,
    };
    let runs = double_scan_in(
        call.next()?,
        mine(left.is_none()),
        mine(right.is_none()),
        after,
        |a, b| after(b, a),
    )
    .await?;
    // The whole chain: this rank and left of it, plus right of it.
    let (all, rest) = (runs.inclusive_lr, runs.exclusive_rl);
    faults.learn(all.fault.union(rest.map_or(Fault::NONE, |r| r.fault)));
    if all.balance.wrapping_add(rest.map_or(0, |r| r.balance)) != 0 {
        faults.learn(Fault::NOT_A_TOTAL_ORDER);
    }
    faults.check()?;
    if let Some(item) = &slot {
        let placement = Placement {
            rank: runs.inclusive_lr.count - 1,
            size: runs.inclusive_lr.count + runs.inclusive_rl.count - 1,
            left,
            right,
        };
        parent
            .send(t, item.address, tags.round(1)?, &placement, deadline)
            .await?;
    }
    if !member {
        return Ok(None);
    }
    // From whichever position holds this member's item.
    parent.recv_any(t, tags.round(1)?, deadline).await.map(Some)
}

/// The placement of each item of a sorted run, in the run's order.
pub(crate) fn placements<K>(sorted: &[Item<K>]) -> Vec<Placement> {
    let mut out = Vec::with_capacity(sorted.len());
    for group in sorted.chunk_by(|a, b| a.color == b.color) {
        let size = group.len() as u32;
        for (rank, _) in group.iter().enumerate() {
            out.push(Placement {
                rank: rank as u32,
                size,
                left: rank.checked_sub(1).map(|l| group[l].address),
                right: group.get(rank + 1).map(|r| r.address),
            });
        }
    }
    out
}
