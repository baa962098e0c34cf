//! The split's last step, the same for every algorithm: each group's member
//! of lowest parent rank leads it; an exclusive scan of leaders over the
//! parent chain numbers the groups, and each group learns its number from
//! its leader by an allreduce on the new chain. O(log N), O(1) memory.
//! The scan also spreads a comparator fault of any member to every process,
//! those whose sub-chain saw none included (Hash splits before it sorts).

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use super::agreement::Agreed;
use super::fault::{Fault, Faults};
use super::{Group, Placement, Split};
use crate::call::Call;
use crate::chain::Chain;
use crate::scan::{allreduce, double_scan_in};
use crate::Result;

/// Takes the tags of one call on the parent; the new chain is the member's
/// alone until the split returns it. A member that `offer`s a region of its
/// host arena learns every member's place, where every member offered one
/// (in the same allreduce that numbers it).
pub(crate) async fn number<T: Transport>(
    call: Call<'_, T>,
    placement: Option<Placement>,
    mut faults: Faults,
    agreed: Agreed,
    offer: impl Offering,
) -> Result<Split> {
    let (t, parent, deadline) = (call.t, call.chain, call.deadline);
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
    let leaders = double_scan_in(call, mine, mine, add, add).await?;
    let (lr, rl) = (leaders.inclusive_lr, leaders.exclusive_rl);
    faults.learn(lr.1.union(rl.map_or(Fault::NONE, |r| r.1)));
    faults.check()?;
    let count = lr.0 + rl.map_or(0, |r| r.0);
    let Some(chain) = chain else {
        return Ok(Split::NotMember { groups: count });
    };
    let mine = leads.then(|| leaders.exclusive_lr.map_or(0, |e| e.0));
    if agreed.offered {
        // Boxed: the common way (nobody offers) keeps its small future.
        let offer = offer
            .offer()
            .filter(|_| chain.size() <= crate::host::MAX_MEMBERS);
        let (id, places) = Box::pin(number_placed(t, &chain, mine, offer, deadline)).await?;
        return Ok(Split::Member(Group {
            chain,
            id,
            count,
            places,
        }));
    }
    let id = allreduce(t, &chain, mine, |a, b| a.or(*b), deadline)
        .await?
        .expect("every group has a leader");
    Ok(Split::Member(Group {
        chain,
        id,
        count,
        places: None,
    }))
}

/// The group's number, and every member's place where all of them
/// offered a region, from one allreduce on the new chain (`mine`: the
/// number if this member leads).
async fn number_placed<T: Transport>(
    t: &T,
    chain: &Chain,
    mine: Option<u32>,
    offer: Option<Offer>,
    deadline: Time,
) -> Result<(u32, Option<Box<[Place]>>)> {
    let places = offer.map(|offer| {
        let mut places = vec![None; chain.size() as usize];
        places[chain.rank() as usize] = Some(Place {
            rank: chain.address(),
            host: t.host(),
            region: offer.region,
        });
        places
    });
    let merge = |a: &Numbered, b: &Numbered| Numbered {
        id: a.id.or(b.id),
        places: match (&a.places, &b.places) {
            (Some(x), Some(y)) => Some(x.iter().zip(y).map(|(p, q)| p.or(*q)).collect()),
            _ => None,
        },
    };
    let all = allreduce(t, chain, Numbered { id: mine, places }, merge, deadline).await?;
    let id = all.id.expect("every group has a leader");
    let places = all
        .places
        .and_then(|p| p.into_iter().collect::<Option<Box<[Place]>>>());
    Ok((id, places))
}

/// What a split offers its new group: [`NoOffer`] where it cannot (its
/// future then holds nothing for it), or maybe an [`Offer`].
pub(crate) trait Offering: Copy + 'static {
    fn offer(self) -> Option<Offer>;
}

/// A split that offers no region (one outside a communicator).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NoOffer;

impl Offering for NoOffer {
    fn offer(self) -> Option<Offer> {
        None
    }
}

impl Offering for Option<Offer> {
    fn offer(self) -> Option<Offer> {
        self
    }
}

/// A region a member offers its new group, for a host team.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Offer {
    pub region: u64,
}

/// A member's world rank, host and offered region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Place {
    pub rank: Rank,
    pub host: u64,
    pub region: u64,
}

/// What the new chain's allreduce agrees on.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Numbered {
    id: Option<u32>,
    places: Option<Vec<Option<Place>>>,
}
