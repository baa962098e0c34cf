//! The simulator: N virtual ranks in one process with virtual time, running
//! the very algorithm futures the real providers run. One event queue
//! ordered by (virtual time, sequence), per-rank state in flat vectors, no
//! thread or OS resource per rank, and no randomness: a run is deterministic.
//!
//! A rank's clock advances by what the [`CostModel`] charges for its sends
//! and receives, and jumps forward while it waits. Local computation is free
//! unless [`Sim::with_compute`] charges the CPU time each rank's code takes
//! (then a run is no longer reproducible to the nanosecond). Messages and
//! puts become visible at their arrival time.
//!
//! Tagged messages are the simulator's own ([`Sim::run`]). With
//! [`Sim::run_eager`] they go through the real providers' eager messaging
//! over simulated puts instead, and [`Sim::with_delays`] makes
//! puts land late in a seeded, deterministic disorder: the eager protocol's
//! races (first contact, credit, full rings) run here, reproducibly.

#![warn(missing_docs, unreachable_pub)]

mod compute;
mod eager;
mod host;
mod jitter;
mod memory;
pub mod model;
mod rank;
mod window;

use std::cell::{Cell, OnceCell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use rustc_hash::{FxHashMap, FxHashSet};

pub use compute::{thread_cpu_ns, ComputeFactor, CpuClock};
pub use eager::EagerRank;
pub use host::HostModel;
pub use jitter::{Delays, Enumerated, Seeded};
pub use model::{CostModel, LogGp, Routed};
pub use rank::SimRank;
pub use window::SimWindow;

use catena_fabric::{ContextId, Message, Rank, Signal, Time};
use compute::Meter;
use jitter::Jitter;

/// A message in flight or waiting in an inbox.
struct Envelope {
    context: ContextId,
    message: Message,
}

enum AtomicOp {
    FetchAdd(u64),
    CompareSwap { expected: u64, new: u64 },
}

enum Action {
    /// A tagged message lands in `to`'s inbox.
    Deliver { to: Rank, envelope: Envelope },
    /// A put, then its signal, lands in a window of `to`.
    Put {
        to: Rank,
        window: u64,
        offset: usize,
        data: Vec<u8>,
        signal: Option<Signal>,
    },
    /// An atomic reaches its target; the old value travels back.
    Atomic {
        origin: Rank,
        to: Rank,
        window: u64,
        offset: usize,
        op: AtomicOp,
        reply: u64,
    },
    /// The old value of an atomic (`None`: the window was freed) is back.
    Reply {
        to: Rank,
        reply: u64,
        value: Option<u64>,
    },
    /// A rank asked to be polled again then (a deadline).
    Wake { rank: Rank },
}

struct Event {
    at: Time,
    seq: u64,
    action: Action,
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Event) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Event) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// Bytes a rank's directory spends on one peer in the simulator: a real
/// directory's cost for an entry with a 300-byte provider address (a UCX
/// worker address with shared-memory and network transports) and a
/// 16-byte host name.
pub fn directory_entry_bytes() -> u64 {
    catena_fabric::entry_bytes(300, 16) as u64
}

/// What one virtual rank holds in the simulator (104 bytes).
#[derive(Default)]
struct RankState {
    clock: Cell<u64>,
    /// When this rank may start its next send (LogGP's gap).
    next_send: Cell<u64>,
    /// The earliest pending wake-up, `u64::MAX` if none.
    wake: Cell<u64>,
    /// When every put this rank issued has landed.
    puts_landed: Cell<u64>,
    /// Bytes the transport holds for this rank: unconsumed messages, windows.
    held: Cell<u64>,
    /// Peers whose start-up entries this rank's directory holds.
    directory_entries: Cell<u32>,
    /// Inside a transport call (perhaps waiting in it): not computing.
    in_call: Cell<bool>,
    /// The next [`catena_fabric::Rma::next_serial`].
    serials: Cell<u64>,
    /// Host regions made so far (region ids are 1, 2, ...).
    host_regions: Cell<u64>,
    /// Whether the world's host region was handed out.
    world_region: Cell<bool>,
    /// What this rank offers its host peers to copy from (see
    /// `HostMemory::host_offer`), by handle, and the next handle.
    offers: RefCell<Vec<(u64, Rc<[u8]>)>>,
    next_offer: Cell<u64>,
    inbox: RefCell<Vec<Envelope>>,
}

