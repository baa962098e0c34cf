//! A communicator: one value that ties a group's chain, its context, a
//! default timeout and its rank-to-world map to the transport, with every
//! collective as a method. Methods block (as MPI's do); each has an async
//! form, prefixed `i` as MPI's nonblocking calls are, for composition under
//! one executor and in the simulator.

pub(crate) mod alltoallv;
mod buffers;
mod collectives;
mod create;
mod hierarchy;
mod levels;
mod map;
mod merge;
mod p2p;

use std::cell::{Cell, OnceCell};
use std::cmp::Ordering;
use std::future::Future;
use std::time::Duration;

use crate::blocking::block_on;
use crate::call::Call;
use catena_fabric::{Blocking, ContextId, Time, Transport};
use serde::Serialize;

use crate::chain::Chain;
use crate::context::{Proposal, WORLD_CONTEXT};
use crate::groupmap::GroupMap;
use crate::host::{Claim, Team, TeamCall, NO_REGION};
use crate::scan::allreduce_in;
use crate::split::numbering::Offer;
use crate::split::{self, dense, split_offering, Algorithm, Color, Key, Request, Split};
use crate::{Error, Result, Wire};
pub use create::{CreateAlgorithm, CREATE_TAGS};
pub use hierarchy::Hierarchy;
use levels::{Levels, LevelsCall};
pub(crate) use map::listed as listed_map;

/// The timeout a communicator gives each call unless told otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// A group of processes and everything needed to talk within it.
///
/// Collective methods must be called by every member in the same order, as
/// in MPI; their async forms (`i...`) take their tags when called, so
/// collectives called in that order may run concurrently (their futures
/// joined). Every call ends by its deadline, [`Comm::timeout`] (to within a
/// clock tick, a few milliseconds) after it was
/// called, with `Error::Timeout` if a member never takes part.
///
/// ```
/// use catena_algorithms::prelude::*;
///
/// let sim = catena_sim::Sim::new(6, catena_sim::LogGp::default());
/// let (sums, _) = sim
///     .run(async |t| {
///         let world = Comm::world(t);
///         let half = world.isplit(Some(world.rank() % 2), world.rank()).await?;
///         let half = half.expect("every rank passed a color");
///         half.iallreduce(world.rank(), |a, b| a + b).await
///     })
///     .unwrap();
/// assert_eq!(sums.into_iter().map(Result::unwrap).collect::<Vec<_>>(), [6, 9, 6, 9, 6, 9]);
/// ```
pub struct Comm<'t, T: Transport> {
    t: &'t T,
    chain: Chain,
    /// The members' shared memory, when they all share this host: the
    /// collectives run through it instead of the chain.
    team: Option<Box<Team<'t, T>>>,
    /// Where the members span several hosts (the whole job, its dups, and
    /// a split or created group of at most `MAX_MEMBERS` whose members
    /// offered places): the host levels its collectives take.
    levels: Option<Box<Levels<'t, T>>>,
    timeout: Duration,
    algorithm: Algorithm,
    /// The rank-to-world map: given at creation, listed from the team or
    /// the places a split's members offered, or loaded by `group_map`.
    map: OnceCell<GroupMap>,
    /// Whether `group_map` is loading the map.
    loading: Cell<map::Loading>,
}

