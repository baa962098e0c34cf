//! Group-collective creation (seed 004, MPI_Comm_create_group): only the
//! members of the new group call it. Each finds its rank, its neighbours
//! and its 2^d neighbour cache in the caller's map by lookups, so the chain
//! costs no message; one allreduce over the members then agrees the
//! context (the leader's proposal) and checks a hash of (map, tag).

use std::future::Future;

use crate::blocking::block_on;
use crate::call::Call;
use catena_fabric::{Blocking, Rank, Tag, Transport};
use serde::{Deserialize, Serialize};

use super::levels::Levels;
use super::{merge, Comm};
use crate::chain::{CallTags, Chain, Neighbours};
use crate::context::{channel, Channel, Proposal};
use crate::groupmap::GroupMap;
use crate::host::{Claim, MAX_MEMBERS, NO_REGION};
use crate::scan::allreduce_in;
use crate::{Error, Result};

/// How [`Comm::create_group`] builds the new communicator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CreateAlgorithm {
    /// The chain from map lookups and one allreduce: ceil(log2 g) rounds.
    #[default]
    Direct,
    /// The seed's algorithm, as a baseline: ceil(log2 g) rounds of
    /// intercommunicator create and merge of neighbouring blocks, each
    /// agreeing a context twice: O(log^2 g) rounds.
    RecursiveMerge,
}

/// Creation tags are below this: each takes the tags of one call on the
/// parent's creation context.
pub const CREATE_TAGS: Tag = 1 << 24;

/// What the members' allreduce agrees on: the leftmost's context proposal,
/// and the least and greatest hash of (map, tag) any member passed.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub(super) struct Votes {
    pub proposal: Proposal,
    pub hashes: (u64, u64),
}

impl Votes {
    pub(super) fn new<T: Transport>(t: &T, map: &GroupMap, tag: Tag) -> Votes {
        let hash = map.fingerprint() ^ u64::from(tag).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Votes {
            proposal: Proposal::new(t),
            hashes: (hash, hash),
        }
    }

    pub(super) fn combine(a: &Votes, b: &Votes) -> Votes {
        Votes {
            proposal: Proposal::leftmost(&a.proposal, &b.proposal),
            hashes: (a.hashes.0.min(b.hashes.0), a.hashes.1.max(b.hashes.1)),
        }
    }

    /// The agreed context, or `Mismatch` where members passed different
    /// groups or tags (every member sees the same votes, so all fail).
    pub(super) fn check(self, world: u32) -> Result<catena_fabric::ContextId> {
        if self.hashes.0 != self.hashes.1 {
            return Err(Error::Mismatch {
                what: "the group or tag of create_group (their hashes differ)".into(),
            });
        }
        self.proposal.context(world)
    }
}

/// Where a member of a group being created would keep its share of a host
/// team: its host and its region.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Place {
    host: u64,
    region: u64,
}

/// The direct construction's votes: the creation's, and each member's
/// place (by group rank) while the group is small enough for teams and
/// each member shares its host with another.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct DirectVotes {
    votes: Votes,
    places: Vec<Option<Place>>,
}

impl DirectVotes {
    fn combine(a: &DirectVotes, b: &DirectVotes) -> DirectVotes {
        DirectVotes {
            votes: Votes::combine(&a.votes, &b.votes),
            places: a
                .places
                .iter()
                .zip(&b.places)
                .map(|(x, y)| x.or(*y))
                .collect(),
        }
    }
}

/// The chain node of group rank `rank` of the members `lo..hi` of `map`,
/// with its neighbour cache filled from the map (no messages).
pub(super) fn chain_of(
    map: &GroupMap,
    rank: u32,
    (lo, hi): (u32, u32),
    context: catena_fabric::ContextId,
) -> Result<Chain> {
    let at = |g: u32| map.select(g);
    let mut left = Vec::new();
    let mut right = Vec::new();
    for d in 0..32 {
        let step = 1u32 << d;
        let l = rank.checked_sub(step).filter(|&g| g >= lo);
        let r = rank.checked_add(step).filter(|&g| g < hi);
        if l.is_none() && r.is_none() {
            break;
        }
        left.extend(l.map(at).transpose()?);
        right.extend(r.map(at).transpose()?);
    }
    let me = at(rank)?;
    let (l, r) = (left.first().copied(), right.first().copied());
    let chain = Chain::from_links(rank - lo, hi - lo, me, l, r, context)?;
    Ok(chain.with_neighbours(Neighbours::new(left, right)))
}

/// This process's group rank in `map`, after the checks every member can
/// make alone.
fn my_rank<T: Transport>(t: &T, map: &GroupMap, tag: Tag) -> Result<Option<u32>> {
    if map.world_size() != t.size() {
        return Err(Error::InvalidArgument(format!(
            "a group of a world of {} ranks in a job of {}",
            map.world_size(),
            t.size()
        )));
    }
    if tag >= CREATE_TAGS {
        return Err(Error::InvalidArgument(format!(
            "create_group tag {tag}: tags are below {CREATE_TAGS}"
        )));
    }
    Ok(map.rank(t.rank())?)
}

