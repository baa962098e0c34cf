//! A communicator that spans several hosts runs its collectives in two
//! levels (issue 32): inside each host through the host's shared memory,
//! across hosts on a chain of one leader per host, so a value crosses the
//! network once per host instead of once per rank. The host's team is made
//! with the communicator, without messages; the leaders' chain is linked by
//! one double scan in the first call that needs it, with tags the
//! communicator reserved when it was made. This file holds the levels and the reductions; `gathers` and
//! `scans` the rest, and `dense_split` the dense split across hosts.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use bytemuck::Pod;
use catena_fabric::{ContextId, Rank, Time, Transport};

pub(super) mod dense_split;
mod gathers;
mod scans;

use super::buffers::{
    combine_pod, combine_tagged, fill, fill_folded, or_scratch, tagged, untagged, POISONED,
};
use super::collectives::Value;
use super::Comm;
use crate::call::Call;
use crate::chain::{CallTags, Chain};
use crate::codec::{decode, encode};
use crate::context::{channel, Channel};
use crate::doubling;
use crate::error::user_code;
use crate::host::{self, values, Claim, Team, TeamCall, NO_REGION};
use crate::once::{taken_once, Once};
use crate::scan::{allreduce_in, double_scan_in};
use crate::tree::{bcast_bytes_in, bcast_in, reduce_with};
use crate::{Error, Result};

/// A communicator's two levels. Holds O(members on this host): the host's
/// team, and on a leader the leaders' chain node.
pub(super) struct Levels<'t, T: Transport> {
    /// The members on this host, where it has several that fit a team.
    team: Option<Team<'t, T>>,
    state: RefCell<State>,
    /// Two-level calls taken so far: call k has the host team's sequence
    /// numbers 2k + 1 and 2k + 2 and the leaders' chain's calls
    /// `leader_base + 2k` and `+ 2k + 1`, whichever path it takes in the
    /// end.
    calls: Cell<u64>,
    /// This member's place on its host, which a dup shares.
    host: HostPart,
}

/// The communicator's members on this member's host, as this member sees
/// them when the communicator is made.
#[derive(Clone, Copy, Debug)]
struct HostPart {
    /// This member is the first of them: it leads the host.
    leads: bool,
    /// How many there are.
    members: u32,
    /// They hold consecutive ranks of the communicator.
    consecutive: bool,
}

impl HostPart {
    /// The part of member `me` whose host holds the communicator's ranks
    /// `here` (ascending, `me` among them).
    fn of(here: &[u32], me: u32) -> HostPart {
        HostPart {
            leads: here.first() == Some(&me),
            members: here.len() as u32,
            consecutive: here.windows(2).all(|w| w[1] == w[0] + 1),
        }
    }

    /// This member's part of the shape, its host having a team or not.
    fn shape(self, team: bool) -> Shape {
        Shape {
            teams: team || self.members == 1,
            shared: self.members > 1,
            ordered: self.consecutive,
        }
    }
}

/// Where the levels' build stands (see [`crate::once`]; it holds no borrow
/// of the transport, so a communicator stays covariant in its lifetime).
type State = Once<Box<Reservation>, Built>;

/// What the build takes on the communicator's chain, reserved when the
/// communicator is made: one double scan, which agrees on the levels' shape
/// and links the leaders' chain.
struct Reservation {
    scan: CallTags,
    /// This member's part of the shape.
    mine: Shape,
    /// Whether this member leads its host.
    leads: bool,
}

/// The built levels.
struct Built {
    /// The leaders' chain, on a leader (the first member of its host).
    leaders: Option<Chain>,
    /// The leaders' chain calls made before the first two-level call.
    leader_base: u32,
    shape: Shape,
}

/// The order a reduction may fold its members' values in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fold {
    /// Rank order: an associative operation.
    InRankOrder,
    /// Any order: a commutative one as well.
    AnyOrder,
}

/// What the members agree when the levels are built, so that all take
/// the same path.
#[derive(Clone, Copy, Debug, serde::Serialize, serde::Deserialize)]
struct Shape {
    /// Every host's members share a team, or are alone on it.
    teams: bool,
    /// Some host holds more than one member.
    shared: bool,
    /// Every host holds consecutive ranks: a fold in two levels is in rank
    /// order, as an associative operation needs.
    ordered: bool,
}