/// Told which rank runs: `Some(rank)` before a rank's code runs, `None`
/// when the simulator's own code runs (to attribute memory per rank).
pub type Observer = Box<dyn Fn(Option<Rank>)>;

/// The figures of one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// How many ranks ran.
    pub ranks: u32,
    /// The latest clock of any rank when all had finished.
    pub completion: Duration,
    /// Sends charged by the cost model: tagged messages, puts and atomics.
    pub messages: u64,
    /// Payload bytes of those sends.
    pub bytes: u64,
    /// Events the simulator carried out (deliveries, puts, wake-ups, ...).
    pub events: u64,
    /// The most bytes the transport held for one rank at any time
    /// (unconsumed messages, windows and its directory of peers).
    pub peak_transport_bytes: u64,
    /// The most peers' entries one rank's directory held (the peers it
    /// sent to or received from), and their bytes as
    /// [`directory_entry_bytes`] each.
    pub peak_directory_entries: u32,
    /// Real (host) time the run took.
    pub wall: Duration,
    /// Puts and atomics that [`Sim::with_delays`] delayed (0 without).
    pub delayed_operations: u64,
    /// Every event in the order it happened, if [`Sim::with_trace`] asked.
    pub trace: Vec<TraceEvent>,
}

/// One event as it happened: when, at which rank, what, and how many bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TraceEvent {
    /// Virtual time at which it happened.
    pub at: Time,
    /// The rank it happened at (the receiver of a message or put).
    pub rank: Rank,
    /// The kind: "message", "put", "put+signal", "atomic", "atomic reply"
    /// or "wake".
    pub what: &'static str,
    /// Payload bytes (8 for atomics, 0 for wake-ups).
    pub bytes: usize,
}

impl Report {
    /// Simulation speed: events carried out per second of wall time.
    pub fn events_per_second(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Ranks that were still waiting when nothing was left to happen.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
#[error("{waiting} of {ranks} simulated ranks were still waiting with no event left (first: rank {first})")]
pub struct Stuck {
    /// How many ranks the run had.
    pub ranks: u32,
    /// How many of them had not finished.
    pub waiting: u32,
    /// The lowest rank that had not finished.
    pub first: Rank,
}

/// A rank as the event loop drives it: its transport, and what it does for
/// its peers whenever it runs.
trait Served<'s> {
    fn sim_rank(&self) -> &SimRank<'s>;
    /// Work no future polls for (eager messaging's progress).
    fn serve(&self);
}

impl<'s> Served<'s> for SimRank<'s> {
    fn sim_rank(&self) -> &SimRank<'s> {
        self
    }

    fn serve(&self) {}
}

impl<'s> Served<'s> for EagerRank<'s> {
    fn sim_rank(&self) -> &SimRank<'s> {
        EagerRank::sim_rank(self)
    }

    fn serve(&self) {
        EagerRank::serve(self);
    }
}

/// A live window's bytes, by (owner, id).
type WindowMemory = Rc<RefCell<memory::Memory>>;

