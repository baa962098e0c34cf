//! The integers that name things on the wire: ranks, contexts and tags.
//! They sit below every other module, for errors name ranks too.

/// A world rank: the only address algorithms ever use.
pub type Rank = u32;
/// Keeps the messages of different groups (communicators) apart; 64 bits,
/// so that ids made of a process and its own counter never run out.
pub type ContextId = u64;
/// Matches a message to a receive within one context.
pub type Tag = u32;