impl Shape {
    fn combine(a: &Shape, b: &Shape) -> Shape {
        Shape {
            teams: a.teams && b.teams,
            shared: a.shared || b.shared,
            ordered: a.ordered && b.ordered,
        }
    }

    /// Whether two levels serve a call (`in_order`: one that must fold
    /// values in rank order).
    fn serves(self, in_order: bool) -> bool {
        self.teams && self.shared && (self.ordered || !in_order)
    }
}

impl<'t, T: Transport> Levels<'t, T> {
    /// Levels with the host's `team` (where its members have one) and this
    /// member's `host`, the build's tags reserved on `chain` now.
    fn reserved(chain: &Chain, team: Option<Team<'t, T>>, host: HostPart) -> Box<Levels<'t, T>> {
        let reservation = Reservation {
            scan: chain.next_call(),
            mine: host.shape(team.is_some()),
            leads: host.leads,
        };
        Box::new(Levels {
            team,
            state: RefCell::new(Once::Reserved(Box::new(reservation))),
            calls: Cell::new(0),
            host,
        })
    }

    /// The levels of a new communicator on `chain` that spans hosts: its
    /// members on this host, its ranks `here` (ascending, this member's
    /// `rank` among them), world ranks `ranks`, offered `regions` (this
    /// member's held by `claim`) for a team of theirs, which they make where
    /// each has one ([`NO_REGION`] where one has none).
    pub(super) fn of_group(
        chain: &Chain,
        claim: Claim<'t, T>,
        here: &[u32],
        (ranks, regions): (Vec<Rank>, Vec<u64>),
    ) -> Result<Box<Levels<'t, T>>> {
        let rank = chain.rank();
        let me = here
            .iter()
            .position(|&m| m == rank)
            .ok_or_else(|| Error::Mismatch {
                what: format!("a new group's places: this member's rank {rank} is on another host"),
            })?;
        let team = match regions.contains(&NO_REGION) {
            true => None,
            false => claim.into_team(ranks, regions, me as u32, chain.context())?,
        };
        Ok(Levels::reserved(chain, team, HostPart::of(here, rank)))
    }

    /// The levels of the world on `chain`, if the job spans several hosts
    /// and this is the process's first world (every member decides alike
    /// from the job's shape and program order): the host's team takes the
    /// host's world region, as a one-host world's does, so it needs no
    /// message; the build's tags are reserved now.
    pub(super) fn of_world(t: &'t T, chain: &Chain) -> Option<Box<Levels<'t, T>>> {
        let ranks = t.host_ranks();
        if ranks.len() >= t.size() as usize {
            return None;
        }
        let team = Team::of_host(t)?;
        Some(Levels::reserved(chain, team, HostPart::of(ranks, t.rank())))
    }

    /// Takes a call that makes a dup's levels ([`Levels::of_dup`]); a dup
    /// calls this when it is called.
    pub(super) fn dup_call(&self) -> u64 {
        let k = self.calls.get();
        self.calls.set(k + 1);
        k
    }

    /// The levels of a dup of this communicator on `chain` (its context
    /// `context`), made by call `k`: the members of this host offer a region
    /// each and swap where they lie on this host's team (its first call of
    /// `k`), so the dup's team needs no message across hosts; the build's
    /// tags are reserved on the dup's chain.
    pub(super) async fn of_dup(
        &self,
        k: u64,
        t: &'t T,
        chain: &Chain,
        context: ContextId,
        deadline: Time,
    ) -> Result<Box<Levels<'t, T>>> {
        let (up, down) = seqs(k);
        let team = match &self.team {
            None => None,
            Some(team) => {
                let claim = Claim::new(t, team.size());
                let offer = claim.offer().unwrap_or(NO_REGION).to_le_bytes();
                let mut all = vec![0u8; 8 * team.size() as usize];
                let swap = host::allgather(team, up, &offer, &mut all, deadline);
                let swapped = team.run(up, deadline, swap).await;
                let passed = team.run(down, deadline, async { Ok(()) }).await;
                swapped.and(passed)?;
                let regions: Vec<u64> = all
                    .chunks_exact(8)
                    .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
                    .collect();
                let dup = match regions.contains(&NO_REGION) {
                    true => None,
                    false => claim.into_team(team.ranks().to_vec(), regions, team.me(), context)?,
                };
                if let Some(dup) = &dup {
                    dup.inherit_ways(team);
                }
                dup
            }
        };
        Ok(Levels::reserved(chain, team, self.host))
    }

