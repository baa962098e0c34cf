//! Towards the root: each chunk of a colour is this process's contribution
//! with every child's partial of it folded in, put into the parent's ring
//! for this child; the root keeps it for the way down.

use bytemuck::Pod;
use catena_fabric::Transport;

use super::run::{Mode, Run};
use crate::error::user_code;
use crate::Result;

impl<T: Transport, E: Pod> Run<'_, '_, T, E> {
    /// Whether colour `c`'s next chunk up has every child's partial and
    /// room at the parent.
    pub(super) fn up_ready(&self, c: usize) -> catena_fabric::Result<bool> {
        let (colour, lane) = (&self.tc.colours[c], &self.lanes[c]);
        if !self.header.reduce || lane.up == lane.chunks {
            return Ok(false);
        }
        let seq = colour.up + lane.up;
        let room = match &colour.parent {
            Some(parent) => self.has_room(parent, seq)?,
            // A concurrent root keeps its reduced chunk in `partial` until
            // the chunk has gone down.
            None => !self.tc.concurrent || lane.down == lane.up,
        };
        if !room {
            return Ok(false);
        }
        for child in &colour.children {
            if !self.has_arrived(child, seq)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Moves colour `c`'s next chunk up if it can; whether it did.
    pub(super) fn step_up(&mut self, c: usize) -> Result<bool> {
        if !self.up_ready(c)? {
            return Ok(false);
        }
        let Run {
            tc,
            header,
            chunk,
            lanes,
            mode,
            ..
        } = self;
        let Mode::Allreduce {
            contribution,
            op,
            reduced,
        } = mode
        else {
            return Ok(false);
        };
        let tc = &**tc;
        let (colour, lane) = (&tc.colours[c], &mut lanes[c]);
        let seq = colour.up + lane.up;
        let range = lane.chunk(lane.up, *chunk);
        let first = (lane.up == 0).then_some(*header);
        let partial = &mut lane.partial[..range.len()];
        if !range.is_empty() {
            user_code("an allreduce contribution", || {
                contribution(range.start, partial)
            })?;
        }
        for child in &colour.children {
            let incoming = &mut lane.incoming[..range.len()];
            tc.take_chunk(child, seq, first, bytemuck::cast_slice_mut(incoming))?;
            if !range.is_empty() {
                user_code("an allreduce operation", || op(partial, incoming))?;
            }
        }
        match &colour.parent {
            Some(parent) => tc.put_chunk(parent, seq, first, bytemuck::cast_slice(partial))?,
            None if !tc.concurrent => reduced[range].copy_from_slice(partial),
            None => {}
        }
        lane.up += 1;
        Ok(true)
    }
}
