//! A communicator's rank-to-world map and the local lookups through it.
//! The world's is a stride and create_group's the caller's; one made by
//! split or dup in host memory is listed from its team's member list
//! ([`listed`]), and a split's in two levels from its members' places;
//! any other made by split or dup is loaded by the named
//! collective `group_map`, one allgather of the members' world ranks, then
//! compressed (Hybrid, so both directions stay fast).

use std::future::Future;

use crate::blocking::block_on;
use catena_fabric::{wait_until, Blocking, Rank, Transport};

use super::Comm;
use crate::groupmap::{GroupMap, OrderKind, RankRange, SetKind, Strategy};
use crate::{tree, Error, Result};

/// Where loading a communicator's map stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Loading {
    /// No lookup has loaded it: the map was given at creation, or none
    /// is held yet.
    #[default]
    Idle,
    /// A lookup loads it, or has loaded it.
    Running,
    /// The allgather failed or was dropped half-way: its messages are spent.
    Failed,
}

/// Marks the load failed unless it finished.
struct LoadRun<'c, 't, T: Transport>(&'c Comm<'t, T>);

impl<T: Transport> Drop for LoadRun<'_, '_, T> {
    fn drop(&mut self) {
        if self.0.map.get().is_none() {
            self.0.loading.set(Loading::Failed);
        }
    }
}

/// The map of a group in host memory, whose members' world ranks `ranks`
/// (group order) every member already holds: one stride where they form
/// one, rising or falling, else the plain list. O(members), weighing no
/// other representation: a team holds its list anyway, and building the
/// compressed candidates `Auto` weighs (a zstd context, a BDD) took 10 to
/// 16 µs a split for groups of 2 to 16, where the whole split takes 2.
pub(crate) fn listed(world: u32, ranks: &[Rank]) -> Option<GroupMap> {
    let progression = match ranks {
        [] => None,
        [only] => Some(RankRange::new(*only, *only, 1)),
        [first, second, ..] => {
            let step = i64::from(*second) - i64::from(*first);
            let even = ranks
                .windows(2)
                .all(|p| i64::from(p[1]) - i64::from(p[0]) == step);
            let last = *ranks.last().expect("two or more");
            (step != 0 && even).then(|| RankRange::new(*first, last, step))
        }
    };
    match progression {
        Some(range) => GroupMap::from_ranges(world, &[range], Strategy::Auto),
        None => GroupMap::from_ranks(
            world,
            ranks,
            Strategy::Fixed {
                set: SetKind::Plain,
                order: OrderKind::Sorted,
            },
        ),
    }
    .ok()
}

fn load_failed() -> Error {
    Error::Mismatch {
        what: "the group map: loading it failed in an earlier or concurrent call".into(),
    }
}

/// The members' world ranks must list this group as the chain sees it:
/// one per member, and this process at its own rank (a peer's garbage
/// fails here, or in the map's own checks of range and repeats).
pub(super) fn check_listed(ranks: &[Rank], size: u32, rank: u32, me: Rank) -> Result<()> {
    if ranks.len() != size as usize || ranks.get(rank as usize) != Some(&me) {
        return Err(Error::Mismatch {
            what: format!(
                "the group map: {} world ranks for {size} members, with {:?} at this \
                 process's rank {rank} (world rank {me})",
                ranks.len(),
                ranks.get(rank as usize)
            ),
        });
    }
    Ok(())
}