    /// Takes the next two-level call, with the tags `flat` its flat path
    /// reserved; a collective calls this when it is called, before its
    /// first await.
    pub(super) fn call<F>(&self, flat: F) -> LevelsCall<'_, 't, T, F> {
        let k = self.calls.get();
        self.calls.set(k + 1);
        LevelsCall {
            levels: self,
            k,
            flat,
        }
    }
}

/// What each member adds to the build's double scan: its part of the
/// shape, and whether it leads (a leader its world rank too).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
struct Part {
    shape: Shape,
    /// The leaders in the run folded so far.
    leaders: u32,
    /// The run's leader nearest the member that folds it: the last one
    /// left to right, the first one right to left.
    nearest: Option<Rank>,
}

impl Part {
    fn shape(a: &Part, b: &Part) -> Shape {
        Shape::combine(&a.shape, &b.shape)
    }

    /// Left to right: the last leader of the two runs.
    fn left_to_right(a: &Part, b: &Part) -> Part {
        Part {
            shape: Part::shape(a, b),
            leaders: a.leaders + b.leaders,
            nearest: b.nearest.or(a.nearest),
        }
    }

    /// Right to left: the first leader of the two runs.
    fn right_to_left(a: &Part, b: &Part) -> Part {
        Part {
            nearest: a.nearest.or(b.nearest),
            ..Part::left_to_right(a, b)
        }
    }
}

/// The build: one double scan on the communicator's chain agrees on the
/// shape and tells each leader how many leaders lie before it, how many
/// there are, and the nearest on each side, which link the leaders' chain
/// (on the communicator's leaders' channel) without a split.
async fn build<T: Transport>(
    t: &T,
    chain: &Chain,
    reservation: Reservation,
    deadline: Time,
) -> Result<Built> {
    let mine = Part {
        shape: reservation.mine,
        leaders: u32::from(reservation.leads),
        nearest: reservation.leads.then(|| t.rank()),
    };
    let call = Call::new(t, chain, reservation.scan, deadline);
    let scan = double_scan_in(
        call,
        mine.clone(),
        mine,
        Part::left_to_right,
        Part::right_to_left,
    )
    .await?;
    let whole = match &scan.exclusive_rl {
        Some(right) => Part::left_to_right(&scan.inclusive_lr, right),
        None => scan.inclusive_lr.clone(),
    };
    let leaders = match reservation.leads {
        true => {
            let before = scan.exclusive_lr.as_ref();
            let after = scan.exclusive_rl.as_ref();
            let leaders = Chain::from_links(
                before.map_or(0, |p| p.leaders),
                whole.leaders,
                t.rank(),
                before.and_then(|p| p.nearest),
                after.and_then(|p| p.nearest),
                channel(chain.context(), Channel::Leaders),
            )?;
            // Its tree broadcasts and recursive doubling need neighbour
            // searches, reserved before any two-level call numbers its
            // calls.
            doubling::reserve_searches(&leaders);
            Some(leaders)
        }
        false => None,
    };
    Ok(Built {
        leader_base: leaders.as_ref().map_or(0, Chain::calls_made),
        leaders,
        shape: whole.shape,
    })
}

fn build_failed() -> Error {
    Error::Mismatch {
        what: "the communicator's host levels: their build failed in an earlier call".into(),
    }
}

/// The leaders' chain calls each two-level call has: a scatter makes
/// two (the hosts' sizes up, their runs of pieces down), the others one.
const LEADER_CALLS: u64 = 2;

