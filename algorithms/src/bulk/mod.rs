//! Large-message collectives over an explicit rank list that ignore
//! topology: the baselines torus trees are measured against, as MPI
//! libraries run them for long messages. Tagged messages, no set-up.

mod ring;
mod ring_allreduce;
mod scatter_allgather;

use std::cell::Cell;

use catena_fabric::{ContextId, Rank, Time};

pub use ring_allreduce::{ring_allreduce, ring_allreduce_stream};
pub use scatter_allgather::{scatter_allgather, scatter_allgather_stream};

/// Where and by when one bulk collective runs; every process of `ranks`
/// calls it with the same `ranks` and `context`, and calls on one context
/// follow one another (their messages are told apart by order alone).
pub struct BulkCall<'a, T> {
    /// This process's transport.
    pub t: &'a T,
    /// The processes that take part, in ring order; the caller among them.
    pub ranks: &'a [Rank],
    /// The context that keeps the call's messages apart from other traffic.
    pub context: ContextId,
    /// When the call gives up with `Timeout`.
    pub deadline: Time,
}

// By hand: a derive would ask `T: Copy` of the transport behind the reference.
impl<T> Clone for BulkCall<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for BulkCall<'_, T> {}

// The in-place forms read contributions from and write results to one
// slice, through cells: each piece is read before its result can arrive,
// but the borrow checker cannot know.
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
