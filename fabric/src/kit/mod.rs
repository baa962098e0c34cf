//! What every provider shares, as libfabric's `prov/util` is for its
//! providers: the `Rma` and `HostMemory` methods a provider answers from
//! its [`Job`](crate::job::Job), window ids, the sealed header of window
//! keys, and the forwarding a transport that wraps another (the
//! simulator's eager ranks) needs.

mod forward;
mod from_job;
mod window_ids;
mod window_key;

pub(crate) use from_job::{host_memory_from_job, rma_from_job};
pub(crate) use window_ids::WindowIds;
#[cfg(feature = "ucx")]
pub(crate) use window_key::HEADER_LEN as KEY_HEADER_LEN;
pub(crate) use window_key::{KeyHeader, RestLen};