impl Built {
    /// Leaders' call `part` (below [`LEADER_CALLS`]) of two-level call `k`,
    /// on a leader.
    fn leaders_call<'c, T: Transport>(
        &'c self,
        t: &'c T,
        (k, part): (u64, u64),
        deadline: Time,
    ) -> Option<Call<'c, T>> {
        debug_assert!(part < LEADER_CALLS);
        let chain = self.leaders.as_ref()?;
        let number = k.wrapping_mul(LEADER_CALLS).wrapping_add(part) as u32;
        let tags = CallTags::numbered(self.leader_base.wrapping_add(number));
        Some(Call::new(t, chain, tags, deadline))
    }
}

/// The host team's two sequence numbers of two-level call `k`: one up to
/// the leader, one down from it.
fn seqs(k: u64) -> (u64, u64) {
    (2 * k + 1, 2 * k + 2)
}

/// Runs `body` as the host team's call `seq` (nothing to order where this
/// host has one member).
async fn on_host<T: Transport, R>(
    team: Option<&Team<'_, T>>,
    seq: u64,
    deadline: Time,
    body: impl std::future::Future<Output = Result<R>>,
) -> Result<R> {
    match team {
        Some(team) => team.run(seq, deadline, body).await,
        None => body.await,
    }
}

/// One collective on the levels, taken when it was called: its number,
/// and the tags `F` its flat path reserved (which a call with a root other
/// than rank 0 uses between the root and rank 0, when the levels serve
/// it).
pub(super) struct LevelsCall<'a, 't, T: Transport, F = CallTags> {
    levels: &'a Levels<'t, T>,
    k: u64,
    flat: F,
}

impl<'a, 't, T: Transport, F: Copy> LevelsCall<'a, 't, T, F> {
    /// The levels, building them with the reserved tags if no call has
    /// started to, else waiting for the call that did.
    async fn built(&self, comm: &Comm<'t, T>, deadline: Time) -> Result<Rc<Built>> {
        let t = comm.t;
        let wait = (
            "a concurrent call's build of the host levels",
            build_failed as fn() -> Error,
        );
        taken_once(&self.levels.state, t, deadline, wait, |reservation| {
            build(t, &comm.chain, *reservation, deadline)
        })
        .await
    }

    /// The levels where they serve this call (`in_order`: one that must
    /// fold values in rank order); else `None`, this call's host calls
    /// passed, and the call takes the flat path.
    async fn serving(
        &self,
        comm: &Comm<'t, T>,
        in_order: bool,
        deadline: Time,
    ) -> Result<Option<Rc<Built>>> {
        let built = self.built(comm, deadline).await?;
        if built.shape.serves(in_order) {
            return Ok(Some(built));
        }
        self.pass(deadline).await?;
        Ok(None)
    }

    /// Passes this call's two host calls without using them, so that later
    /// calls on the team go on.
    async fn pass(&self, deadline: Time) -> Result<()> {
        let (up, down) = self.seqs();
        on_host(self.levels.team.as_ref(), up, deadline, async { Ok(()) }).await?;
        on_host(self.levels.team.as_ref(), down, deadline, async { Ok(()) }).await
    }

    /// The host team's two sequence numbers of this call.
    fn seqs(&self) -> (u64, u64) {
        seqs(self.k)
    }

    /// This host's fold of `x` in rank order on its leader (`None` on the
    /// other members), as this call's first host call.
    async fn to_leader<A: Value>(
        &self,
        x: A,
        op: &impl Fn(&A, &A) -> A,
        deadline: Time,
    ) -> Result<Option<A>> {
        let (up, team) = (self.seqs().0, self.levels.team.as_ref());
        on_host(team, up, deadline, async {
            match team {
                Some(team) => values::reduce_value(team, up, 0, x, op, deadline).await,
                None => Ok(Some(x)),
            }
        })
        .await
    }