/// A simulated machine of `size` ranks.
pub struct Sim {
    size: u32,
    model: RefCell<Box<dyn CostModel>>,
    ranks: Vec<RankState>,
    queue: RefCell<BinaryHeap<Reverse<Event>>>,
    seq: Cell<u64>,
    windows: RefCell<FxHashMap<(Rank, u64), WindowMemory>>,
    next_window: Cell<u64>,
    replies: RefCell<FxHashMap<u64, Option<u64>>>,
    next_reply: Cell<u64>,
    messages: Cell<u64>,
    bytes: Cell<u64>,
    peak_held: Cell<u64>,
    /// Pairs of ranks that learned each other's entries, as
    /// `low << 32 | high`.
    contacts: RefCell<FxHashSet<u64>>,
    peak_directory_entries: Cell<u32>,
    observer: Option<Observer>,
    /// The rank whose code runs now.
    running: Cell<Option<Rank>>,
    /// The id of rank 0's control window in eager mode (rank r's is this + r).
    control_base: Cell<u64>,
    /// Per peer, the unreceived bytes an eager rank holds (see
    /// `Messenger::with_inbox_bytes`).
    eager_inbox_bytes: usize,
    /// An eager rank's rendezvous threshold and bulk ring size (see
    /// `Messenger::with_rendezvous`).
    eager_rendezvous: (usize, usize),
    jitter: RefCell<Option<Jitter>>,
    trace: Option<RefCell<Vec<TraceEvent>>>,
    /// Charges each rank's computation to its clock, when asked to.
    compute: Option<Meter>,
    /// Which simulated host each rank is on (what `Rma::host` tells).
    placement: Placement,
    /// What host memory costs.
    host_model: HostModel,
    /// 0..size ordered by host (and rank), made when a rank first asks
    /// who shares its host.
    all_ranks: OnceCell<Vec<Rank>>,
    /// Whether ranks offer their memory to single copies, the ranks whose
    /// copies are refused (as a system's rules may refuse them) and those
    /// whose copies fail (as a copy from a withdrawn offer does).
    single_copy: bool,
    single_copy_refused: FxHashSet<Rank>,
    single_copy_failing: FxHashSet<Rank>,
    /// A single copy costs this many times a copy of as many bytes.
    single_copy_factor: f64,
    /// What ranks read as their host tuning.
    host_tuning: catena_fabric::config::HostTuning,
}

/// How ranks lie on simulated hosts.
#[derive(Clone, Copy, Debug)]
enum Placement {
    /// This many consecutive ranks on each host.
    Blocks(u32),
    /// Ranks dealt over this many hosts in turn.
    Dealt(u32),
}

impl Placement {
    fn host(self, rank: Rank) -> u32 {
        match self {
            Placement::Blocks(per) => rank / per,
            Placement::Dealt(hosts) => rank % hosts,
        }
    }
}

impl Sim {
    /// A machine of `size` ranks whose sends cost what `model` charges, with
    /// native messages, no delays, no trace and no observer.
    pub fn new(size: u32, model: impl CostModel + 'static) -> Sim {
        let ranks = (0..size)
            .map(|_| RankState {
                wake: Cell::new(u64::MAX),
                ..RankState::default()
            })
            .collect();
        Sim {
            size,
            model: RefCell::new(Box::new(model)),
            ranks,
            queue: RefCell::new(BinaryHeap::new()),
            seq: Cell::new(0),
            windows: RefCell::new(FxHashMap::default()),
            next_window: Cell::new(1),
            replies: RefCell::new(FxHashMap::default()),
            next_reply: Cell::new(0),
            messages: Cell::new(0),
            bytes: Cell::new(0),
            peak_held: Cell::new(0),
            contacts: RefCell::default(),
            peak_directory_entries: Cell::new(0),
            observer: None,
            running: Cell::new(None),
            control_base: Cell::new(0),
            eager_inbox_bytes: catena_fabric::eager::DEFAULT_INBOX_BYTES,
            eager_rendezvous: (
                catena_fabric::eager::DEFAULT_RENDEZVOUS_BYTES,
                catena_fabric::eager::DEFAULT_BULK_BYTES,
            ),
            jitter: RefCell::new(None),
            trace: None,
            compute: None,
            placement: Placement::Blocks(1),
            host_model: HostModel::default(),
            all_ranks: OnceCell::new(),
            single_copy: true,
            single_copy_refused: FxHashSet::default(),
            single_copy_failing: FxHashSet::default(),
            single_copy_factor: 1.0,
            host_tuning: Default::default(),
        }
    }