impl<'t, T: Transport> Comm<'t, T> {
    /// The group's rank-to-world map, and the one call that loads it. On a
    /// communicator made by split or dup outside host memory (and not in
    /// two levels) the first call is collective (every member makes it at
    /// the same point of its calls): one allgather of world ranks, O(size)
    /// time once. Later calls and every other communicator answer at once. The lookups
    /// (`world_rank_of`, `group_rank_of`, `translate`, `send`, `recv`) are
    /// local and refuse to run before it.
    pub fn igroup_map(&self) -> impl Future<Output = Result<&GroupMap>> + '_ {
        // A map held already answers at once: no deadline (no clock read)
        // for the lookups that need none.
        let deadline = self.held_group_map().is_none().then(|| self.deadline());
        let load = deadline
            .filter(|_| self.loading.get() == Loading::Idle)
            .map(|deadline| {
                self.loading.set(Loading::Running);
                tree::allgather(self.t, &self.chain, &self.t.rank(), deadline)
            });
        async move {
            if let Some(map) = self.map.get() {
                return Ok(map);
            }
            let deadline = deadline.expect("taken when the map was missing");
            let Some(allgather) = load else {
                wait_until(self.t, deadline, "a concurrent call's group map", || {
                    let failed = self.loading.get() == Loading::Failed;
                    Ok((self.map.get().is_some() || failed).then_some(()))
                })
                .await?;
                return self.map.get().ok_or_else(load_failed);
            };
            let _run = LoadRun(self);
            let ranks: Vec<Rank> = allgather.await?;
            check_listed(&ranks, self.size(), self.rank(), self.t.rank())?;
            let strategy = Strategy::hybrid(Strategy::DEFAULT_ALPHA)?;
            let map = GroupMap::from_ranks(self.t.size(), &ranks, strategy)?;
            let _ = self.map.set(map);
            // Lookups waiting for this load are polled again now.
            self.t.wake_at(self.t.now());
            self.map.get().ok_or_else(load_failed)
        }
    }

    /// The group map if this process holds it (the world's, a created
    /// group's, one in host memory, or one an earlier lookup loaded): a
    /// local answer, never a collective. Every member holds it or none does.
    pub fn held_group_map(&self) -> Option<&GroupMap> {
        // In host memory every member's world rank is at hand.
        if let (None, Some(team)) = (self.map.get(), &self.team) {
            if let Some(map) = listed(self.t.size(), team.ranks()) {
                let _ = self.map.set(map);
            }
        }
        self.map.get()
    }

    /// The world rank of group rank `rank`: a local lookup in the held
    /// map ([`Comm::held_group_map`]), `InvalidArgument` where it is not
    /// held (load it first by [`Comm::igroup_map`] on every member).
    pub fn world_rank_of(&self, rank: u32) -> Result<Rank> {
        Ok(self.lookup_map("world_rank_of")?.select(rank)?)
    }

    /// The group rank of world rank `world`, `None` if not a member: a
    /// local lookup, as [`Comm::world_rank_of`].
    pub fn group_rank_of(&self, world: Rank) -> Result<Option<u32>> {
        Ok(self.lookup_map("group_rank_of")?.rank(world)?)
    }

    /// The ranks in `other` of this group's ranks `ranks`, `None` where a
    /// process is not in `other` (MPI_Group_translate_ranks): a local
    /// lookup in both communicators' held maps, as
    /// [`Comm::world_rank_of`], so only this communicator's members may
    /// call it where `other` is a larger one.
    pub fn translate(&self, ranks: &[u32], other: &Comm<'_, T>) -> Result<Vec<Option<u32>>> {
        let theirs = other.held_group_map().ok_or_else(|| {
            Error::InvalidArgument(
                "translate: the other communicator's group map is not loaded here; \
                 load it first by group_map on all its members (a collective over it)"
                    .into(),
            )
        })?;
        Ok(self
            .lookup_map("translate")?
            .translate_ranks(ranks, theirs)?)
    }

    /// The held map, or `InvalidArgument` naming `what` needed it and how
    /// to load it: a lookup never starts the collective load itself, which
    /// a member looking up alone would wait in until its deadline.
    pub(super) fn lookup_map(&self, what: &str) -> Result<&GroupMap> {
        self.held_group_map().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what}: this communicator's group map is not loaded here (a communicator \
                 made by split or dup outside host memory gets it by a collective): load it \
                 first by group_map on all its members"
            ))
        })
    }
}

/// The blocking forms.
impl<T: Transport + Blocking> Comm<'_, T> {
    /// See [`Comm::igroup_map`].
    pub fn group_map(&self) -> Result<&GroupMap> {
        block_on(self.t, || self.igroup_map())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A team's map answers as its list, as one stride where the members
    /// form one (either way), else as the plain list.
    #[test]
    fn a_listed_map_is_its_list() {
        let cases: [(&[Rank], SetKind); 7] = [
            (&[3], SetKind::Stride),
            (&[0, 1], SetKind::Stride),
            (&[1, 0], SetKind::Stride),
            (&[13, 8, 3], SetKind::Stride),
            (&[2, 5, 8, 11], SetKind::Stride),
            (&[3, 1, 2, 0], SetKind::Plain),
            (&[4, 9, 13], SetKind::Plain),
        ];
        for (ranks, kind) in cases {
            let map = listed(16, ranks).expect("a valid list");
            assert_eq!(map.set_kind(), kind, "{ranks:?}");
            assert_eq!(map.iter().collect::<Vec<_>>(), ranks);
            for w in 0..16 {
                let at = ranks.iter().position(|&r| r == w).map(|g| g as u32);
                assert_eq!(map.rank(w).expect("in the world"), at, "{ranks:?} {w}");
            }
        }
        assert!(listed(16, &[2, 2]).is_none());
        assert!(listed(4, &[1, 7]).is_none());
    }

    #[test]
    fn a_listing_that_misplaces_this_process_or_miscounts_is_refused() {
        assert!(check_listed(&[4, 2, 9], 3, 1, 2).is_ok());
        assert!(check_listed(&[4, 2, 9], 3, 1, 4).is_err());
        assert!(check_listed(&[4, 2], 3, 1, 2).is_err());
        assert!(check_listed(&[4, 2, 9, 1], 3, 1, 2).is_err());
    }
}
