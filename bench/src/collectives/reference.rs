//! MPICH's side of each row behind one trait, so that the rows read the
//! same in a build without MPI, where [`Mpi`] has no value and no row has
//! an MPICH side.

use super::rows::{Buffers, Place};
use super::sample::Result;
use crate::alltoall::MpichExchange;

/// What the rows ask of MPICH, on the communicator of the same processes.
pub(crate) trait Reference {
    /// MPI_Barrier.
    fn barrier(&self);
    /// The collective `b.op` on `b`'s buffers (u64, MPI_SUM, root 0).
    fn collective(&self, b: &mut Buffers);
    /// MPI_Comm_split, the result freed: this rank's (rank, size) in it.
    fn split(&self, color: i32, key: i32) -> Result<Place>;
    /// The MPI group of these ranks, in this order.
    fn group(&self, members: &[u32]) -> MpiGroup;
    /// MPI_Comm_create_group by a member of `group`, the result freed.
    fn create_group(&self, group: &MpiGroup, tag: i32) -> Result<(u32, u32)>;
    /// `catena-bench alltoall`'s MPICH exchange: the bytes received.
    fn exchange(&self, x: &mut MpichExchange, send: &[u8]) -> Result<usize>;
}

/// MPICH's communicator of the job's processes.
#[cfg(feature = "mpi")]
pub(crate) type Mpi = mpi::topology::SimpleCommunicator;
/// An MPI group.
#[cfg(feature = "mpi")]
pub(crate) type MpiGroup = mpi::topology::UserGroup;

#[cfg(feature = "mpi")]
impl Reference for Mpi {
    fn barrier(&self) {
        mpi::traits::CommunicatorCollectives::barrier(self);
    }

    fn collective(&self, b: &mut Buffers) {
        use super::rows::Collective;
        use mpi::collective::SystemOperation;
        use mpi::traits::*;
        let root = self.process_at_rank(0);
        let at_root = b.at_root();
        let (send, recv) = (&b.send[..], &mut b.recv[..]);
        match b.op {
            Collective::Bcast => root.broadcast_into(recv),
            Collective::Reduce if at_root => {
                root.reduce_into_root(send, recv, SystemOperation::sum())
            }
            Collective::Reduce => root.reduce_into(send, SystemOperation::sum()),
            Collective::Allreduce => self.all_reduce_into(send, recv, SystemOperation::sum()),
            Collective::Allgather => self.all_gather_into(send, recv),
            Collective::Gather if at_root => root.gather_into_root(send, recv),
            Collective::Gather => root.gather_into(send),
            Collective::Scatter if at_root => root.scatter_into_root(send, recv),
            Collective::Scatter => root.scatter_into(recv),
        }
    }

    fn split(&self, color: i32, key: i32) -> Result<Place> {
        use mpi::traits::*;
        let color = mpi::topology::Color::with_value(color);
        let made = self.split_by_color_with_key(color, key);
        Ok(made.map(|c| (c.rank() as u32, c.size() as u32)))
    }

    fn group(&self, members: &[u32]) -> MpiGroup {
        use mpi::traits::*;
        let ranks: Vec<i32> = members.iter().map(|&r| r as i32).collect();
        Communicator::group(self).include(&ranks)
    }

    fn create_group(&self, group: &MpiGroup, tag: i32) -> Result<(u32, u32)> {
        use mpi::traits::*;
        let made = self
            .split_by_subgroup_with_tag(group, tag)
            .ok_or("a member got MPI_COMM_NULL")?;
        Ok((made.rank() as u32, made.size() as u32))
    }

    fn exchange(&self, x: &mut MpichExchange, send: &[u8]) -> Result<usize> {
        x.exchange(self, send)
    }
}

/// No MPI in this build: no value of this type exists.
#[cfg(not(feature = "mpi"))]
pub(crate) enum Mpi {}
/// No MPI in this build.
#[cfg(not(feature = "mpi"))]
pub(crate) type MpiGroup = ();

#[cfg(not(feature = "mpi"))]
impl Reference for Mpi {
    fn barrier(&self) {
        match *self {}
    }

    fn collective(&self, _: &mut Buffers) {
        match *self {}
    }

    fn split(&self, _: i32, _: i32) -> Result<Place> {
        match *self {}
    }

    fn group(&self, _: &[u32]) -> MpiGroup {
        match *self {}
    }

    fn create_group(&self, _: &MpiGroup, _: i32) -> Result<(u32, u32)> {
        match *self {}
    }

    fn exchange(&self, _: &mut MpichExchange, _: &[u8]) -> Result<usize> {
        match *self {}
    }
}