impl<'t, T: Transport> Comm<'t, T> {
    /// Every process of the job, in world rank order, with the world's
    /// context (one world per transport: libraries [`Comm::dup`] it).
    ///
    /// When every rank shares this host, the first world of a process
    /// takes the host's shared memory for its collectives (every rank
    /// decides alike from the job's shape); across hosts it runs its
    /// collectives in two levels, inside each host and across one leader
    /// per host (built by the first such call). Later worlds of the same
    /// process run the chain algorithms, so make one and dup it.
    pub fn world(t: &'t T) -> Comm<'t, T> {
        let map = GroupMap::world_group(t.size());
        let mut world = Comm::new(t, Chain::world(t, WORLD_CONTEXT), Some(map));
        world.team = Team::world(t).map(Box::new);
        world.levels = Levels::of_world(t, &world.chain);
        world
    }

    fn new(t: &'t T, chain: Chain, map: Option<GroupMap>) -> Comm<'t, T> {
        Comm {
            t,
            chain,
            team: None,
            levels: None,
            timeout: DEFAULT_TIMEOUT,
            algorithm: Algorithm::Auto,
            map: map.map(OnceCell::from).unwrap_or_default(),
            loading: Cell::default(),
        }
    }

    /// A communicator made from this one: same transport, timeout and split
    /// algorithm.
    fn derived(&self, chain: Chain, map: Option<GroupMap>) -> Comm<'t, T> {
        Comm {
            timeout: self.timeout,
            algorithm: self.algorithm,
            ..Comm::new(self.t, chain, map)
        }
    }

    /// This communicator with another timeout for each call.
    pub fn with_timeout(mut self, timeout: Duration) -> Comm<'t, T> {
        self.timeout = timeout;
        self
    }

