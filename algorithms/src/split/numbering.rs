//! The split's last step, the same for every algorithm: each group's member
//! of lowest parent rank leads it; an exclusive scan of leaders over the
//! parent chain numbers the groups, and each group learns its number from
//! its leader by an allreduce on the new chain. O(log N), O(1) memory.
//! The scan also spreads a comparator fault of any member to every process,
//! those whose sub-chain saw none included (Hash splits before it sorts).

use catena_fabric::{Time, Transport};

use super::agreement::Agreed;
use super::fault::{Fault, Faults};
use super::{Group, Placement, Split};
use crate::chain::{CallTags, Chain};
use crate::scan::{allreduce, double_scan_in};
use crate::Result;

/// Takes the tags of one call on the parent; the new chain is the member's
/// alone until the split returns it.
pub(crate) async fn number<T: Transport>(
    t: &T,
    parent: &Chain,
    tags: CallTags,
    placement: Option<Placement>,
    mut faults: Faults,
    agreed: Agreed,
    deadline: Time,
) -> Result<Split> {
    let chain = placement
        .map(|p| {
            Chain::from_links(
                p.rank,
                p.size,
                parent.address(),
                p.left,
                p.right,
                agreed.context,
            )
        })
        .transpose()?;
    let leads = match &chain {
        None => false,
        // Unordered groups keep parent order: their rank 0 is the lowest.
        Some(c) if !agreed.reorder => c.rank() == 0,
        Some(c) => {
            let lowest = allreduce(t, c, parent.rank(), |a, b| *a.min(b), deadline).await?;
            lowest == parent.rank()
        }
    };
    let add = |a: &(u32, Fault), b: &(u32, Fault)| (a.0 + b.0, a.1.union(b.1));
    let mine = (u32::from(leads), faults.flags());
    let leaders = double_scan_in(t, parent, tags, mine, mine, add, add, deadline).await?;
    let (lr, rl) = (leaders.inclusive_lr, leaders.exclusive_rl);
    faults.learn(lr.1.union(rl.map_or(Fault::NONE, |r| r.1)));
    faults.check()?;
    let count = lr.0 + rl.map_or(0, |r| r.0);
    let Some(chain) = chain else {
        return Ok(Split::NotMember { groups: count });
    };
    let mine = leads.then(|| leaders.exclusive_lr.map_or(0, |e| e.0));
    let id = allreduce(t, &chain, mine, |a, b| a.or(*b), deadline)
        .await?
        .expect("every group has a leader");
    Ok(Split::Member(Group { chain, id, count }))
}
