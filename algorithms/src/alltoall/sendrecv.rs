//! Elements through eager messages of at most 16 KiB (ZMPI's default
//! aggregation), after the same reservations as the one-sided variants,
//! which tell each target how many elements to wait for. Unstable (arrival
//! order) unless order is asked for; then each source's messages are kept
//! and placed in source order.

use bytemuck::Pod;
use catena_fabric::{LocalWindow, Transport};

use super::route::Routed;
use super::window::Layout;
use super::{AlltoallPlan, PlanCall};
use crate::groupmap::GroupMap;
use crate::join::{join, join_all};
use crate::{Error, Result};

/// Bytes per message at most.
const PIECE_BYTES: usize = 16 << 10;

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// [`super::Variant::Sendrecv`].
    pub(super) async fn sendrecv(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        local: Result<()>,
        routed: &Routed<E>,
        recv: &mut [E],
    ) -> Result<usize> {
        let (t, comm) = (self.comm.transport(), self.comm);
        let receiver = self.window();
        let reserved = self.reserve(call, map, local, routed, |_, _| false).await?;
        let total = receiver.window.signal(Layout::counter(call.parity))?;
        let total = self.received_count(total)?;
        let (context, tag, deadline) = (comm.context(), call.exchange.round(2)?, call.deadline);
        let size = std::mem::size_of::<E>().max(1);
        let per_piece = (PIECE_BYTES / size).max(1);
        let me = t.rank();
        let sends = join_all(reserved.iter().filter(|r| r.world != me).map(|r| {
            let run = &routed.staging[r.run.start..r.run.start + r.run.count];
            async move {
                for piece in run.chunks(per_piece) {
                    let bytes = bytemuck::cast_slice(piece);
                    t.send(r.world, context, tag, bytes, deadline).await?;
                }
                Ok(())
            }
        }));
        let own = reserved
            .iter()
            .find(|r| r.world == me)
            .map(|r| &routed.staging[r.run.start..r.run.start + r.run.count]);
        let out = &mut recv[..total];
        let receives = async {
            // Own elements first; then (unstable) each message where the
            // previous ended, or (stable) every piece kept by source.
            let mut got = own.map_or(0, <[E]>::len);
            out[..got].copy_from_slice(own.unwrap_or(&[]));
            let mut kept = Vec::new();
            while got < total {
                let message = t.recv(None, context, tag, deadline).await?;
                let count = message.data.len() / size;
                if message.data.len() % size != 0 || count > total - got {
                    return Err(Error::Mismatch {
                        what: format!(
                            "a sendrecv piece of {} bytes with {} of {total} elements received",
                            message.data.len(),
                            got
                        ),
                    });
                }
                if self.stable {
                    let source = map.rank(message.source)?.unwrap_or(u32::MAX);
                    kept.push((source, message.data));
                } else {
                    let into: &mut [u8] = bytemuck::cast_slice_mut(&mut out[got..got + count]);
                    into.copy_from_slice(&message.data);
                }
                got += count;
            }
            Ok(kept)
        };
        let (_, mut kept) = join(sends, receives).await?;
        if self.stable {
            // Own elements sit in front; place them by rank among the rest.
            let own_len = own.map_or(0, <[E]>::len);
            let own_bytes: Vec<u8> = bytemuck::cast_slice(&out[..own_len]).to_vec();
            kept.push((comm.rank(), own_bytes));
            // A stable sort keeps each source's pieces in arrival (= send) order.
            kept.sort_by_key(|(source, _)| *source);
            let into: &mut [u8] = bytemuck::cast_slice_mut(out);
            let mut at = 0;
            for (_, bytes) in &kept {
                into[at..at + bytes.len()].copy_from_slice(bytes);
                at += bytes.len();
            }
        }
        receiver.reset(call.parity)?;
        Ok(total)
    }
}
