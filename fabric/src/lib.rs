//! catena's transport layer: the contract every algorithm is written against
//! ([`Rma`] for windows and one-sided puts, [`Transport`] for tagged messages),
//! the providers that implement it, and the bootstraps that start a job.
//!
//! Algorithms are `async fn`s generic over `T: Transport`; [`block_on`] drives
//! one on a real provider. See `docs/architecture.md` for the full contract.

#![warn(missing_docs, unreachable_pub)]

pub mod bootstrap;
pub mod bounds;
mod catalog;
pub mod config;
mod directory;
pub mod eager;
mod error;
mod executor;
#[doc(hidden)]
pub mod fuzz_hooks;
pub mod host;
pub mod job;
mod key;
mod kit;
mod names;
#[cfg(feature = "ofi")]
pub mod ofi;
pub mod os;
pub mod owned_name;
#[cfg(any(feature = "ofi", feature = "ucx"))]
pub mod progress_thread;
mod provider;
mod select;
pub mod shm;
mod time;
#[cfg(any(feature = "ofi", feature = "ucx"))]
mod tombstone;
mod transport;
#[cfg(feature = "ucx")]
pub mod ucx;
mod waker;

pub use catalog::{default_provider, spans_hosts, AUTO, NETWORK_PROVIDERS, PROVIDERS};
pub use directory::{entry_bytes, Directory, DirectoryUse, Entry};
pub use eager::EagerMessaging;
pub use error::{Error, FabricFailure, Result, Unavailable};
pub use executor::{block_on, in_block_on};
pub use key::RemoteKey;
pub use names::{ContextId, Rank, Tag};
pub use provider::{finalize_barrier, Provider};
pub use select::{with_provider, WithProvider};
pub use time::Time;
pub use transport::{
    wait_until, Blocking, ControlWindows, HostMemory, HostRegion, KeyedWindow, LocalWindow,
    Message, PeerWindow, Received, Rma, Signal, Transport,
};
pub use waker::{catena_waker, polled_by_catena};

/// Starts this process's transport on the default provider (shm), taking its
/// identity from whatever started it: catena's launcher, a PMIx server
/// (feature `pmix`), a PMI-1/2 process manager, or MPI (feature `mpi`); see
/// [`bootstrap::from_env`]. A process started alone is a job of one.
pub fn init() -> Result<shm::ShmTransport> {
    shm::ShmTransport::from_env()
}
