//! Collectives among the members of a communicator that share one host,
//! through the host's shared memory instead of messages (issue 32): a
//! [`Team`] gives each member a region of its host arena; flags and small
//! values move through mailbox lines that peers store into, larger data
//! through cells the writer exposes and its readers copy out of. Written
//! once against `HostMemory`, so the simulator runs them too, with a cost
//! model of their own. One file per collective; `select` picks among them.

mod allgather;
mod allreduce;
mod barrier;
mod bcast;
mod claim;
mod copy_way;
mod gather;
mod gathered;
mod layout;
mod mailbox;
mod message;
mod offer;
mod reduce;
mod scatter;
pub(crate) mod select;
mod stream;
mod tree;
pub(crate) mod values;

use std::cell::{Cell, OnceCell};
use std::time::Duration;

use catena_fabric::config::HostTuning;
use catena_fabric::{wait_until, ContextId, HostMemory, HostRegion, Rank, Time};

pub(crate) use allgather::{allgather, allgather_any};
pub(crate) use allreduce::allreduce;
pub(crate) use barrier::barrier;
pub(crate) use bcast::{bcast, poison as poison_bcast, Value};
pub(crate) use claim::{Claim, NO_REGION};
pub(crate) use copy_way::{Op, Way};
pub(crate) use gather::{gather, gather_any};
pub(crate) use gathered::Gathered;
pub(crate) use layout::{Layout, MAX_MEMBERS};
pub(crate) use reduce::reduce;
pub(crate) use scatter::{scatter, scatter_any, Pieces};

use crate::context::WORLD_CONTEXT;
use crate::{Error, Result};

/// A context id's bits mixed, so that ids that differ anywhere give stamps
/// that differ (splitmix64's finalizer).
fn context_digest(context: ContextId) -> u64 {
    let mut z = context.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// How often a writer that waits for a peer to finish a call looks again:
/// it reads the peer's memory, and nothing wakes it when that changes.
const PEER_POLL: Duration = Duration::from_micros(20);

/// Whether elements of `elem` bytes fit a cell whole, as host reductions
/// need.
pub(crate) fn stream_fits(elem: usize) -> bool {
    stream::chunk_for(elem).is_some()
}

/// The other members in rank order, then `me`: a member that copies its
/// own part last copies its peers' while they expose theirs (its own copy
/// needs nobody). Readers take writers in one order for all, as a cell is
/// free again only once all its readers consumed it: rotated orders can
/// wait on each other in a circle.
pub(crate) fn others_then_me(me: u32, n: u32) -> impl Iterator<Item = u32> {
    (0..n).filter(move |&m| m != me).chain([me])
}

/// A reduction over bytes: `acc = acc ⊕ x`, `acc` on the left.
pub(crate) type Combine<'a> = &'a dyn Fn(&mut [u8], &[u8]) -> Result<()>;

/// One call of a team as the steps of its algorithm see it: the team, the
/// sequence number the call took when it was called (or numbers, for a
/// call that runs several), and its deadline.
pub(crate) struct TeamCall<'a, 't, T: HostMemory, Seq = u64> {
    pub(crate) team: &'a Team<'t, T>,
    pub(crate) seq: Seq,
    pub(crate) deadline: Time,
}

/// What a member keeps of another (or of itself): where its region is, its
/// arena (mapped on first use), and counts of their traffic.
struct Member<P> {
    region: u64,
    peer: OnceCell<P>,
    /// What it last showed as finished (a lower bound).
    seen_finished: Cell<u64>,
    /// Chunks exposed to it, and consumed from it, so far.
    sent_to: Cell<u64>,
    got_from: Cell<u64>,
    /// Its last report of a read of this member's data taken in, per
    /// operation whose readers report.
    report_seen: [Cell<u64>; Op::REPORTED],
}

/// The members of a communicator on one host, and where each one's region
/// lies. Holds O(members) state: a host has a bounded number of cores.
pub(crate) struct Team<'t, T: HostMemory> {
    t: &'t T,
    /// Members' world ranks, in group rank order.
    ranks: Vec<Rank>,
    /// What this member keeps of each member (one allocation).
    members: Vec<Member<T::HostPeer>>,
    me: u32,
    own: HostRegion,
    layout: Layout,
    tuning: HostTuning,
    /// The world's region is never given back.
    world: bool,
    /// The upper half of every mailbox sequence word this team stores (a
    /// digest of its communicator's context): a slot a team of another
    /// communicator left in a reused region never looks posted.
    stamp: u64,
    next_seq: Cell<u64>,
    finished: Cell<u64>,
    /// A call waits for an earlier one to end.
    queued: Cell<bool>,
    /// The last call every member is known to have finished.
    all_finished: Cell<u64>,

    /// Where a short value a peer posted is read before it is combined.
    scratch: std::cell::RefCell<Vec<u8>>,
    /// A reduction's accumulator, lent to one call at a time.
    buffer: Cell<Vec<u8>>,
    /// Which way this member's long data reached its readers faster.
    learnt: copy_way::Learnt,
}