    /// Whether ranks offer their own memory to their host peers' single
    /// copies (`HostMemory::host_offer`; on by default, as on the real
    /// providers): off, long host data moves through host memory in two.
    pub fn with_single_copy(mut self, on: bool) -> Sim {
        self.single_copy = on;
        self
    }

    /// Refuses the single copies of these ranks, as a system's rules may
    /// (`host_copy_from` says it cannot), so that they take what was
    /// offered the other way.
    pub fn with_single_copy_refused(mut self, ranks: impl IntoIterator<Item = Rank>) -> Sim {
        self.single_copy_refused = ranks.into_iter().collect();
        self
    }

    /// Fails the single copies of these ranks with an error, as a copy
    /// from an offer withdrawn under it fails (`host_copy_from`'s `Err`).
    pub fn with_single_copy_failing(mut self, ranks: impl IntoIterator<Item = Rank>) -> Sim {
        self.single_copy_failing = ranks.into_iter().collect();
        self
    }

    /// Charges a single copy `factor` times a copy of as many bytes (1 by
    /// default), as on machines where a cross-memory copy costs more than
    /// a copy through shared memory, or less.
    pub fn with_single_copy_cost(mut self, factor: f64) -> Sim {
        self.single_copy_factor = factor;
        self
    }

    /// Gives the ranks `tuning` as their `HostMemory::host_tuning`
    /// instead of the defaults, as the variables do on a real provider.
    pub fn with_host_tuning(mut self, tuning: catena_fabric::config::HostTuning) -> Sim {
        self.host_tuning = tuning;
        self
    }

    /// Charges host memory (the memory the ranks of one simulated host
    /// share) by `model` instead of the default.
    pub fn with_host_model(mut self, model: HostModel) -> Sim {
        self.host_model = model;
        self
    }

    /// Places `n` consecutive ranks on each simulated host (1 by default),
    /// as `Rma::host` reports them; they share host memory, charged by the
    /// [`HostModel`]. The network's cost model does not change with it.
    pub fn with_ranks_per_host(mut self, n: u32) -> Sim {
        self.placement = Placement::Blocks(n.max(1));
        self
    }

    /// Deals the ranks over `hosts` simulated hosts in turn (rank r on host
    /// r mod `hosts`), as a launcher placing round-robin does: each host
    /// holds ranks that are not consecutive.
    pub fn with_ranks_dealt_over(mut self, hosts: u32) -> Sim {
        self.placement = Placement::Dealt(hosts.max(1));
        self
    }

    /// Charges the CPU time each rank's own code spends (between transport
    /// calls) to its clock, times `factor`: the simulated machine computes
    /// `factor` times slower than this host. Virtual times then vary a
    /// little from run to run, with the host's load.
    pub fn with_compute(self, factor: ComputeFactor) -> Sim {
        self.with_compute_clock(factor, thread_cpu_ns)
    }

    /// [`Sim::with_compute`] with CPU time read from `clock`: a test's
    /// clock, which moves only where the test says, makes the charges
    /// exact (the caller owns the clock).
    pub fn with_compute_clock(mut self, factor: ComputeFactor, clock: CpuClock) -> Sim {
        self.compute = Some(Meter::new(factor, clock));
        self
    }

    /// `rank`'s code runs from now on (unless it is still inside a call).
    fn computing(&self, rank: Rank) {
        if let Some(meter) = &self.compute {
            if !self.state(rank).in_call.get() {
                meter.start();
            }
        }
    }

    /// `rank`'s code stops running: its clock advances by what it computed.
    fn computed(&self, rank: Rank) {
        if let Some(meter) = &self.compute {
            let clock = &self.state(rank).clock;
            clock.set(clock.get() + meter.stop());
        }
    }