    /// This host's elementwise fold of its members' `send` in rank order,
    /// as this call's first host call: on its leader as the chain's
    /// reductions carry it ([`tagged`]; a poison where a member's buffer had
    /// another length), `Ok(None)` on the other members.
    async fn buffers_to_leader<E: Pod>(
        &self,
        built: &Built,
        send: &[E],
        op: &impl Fn(&E, &E) -> E,
        deadline: Time,
    ) -> Result<Option<Vec<u8>>> {
        let (up, team) = (self.seqs().0, self.levels.team.as_ref());
        let combine = |acc: &mut [u8], x: &[u8]| combine_pod(acc, x, op);
        let send = bytemuck::cast_slice::<E, u8>(send);
        // A leader folds its host's values into an accumulator of its own.
        let mut acc = built.leaders.is_some().then(|| send.to_vec());
        let reduced = on_host(team, up, deadline, async {
            let Some(team) = team else { return Ok(()) };
            let call = TeamCall {
                team,
                seq: up,
                deadline,
            };
            let elem = std::mem::size_of::<E>();
            host::reduce(call, 0, send, acc.as_deref_mut(), elem, &combine).await
        })
        .await;
        match (reduced, acc) {
            (Ok(()), acc) => Ok(acc.map(|acc| tagged::<u8>(&acc))),
            (Err(Error::Mismatch { .. }), Some(_)) => Ok(Some(vec![POISONED])),
            (Err(e), _) => Err(e),
        }
    }

    /// The value this host's leader holds (`Ok(Some)` there, `Ok(None)`
    /// on the other members) on every member of the host, as this call's
    /// second host call; `Ok` only where `held` is.
    async fn leader_to_members<V: Value>(
        &self,
        built: &Built,
        held: Result<Option<V>>,
        deadline: Time,
    ) -> Result<V> {
        let (down, team) = (self.seqs().1, self.levels.team.as_ref());
        let leads = built.leaders.is_some();
        on_host(team, down, deadline, async {
            let Some(team) = team else {
                return held.map(|v| v.expect("alone, this member leads"));
            };
            // A leader that failed leaves its host's members to their
            // deadline, as a flat call would.
            let (value, own) = match (leads, held) {
                (true, Ok(value)) => (value, Ok(())),
                (true, Err(e)) => return Err(e),
                (false, own) => (None, own.map(drop)),
            };
            let got = values::bcast_value(team, down, 0, value, deadline).await;
            own.and(got)
        })
        .await
    }

    /// The flat path's call on the communicator's chain.
    fn flat<'c>(&self, comm: &'c Comm<'t, T>, deadline: Time) -> Call<'c, T, F> {
        Call::new(comm.t, &comm.chain, self.flat, deadline)
    }
}

impl<'a, 't, T: Transport> LevelsCall<'a, 't, T> {
    /// See [`Comm::ibarrier`].
    pub(super) async fn barrier(self, comm: &Comm<'t, T>, deadline: Time) -> Result<()> {
        let Some(built) = self.serving(comm, false, deadline).await? else {
            let flat = self.flat(comm, deadline);
            return double_scan_in(flat, (), (), |_, _| (), |_, _| ())
                .await
                .map(drop);
        };
        let (up, down) = self.seqs();
        let team = self.levels.team.as_ref();
        let entered = on_host(team, up, deadline, async {
            match team {
                Some(team) => host::barrier(team, up, deadline).await,
                None => Ok(()),
            }
        })
        .await;
        let across = match (entered, built.leaders_call(comm.t, (self.k, 0), deadline)) {
            (Ok(()), Some(call)) => doubling::allreduce(call, (), |_, _| ()).await,
            (entered, _) => entered,
        };
        // A member whose part failed leaves the others to their deadline,
        // as in a flat barrier.
        let release = across.is_ok();
        let released = on_host(team, down, deadline, async {
            match team {
                Some(team) if release => host::barrier(team, down, deadline).await,
                _ => Ok(()),
            }
        })
        .await;
        across.and(released)
    }