impl<'t, T: HostMemory> Team<'t, T> {
    /// The world's team, if every rank of the job shares this host: every
    /// rank finds its region at the same offset, so this needs no exchange.
    /// Only the first world of a process gets it; the decision depends on
    /// nothing but the job's shape and program order, so every rank takes
    /// the same one.
    pub(crate) fn world(t: &'t T) -> Option<Team<'t, T>> {
        let size = t.host_ranks().len() as u32;
        if size != t.size() || !(2..=MAX_MEMBERS).contains(&size) {
            return None;
        }
        Team::of_host(t).flatten()
    }

    /// The job's ranks on this host as one team in the host's world
    /// region, which every rank takes at the same offset, so this needs no
    /// exchange: `None` where this process's world region is taken (not
    /// its first world), `Some(None)` where the host has one rank or more
    /// than a team holds (the region is taken all the same, so that every
    /// rank's later worlds are alike later ones).
    pub(crate) fn of_host(t: &'t T) -> Option<Option<Team<'t, T>>> {
        let ranks = t.host_ranks().to_vec();
        let size = ranks.len() as u32;
        let fits = (2..=MAX_MEMBERS).contains(&size);
        let own = t.host_world_region(Layout::new(if fits { size } else { 1 }).bytes())?;
        let me = ranks.iter().position(|&r| r == t.rank());
        let (true, Some(me)) = (fits, me) else {
            return Some(None);
        };
        let regions = vec![own.at; ranks.len()];
        let team = Team::new(t, ranks, regions, me as u32, own, true, WORLD_CONTEXT);
        Some(Some(team))
    }

    /// A team of `ranks` (group order) whose regions are `regions` (one
    /// each), this member being `me` with region `own`, for the
    /// communicator `context`.
    pub(crate) fn new(
        t: &'t T,
        ranks: Vec<Rank>,
        regions: impl IntoIterator<Item = u64>,
        me: u32,
        own: HostRegion,
        world: bool,
        context: ContextId,
    ) -> Team<'t, T> {
        let n = ranks.len();
        let members = regions
            .into_iter()
            .map(|region| Member {
                region,
                peer: OnceCell::new(),
                seen_finished: Cell::new(0),
                sent_to: Cell::new(0),
                got_from: Cell::new(0),
                report_seen: Default::default(),
            })
            .collect();
        Team {
            t,
            members,
            layout: Layout::new(n as u32),
            tuning: t.host_tuning(),
            ranks,
            me,
            own,
            world,
            stamp: (context_digest(context) as u32 as u64) << 32,
            next_seq: Cell::new(1),
            finished: Cell::new(0),
            queued: Cell::new(false),
            all_finished: Cell::new(0),
            scratch: std::cell::RefCell::new(Vec::new()),
            buffer: Cell::new(Vec::new()),
            learnt: copy_way::Learnt::default(),
        }
    }

    /// What a mailbox sequence word holds once call `seq` was posted.
    pub(crate) fn stamp(&self, seq: u64) -> u64 {
        self.stamp | (seq & 0xffff_ffff)
    }

    /// The members' world ranks, in group order.
    pub(crate) fn ranks(&self) -> &[Rank] {
        &self.ranks
    }

    /// Member `m`'s world rank.
    pub(crate) fn rank_of(&self, m: u32) -> Rank {
        self.ranks[m as usize]
    }

    /// The number of members.
    pub(crate) fn size(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// This member's index.
    pub(crate) fn me(&self) -> u32 {
        self.me
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Where this team's collectives change algorithm with its size.
    pub(crate) fn tuning(&self) -> HostTuning {
        self.tuning
    }

    /// The way this member, writing `copied` bytes per reader of `op`
    /// (long data, within the single copy's bounds), sends them: learnt
    /// (from its readers' reports, taken in first, or from its own calls'
    /// times, see `copy_way`) where the tuning asks for that; else an
    /// offer.
    pub(crate) fn way(&self, op: Op, copied: usize) -> Result<Way> {
        if !self.tuning.single_copy_learn {
            return Ok(Way::Offer);
        }
        if !op.reported() {
            return Ok(self.learnt.choose(op, copied));
        }
        let own = self.peer(self.me)?;
        for (m, member) in self.members.iter().enumerate() {
            let at = self.at(self.me, self.layout.reported(m as u32, op));
            let word = self.t.host_load(own, at)?;
            if word != member.report_seen[op as usize].replace(word) {
                if let Some(report) = copy_way::Report::decode(op, word) {
                    self.learnt.learn(report);
                }
            }
        }
        Ok(self.learnt.choose(op, copied))
    }

    /// Starts from what `parent` learnt of which way long data goes, if
    /// it is a team of the same processes (it has as many members: a
    /// team's members are a subset of its parent's), so that a dup does
    /// not explore again; a smaller team's readers cost otherwise, so it
    /// learns afresh.
    pub(crate) fn inherit_ways(&self, parent: &Team<'t, T>) {
        if parent.size() == self.size() {
            self.learnt.inherit(&parent.learnt);
        }
    }

    /// Tells member `from` that this member's read of its `bytes` of call
    /// `seq` of `op`, which went by `way`, began at `began` (and ends now),
    /// if `op`'s readers report.
    pub(crate) fn report(
        &self,
        from: u32,
        seq: u64,
        op: Op,
        bytes: usize,
        way: Way,
        began: Time,
    ) -> Result<()> {
        if !op.reported() || !self.tuning.single_copy_learn {
            return Ok(());
        }
        let t = self.t;
        let ns = t.now().saturating_sub(began).as_nanos() as u64;
        let report = copy_way::Report::of(seq, op, bytes, way, ns);
        let at = self.at(from, self.layout.reported(self.me, op));
        // Read at the writer's next choice; nothing waits on it.
        Ok(t.host_set(self.peer(from)?, at, report.encode())?)
    }

    /// Learns from this member's own call `seq` of `op` (every member
    /// writing and reading `copied` bytes per reader), in which it
    /// `offered` or not, from its choice at `began` until now: where the
    /// choice was learnt (the bytes within the bounds).
    pub(crate) fn timed(&self, seq: u64, op: Op, copied: usize, offered: bool, began: Time) {
        debug_assert!(!op.reported());
        if !self.tuning.single_copy_learn || copied < self.tuning.single_copy_min {
            return;
        }
        let ns = self.t.now().saturating_sub(began).as_nanos() as u64;
        let way = if offered { Way::Offer } else { Way::Cells };
        self.learnt
            .learn(copy_way::Report::of(seq, op, copied, way, ns));
    }

    /// The transport.
    pub(crate) fn t(&self) -> &'t T {
        self.t
    }

    /// Member `m`'s arena, mapped on first use.
    pub(crate) fn peer(&self, m: u32) -> Result<&T::HostPeer> {
        let t = self.t;
        let cell = &self.members[m as usize].peer;
        if let Some(peer) = cell.get() {
            return Ok(peer);
        }
        let peer = t.host_peer(self.ranks[m as usize])?;
        Ok(cell.get_or_init(|| peer))
    }

    /// The offset of `at` in member `m`'s region.
    pub(crate) fn at(&self, m: u32, at: u64) -> u64 {
        self.members[m as usize].region + at
    }

    /// Takes the next call's sequence number; called when a collective is
    /// called, before its first await, so calls take theirs in call order.
    pub(crate) fn call(&self) -> u64 {
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        seq
    }

    /// Runs `body` as call `seq`: [`Team::begin`], the body, [`Team::end`].
    /// (The hot calls write the three steps out: a body moved into this
    /// future would take its room twice.)
    pub(crate) async fn run<R>(
        &self,
        seq: u64,
        deadline: Time,
        body: impl std::future::Future<Output = Result<R>>,
    ) -> Result<R> {
        self.begin(seq, deadline).await?;
        let out = body.await;
        self.end(seq, out)
    }

    /// Waits until every earlier call on this team has ended: calls on a
    /// team run one after another, in call order, so their cells and
    /// counts never interleave.
    pub(crate) async fn begin(&self, seq: u64, deadline: Time) -> Result<()> {
        if self.finished.get() + 1 == seq {
            return Ok(());
        }
        wait_until(self.t, deadline, "an earlier host collective", || {
            let ready = self.finished.get() + 1 == seq;
            self.queued.set(self.queued.get() || !ready);
            Ok(ready.then_some(()))
        })
        .await
        .map_err(Error::from)
    }

    /// Ends call `seq` (whatever its outcome, which it passes on, so later
    /// calls go on) and publishes that it did, for writers that wait to
    /// reuse a mailbox slot.
    pub(crate) fn end<R>(&self, seq: u64, out: Result<R>) -> Result<R> {
        self.finished.set(seq);
        let own = self.peer(self.me)?;
        // Writers poll this word; none sleeps on it.
        self.t
            .host_set(own, self.at(self.me, Layout::FINISHED), seq)?;
        // A later call waits for this one and nothing from outside will
        // poll it again: ask to be polled now.
        if self.queued.replace(false) {
            self.t.wake_at(self.t.now());
        }
        out
    }

    /// Records that every member has entered call `seq` (this member got
    /// something from each, directly or through others): so each finished
    /// every call before it.
    pub(crate) fn all_entered(&self, seq: u64) {
        self.all_finished.set(self.all_finished.get().max(seq - 1));
    }

    /// Whether member `m` is known to have finished call `need`.
    pub(crate) fn known_finished(&self, m: u32, need: u64) -> bool {
        need <= self.all_finished.get() || self.members[m as usize].seen_finished.get() >= need
    }

    /// Waits until member `m` has finished call `need`, so that call `seq`
    /// may write the mailbox slot `need` used. It reads `m`'s memory, which
    /// nothing signals, so it polls every [`PEER_POLL`]; when it must wait,
    /// it waits for half the slots more, so the next calls need not look.
    pub(crate) async fn await_finished(
        &self,
        m: u32,
        seq: u64,
        need: u64,
        deadline: Time,
    ) -> Result<()> {
        let seen = &self.members[m as usize].seen_finished;
        if self.known_finished(m, need) {
            return Ok(());
        }
        let t = self.t;
        let peer = self.peer(m)?;
        let at = self.at(m, Layout::FINISHED);
        let finished = t.host_load(peer, at)?;
        seen.set(seen.get().max(finished));
        if finished >= need {
            return Ok(());
        }
        // `m` needs nothing from call `seq` on to finish the calls before it.
        let goal = (need + layout::SLOTS / 2).min(seq - 1);
        wait_until(t, deadline, "a host peer to finish a call", || {
            let finished = t.host_load(peer, at)?;
            seen.set(seen.get().max(finished));
            if finished >= goal {
                return Ok(Some(()));
            }
            t.wake_at(t.now().saturating_add(PEER_POLL).min(deadline));
            Ok(None)
        })
        .await
        .map_err(Error::from)
    }

    /// Runs `f` on this team's scratch buffer of `len` bytes (never across
    /// an await: calls on a team run one at a time, each in turns).
    pub(crate) fn with_scratch<R>(&self, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut scratch = self.scratch.borrow_mut();
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        f(&mut scratch[..len])
    }

    /// This team's accumulator (empty while a call holds it): no call
    /// allocates one anew.
    pub(crate) fn take_buffer(&self) -> Vec<u8> {
        self.buffer.take()
    }

    /// Gives the accumulator back.
    pub(crate) fn put_buffer(&self, buffer: Vec<u8>) {
        self.buffer.set(buffer);
    }

    pub(crate) fn sent_to(&self, m: u32) -> &Cell<u64> {
        &self.members[m as usize].sent_to
    }

    pub(crate) fn got_from(&self, m: u32) -> &Cell<u64> {
        &self.members[m as usize].got_from
    }
}

/// Letting go of a team: every member's region loses a user, and this
/// member's own is given back, to be reused once nobody uses it.
impl<T: HostMemory> Drop for Team<'_, T> {
    fn drop(&mut self) {
        if self.world {
            return;
        }
        for m in 0..self.size() {
            if let Ok(peer) = self.peer(m) {
                let _ = self.t.host_add(peer, self.at(m, Layout::USERS), u64::MAX);
            }
        }
        self.t.host_release(self.own);
    }
}

/// The small calls' futures stay small: each is built in place and polled
/// where it lies, and a larger one costs a copy of its room on every call
/// (issue 32 measured that). The bounds leave room for compilers; a change
/// that crosses one should say why.
#[cfg(test)]
mod future_sizes {
    use super::*;

