//! Point-to-point messages between members, addressed by group rank, on
//! the communicator's own point-to-point context: user tags never meet the
//! tags its collectives take.

use std::future::Future;

use crate::blocking::block_on;
use catena_fabric::{Blocking, Tag, Transport};
use serde::Serialize;

use super::collectives::Value;
use super::Comm;
use crate::codec::{decode, encode};
use crate::context::{channel, Channel};
use crate::Result;

impl<'t, T: Transport> Comm<'t, T> {
    /// Sends `value` to group rank `to` with `tag`; done once handed to the
    /// transport. `to` is looked up in the held group map: on a communicator
    /// made by split or dup outside host memory, load it first by
    /// [`Comm::igroup_map`] on every member (else `InvalidArgument`).
    pub fn isend<'a, V: Serialize + ?Sized>(
        &'a self,
        to: u32,
        tag: Tag,
        value: &V,
    ) -> impl Future<Output = Result<()>> + 'a {
        let target = self.lookup_map("send").map(|map| map.select(to));
        let (deadline, bytes) = (self.deadline(), encode(value, "a point-to-point message"));
        async move {
            let target = target??;
            let context = channel(self.context(), Channel::PointToPoint);
            Ok(self.t.send(target, context, tag, &bytes?, deadline).await?)
        }
    }

    /// Receives the value group rank `from` sent with `tag`, in send order
    /// (`from` looked up as [`Comm::isend`] looks up its target).
    pub fn irecv<V: Value>(&self, from: u32, tag: Tag) -> impl Future<Output = Result<V>> + '_ {
        let source = self.lookup_map("recv").map(|map| map.select(from));
        let deadline = self.deadline();
        async move {
            let source = source??;
            let context = channel(self.context(), Channel::PointToPoint);
            let message = self.t.recv(Some(source), context, tag, deadline).await?;
            decode(&message.data, "a point-to-point message")
        }
    }

    /// Receives the first value any member sent with `tag`, and its sender's
    /// group rank.
    pub fn irecv_any<V: Value>(&self, tag: Tag) -> impl Future<Output = Result<(u32, V)>> + '_ {
        let deadline = self.deadline();
        self.recv_any_by(tag, deadline)
    }

    /// [`Comm::irecv_any`] of a message that has arrived already, `None`
    /// if none has (MPI_Iprobe and a receive): never waits.
    pub fn itry_recv_any<V: Value>(
        &self,
        tag: Tag,
    ) -> impl Future<Output = Result<Option<(u32, V)>>> + '_ {
        let received = self.recv_any_by(tag, self.t.now());
        async move {
            match received.await {
                Err(crate::Error::Transport(catena_fabric::Error::Timeout { .. })) => Ok(None),
                other => other.map(Some),
            }
        }
    }

    fn recv_any_by<V: Value>(
        &self,
        tag: Tag,
        deadline: catena_fabric::Time,
    ) -> impl Future<Output = Result<(u32, V)>> + '_ {
        let map = self.lookup_map("recv_any");
        async move {
            let map = map?;
            let context = channel(self.context(), Channel::PointToPoint);
            let message = self.t.recv(None, context, tag, deadline).await?;
            let from = map
                .rank(message.source)?
                .ok_or_else(|| crate::Error::Mismatch {
                    what: format!(
                        "membership: world rank {} is not in this group",
                        message.source
                    ),
                })?;
            Ok((from, decode(&message.data, "a point-to-point message")?))
        }
    }
}

/// The blocking forms.
impl<T: Transport + Blocking> Comm<'_, T> {
    /// See [`Comm::isend`].
    pub fn send<V: Serialize + ?Sized>(&self, to: u32, tag: Tag, value: &V) -> Result<()> {
        block_on(self.t, || self.isend(to, tag, value))
    }

    /// See [`Comm::irecv`].
    pub fn recv<V: Value>(&self, from: u32, tag: Tag) -> Result<V> {
        block_on(self.t, || self.irecv(from, tag))
    }

    /// See [`Comm::irecv_any`].
    pub fn recv_any<V: Value>(&self, tag: Tag) -> Result<(u32, V)> {
        block_on(self.t, || self.irecv_any(tag))
    }

    /// See [`Comm::itry_recv_any`].
    pub fn try_recv_any<V: Value>(&self, tag: Tag) -> Result<Option<(u32, V)>> {
        block_on(self.t, || self.itry_recv_any(tag))
    }
}