    /// The root's bytes on every member (the root passes `Some`): to rank
    /// 0 first where the root is another, across the leaders from rank 0,
    /// then inside each host from its leader.
    async fn bcast_bytes(
        &self,
        comm: &Comm<'t, T>,
        built: &Built,
        root: u32,
        bytes: Option<Vec<u8>>,
        deadline: Time,
    ) -> Result<Vec<u8>> {
        let (t, chain) = (comm.t, &comm.chain);
        let (up, down) = self.seqs();
        let team = self.levels.team.as_ref();
        on_host(team, up, deadline, async { Ok(()) }).await?;
        let mut value = Ok(bytes);
        if root != 0 {
            let tag = self.flat.round(0)?;
            if let (true, Ok(Some(bytes))) = (comm.rank() == root, &value) {
                let sent = match comm.world_rank_of(0) {
                    Ok(first) => chain.send_bytes(t, first, tag, bytes, deadline).await,
                    Err(e) => Err(e),
                };
                value = sent.map(|()| None);
            } else if comm.rank() == 0 {
                value = match comm.world_rank_of(root) {
                    Ok(from) => chain.recv_bytes(t, from, tag, deadline).await.map(Some),
                    Err(e) => Err(e),
                };
            }
        }
        if let (Ok(held), Some(call)) = (
            &mut value,
            built.leaders_call(comm.t, (self.k, 0), deadline),
        ) {
            let at_first = held.take().filter(|_| comm.rank() == 0);
            value = bcast_bytes_in(call, 0, at_first).await.map(Some);
        }
        let leads = built.leaders.is_some();
        on_host(team, down, deadline, async {
            let Some(team) = team else {
                return value.map(|bytes| bytes.expect("alone, this member leads"));
            };
            // A leader that failed across hosts leaves its host's members to
            // their deadline, as a flat broadcast would.
            let (mut bytes, own) = match (leads, value) {
                (true, Ok(bytes)) => (bytes.expect("a leader holds the value"), Ok(())),
                (true, Err(e)) => return Err(e),
                (false, own) => (Vec::new(), own.map(drop)),
            };
            host::bcast(team, down, 0, host::Value::Any(&mut bytes), deadline).await?;
            own.map(|()| bytes)
        })
        .await
    }