    /// This communicator with another split algorithm (default `Auto`).
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Comm<'t, T> {
        self.algorithm = algorithm;
        self
    }

    /// Sets the timeout of each later call, in place: a communicator in
    /// use need not be rebuilt (nor dup'ed) for it.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Sets the algorithm of later splits (and of the communicators they
    /// make), in place: a communicator in use need not be dup'ed for it.
    /// Like the split's arguments, it must be the same on every member.
    pub fn set_algorithm(&mut self, algorithm: Algorithm) {
        self.algorithm = algorithm;
    }

    /// The algorithm this communicator's splits take.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// How long each call may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// This process's rank in the group, `0..size`.
    pub fn rank(&self) -> u32 {
        self.chain.rank()
    }

    /// The number of processes in the group.
    pub fn size(&self) -> u32 {
        self.chain.size()
    }

    /// The id that keeps this communicator's messages apart from every
    /// other's (it owns [`crate::context::CHANNELS`] ids from here).
    pub fn context(&self) -> ContextId {
        self.chain.context()
    }

    /// The group's chain node, for the free functions of this crate.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The transport.
    pub fn transport(&self) -> &'t T {
        self.t
    }

    /// Whether the collectives run through the host's shared memory (every
    /// member shares this host, and the communicator was made with it).
    pub fn in_host_memory(&self) -> bool {
        self.team.is_some()
    }

    /// The deadline of a call made now.
    pub fn deadline(&self) -> Time {
        // The coarse clock: a call's deadline may count from a few
        // milliseconds back, and a fast call reads no clock worth tens of ns.
        self.t.coarse_now().saturating_add(self.timeout)
    }

    /// A communicator of the same group with a new context (collective):
    /// a library's messages on it never meet the caller's. In host memory
    /// it is the dense split that keeps everyone in order, and gets a team
    /// of its own.
    pub fn idup(&self) -> impl Future<Output = Result<Comm<'t, T>>> + '_ {
        let in_host = self.team.is_some();
        let on_host = in_host.then(|| {
            self.split_as(
                Color::<()>::Everyone,
                Key::<()>::ParentOrder,
                Algorithm::Dense,
            )
        });
        let on_chain = (!in_host).then(|| (self.chain.next_call(), Proposal::new(self.t)));
        let levels = self.levels.as_deref().map(|l| (l, l.dup_call()));
        let deadline = self.deadline();
        async move {
            if let Some(dup) = on_host {
                let dup = dup
                    .await?
                    .ok_or_else(|| Error::InvalidArgument("a dup without this member".into()))?;
                return Ok(dup);
            }
            let (tags, proposal) = on_chain.expect("the chain's when not in host memory");
            let agreed = allreduce_in(
                Call::new(self.t, &self.chain, tags, deadline),
                proposal,
                Proposal::leftmost,
            )
            .await?;
            let c = &self.chain;
            let context = agreed.context(self.t.size())?;
            let chain = Chain::from_links(
                c.rank(),
                c.size(),
                c.address(),
                c.left(),
                c.right(),
                context,
            )?;
            // A map given at creation is on every member; one group_map
            // loads may still be loading on some, so the dup loads its own.
            let given = self.loading.get() == map::Loading::Idle;
            let mut dup = self.derived(chain, self.map.get().filter(|_| given).cloned());
            if let Some((levels, k)) = levels {
                let (chain, t) = (&dup.chain, self.t);
                dup.levels = Some(levels.of_dup(k, t, chain, context, deadline).await?);
            }
            Ok(dup)
        }
    }

    /// Splits the group by `color` (`None`: join no group, MPI_UNDEFINED;
    /// or a [`Color`]), ordering each new group by `key`, then by rank
    /// here (MPI_Comm_split); `None` where this process joins no group.
    /// Collective over this communicator.
    pub fn isplit<'a, C, K>(
        &'a self,
        color: impl Into<Color<C>>,
        key: K,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a
    where
        C: Serialize + 'a,
        K: Wire + Clone + Ord + 'static,
    {
        self.split_with(color.into(), Key::Is(key))
    }

    fn split_with<'a, C, K>(
        &'a self,
        color: Color<C>,
        key: Key<K>,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a
    where
        C: Serialize + 'a,
        K: Wire + Clone + Ord + 'static,
    {
        self.split_as(color, key, self.algorithm)
    }

    fn split_as<'a, C, K>(
        &'a self,
        color: Color<C>,
        key: Key<K>,
        algorithm: Algorithm,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a
    where
        C: Serialize + 'a,
        K: Wire + Clone + Ord + 'static,
    {
        self.split_request(Request::own_order(color, key, algorithm))
    }

    /// Splits as `request` asks, by the path [`Comm::split_path`] chooses.
    fn split_request<'a, C, K, O>(
        &'a self,
        request: Request<C, K, O>,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a
    where
        C: Serialize + 'a,
        K: Wire + Clone + 'a,
        O: Fn(&K, &K) -> Ordering + 'a,
    {
        let deadline = self.deadline();
        let algorithm = request.algorithm;
        let mut request = Some(request);
        let mut claim = None;
        let path = self.split_path(algorithm, &mut claim, |offer| {
            let request = request.take().expect("taken once");
            Box::pin(split_offering(
                self.t,
                &self.chain,
                request,
                offer,
                deadline,
            ))
        });
        async move {
            let offered = || claim.expect("offered off the host team");
            match path {
                SplitPath::Chain(split) => self.member_of(split.await?, offered()),
                SplitPath::Dense(team, seqs, proposal) => {
                    let request = request.take().expect("taken once");
                    let call = TeamCall {
                        team,
                        seq: seqs,
                        deadline,
                    };
                    let body = dense::split(call, &self.chain, proposal, request);
                    Ok(self.member_of_dense(body.await?))
                }
                SplitPath::Levels(calls, reserved, offer) => {
                    let request = request.take().expect("taken once");
                    let body = levels::dense_split::split(
                        self,
                        calls,
                        reserved,
                        (request, offer),
                        deadline,
                    );
                    self.member_of(Box::pin(body).await?, offered())
                }
            }
        }
    }

    /// Chooses how a split called now runs (every member decides alike):
    /// the dense path on a communicator in host memory (with the team's two
    /// calls and a context proposal, taken now); the dense path across hosts
    /// on one with levels of at most [`DENSE_ACROSS_HOSTS`] members (two
    /// two-level calls, and a chain split reserved to fall back on); else
    /// `chain(offer)`, which takes the chain's tags. Off the host team,
    /// this member offers its new group a region for a team, kept in
    /// `claim`.
    fn split_path<F>(
        &self,
        algorithm: Algorithm,
        claim: &mut Option<Claim<'t, T>>,
        chain: impl FnOnce(Option<Offer>) -> F,
    ) -> SplitPath<'_, 't, T, F> {
        let dense = matches!(algorithm, Algorithm::Auto | Algorithm::Dense);
        if let (Some(team), true) = (&self.team, dense) {
            return SplitPath::Dense(team, (team.call(), team.call()), Proposal::new(self.t));
        }
        let offer = self.offer_into(claim);
        match self.levels.as_deref() {
            Some(levels)
                if algorithm == Algorithm::Dense
                    || (algorithm == Algorithm::Auto && self.size() <= DENSE_ACROSS_HOSTS) =>
            {
                let calls = [levels.call(()), levels.call(())];
                let reserved = split::Reserved::on(self.t, &self.chain);
                SplitPath::Levels(calls, reserved, offer)
            }
            _ => SplitPath::Chain(Box::pin(chain(offer))),
        }
    }

    fn member_of_dense(&self, dense: dense::Dense<'t, T>) -> Option<Comm<'t, T>> {
        match dense.split {
            Split::Member(group) => {
                let mut comm = self.derived(group.chain, dense.map);
                if let (Some(team), Some(parent)) = (&dense.team, &self.team) {
                    team.inherit_ways(parent);
                }
                comm.team = dense.team.map(Box::new);
                Some(comm)
            }
            Split::NotMember { .. } => None,
        }
    }

    /// [`Comm::isplit`] keeping this communicator's order in each group
    /// (no key: the cheaper split, which only groups).
    pub fn isplit_by_color<'a, C: Serialize + 'a>(
        &'a self,
        color: impl Into<Color<C>>,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a {
        self.split_with(color.into(), Key::<()>::ParentOrder)
    }

    /// [`Comm::isplit`] with the keys ordered by `order`.
    pub fn isplit_by<'a, C, K>(
        &'a self,
        color: impl Into<Color<C>>,
        key: K,
        order: impl Fn(&K, &K) -> Ordering + 'a,
    ) -> impl Future<Output = Result<Option<Comm<'t, T>>>> + 'a
    where
        C: Serialize + 'a,
        K: Wire + Clone + 'a,
    {
        self.split_request(Request::by(
            color.into(),
            Key::Is(key),
            order,
            self.algorithm,
        ))
    }

    /// A region offered to the group a chain split makes, for a team where
    /// that group is on this host: as large as the most members it can
    /// have here (none where this host has one rank). `claim` keeps it
    /// until the split says whether the team is made.
    fn offer_into(&self, claim: &mut Option<Claim<'t, T>>) -> Option<Offer> {
        let here = self.t.host_ranks().len() as u32;
        let offered = claim.insert(Claim::new(self.t, self.size().min(here)));
        offered.offer().map(|region| Offer { region })
    }

    /// The communicator of a chain split's `split`, where every member
    /// offered a region: in host memory where its group is on this host,
    /// in two levels where it spans hosts (a team of its members on each).
    fn member_of(&self, split: Split, claim: Claim<'t, T>) -> Result<Option<Comm<'t, T>>> {
        let Split::Member(group) = split else {
            return Ok(None);
        };
        let Some(places) = group.places else {
            return Ok(Some(self.derived(group.chain, None)));
        };
        let (t, rank, context) = (self.t, group.chain.rank(), group.chain.context());
        let ranks: Vec<_> = places.iter().map(|p| p.rank).collect();
        map::check_listed(&ranks, group.chain.size(), rank, t.rank())?;
        let here: Vec<u32> = (0..places.len() as u32)
            .filter(|&m| places[m as usize].host == t.host())
            .collect();
        if here.len() == places.len() {
            // A member whose arena had no room offered none (the dense
            // split across hosts says so): no team, the map from the places.
            let regions = places.iter().map(|p| p.region);
            if regions.clone().any(|r| r == NO_REGION) {
                let map = map::listed(t.size(), &ranks);
                return Ok(Some(self.derived(group.chain, map)));
            }
            let team = claim.into_team(ranks, regions, rank, context)?;
            // The map is made from the team's list on the first lookup.
            let mut comm = self.derived(group.chain, None);
            comm.team = team.map(Box::new);
            return Ok(Some(comm));
        }
        let of_here = |m: &u32| places[*m as usize];
        let ranks_here = here.iter().map(|m| of_here(m).rank).collect();
        let regions_here = here.iter().map(|m| of_here(m).region).collect();
        let mut comm = self.derived(group.chain, map::listed(t.size(), &ranks));
        let levels = Levels::of_group(&comm.chain, claim, &here, (ranks_here, regions_here))?;
        comm.levels = Some(levels);
        Ok(Some(comm))
    }
}

/// How a split runs: the dense path through the host team (its two calls
/// and a context proposal), the dense path across hosts (its two two-level
/// calls, the chain split it falls back on, and this member's offer), or a
/// chain split (its future, which took its tags; boxed, as it holds every
/// chain algorithm's state: unboxed, a split's future was 8,976 bytes
/// where the dense path needs 6,144, all moved on every split in host
/// memory too).
enum SplitPath<'a, 't, T: Transport, F> {
    Dense(&'a Team<'t, T>, (u64, u64), Proposal),
    Levels(
        [LevelsCall<'a, 't, T, ()>; 2],
        split::Reserved,
        Option<Offer>,
    ),
    Chain(std::pin::Pin<Box<F>>),
}

/// The most members a split across hosts takes the dense path with under
/// `Auto` (every member holds every member's record): in the simulator's
/// model of a 16-core host (`catena-bench calibrate --ops split`) the
/// dense path was ahead of the chain split at 1,024 ranks (58.7 against
/// 88.1 µs, the levels' build included) and behind at 4,096 (136 against
/// 110).
const DENSE_ACROSS_HOSTS: u32 = 1024;

/// Joins the job on the default provider (shm; see
/// [`catena_fabric::init`]), runs `body` with the world communicator, and
/// leaves the job in order (every rank waits for the others to finish, so
/// none is told a peer is gone). Use `P::from_env()` and [`Comm::world`]
/// for another provider.
pub fn with_world<R>(
    body: impl FnOnce(&Comm<'_, catena_fabric::shm::ShmTransport>) -> Result<R>,
) -> Result<R> {
    use catena_fabric::Provider;
    let t = catena_fabric::init()?;
    let world = Comm::world(&t);
    let (out, timeout) = (body(&world), world.timeout());
    drop(world);
    t.finalize(timeout)?;
    out
}

/// The blocking forms, for providers with a blocking executor.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::idup`].
    pub fn dup(&self) -> Result<Comm<'t, T>> {
        block_on(self.t, || self.idup())
    }

    /// See [`Comm::isplit`].
    pub fn split<C, K>(&self, color: impl Into<Color<C>>, key: K) -> Result<Option<Comm<'t, T>>>
    where
        C: Serialize,
        K: Wire + Clone + Ord + 'static,
    {
        block_on(self.t, || self.isplit(color, key))
    }

    /// See [`Comm::isplit_by_color`].
    pub fn split_by_color<C: Serialize>(
        &self,
        color: impl Into<Color<C>>,
    ) -> Result<Option<Comm<'t, T>>> {
        block_on(self.t, || self.isplit_by_color(color))
    }

    /// See [`Comm::isplit_by`].
    pub fn split_by<C, K>(
        &self,
        color: impl Into<Color<C>>,
        key: K,
        order: impl Fn(&K, &K) -> Ordering,
    ) -> Result<Option<Comm<'t, T>>>
    where
        C: Serialize,
        K: Wire + Clone,
    {
        block_on(self.t, || self.isplit_by(color, key, order))
    }
}

impl<T: Transport> std::fmt::Debug for Comm<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Comm")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("context", &format_args!("{:#x}", self.context()))
            .field("timeout", &self.timeout)
            .field("host_memory", &self.team.is_some())
            .field("host_levels", &self.levels.is_some())
            .field("map", &self.map.get().map(|m| m.to_string()))
            .finish()
    }
}

/// A communicator stays covariant in its transport's lifetime (its host
/// levels keep no borrow of the transport in a cell, which would make it
/// invariant and break callers' signatures): this compiles only then.
#[cfg(test)]
#[allow(dead_code)]
fn covariant<'long: 'short, 'short, T: Transport>(comm: Comm<'long, T>) -> Comm<'short, T> {
    comm
}
