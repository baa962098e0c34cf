//! One call: a single loop advances every colour's chunks as far as they go
//! without waiting, then waits (until the caller's deadline) for a signal
//! that lets some colour go on.

use std::ops::Range;

use bytemuck::Pod;
use catena_fabric::{wait_until, LocalWindow, Signal, Time, Transport};

use super::window::{Header, HEADER};
use super::{Edge, TreeCollective};
use crate::{Error, Result};

/// What the call does besides moving chunks towards the leaves.
pub(super) enum Mode<'r, E> {
    /// The root's source fills each chunk.
    Bcast {
        source: &'r mut dyn FnMut(usize, &mut [E]),
    },
    /// Chunks are reduced towards the root first; the root's reduced chunks
    /// are the ones that go down.
    Allreduce {
        contribution: &'r mut dyn FnMut(usize, &mut [E]),
        op: &'r dyn Fn(&mut [E], &[E]),
        /// The whole result, on a root that broadcasts only once everything
        /// is reduced; empty elsewhere.
        reduced: Vec<E>,
    },
}

/// One colour's part of the call.
pub(super) struct Lane<E> {
    /// The elements this colour carries.
    pub share: Range<usize>,
    /// At least one, even for an empty share: the first carries the header.
    pub chunks: u64,
    /// Chunks of this call done towards the leaves, and towards the root.
    pub down: u64,
    pub up: u64,
    /// The chunk on its way down.
    pub passing: Vec<E>,
    /// The partial result on its way up (on a concurrent root: the reduced
    /// chunk until it has gone down), and a child's partial being folded in.
    pub partial: Vec<E>,
    pub incoming: Vec<E>,
}

impl<E> Lane<E> {
    /// The elements of the call's chunk `index` of this colour.
    pub(crate) fn chunk(&self, index: u64, chunk: usize) -> Range<usize> {
        // `index` is below `chunks`, so the product stays within the share.
        let start = self.share.start + index as usize * chunk;
        start..(start + chunk).min(self.share.end)
    }
}

pub(super) struct Run<'r, 't, T: Transport, E> {
    pub tc: &'r mut TreeCollective<'t, T>,
    pub header: Header,
    /// Elements per chunk.
    pub chunk: usize,
    pub lanes: Vec<Lane<E>>,
    pub mode: Mode<'r, E>,
    pub sink: &'r mut dyn FnMut(usize, &[E]),
}

/// Colour `colour`'s share of `len` elements: the c-th of `colours`
/// near-equal contiguous runs.
fn share(len: usize, colours: usize, colour: usize) -> Range<usize> {
    let (base, extra) = (len / colours, len % colours);
    let start = colour * base + colour.min(extra);
    start..start + base + usize::from(colour < extra)
}

impl<'r, 't, T: Transport, E: Pod> Run<'r, 't, T, E> {
    /// Starts a call, unless its elements do not fit a chunk or an earlier
    /// call failed.
    pub(crate) fn new(
        tc: &'r mut TreeCollective<'t, T>,
        len: usize,
        mode: Mode<'r, E>,
        sink: &'r mut dyn FnMut(usize, &[E]),
    ) -> Result<Self> {
        let element = size_of::<E>();
        if element == 0 || element > tc.rings.chunk {
            return Err(Error::InvalidArgument(format!(
                "elements of {element} bytes in chunks of {} bytes",
                tc.rings.chunk
            )));
        }
        if tc.in_call {
            return Err(Error::InvalidArgument(
                "an earlier call on this tree collective failed".into(),
            ));
        }
        tc.in_call = true;
        let chunk = tc.rings.chunk / element;
        let reduce = matches!(mode, Mode::Allreduce { .. });
        let colours = tc.colours.len();
        let lanes = tc
            .colours
            .iter()
            .enumerate()
            .map(|(c, colour)| {
                let share = share(len, colours, c);
                let buffer = chunk.min(share.len());
                let chunks = share.len().div_ceil(chunk).max(1) as u64;
                let incoming = if colour.children.is_empty() {
                    0
                } else {
                    buffer
                };
                Lane {
                    share,
                    chunks,
                    down: 0,
                    up: 0,
                    passing: vec![E::zeroed(); buffer],
                    partial: vec![E::zeroed(); if reduce { buffer } else { 0 }],
                    incoming: vec![E::zeroed(); if reduce { incoming } else { 0 }],
                }
            })
            .collect();
        Ok(Run {
            tc,
            header: Header {
                reduce,
                element,
                len,
            },
            chunk,
            lanes,
            mode,
            sink,
        })
    }