    /// `rank` enters a transport call until the guard drops: what it computed
    /// so far is charged first, and the call's own work is not.
    fn call(&self, rank: Rank) -> InCall<'_> {
        self.computed(rank);
        let outer = self.state(rank).in_call.replace(true);
        InCall {
            sim: self,
            rank,
            outer,
        }
    }

    /// Every put and atomic lands `delays` nanoseconds late, within the
    /// transport contract's ordering (see [`Delays`]).
    pub fn with_delays(self, delays: impl Delays + 'static) -> Sim {
        *self.jitter.borrow_mut() = Some(Jitter::new(delays));
        self
    }

    /// Eager ranks hold at most about `bytes` of unreceived messages per
    /// peer before that peer's sends wait (see `Messenger::with_inbox_bytes`).
    pub fn with_eager_inbox_bytes(mut self, bytes: usize) -> Sim {
        self.eager_inbox_bytes = bytes;
        self
    }

    /// Eager ranks send messages of `threshold` bytes or more by rendezvous,
    /// through bulk rings of `bulk_bytes` (see `Messenger::with_rendezvous`;
    /// by default the real providers' sizes).
    pub fn with_eager_rendezvous(mut self, threshold: usize, bulk_bytes: usize) -> Sim {
        self.eager_rendezvous = (threshold, bulk_bytes);
        self
    }

    /// Records every event into the report's `trace`.
    pub fn with_trace(mut self) -> Sim {
        self.trace = Some(RefCell::new(Vec::new()));
        self
    }

    /// When a put to `to` that would land at `at` lands.
    fn put_lands(&self, from: Rank, to: Rank, at: Time, signals: bool) -> Time {
        match &mut *self.jitter.borrow_mut() {
            Some(jitter) => Time(jitter.put(from, to, at.0, signals)),
            None => at,
        }
    }

    /// When an atomic to `to` that would arrive at `at` arrives.
    fn atomic_arrives(&self, from: Rank, to: Rank, at: Time) -> Time {
        match &mut *self.jitter.borrow_mut() {
            Some(jitter) => Time(jitter.atomic(from, to, at.0)),
            None => at,
        }
    }

    fn record(&self, at: Time, rank: Rank, what: &'static str, bytes: usize) {
        if let Some(trace) = &self.trace {
            self.as_transport(|| {
                trace.borrow_mut().push(TraceEvent {
                    at,
                    rank,
                    what,
                    bytes,
                })
            });
        }
    }

    /// Calls `observer` whenever the running rank changes.
    pub fn with_observer(mut self, observer: Observer) -> Sim {
        self.observer = Some(observer);
        self
    }

    /// The number of simulated ranks.
    pub fn size(&self) -> u32 {
        self.size
    }

    fn observe(&self, rank: Option<Rank>) {
        self.running.set(rank);
        if let Some(o) = &self.observer {
            o(rank);
        }
    }

    /// Runs `f` as the simulator's own code: what it allocates (events,
    /// message copies, windows) is the transport's, not the running rank's.
    fn as_transport<R>(&self, f: impl FnOnce() -> R) -> R {
        let rank = self.running.get();
        if rank.is_some() {
            self.observe(None);
        }
        let out = f();
        if rank.is_some() {
            self.observe(rank);
        }
        out
    }

    fn schedule(&self, at: Time, action: Action) {
        let seq = self.seq.get();
        self.seq.set(seq + 1);
        self.as_transport(|| {
            self.queue
                .borrow_mut()
                .push(Reverse(Event { at, seq, action }))
        });
    }

    fn state(&self, rank: Rank) -> &RankState {
        &self.ranks[rank as usize]
    }

    fn hold(&self, rank: Rank, bytes: u64) {
        let held = &self.state(rank).held;
        held.set(held.get() + bytes);
        self.peak_held.set(self.peak_held.get().max(held.get()));
    }

    fn release(&self, rank: Rank, bytes: u64) {
        let held = &self.state(rank).held;
        held.set(held.get().saturating_sub(bytes));
    }

    /// Records that `a` and `b` met (a send from one to the other): each
    /// then holds the other's entry, as a real rank's directory does after
    /// its first lookup, charged once per pair.
    fn contact(&self, a: Rank, b: Rank) {
        if a == b {
            return;
        }
        let pair = u64::from(a.min(b)) << 32 | u64::from(a.max(b));
        if !self.as_transport(|| self.contacts.borrow_mut().insert(pair)) {
            return;
        }
        for rank in [a, b] {
            let entries = &self.state(rank).directory_entries;
            entries.set(entries.get() + 1);
            self.peak_directory_entries
                .set(self.peak_directory_entries.get().max(entries.get()));
            self.hold(rank, directory_entry_bytes());
        }
    }

    /// Charges `from` for sending `bytes` to `to` now: returns the arrival.
    fn transmit(&self, from: Rank, to: Rank, bytes: usize) -> Time {
        self.contact(from, to);
        let mut model = self.model.borrow_mut();
        let s = self.state(from);
        let start = s.clock.get().max(s.next_send.get());
        let depart = start + model.overhead_ns();
        s.clock.set(depart);
        s.next_send.set(start + model.gap_ns(bytes));
        self.messages.set(self.messages.get() + 1);
        self.bytes.set(self.bytes.get() + bytes as u64);
        model.arrival(from, to, bytes, Time(depart))
    }

    /// Runs `body` as every rank, to completion; returns each rank's result
    /// in rank order and the run's figures.
    pub fn run<R>(&self, body: impl AsyncFn(&SimRank<'_>) -> R) -> Result<(Vec<R>, Report), Stuck> {
        let handles = (0..self.size).map(|r| SimRank::new(self, r)).collect();
        self.run_ranks(handles, body)
    }

    /// [`Sim::run`] with tagged messages through the real providers' eager
    /// messaging over simulated puts, with rings of `ring_bytes` (a control
    /// window, and a connection window per partner, per rank).
    pub fn run_eager<R>(
        &self,
        ring_bytes: usize,
        body: impl AsyncFn(&EagerRank<'_>) -> R,
    ) -> Result<(Vec<R>, Report), Stuck> {
        self.run_ranks(eager::ranks(self, ring_bytes), body)
    }

    fn run_ranks<'s, H: Served<'s>, R>(
        &'s self,
        handles: Vec<H>,
        body: impl AsyncFn(&H) -> R,
    ) -> Result<(Vec<R>, Report), Stuck> {
        let started = Instant::now();
        host::reset(self);
        let mut futures: Vec<Option<Pin<Box<dyn Future<Output = R> + '_>>>> = handles
            .iter()
            .map(|h| {
                self.observe(Some(h.sim_rank().rank_id()));
                let f: Pin<Box<dyn Future<Output = R> + '_>> = Box::pin(body(h));
                self.observe(None);
                Some(f)
            })
            .collect();
        let mut results: Vec<Option<R>> = (0..self.size).map(|_| None).collect();
        let mut running = self.size;
        let mut events = 0u64;
        // Polls `rank` at `at`; true when it just finished.
        let mut poll = |rank: Rank, at: Time| -> bool {
            let clock = &self.state(rank).clock;
            clock.set(clock.get().max(at.0));
            self.observe(Some(rank));
            handles[rank as usize].serve();
            let Some(future) = futures[rank as usize].as_mut() else {
                self.observe(None);
                return false;
            };
            self.computing(rank);
            let polled = future
                .as_mut()
                .poll(&mut Context::from_waker(catena_fabric::catena_waker()));
            self.computed(rank);
            self.observe(None);
            let Poll::Ready(out) = polled else {
                return false;
            };
            results[rank as usize] = Some(out);
            self.observe(Some(rank));
            futures[rank as usize] = None;
            self.observe(None);
            true
        };
        for rank in 0..self.size {
            if poll(rank, Time(0)) {
                running -= 1;
            }
        }
        while running > 0 {
            let Some(Reverse(event)) = self.queue.borrow_mut().pop() else {
                break;
            };
            events += 1;
            if let Some(rank) = self.apply(event.at, event.action) {
                if poll(rank, event.at) {
                    running -= 1;
                }
            }
        }
        if running > 0 {
            let first = results.iter().position(Option::is_none).unwrap_or(0) as Rank;
            return Err(Stuck {
                ranks: self.size,
                waiting: running,
                first,
            });
        }
        let completion = self.ranks.iter().map(|s| s.clock.get()).max().unwrap_or(0);
        let report = Report {
            ranks: self.size,
            completion: Duration::from_nanos(completion),
            messages: self.messages.get(),
            bytes: self.bytes.get(),
            events,
            peak_transport_bytes: self.peak_held.get(),
            peak_directory_entries: self.peak_directory_entries.get(),
            wall: started.elapsed(),
            delayed_operations: self.jitter.borrow().as_ref().map_or(0, |j| j.operations),
            trace: self.trace.as_ref().map(|t| t.take()).unwrap_or_default(),
        };
        Ok((results.into_iter().flatten().collect(), report))
    }

    /// Carries out an event; returns the rank to poll because of it.
    fn apply(&self, at: Time, action: Action) -> Option<Rank> {
        if self.trace.is_some() {
            let (rank, what, bytes) = match &action {
                Action::Deliver { to, envelope } => (*to, "message", envelope.message.data.len()),
                Action::Put {
                    to, data, signal, ..
                } => (
                    *to,
                    if signal.is_some() {
                        "put+signal"
                    } else {
                        "put"
                    },
                    data.len(),
                ),
                Action::Atomic { to, .. } => (*to, "atomic", 8),
                Action::Reply { to, .. } => (*to, "atomic reply", 8),
                Action::Wake { rank } => (*rank, "wake", 0),
            };
            self.record(at, rank, what, bytes);
        }
        match action {
            Action::Deliver { to, envelope } => {
                self.hold(to, envelope.message.data.len() as u64);
                self.state(to).inbox.borrow_mut().push(envelope);
                Some(to)
            }
            Action::Put {
                to,
                window,
                offset,
                data,
                signal,
            } => {
                // A window freed meanwhile takes nothing (the origin checked
                // it was live when it put).
                if let Some(memory) = self.windows.borrow().get(&(to, window)) {
                    let mut memory = memory.borrow_mut();
                    memory.write(offset, &data);
                    if let Some(s) = signal {
                        let old = memory.word(s.offset);
                        memory.set_word(s.offset, old.wrapping_add(s.add));
                    }
                }
                Some(to)
            }
            Action::Atomic {
                origin,
                to,
                window,
                offset,
                op,
                reply,
            } => {
                let value = self.windows.borrow().get(&(to, window)).map(|memory| {
                    let mut memory = memory.borrow_mut();
                    let old = memory.word(offset);
                    let new = match op {
                        AtomicOp::FetchAdd(add) => old.wrapping_add(add),
                        AtomicOp::CompareSwap { expected, new } if old == expected => new,
                        AtomicOp::CompareSwap { .. } => old,
                    };
                    memory.set_word(offset, new);
                    old
                });
                let back = self.model.borrow_mut().arrival(to, origin, 8, at);
                let back = Time(back.0 + self.model.borrow().overhead_ns());
                self.schedule(
                    back,
                    Action::Reply {
                        to: origin,
                        reply,
                        value,
                    },
                );
                None
            }
            Action::Reply { to, reply, value } => {
                self.replies.borrow_mut().insert(reply, value);
                Some(to)
            }
            Action::Wake { rank } => {
                let wake = &self.state(rank).wake;
                if wake.get() == at.0 {
                    wake.set(u64::MAX);
                }
                Some(rank)
            }
        }
    }
}

/// A rank inside a transport call; dropping it resumes the rank's code
/// (or the call this one was made from, as `now` is from `recv`).
struct InCall<'s> {
    sim: &'s Sim,
    rank: Rank,
    outer: bool,
}

impl Drop for InCall<'_> {
    fn drop(&mut self) {
        self.sim.state(self.rank).in_call.set(self.outer);
        self.sim.computing(self.rank);
    }
}