    /// See [`Comm::ibcast`].
    pub(super) async fn bcast_value<V: Value>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        value: Option<V>,
        deadline: Time,
    ) -> Result<V> {
        let Some(built) = self.serving(comm, false, deadline).await? else {
            return bcast_in(self.flat(comm, deadline), root, value).await;
        };
        let checked = check_root(comm, root).and_then(|()| {
            if (comm.rank() == root) != value.is_some() {
                return Err(Error::InvalidArgument(
                    "bcast takes a value on the root and none elsewhere".into(),
                ));
            }
            value
                .as_ref()
                .map(|v| encode(v, "a bcast value"))
                .transpose()
        });
        let bytes = match checked {
            Ok(bytes) => bytes,
            Err(e) => return self.pass(deadline).await.and(Err(e)),
        };
        let bytes = self
            .bcast_bytes(comm, &built, root, bytes, deadline)
            .await?;
        match value {
            Some(v) => Ok(v),
            None => decode(&bytes, "a bcast value"),
        }
    }

    /// See [`Comm::ibcast_into`].
    pub(super) async fn bcast_into<E: Pod>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        buf: &mut [E],
        deadline: Time,
    ) -> Result<()> {
        let at_root = comm.rank() == root;
        let value = at_root.then(|| bytemuck::cast_slice::<E, u8>(buf).to_vec());
        let bytes = match self.serving(comm, false, deadline).await? {
            None => bcast_bytes_in(self.flat(comm, deadline), root, value).await?,
            Some(built) => {
                if let Err(e) = check_root(comm, root) {
                    return self.pass(deadline).await.and(Err(e));
                }
                self.bcast_bytes(comm, &built, root, value, deadline)
                    .await?
            }
        };
        match at_root {
            true => Ok(()),
            false => fill(buf, &bytes, "a bcast buffer"),
        }
    }

    /// See [`Comm::ireduce`]: up to each host's leader, a tree reduce
    /// across the leaders to rank 0, then to the root where it is another.
    pub(super) async fn reduce_value<A: Value>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        x: A,
        op: impl Fn(&A, &A) -> A,
        deadline: Time,
    ) -> Result<Option<A>> {
        let combine = |a: A, b: A| user_code("a reduce operation", || op(&a, &b));
        let Some(built) = self.serving(comm, true, deadline).await? else {
            return reduce_with(self.flat(comm, deadline), root, x, combine).await;
        };
        if let Err(e) = check_root(comm, root) {
            return self.pass(deadline).await.and(Err(e));
        }
        let t = comm.t;
        let down = self.seqs().1;
        let total = match (
            self.to_leader(x, &op, deadline).await,
            built.leaders_call(t, (self.k, 0), deadline),
        ) {
            (Ok(Some(total)), Some(call)) => reduce_with(call, 0, total, combine).await,
            (other, _) => other,
        };
        on_host(self.levels.team.as_ref(), down, deadline, async { Ok(()) }).await?;
        self.to_root(comm, root, total?, deadline).await
    }

    /// See [`Comm::ireduce_into`]: up to each host's leader through host
    /// memory, a tree reduce across the leaders to rank 0, then to the
    /// root where it is another. A member's buffer of another length
    /// poisons the fold: the root gets `Mismatch`, none waits.
    pub(super) async fn reduce_into<E: Pod>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        (send, recv): (&[E], Option<&mut [E]>),
        op: impl Fn(&E, &E) -> E,
        deadline: Time,
    ) -> Result<()> {
        let fold = |a: Vec<u8>, b: Vec<u8>| {
            user_code("a reduce operation", || combine_tagged::<E>(&a, &b, &op))
        };
        let Some(built) = self.serving(comm, true, deadline).await? else {
            let flat = self.flat(comm, deadline);
            return match (recv, reduce_with(flat, root, tagged(send), fold).await?) {
                (Some(recv), Some(bytes)) => fill_folded(bytes, recv, send.len(), "a reduce"),
                _ => Ok(()),
            };
        };
        let holds = match (comm.rank() == root) == recv.is_some() {
            true => Ok(()),
            false => Err(Error::InvalidArgument(
                "reduce takes a receive buffer on the root and none elsewhere".into(),
            )),
        };
        if let Err(e) = check_root(comm, root).and(holds) {
            return self.pass(deadline).await.and(Err(e));
        }
        let held = self.buffers_to_leader(&built, send, &op, deadline).await;
        // A poison folds into the others' values: the root learns it.
        let total = match (held, built.leaders_call(comm.t, (self.k, 0), deadline)) {
            (Ok(Some(mine)), Some(call)) => reduce_with(call, 0, mine, fold).await,
            (other, _) => other,
        };
        let down = self.seqs().1;
        on_host(self.levels.team.as_ref(), down, deadline, async { Ok(()) }).await?;
        match (recv, self.to_root(comm, root, total?, deadline).await?) {
            (Some(recv), Some(bytes)) => fill_folded(bytes, recv, send.len(), "a reduce"),
            _ => Ok(()),
        }
    }

    /// A value that the root holds (`Some` there) on rank 0 instead, sent
    /// with the flat path's tags where the root is another.
    async fn to_first<V: Value>(
        &self,
        comm: &Comm<'t, T>,
        root: u32,
        value: Option<V>,
        deadline: Time,
    ) -> Result<Option<V>> {
        let (t, chain) = (comm.t, &comm.chain);
        let tag = self.flat.round(0)?;
        match (comm.rank(), value) {
            (_, value) if root == 0 => Ok(value),
            (me, Some(value)) if me == root => {
                let to = comm.world_rank_of(0)?;
                chain.send(t, to, tag, &value, deadline).await?;
                Ok(None)
            }
            (0, _) => {
                let from = comm.world_rank_of(root)?;
                chain.recv(t, from, tag, deadline).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    /// A result that rank 0 holds (`Some` there) on the root instead,
    /// sent with the flat path's tags where the root is another.
    async fn to_root<A: Value>(
        &self,
        comm: &Comm<'t, T>,
        root: u32,
        total: Option<A>,
        deadline: Time,
    ) -> Result<Option<A>> {
        let (t, chain) = (comm.t, &comm.chain);
        let tag = self.flat.round(0)?;
        match (comm.rank(), total) {
            (0, Some(total)) if root == 0 => Ok(Some(total)),
            (0, Some(total)) => {
                let to = comm.world_rank_of(root)?;
                chain.send(t, to, tag, &total, deadline).await?;
                Ok(None)
            }
            (me, _) if me == root => {
                let from = comm.world_rank_of(0)?;
                chain.recv(t, from, tag, deadline).await.map(Some)
            }
            _ => Ok(None),
        }
    }

    /// See [`Comm::iallreduce`].
    pub(super) async fn allreduce_value<A: Value + Clone>(
        self,
        comm: &Comm<'t, T>,
        x: A,
        op: impl Fn(&A, &A) -> A,
        fold: Fold,
        deadline: Time,
    ) -> Result<A> {
        let in_order = fold == Fold::InRankOrder;
        let Some(built) = self.serving(comm, in_order, deadline).await? else {
            return allreduce_in(self.flat(comm, deadline), x, op).await;
        };
        let host_total = self.to_leader(x, &op, deadline).await;
        let total = match (
            host_total,
            built.leaders_call(comm.t, (self.k, 0), deadline),
        ) {
            (Ok(Some(total)), Some(call)) => doubling::allreduce(call, total, &op).await.map(Some),
            (other, _) => other,
        };
        self.leader_to_members(&built, total, deadline).await
    }

    /// See [`Comm::iallreduce_into`]. A member's buffer of another length
    /// poisons the call: every member gets `Mismatch`, none waits.
    pub(super) async fn allreduce_into<E: Pod>(
        self,
        comm: &Comm<'t, T>,
        send: &[E],
        recv: &mut [E],
        (op, order): (impl Fn(&E, &E) -> E, Fold),
        deadline: Time,
    ) -> Result<()> {
        let fold = |a: &Vec<u8>, b: &Vec<u8>| combine_tagged::<E>(a, b, &op);
        let in_order = order == Fold::InRankOrder;
        let Some(built) = self.serving(comm, in_order, deadline).await? else {
            let folded = allreduce_in(self.flat(comm, deadline), tagged(send), fold).await?;
            return fill_folded(folded, recv, send.len(), "an allreduce");
        };
        let down = self.seqs().1;
        let team = self.levels.team.as_ref();
        let leads = built.leaders.is_some();
        let held = self.buffers_to_leader(&built, send, &op, deadline).await;
        // A poison folds into the other hosts' values: they learn it too.
        let across = match (held, built.leaders_call(comm.t, (self.k, 0), deadline)) {
            (Ok(Some(mine)), Some(call)) => {
                let folded = doubling::allreduce(call, mine, fold).await;
                folded
                    .and_then(|bytes| untagged(bytes, "an allreduce"))
                    .map(Some)
            }
            (other, _) => other,
        };
        let send = bytemuck::cast_slice::<E, u8>(send);
        let mut scratch = Vec::new();
        let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
        let (into, wrong) = or_scratch(recv, send.len(), &mut scratch, "the receive buffer");
        let out = on_host(team, down, deadline, async {
            let Some(team) = team else {
                into.copy_from_slice(&across?.expect("alone, this member leads"));
                return Ok(());
            };
            match (leads, across) {
                (true, Ok(total)) => {
                    let mut total = total.expect("a leader holds the total");
                    host::bcast(team, down, 0, host::Value::Fixed(&mut total), deadline).await?;
                    into.copy_from_slice(&total);
                    Ok(())
                }
                (true, Err(e @ Error::Mismatch { .. })) => {
                    host::poison_bcast(team, down, 0, deadline).await?;
                    Err(e)
                }
                (true, Err(e)) => Err(e),
                (false, own) => {
                    let got = host::bcast(team, down, 0, host::Value::Fixed(into), deadline).await;
                    own.map(drop).and(got)
                }
            }
        })
        .await;
        out.and(wrong.map_or(Ok(()), Err))
    }
}

/// `InvalidArgument` unless `root` is a member.
fn check_root<T: Transport>(comm: &Comm<'_, T>, root: u32) -> Result<()> {
    if root >= comm.size() {
        return Err(Error::InvalidArgument(format!(
            "root {root} in a group of {}",
            comm.size()
        )));
    }
    Ok(())
}
