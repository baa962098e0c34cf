//! The dense split of a communicator across hosts: every member's record
//! swapped in two levels (each host's to its leader, the leaders' runs by
//! recursive doubling, the whole back through each host), then the same
//! local sort as in host memory ([`crate::split::dense`]). Where the
//! levels do not serve (some host's ranks are not consecutive), the chain
//! split reserved beside it runs instead.

use std::cell::Cell;
use std::cmp::Ordering;
use std::rc::Rc;

use catena_fabric::{Rank, Time, Transport};
use serde::Serialize;

use super::{Built, LevelsCall};
use crate::call::Call;
use crate::comm::Comm;
use crate::host::{Gathered, NO_REGION};
use crate::split::numbering::Offer;
use crate::split::{self, dense, Request, Split};
use crate::{Result, Wire};

/// The levels' swap: the two two-level calls the split took, counting in
/// `ran` those that ran.
struct LevelsSwap<'c, 'a, 't, T: Transport> {
    comm: &'c Comm<'t, T>,
    calls: &'c [LevelsCall<'a, 't, T, ()>; 2],
    built: &'c Built,
    ran: &'c Cell<usize>,
    deadline: Time,
}

impl<T: Transport> dense::Swap for LevelsSwap<'_, '_, '_, T> {
    fn size(&self) -> u32 {
        self.comm.size()
    }

    fn me(&self) -> u32 {
        self.comm.rank()
    }

    fn world_rank(&self, m: u32) -> Result<Rank> {
        self.comm.world_rank_of(m)
    }

    async fn swap(&self, round: usize, bytes: &[u8]) -> Result<Gathered> {
        self.ran.set(round + 1);
        let call = &self.calls[round];
        let all = call
            .allgather_run(self.comm, self.built, bytes.to_vec(), self.deadline)
            .await?;
        let mut gathered = Gathered::with_capacity(all.len(), bytes.len());
        for record in &all {
            gathered.buffer().extend_from_slice(record);
            gathered.close();
        }
        Ok(gathered)
    }
}

/// Splits `comm` as `request` asks, by the dense split on the levels'
/// `calls` (two, taken when the split was called) where they serve, else
/// by the chain split `reserved` (taken then too). This member offers its
/// new group `offer` for a team. Both calls run whatever happens.
pub(in crate::comm) async fn split<T, C, K, O>(
    comm: &Comm<'_, T>,
    calls: [LevelsCall<'_, '_, T, ()>; 2],
    reserved: split::Reserved,
    (request, offer): (Request<C, K, O>, Option<Offer>),
    deadline: Time,
) -> Result<Split>
where
    T: Transport,
    C: Serialize,
    K: Wire + Clone,
    O: Fn(&K, &K) -> Ordering,
{
    let built: Option<Rc<Built>> = calls[0].serving(comm, true, deadline).await?;
    let Some(built) = built else {
        calls[1].pass(deadline).await?;
        let call = Call::new(comm.t, &comm.chain, reserved, deadline);
        return split::run(call, request, offer).await;
    };
    let ran = Cell::new(0);
    let swap = LevelsSwap {
        comm,
        calls: &calls,
        built: &built,
        ran: &ran,
        deadline,
    };
    let offered = (reserved.proposal(), offer.map_or(NO_REGION, |o| o.region));
    let out = dense::split_with(&swap, comm.t, &comm.chain, offered, request).await;
    for call in calls.iter().skip(ran.get()) {
        call.pass(deadline).await?;
    }
    out
}
