//! Long runs between processes of one host, copied once: the source offers
//! its run where it lies in staging and puts only a chunk header naming the
//! offer; the target copies the run out of the source's memory straight
//! into its receive buffer and acknowledges; the source stays in the call
//! until its targets have, and puts the runs a target could not copy.

use bytemuck::Pod;
use catena_fabric::{HostMemory, Rank, Signal, Transport};

use super::put::Reservation;
use super::route::Run;
use super::window::Layout;
use super::{AlltoallPlan, PlanCall};
use crate::join::join_all;
use crate::{Error, Result};

/// What a target answers an offer with: copied; not copied, so put it;
/// not copied, as the call failed at the target, so keep it.
const COPIED: u8 = 1;
const REFUSED: u8 = 0;
const DECLINED: u8 = 2;

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Whether this process offers `run` to `world` rather than putting
    /// it: a run long enough for a single copy to pay
    /// (`HostTuning::single_copy_min`) to another process of its host,
    /// unless a target of this plan refused an offer before.
    pub(super) fn offers(&self, run: &Run, world: Rank) -> bool {
        let t = self.comm.transport();
        let bytes = run.count.saturating_mul(size_of::<E>());
        world != t.rank()
            && bytes >= t.host_tuning().single_copy_min
            && !self.offers_refused.get()
            && t.host_ranks().binary_search(&world).is_ok()
    }
}

/// The runs this process offered in a call, withdrawn when dropped
/// (whatever way the call ends).
pub(super) struct Offered<'t, T: HostMemory> {
    t: &'t T,
    handles: Vec<u64>,
    /// Indices of the reservations offered.
    reservations: Vec<usize>,
}

impl<'t, T: HostMemory> Offered<'t, T> {
    pub(super) fn new(t: &'t T) -> Offered<'t, T> {
        Offered {
            t,
            handles: Vec::new(),
            reservations: Vec::new(),
        }
    }

    /// Offers `data`, the run of reservation `index`: the handle, or `None`
    /// where the provider makes no offers (the run is then put).
    pub(super) fn offer(&mut self, index: usize, data: &[u8]) -> Option<u64> {
        let handle = self.t.host_offer(data)?;
        self.handles.push(handle);
        self.reservations.push(index);
        Some(handle)
    }
}

impl<T: HostMemory> Drop for Offered<'_, T> {
    fn drop(&mut self) {
        for &handle in &self.handles {
            self.t.host_withdraw(handle);
        }
    }
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// Copies the run `world` offered as `handle` into `into`, and tells
    /// `world` whether it did: `false` where this process cannot (the
    /// provider, the system's rules), and the run will be put instead.
    pub(super) async fn pull(
        &self,
        call: &PlanCall,
        world: Rank,
        handle: u64,
        into: &mut [E],
    ) -> Result<bool> {
        let t = self.comm.transport();
        let source = t.host_peer(world).map_err(|_| Error::Mismatch {
            what: format!("a chunk header: rank {world} offered a run but shares no host"),
        })?;
        let copied = t.host_copy_from(&source, handle, 0, bytemuck::cast_slice_mut(into))?;
        self.answer(call, world, if copied { COPIED } else { REFUSED })
            .await?;
        Ok(copied)
    }

    /// Tells `world` this process will not take the run it offered: the
    /// call failed here.
    pub(super) async fn decline(&self, call: &PlanCall, world: Rank) -> Result<()> {
        self.answer(call, world, DECLINED).await
    }

    async fn answer(&self, call: &PlanCall, world: Rank, answer: u8) -> Result<()> {
        let (context, tag) = (self.comm.context(), call.exchange.round(2)?);
        let t = self.comm.transport();
        Ok(t.send(world, context, tag, &[answer], call.deadline)
            .await?)
    }

    /// Waits for every target's answer to this process's offers, and puts
    /// the runs refused where they were reserved, signalling them on the
    /// target's refilled word. Returns once no target copies any more, so
    /// staging may change after.
    pub(super) async fn settle(
        &self,
        call: &PlanCall,
        offered: &Offered<'_, T>,
        reserved: &[Reservation],
        staging: &[E],
    ) -> Result<()> {
        let t = self.comm.transport();
        let (context, tag, deadline) =
            (self.comm.context(), call.exchange.round(2)?, call.deadline);
        let answers = offered.reservations.iter().map(|&i| {
            let r = &reserved[i];
            async move {
                let answer = t.recv(Some(r.world), context, tag, deadline).await?;
                Ok((r, answer.data.first().copied()))
            }
        });
        for (r, answer) in join_all(answers).await? {
            if answer == Some(COPIED) || answer == Some(DECLINED) {
                continue;
            }
            self.offers_refused.set(true);
            let run = &staging[r.run.start..r.run.start + r.run.count];
            let layout = Layout::new(r.peer.capacity as usize, size_of::<E>(), self.comm.size())?;
            let at = layout.element_at(r.base as usize);
            let signal = Signal {
                offset: Layout::refilled(call.parity),
                add: r.run.count as u64,
            };
            t.put_signal(r.world, &r.peer.key, at, bytemuck::cast_slice(run), signal)?;
        }
        Ok(())
    }
}
