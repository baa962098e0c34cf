//! MPI_Alltoallv on a communicator: every member sends a block (maybe
//! empty) to every member, counts given on both sides. All sends and
//! receives are in flight at once over the eager messages (empty blocks
//! send nothing); O(P) per process, as the interface itself is.

use std::future::Future;

use crate::blocking::block_on;
use bytemuck::Pod;
use catena_fabric::{Blocking, ContextId, Tag, Time, Transport};

use super::Comm;
use crate::groupmap::GroupMap;
use crate::join::{join, join_all};
use crate::{Error, Result};

impl<T: Transport> Comm<'_, T> {
    /// Sends `send_counts[r]` elements of `send` (in rank order, packed) to
    /// each member r, and receives `recv_counts[s]` elements from each
    /// member s into `recv` (in rank order, packed). Collective; the counts
    /// must agree pairwise (a block of another length is `Mismatch`).
    pub fn ialltoallv<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        send_counts: &'a [usize],
        recv: &'a mut [E],
        recv_counts: &'a [usize],
    ) -> impl Future<Output = Result<()>> + 'a {
        let (tags, deadline) = (self.chain.next_call(), self.deadline());
        let map = self.igroup_map();
        async move {
            let blocks = Blocks {
                send,
                send_counts,
                recv_counts,
            };
            let (map, tag) = (map.await?, tags.round(0)?);
            alltoallv_in(self, map, tag, blocks, recv, deadline).await
        }
    }
}

/// The blocking form.
impl<T: Transport + Blocking> Comm<'_, T> {
    /// See [`Comm::ialltoallv`].
    pub fn alltoallv<E: Pod>(
        &self,
        send: &[E],
        send_counts: &[usize],
        recv: &mut [E],
        recv_counts: &[usize],
    ) -> Result<()> {
        block_on(self.t, || {
            self.ialltoallv(send, send_counts, recv, recv_counts)
        })
    }
}

/// What one process sends, and what it expects from each member.
pub(crate) struct Blocks<'a, E> {
    pub(crate) send: &'a [E],
    pub(crate) send_counts: &'a [usize],
    pub(crate) recv_counts: &'a [usize],
}

fn sum_within(counts: &[usize], len: usize, size: u32, what: &str) -> Result<()> {
    let sum = counts.iter().try_fold(0usize, |s, &c| s.checked_add(c));
    if counts.len() != size as usize || sum.is_none_or(|s| s > len) {
        return Err(Error::InvalidArgument(format!(
            "{} {what} counts summing to {sum:?} for a group of {size} and a buffer of {len}",
            counts.len()
        )));
    }
    Ok(())
}

/// The exchange under one tag of a call reserved before.
pub(crate) async fn alltoallv_in<T: Transport, E: Pod>(
    comm: &Comm<'_, T>,
    map: &GroupMap,
    tag: Tag,
    blocks: Blocks<'_, E>,
    recv: &mut [E],
    deadline: Time,
) -> Result<()> {
    let (t, size, me) = (comm.t, comm.size(), comm.rank());
    let context: ContextId = comm.context();
    sum_within(blocks.send_counts, blocks.send.len(), size, "send")?;
    sum_within(blocks.recv_counts, recv.len(), size, "receive")?;
    let starts = |counts: &[usize]| -> Vec<usize> {
        counts
            .iter()
            .scan(0, |at, &c| Some(std::mem::replace(at, *at + c)))
            .collect()
    };
    let send_at = starts(blocks.send_counts);
    // One slice of `recv` per source, so every receive writes its own.
    let mut parts: Vec<&mut [E]> = Vec::with_capacity(size as usize);
    let mut rest = recv;
    for &count in blocks.recv_counts {
        let (part, tail) = std::mem::take(&mut rest).split_at_mut(count);
        parts.push(part);
        rest = tail;
    }
    let block = |r: u32| {
        let at = send_at[r as usize];
        &blocks.send[at..at + blocks.send_counts[r as usize]]
    };
    let own = &mut parts[me as usize];
    if own.len() != block(me).len() {
        return Err(Error::Mismatch {
            what: format!(
                "alltoallv counts: {} elements to itself, {} expected",
                block(me).len(),
                own.len()
            ),
        });
    }
    own.copy_from_slice(block(me));
    // Rank r first sends to r + 1, so no one is everyone's first target.
    let sends = join_all((1..size).map(|i| (me + i) % size).filter_map(|to| {
        let data = block(to);
        (!data.is_empty()).then_some(async move {
            let world = map.select(to)?;
            let bytes = bytemuck::cast_slice(data);
            Ok(t.send(world, context, tag, bytes, deadline).await?)
        })
    }));
    let receives = join_all(parts.into_iter().enumerate().filter_map(|(from, part)| {
        (from as u32 != me && !part.is_empty()).then_some(async move {
            let world = map.select(from as u32)?;
            let message = t.recv(Some(world), context, tag, deadline).await?;
            let into: &mut [u8] = bytemuck::cast_slice_mut(part);
            if message.data.len() != into.len() {
                return Err(Error::Mismatch {
                    what: format!(
                        "alltoallv counts: {} bytes from rank {from}, {} expected",
                        message.data.len(),
                        into.len()
                    ),
                });
            }
            into.copy_from_slice(&message.data);
            Ok(())
        })
    }));
    join(sends, receives).await?;
    Ok(())
}
