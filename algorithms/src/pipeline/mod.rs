//! Pipelined broadcast and allreduce over trees the caller chooses, one per
//! colour, each colour carrying a share of the message. Chunks travel only
//! by one-sided puts into slot rings of a window set up once per schedule;
//! signal words count chunks and credits, so a call sends no messages.

mod bcast;
mod reduce;
mod run;
mod setup;
mod torus;
mod window;

use std::cell::Cell;

use bytemuck::Pod;
use std::future::Future;

use catena_fabric::{Rank, RemoteKey, Time, Transport};

use crate::chain::Chain;

use crate::Result;
use run::{Mode, Run};
pub use torus::torus_plan;
use window::{Endpoint, Rings};

/// One colour's tree around this process (world ranks).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreePlace {
    /// Where this process's share comes from (`None` at the root).
    pub parent: Option<Rank>,
    /// Where it forwards its share to, in sending order.
    pub children: Vec<Rank>,
}

/// This process's part of a k-colour schedule. Colour c carries the c-th of
/// k near-equal contiguous shares of the message (share boundaries
/// element-aligned; of n elements, the first n mod k colours carry one more).
/// All colours must have the same root, and every process takes part in
/// every colour.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreePlan {
    /// This process's place in each colour's tree.
    pub colours: Vec<TreePlace>,
    /// Reduce and broadcast may overlap (the schedule is
    /// undirected-link-disjoint); otherwise allreduce reduces everything,
    /// then broadcasts.
    pub concurrent_allreduce: bool,
}

/// How a pipelined collective cuts and buffers its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Bytes per chunk (rounded down to whole elements in each call).
    pub chunk: usize,
    /// Chunks in flight per tree edge and direction: the ring depth.
    pub slots: usize,
}

impl Default for PipelineConfig {
    fn default() -> PipelineConfig {
        PipelineConfig {
            chunk: 16 << 10,
            slots: 4,
        }
    }
}

/// A tree edge seen from this end: the peer, its window, and where each
/// end puts things in the other's window.
struct Edge {
    rank: Rank,
    key: RemoteKey,
    local: Endpoint,
    remote: Endpoint,
}

/// One colour's edges at this process and how far its chunk sequences have
/// run: a call's chunks continue these counts (and so the signal words).
struct Colour {
    parent: Option<Edge>,
    children: Vec<Edge>,
    /// Chunks sent towards the leaves, and towards the root, in earlier calls.
    down: u64,
    up: u64,
}

/// A k-colour tree schedule set up once (collectively over its processes),
/// then serving any number of broadcasts and allreduces.
pub struct TreeCollective<'t, T: Transport> {
    t: &'t T,
    window: T::Window,
    rings: Rings,
    concurrent: bool,
    colours: Vec<Colour>,
    /// Set while a call runs: one that failed leaves counters that no longer
    /// match the peers', so later calls are refused.
    in_call: bool,
}

impl<'t, T: Transport> TreeCollective<'t, T> {
    /// Allocates the window and exchanges keys with parents and children,
    /// by messages in `chain`'s context with the tags of one call on it:
    /// collective over the plan's processes, the members of `chain` (every
    /// one calls it at the same point of its calls on the chain, as with
    /// any chain collective). Its tags are taken when it is called.
    pub fn new<'a>(
        t: &'t T,
        chain: &'a Chain,
        plan: TreePlan,
        config: PipelineConfig,
        deadline: Time,
    ) -> impl Future<Output = Result<Self>> + 'a
    where
        't: 'a,
    {
        let tags = chain.next_call();
        setup::connect(t, chain, tags, plan, config, deadline)
    }

    /// Streams `len` bytes from the plan's root: the root's `source(offset,
    /// out)` fills each chunk, and every process (the root included) gets
    /// each chunk through `sink(offset, data)`, in order within a colour.
    /// Every process passes the same `len`.
    pub async fn bcast_stream(
        &mut self,
        len: usize,
        mut source: impl FnMut(usize, &mut [u8]),
        mut sink: impl FnMut(usize, &[u8]),
        deadline: Time,
    ) -> Result<()> {
        let mode = Mode::Bcast {
            source: &mut source,
        };
        Run::new(self, len, mode, &mut sink)?.drive(deadline).await
    }

    /// The root's `data` copied to every process's `data` (all pass the same
    /// length).
    pub async fn bcast(&mut self, data: &mut [u8], deadline: Time) -> Result<()> {
        let cells = Cell::from_mut(data).as_slice_of_cells();
        self.bcast_stream(
            cells.len(),
            |offset, out| read_cells(&cells[offset..], out),
            |offset, chunk| write_cells(&cells[offset..], chunk),
            deadline,
        )
        .await
    }

    /// Elementwise allreduce of `len` elements: `contribution(offset, out)`
    /// fills this process's elements from `offset` on, `op(acc, other)` folds
    /// `other` into `acc` (associative and commutative: trees do not keep
    /// rank order), and `result(offset, data)` gets the reduced elements,
    /// in order within a colour.
    pub async fn allreduce_stream<E: Pod>(
        &mut self,
        len: usize,
        mut contribution: impl FnMut(usize, &mut [E]),
        op: impl Fn(&mut [E], &[E]),
        mut result: impl FnMut(usize, &[E]),
        deadline: Time,
    ) -> Result<()> {
        // Without overlap the root holds the whole result until the
        // reduction is over.
        let reduced = if self.is_root() && !self.concurrent {
            vec![E::zeroed(); len]
        } else {
            Vec::new()
        };
        let mode = Mode::Allreduce {
            contribution: &mut contribution,
            op: &op,
            reduced,
        };
        Run::new(self, len, mode, &mut result)?
            .drive(deadline)
            .await
    }

    /// [`Self::allreduce_stream`] in place: `data` holds this process's
    /// elements, then the reduced ones.
    pub async fn allreduce<E: Pod>(
        &mut self,
        data: &mut [E],
        op: impl Fn(&mut [E], &[E]),
        deadline: Time,
    ) -> Result<()> {
        let cells = Cell::from_mut(data).as_slice_of_cells();
        self.allreduce_stream(
            cells.len(),
            |offset, out| read_cells(&cells[offset..], out),
            op,
            |offset, reduced| write_cells(&cells[offset..], reduced),
            deadline,
        )
        .await
    }

    fn is_root(&self) -> bool {
        self.colours.iter().all(|c| c.parent.is_none())
    }
}

// The in-place wrappers read contributions from and write results to one
// slice, through cells (a process's own chunk i is read before its result
// can arrive, but the borrow checker cannot know).
fn read_cells<E: Copy>(from: &[Cell<E>], to: &mut [E]) {
    for (to, from) in to.iter_mut().zip(from) {
        *to = from.get();
    }
}

fn write_cells<E: Copy>(to: &[Cell<E>], from: &[E]) {
    for (to, from) in to.iter().zip(from) {
        to.set(*from);
    }
}