impl<'t, T: Transport> Comm<'t, T> {
    /// A communicator of the processes `map` names, in its order, made by
    /// them alone (MPI_Comm_create_group): every member calls it with an
    /// equal map and the same `tag` (below [`CREATE_TAGS`]); other members
    /// of this communicator take no part and send nothing. Concurrent
    /// creations on one parent need different tags; disjoint groups may
    /// share one; sequential ones (each member's last creation on the
    /// parent returned before it makes the next) may reuse one, whatever
    /// their groups: a call takes in every message sent to it before it
    /// returns, and a pair's messages arrive in order. A member that passed
    /// another group or tag gets
    /// `Mismatch` (all members do where their chains still meet; where a
    /// member waits for a partner that takes another path, `Timeout`). The
    /// map becomes the new communicator's.
    ///
    /// ```
    /// use catena_algorithms::prelude::*;
    ///
    /// let sim = catena_sim::Sim::new(8, catena_sim::LogGp::default());
    /// let (got, _) = sim
    ///     .run(async |t| {
    ///         let order = [6, 1, 4];
    ///         if !order.contains(&t.rank()) {
    ///             return Ok(None); // not a member: takes no part
    ///         }
    ///         let map = GroupMap::from_ranks(8, &order, Strategy::Auto)?;
    ///         let world = Comm::world(t);
    ///         let group = world.icreate_group(map, 0, CreateAlgorithm::Direct).await?;
    ///         let group = group.expect("a member");
    ///         Ok::<_, Error>(Some(group.iallgather(&t.rank()).await?))
    ///     })
    ///     .unwrap();
    /// assert_eq!(got[4].as_ref().unwrap(), &Some(vec![6, 1, 4]));
    /// assert!(got[0].as_ref().unwrap().is_none());
    /// ```
    pub fn icreate_group(
        &self,
        map: GroupMap,
        tag: Tag,
        algorithm: CreateAlgorithm,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + '_ {
        let deadline = self.deadline();
        let votes = Votes::new(self.t, &map, tag);
        let context = channel(self.context(), Channel::Create);
        async move {
            let Some(rank) = my_rank(self.t, &map, tag)? else {
                return Ok(None);
            };
            match algorithm {
                CreateAlgorithm::Direct => {
                    let t = self.t;
                    let g = map.len();
                    // A group small enough for teams whose members each
                    // share their host with another offers each member's
                    // place in the same allreduce (a member that does not
                    // offers none, and the merge drops them all): a team of
                    // its own where it is on this host, a team on each host
                    // where it spans hosts.
                    let here = match (2..=MAX_MEMBERS).contains(&g) {
                        true => members_here(t, &map),
                        false => Vec::new(),
                    };
                    let offers = here.len() >= 2;
                    let claim = Claim::new(t, here.len() as u32);
                    let mut places = vec![None; if offers { g as usize } else { 0 }];
                    if offers {
                        places[rank as usize] = Some(Place {
                            host: t.host(),
                            region: claim.offer().unwrap_or(NO_REGION),
                        });
                    }
                    let mine = DirectVotes { votes, places };
                    let agreeing = chain_of(&map, rank, (0, g), context)?;
                    let tags = CallTags::of_call(tag);
                    let all = allreduce_in(
                        Call::new(t, &agreeing, tags, deadline),
                        mine,
                        DirectVotes::combine,
                    )
                    .await?;
                    let context = all.votes.check(t.size())?;
                    let chain = chain_of(&map, rank, (0, g), context)?;
                    let places: Option<Vec<Place>> = all.places.iter().copied().collect();
                    let places = places.filter(|p| offers && p.len() == g as usize);
                    let comm = self.derived(chain, Some(map));
                    match places {
                        Some(places) => comm.with_places(claim, &here, &places).map(Some),
                        None => Ok(Some(comm)),
                    }
                }
                CreateAlgorithm::RecursiveMerge => {
                    let chain =
                        merge::create(self.t, &map, rank, context, tag, votes, deadline).await?;
                    Ok(Some(self.derived(chain, Some(map))))
                }
            }
        }
    }

    /// A created communicator with the `places` its members offered (group
    /// order; `here` its ranks on this host, this member's region held by
    /// `claim`): a team where they are all on this host, two levels where
    /// they span hosts.
    fn with_places(mut self, claim: Claim<'t, T>, here: &[u32], places: &[Place]) -> Result<Self> {
        let (t, rank) = (self.t, self.rank());
        if here.iter().any(|&m| places[m as usize].host != t.host()) {
            return Err(Error::Mismatch {
                what: "a new group's places: a member of this host offered another's".into(),
            });
        }
        let map = self.map.get().expect("given at creation");
        let ranks: Vec<Rank> = here
            .iter()
            .map(|&m| map.select(m))
            .collect::<Result<_, _>>()?;
        let regions: Vec<u64> = here.iter().map(|&m| places[m as usize].region).collect();
        if here.len() < places.len() {
            let levels = Levels::of_group(&self.chain, claim, here, (ranks, regions))?;
            self.levels = Some(levels);
        } else if !regions.contains(&NO_REGION) {
            let team = claim.into_team(ranks, regions, rank, self.chain.context())?;
            self.team = team.map(Box::new);
        }
        Ok(self)
    }
}

/// The group ranks of `map` whose processes share this host.
fn members_here<T: Transport>(t: &T, map: &GroupMap) -> Vec<u32> {
    let host = t.host_ranks();
    (0..map.len())
        .filter(|&m| map.select(m).is_ok_and(|r| host.binary_search(&r).is_ok()))
        .collect()
}

/// The blocking form.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::icreate_group`]; by the direct construction.
    pub fn create_group(&self, map: GroupMap, tag: Tag) -> Result<Option<Comm<'t, T>>> {
        block_on(self.t, || {
            self.icreate_group(map, tag, CreateAlgorithm::Direct)
        })
    }
}
