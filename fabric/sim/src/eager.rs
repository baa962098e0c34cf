//! A simulated rank whose tagged messages go through the real providers'
//! eager messaging (`catena_fabric::eager`) over simulated puts: the same
//! messenger, the same blanket `Transport`, so the protocol's races can be
//! played out in virtual time ([`Sim::run_eager`]).

use catena_fabric::eager::{Messenger, CONTROL_WINDOW_BYTES};
use catena_fabric::{
    ControlWindows, EagerMessaging, HostMemory, KeyedWindow, Rank, RemoteKey, Result, Rma,
};

use super::window::{SimKey, SimWindow};
use super::{Sim, SimRank};

/// One simulated rank with eager messaging: a [`SimRank`]'s puts, plus a
/// control window and a messenger, as on a real provider.
pub struct EagerRank<'s> {
    rank: SimRank<'s>,
    messenger: Messenger<SimWindow<'s>, KeyedWindow>,
}

impl<'s> EagerRank<'s> {
    /// Rank `rank` of `sim`, whose control window is `control`.
    pub(super) fn new(
        rank: SimRank<'s>,
        control: SimWindow<'s>,
        ring_bytes: usize,
        inbox_bytes: usize,
        (rendezvous_bytes, bulk_bytes): (usize, usize),
    ) -> Self {
        EagerRank {
            rank,
            messenger: Messenger::new(control, ring_bytes)
                .with_inbox_bytes(inbox_bytes)
                .with_rendezvous(rendezvous_bytes, bulk_bytes),
        }
    }

    /// Peers this rank holds a connection with.
    pub fn connection_count(&self) -> usize {
        self.messenger.connection_count()
    }

    /// Peers this rank made a bulk window for (they sent it rendezvous
    /// messages).
    pub fn bulk_window_count(&self) -> usize {
        self.messenger.bulk_window_count()
    }

    /// Bytes of unreceived messages this rank holds, over all peers.
    pub fn inbox_bytes(&self) -> u64 {
        self.messenger.inbox_bytes()
    }

    /// Serves peers (first contact, draining rings, credit), as a real
    /// provider's progress does; the simulator calls it whenever this rank
    /// runs, also after its own work is done (as finalize keeps serving).
    pub(super) fn serve(&self) {
        self.messenger.progress(self);
    }

    pub(super) fn sim_rank(&self) -> &SimRank<'s> {
        &self.rank
    }
}

impl<'s> Rma for EagerRank<'s> {
    type Window = SimWindow<'s>;
    type PeerWindow = KeyedWindow;

    catena_fabric::forward_rma!(rank);
}

impl ControlWindows for EagerRank<'_> {
    /// Control windows are made first, in rank order, so rank r's id is
    /// known and its key needs no directory.
    fn control_key(&self, rank: Rank) -> Result<RemoteKey> {
        self.rank.check_peer(rank)?;
        let id = self.rank.sim().control_base.get() + u64::from(rank);
        Ok(SimKey::encode(rank, id, CONTROL_WINDOW_BYTES))
    }
}

impl HostMemory for EagerRank<'_> {
    type HostPeer = Rank;

    catena_fabric::forward_host_memory!(rank);
}

impl<'s> EagerMessaging for EagerRank<'s> {
    fn messenger(&self) -> &Messenger<SimWindow<'s>, KeyedWindow> {
        &self.messenger
    }
}

/// Makes `sim`'s eager ranks, each after making its control window.
pub(super) fn ranks(sim: &Sim, ring_bytes: usize) -> Vec<EagerRank<'_>> {
    sim.control_base.set(sim.next_window.get());
    (0..sim.size())
        .map(|r| {
            let control = SimWindow::new(sim, r, CONTROL_WINDOW_BYTES)
                .expect("an 8 KiB control window fits in memory");
            EagerRank::new(
                SimRank::new(sim, r),
                control,
                ring_bytes,
                sim.eager_inbox_bytes,
                sim.eager_rendezvous,
            )
        })
        .collect()
}