    fn size<F>(_: &F) -> usize {
        std::mem::size_of::<F>()
    }

    #[test]
    fn the_small_calls_futures_stay_small() {
        let sim = catena_sim::Sim::new(2, catena_sim::LogGp::default()).with_ranks_per_host(2);
        let _ = sim.run(async |t: &catena_sim::SimRank<'_>| {
            let team = Team::world(t).unwrap();
            let d = Time::MAX;
            let c = |_: &mut [u8], _: &[u8]| Ok(());
            let (mut one, mut sum) = ([0u8; 8], [0u8; 8]);
            assert!(size(&barrier(&team, 1, d)) <= 256);
            assert!(size(&bcast(&team, 1, 0, Value::Fixed(&mut one), d)) <= 768);
            assert!(size(&mailbox::post(&team, 1, 1, 8, &[0u8; 8], d)) <= 192);
            assert!(size(&mailbox::arrived(&team, 1, 1, d)) <= 192);
            assert!(size(&team.await_finished(1, 1, 1, d)) <= 256);
            let call = TeamCall {
                team: &team,
                seq: 1,
                deadline: d,
            };
            let allreduce = allreduce(call, &[0u8; 8], &mut sum, 8, &c);
            assert!(size(&allreduce) <= 1024);
            let world = crate::Comm::world(t);
            let (send, mut recv) = ([0u64], [0u64]);
            assert!(size(&world.iallreduce_into(&send, &mut recv, |a, b| a + b)) <= 1280);
        });
    }
}
