//! How a provider gets [`Transport`] from eager messaging: it names its
//! [`Messenger`], and one blanket implementation does the rest.

use std::future::Future;

use super::Messenger;
use crate::{
    ContextId, ControlWindows, HostMemory, Message, Rank, Received, Result, Tag, Time, Transport,
};

/// A provider whose tagged messages come from eager messaging over its own
/// puts; [`Transport`] follows from this by one blanket implementation.
pub trait EagerMessaging: ControlWindows {
    /// This rank's messenger, made over its control window.
    fn messenger(&self) -> &Messenger<Self::Window, Self::PeerWindow>;
}

// The messenger's futures themselves, not wrapped in another state machine:
// an `async` wrapper's first poll would copy every call's arguments once
// more (the copy `SendFuture` is written out to avoid).
impl<T: EagerMessaging + HostMemory> Transport for T {
    fn send<'a>(
        &'a self,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &'a [u8],
        deadline: Time,
    ) -> impl Future<Output = Result<()>> + 'a {
        self.messenger()
            .send(self, target, context, tag, data, deadline)
    }

    fn recv(
        &self,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        deadline: Time,
    ) -> impl Future<Output = Result<Message>> {
        self.messenger().recv(self, source, context, tag, deadline)
    }

    fn recv_into<'a>(
        &'a self,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        buf: &'a mut [u8],
        deadline: Time,
    ) -> impl Future<Output = Result<Received>> + 'a {
        self.messenger()
            .recv_into(self, source, context, tag, buf, deadline)
    }
}