    pub(crate) async fn drive(mut self, deadline: Time) -> Result<()> {
        loop {
            let mut advanced = false;
            for c in 0..self.lanes.len() {
                while self.step_up(c)? {
                    advanced = true;
                }
                while self.step_down(c)? {
                    advanced = true;
                }
            }
            if self.finished()? {
                break;
            }
            if !advanced {
                let run = &self;
                wait_until(
                    run.tc.t,
                    deadline,
                    "tree pipeline chunks or credits",
                    || Ok((run.can_advance()? || run.finished()?).then_some(())),
                )
                .await?;
            }
        }
        let reduce = self.header.reduce;
        for (colour, lane) in self.tc.colours.iter_mut().zip(&self.lanes) {
            colour.down += lane.chunks;
            if reduce {
                colour.up += lane.chunks;
            }
        }
        self.tc.in_call = false;
        Ok(())
    }

    fn can_advance(&self) -> catena_fabric::Result<bool> {
        for c in 0..self.lanes.len() {
            if self.up_ready(c)? || self.down_ready(c)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every chunk went its ways, and every credit for them came back: no
    /// peer puts into this window for this call any more, so it may be
    /// freed once the call returns.
    fn finished(&self) -> catena_fabric::Result<bool> {
        let window = &self.tc.window;
        for (colour, lane) in self.tc.colours.iter().zip(&self.lanes) {
            let up = if self.header.reduce { lane.chunks } else { 0 };
            if lane.down < lane.chunks || lane.up < up {
                return Ok(false);
            }
            for child in &colour.children {
                if window.signal(child.local.credits)? < colour.down + lane.chunks {
                    return Ok(false);
                }
            }
            if let Some(parent) = &colour.parent {
                if window.signal(parent.local.credits)? < colour.up + up {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    /// Whether `edge`'s peer has consumed enough that chunk `seq` of the
    /// sequence sent to it finds its slot free.
    pub(crate) fn has_room(&self, edge: &Edge, seq: u64) -> catena_fabric::Result<bool> {
        Ok(self.tc.window.signal(edge.local.credits)? + self.tc.rings.slots > seq)
    }

    /// Whether chunk `seq` of the sequence `edge`'s peer sends has landed.
    pub(crate) fn has_arrived(&self, edge: &Edge, seq: u64) -> catena_fabric::Result<bool> {
        Ok(self.tc.window.signal(edge.local.arrived)? > seq)
    }
}

impl<T: Transport> TreeCollective<'_, T> {
    /// Puts chunk `seq` of a sequence into `edge`'s peer's ring, with the
    /// call's header before the call's first chunk.
    pub(super) fn put_chunk(
        &self,
        edge: &Edge,
        seq: u64,
        header: Option<Header>,
        data: &[u8],
    ) -> Result<()> {
        let slot = self.rings.slot(edge.remote.ring, seq);
        if let Some(header) = header {
            self.t.put(edge.rank, &edge.key, slot, &header.to_bytes())?;
        }
        let signal = Signal {
            offset: edge.remote.arrived,
            add: 1,
        };
        self.t
            .put_signal(edge.rank, &edge.key, slot + HEADER, data, signal)?;
        Ok(())
    }

    /// Copies chunk `seq` of the sequence `edge`'s peer sends out of its
    /// slot, checking the header on the call's first chunk, and credits the
    /// peer.
    pub(super) fn take_chunk(
        &self,
        edge: &Edge,
        seq: u64,
        header: Option<Header>,
        out: &mut [u8],
    ) -> Result<()> {
        let slot = self.rings.slot(edge.local.ring, seq);
        if let Some(mine) = header {
            let theirs = Header::read(&self.window, slot)?;
            if theirs != mine {
                return Err(Error::Mismatch {
                    what: format!(
                        "the call: rank {} makes {mine}, rank {} makes {theirs}",
                        self.t.rank(),
                        edge.rank
                    ),
                });
            }
        }
        self.window.read(slot + HEADER, out)?;
        // The slot is free once copied out.
        let credit = Signal {
            offset: edge.remote.credits,
            add: 1,
        };
        self.t
            .put_signal(edge.rank, &edge.key, edge.remote.credits, &[], credit)?;
        Ok(())
    }
}
