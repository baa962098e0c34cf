//! The host structure of a communicator: its split by host (what
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` gives) and a communicator of
//! one leader per host, with two-level collectives on them: inside each
//! host, then across the hosts' leaders, so that each value crosses the
//! network once per host instead of once per rank.

use std::future::Future;

use crate::blocking::block_on;
use catena_fabric::{Blocking, Transport};

use super::collectives::Value;
use super::Comm;
use crate::split::Color;
use crate::Result;

/// A communicator's ranks grouped by host: the ranks of this rank's host,
/// and, on the first rank of each host, the hosts' leaders.
pub struct Hierarchy<'t, T: Transport> {
    /// The ranks of this rank's host, in the parent's order.
    pub local: Comm<'t, T>,
    /// The first rank of each host (local rank 0), in the parent's order;
    /// `None` on the other ranks.
    pub leaders: Option<Comm<'t, T>>,
}

impl<'t, T: Transport> Comm<'t, T> {
    /// The ranks of this rank's host (by [`catena_fabric::Rma::host`]), in
    /// this communicator's order: `MPI_Comm_split_type` with
    /// `MPI_COMM_TYPE_SHARED`. Collective over this communicator.
    pub fn isplit_by_host(&self) -> impl Future<Output = Result<Comm<'t, T>>> + '_ {
        let host = self.t.host();
        async move {
            self.isplit_by_color(Color::Is(host))
                .await?
                .ok_or_else(|| unreachable_non_member("a split by host"))
        }
    }

    /// This communicator's [`Hierarchy`]: two splits, made once and reused
    /// by every two-level collective. Collective over this communicator.
    pub async fn ihierarchy(&self) -> Result<Hierarchy<'t, T>> {
        let local = self.isplit_by_host().await?;
        let color = match local.rank() {
            0 => Color::Is(0u8),
            _ => Color::NotMember,
        };
        let leaders = self.isplit_by_color(color).await?;
        Ok(Hierarchy { local, leaders })
    }
}

fn unreachable_non_member(what: &str) -> crate::Error {
    crate::Error::InvalidArgument(format!("{what} left this rank in no group"))
}

impl<'t, T: Transport> Hierarchy<'t, T> {
    /// Whether this rank leads its host.
    pub fn leads(&self) -> bool {
        self.leaders.is_some()
    }

    /// x_0 ⊕ … ⊕ x_(n-1) on every rank of the parent: reduced inside each
    /// host, all-reduced across the leaders, broadcast inside each host.
    /// `op` must be associative and commutative (hosts interleave ranks).
    pub async fn iallreduce<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        let mine = self.local.ireduce(0, x, &op).await?;
        let total = match (&self.leaders, mine) {
            (Some(leaders), Some(host_total)) => Some(leaders.iallreduce(host_total, &op).await?),
            _ => None,
        };
        self.local.ibcast(0, total).await
    }

    /// The parent's rank 0's `value` on every rank (rank 0 passes `Some`):
    /// across the leaders (rank 0 leads its host, and the leaders in the
    /// parent's order), then inside each host. For another root, send to
    /// rank 0 first or use the parent's own broadcast.
    pub async fn ibcast<V: Value>(&self, value: Option<V>) -> Result<V> {
        let value = match &self.leaders {
            Some(leaders) => Some(leaders.ibcast(0, value).await?),
            None => None,
        };
        self.local.ibcast(0, value).await
    }
}

/// The blocking forms.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::isplit_by_host`].
    pub fn split_by_host(&self) -> Result<Comm<'t, T>> {
        block_on(self.t, || self.isplit_by_host())
    }

    /// See [`Comm::ihierarchy`].
    pub fn hierarchy(&self) -> Result<Hierarchy<'t, T>> {
        block_on(self.t, || self.ihierarchy())
    }
}

impl<'t, T: Transport + Blocking> Hierarchy<'t, T> {
    /// See [`Hierarchy::iallreduce`].
    pub fn allreduce<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        block_on(self.local.t, || self.iallreduce(x, op))
    }

    /// See [`Hierarchy::ibcast`].
    pub fn bcast<V: Value>(&self, value: Option<V>) -> Result<V> {
        block_on(self.local.t, || self.ibcast(value))
    }
}
