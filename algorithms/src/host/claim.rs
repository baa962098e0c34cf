//! A region of this rank's arena offered to a group being made (by a
//! split, a dup or a group creation): the team of the group takes it once
//! every member offered one on the same host; otherwise it goes back.

use catena_fabric::{ContextId, HostMemory, HostRegion, Rank};

use super::{Layout, Team, MAX_MEMBERS};
use crate::Result;

/// Where a member that has no region for a group's team says so (its
/// arena had no room, or the group has no team on its host): the group
/// gets no team there.
pub(crate) const NO_REGION: u64 = u64::MAX;

/// A region held for a group of at most some number of members.
pub(crate) struct Claim<'t, T: HostMemory> {
    t: &'t T,
    region: Option<HostRegion>,
}

impl<'t, T: HostMemory> Claim<'t, T> {
    /// A region for a group of at most `members` members, if such a group
    /// could be a team (2 to `MAX_MEMBERS` members) and the arena has room;
    /// else an empty claim (the group will have no team).
    pub(crate) fn new(t: &'t T, members: u32) -> Claim<'t, T> {
        let members = members.min(MAX_MEMBERS);
        let layout = Layout::new(members);
        let region = (members >= 2)
            .then(|| t.host_alloc(layout.bytes(), layout.reset_bytes()).ok())
            .flatten();
        Claim { t, region }
    }

    /// Where the region is, if there is one.
    pub(crate) fn offer(&self) -> Option<u64> {
        self.region.map(|r| r.at)
    }

    /// The team of the communicator `context` whose members (world ranks,
    /// group order) offered `regions` (one each), this member being `me`.
    pub(crate) fn into_team(
        mut self,
        ranks: Vec<Rank>,
        regions: impl IntoIterator<Item = u64>,
        me: u32,
        context: ContextId,
    ) -> Result<Option<Team<'t, T>>> {
        let Some(own_region) = self.region.filter(|_| ranks.len() >= 2) else {
            return Ok(None);
        };
        // Every other member lets go of this region too, once.
        let own = self.t.host_peer(self.t.rank())?;
        let others = ranks.len() as u64 - 1;
        self.t
            .host_add(&own, own_region.at + Layout::USERS, others)?;
        self.region = None;
        Ok(Some(Team::new(
            self.t, ranks, regions, me, own_region, false, context,
        )))
    }
}

impl<T: HostMemory> Drop for Claim<'_, T> {
    fn drop(&mut self) {
        if let Some(region) = self.region.take() {
            if let Ok(own) = self.t.host_peer(self.t.rank()) {
                let _ = self.t.host_add(&own, region.at + Layout::USERS, u64::MAX);
            }
            self.t.host_release(region);
        }
    }
}
