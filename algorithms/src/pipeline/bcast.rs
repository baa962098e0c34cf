//! Towards the leaves: each chunk of a colour comes out of the parent's puts
//! (on the root: from the source, or from the reduction), goes on to every
//! child, then to the sink.

use bytemuck::Pod;
use catena_fabric::Transport;

use super::run::{Mode, Run};
use crate::error::user_code;
use crate::Result;

impl<T: Transport, E: Pod> Run<'_, '_, T, E> {
    /// Whether colour `c`'s next chunk down is at hand and every child has
    /// room for it.
    pub(super) fn down_ready(&self, c: usize) -> catena_fabric::Result<bool> {
        let (colour, lane) = (&self.tc.colours[c], &self.lanes[c]);
        if lane.down == lane.chunks {
            return Ok(false);
        }
        let seq = colour.down + lane.down;
        let at_hand = match (&colour.parent, &self.mode) {
            (Some(parent), _) => self.has_arrived(parent, seq)?,
            (None, Mode::Bcast { .. }) => true,
            (None, Mode::Allreduce { .. }) if self.tc.concurrent => lane.up > lane.down,
            (None, Mode::Allreduce { .. }) => self.lanes.iter().all(|l| l.up == l.chunks),
        };
        if !at_hand {
            return Ok(false);
        }
        for child in &colour.children {
            if !self.has_room(child, seq)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Moves colour `c`'s next chunk down if it can; whether it did.
    pub(super) fn step_down(&mut self, c: usize) -> Result<bool> {
        if !self.down_ready(c)? {
            return Ok(false);
        }
        let Run {
            tc,
            header,
            chunk,
            lanes,
            mode,
            sink,
        } = self;
        let tc = &**tc;
        let (colour, lane) = (&tc.colours[c], &mut lanes[c]);
        let seq = colour.down + lane.down;
        let range = lane.chunk(lane.down, *chunk);
        let first = (lane.down == 0).then_some(*header);
        let data: &[E] = match (&colour.parent, mode) {
            (Some(parent), _) => {
                let data = &mut lane.passing[..range.len()];
                tc.take_chunk(parent, seq, first, bytemuck::cast_slice_mut(data))?;
                data
            }
            (None, Mode::Bcast { source }) => {
                let data = &mut lane.passing[..range.len()];
                if !range.is_empty() {
                    user_code("a broadcast source", || source(range.start, data))?;
                }
                data
            }
            (None, Mode::Allreduce { .. }) if tc.concurrent => &lane.partial[..range.len()],
            (None, Mode::Allreduce { reduced, .. }) => &reduced[range.clone()],
        };
        for child in &colour.children {
            tc.put_chunk(child, seq, first, bytemuck::cast_slice(data))?;
        }
        if !range.is_empty() {
            let what = if header.reduce {
                "an allreduce result"
            } else {
                "a broadcast sink"
            };
            user_code(what, || sink(range.start, data))?;
        }
        lane.down += 1;
        Ok(true)
    }
}
