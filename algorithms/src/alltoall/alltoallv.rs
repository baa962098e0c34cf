//! The seed's best variant on dense data: counts to every process, then
//! one [`Comm::ialltoallv`] of the runs. Stable (sources in rank order,
//! each in send order); O(P) counts per process.

use bytemuck::Pod;
use catena_fabric::Transport;

use super::outcome::Outcome;
use super::route::Routed;
use super::{AlltoallPlan, PlanCall};
use crate::call::Call;
use crate::comm::alltoallv::{alltoallv_in, Blocks};
use crate::groupmap::GroupMap;
use crate::scan::allreduce_in;
use crate::Result;

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// [`super::Variant::Alltoallv`].
    pub(super) async fn alltoallv(
        &self,
        call: &PlanCall,
        map: &GroupMap,
        local: Result<()>,
        routed: &Routed<E>,
        recv: &mut [E],
    ) -> Result<usize> {
        let (comm, size) = (self.comm, self.comm.size() as usize);
        let (counts_tag, data_tag) = (call.exchange.round(0)?, call.exchange.round(1)?);
        let mut send_counts = vec![0u64; size];
        for run in &routed.runs {
            send_counts[run.target as usize] = run.count as u64;
        }
        let mut recv_counts = vec![0u64; size];
        let ones = vec![1usize; size];
        let counts = Blocks {
            send: &send_counts,
            send_counts: &ones,
            recv_counts: &ones,
        };
        alltoallv_in(
            comm,
            map,
            counts_tag,
            counts,
            &mut recv_counts,
            call.deadline,
        )
        .await?;
        let required = recv_counts.iter().fold(0u64, |s, &c| s.saturating_add(c));
        let mut outcome = Outcome::of_local(comm.rank(), &local);
        if required > self.capacity as u64 {
            outcome = outcome.overflowing(comm.rank());
        }
        let chain = comm.chain();
        let agreed = allreduce_in(
            Call::new(comm.transport(), chain, call.agree, call.deadline),
            outcome,
            Outcome::merge,
        )
        .await?;
        match (local, agreed.error(required, self.capacity as u64)) {
            (Ok(()), None) => {}
            (Err(own), _) => return Err(own),
            (Ok(()), Some(error)) => return Err(error),
        }
        let as_usize = |c: Vec<u64>| c.into_iter().map(|c| c as usize).collect::<Vec<_>>();
        let (send_counts, recv_counts) = (as_usize(send_counts), as_usize(recv_counts));
        let blocks = Blocks {
            send: &routed.staging,
            send_counts: &send_counts,
            recv_counts: &recv_counts,
        };
        let total = required as usize;
        alltoallv_in(
            comm,
            map,
            data_tag,
            blocks,
            &mut recv[..total],
            call.deadline,
        )
        .await?;
        Ok(total)
    }
}
