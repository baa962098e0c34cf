//! From a sorted distribution to new chains (seed 000, section 3.2): the
//! process at position i of the parent chain holds the i-th item (non-members'
//! empty slots last). Neighbouring items tell where groups begin and end, a
//! segmented double scan gives ranks and sizes, and one message takes each
//! member its placement.

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use super::item::Item;
use super::Placement;
use crate::chain::{Calls, Chain};
use crate::scan::double_scan_in;
use crate::Result;

/// A run length that restarts where a group starts (left to right) or ends
/// (right to left).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Run {
    /// The run restarts at this position.
    boundary: bool,
    count: u32,
}

/// The calls it makes on its chain.
pub(crate) const CALLS: u32 = 2;

/// Places every member from the sorted `slot` this process holds; returns
/// this process's placement if it is a `member`.
pub(crate) async fn place<T: Transport, K>(
    t: &T,
    parent: &Chain,
    mut calls: Calls,
    slot: Option<Item<K>>,
    member: bool,
    deadline: Time,
) -> Result<Option<Placement>> {
    let tags = calls.next()?;
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
    let same_group = |other: &Option<(Vec<u8>, Rank)>| match (other, &slot) {
        (Some((color, address)), Some(item)) if *color == item.color => Some(*address),
        _ => None,
    };
    let (left, right) = (same_group(&left), same_group(&right));
    let counted = u32::from(slot.is_some());
    let runs = double_scan_in(
        t,
        parent,
        calls.next()?,
        Run {
            boundary: left.is_none(),
            count: counted,
        },
        Run {
            boundary: right.is_none(),
            count: counted,
        },
        |a, b| {
            if b.boundary {
                *b
            } else {
                Run {
                    boundary: a.boundary,
                    count: a.count + b.count,
                }
            }
        },
        |a, b| {
            if a.boundary {
                *a
            } else {
                Run {
                    boundary: b.boundary,
                    count: a.count + b.count,
                }
            }
        },
        deadline,
    )
    .await?;
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
