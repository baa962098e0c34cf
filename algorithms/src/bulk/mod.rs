//! Large-message collectives over an explicit rank list that ignore
//! topology: the baselines torus trees are measured against, as MPI
//! libraries run them for long messages. Tagged messages, no set-up.

mod ring;
mod ring_allreduce;
mod scatter_allgather;

use std::cell::Cell;

pub use ring_allreduce::{ring_allreduce, ring_allreduce_stream};
pub use scatter_allgather::{scatter_allgather, scatter_allgather_stream};

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
