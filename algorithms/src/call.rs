//! One collective call on a chain as the steps of its algorithm see it:
//! the transport, the chain, the tags the call reserved when it was called
//! and its deadline, handed down as one value instead of four arguments.

use catena_fabric::Time;

use crate::chain::{CallTags, Calls, Chain};
use crate::Result;

/// A collective call in progress on `chain`. `Tags` is what the call
/// reserved when it was called, in call order ([`Chain::reserve`]): one
/// call's [`CallTags`], the [`Calls`] of a collective and its
/// sub-collectives, or whatever else an algorithm reserves with them.
/// Building a `Call` reserves nothing; it carries what was reserved.
pub(crate) struct Call<'a, T, Tags = CallTags> {
    pub(crate) t: &'a T,
    pub(crate) chain: &'a Chain,
    pub(crate) tags: Tags,
    pub(crate) deadline: Time,
}

impl<'a, T, Tags> Call<'a, T, Tags> {
    pub(crate) fn new(t: &'a T, chain: &'a Chain, tags: Tags, deadline: Time) -> Self {
        Call {
            t,
            chain,
            tags,
            deadline,
        }
    }

    /// A call of the same transport and deadline on `chain` with `tags`:
    /// a step on a chain the algorithm derived, or with other tags.
    pub(crate) fn on<Other>(&self, chain: &'a Chain, tags: Other) -> Call<'a, T, Other> {
        Call::new(self.t, chain, tags, self.deadline)
    }
}

impl<'a, T> Call<'a, T, Calls> {
    /// The next call of the reservation, on the same chain.
    pub(crate) fn next(&mut self) -> Result<Call<'a, T>> {
        let tags = self.tags.next()?;
        Ok(self.on(self.chain, tags))
    }

    /// The next `calls` calls of the reservation, for a sub-collective on
    /// the same chain.
    pub(crate) fn take(&mut self, calls: u32) -> Result<Call<'a, T, Calls>> {
        let tags = self.tags.take(calls)?;
        Ok(self.on(self.chain, tags))
    }
}
