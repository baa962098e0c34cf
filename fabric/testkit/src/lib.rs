//! catena's test kit, kept out of the production library: multi-process
//! test cases that re-execute the test binary once per rank (under catena's
//! launcher or `mpiexec`), and the conformance suite every provider passes.

#![warn(missing_docs, unreachable_pub)]

mod cases;
pub mod conformance;

pub use cases::*;
/// The transport the kit's macros expand to, so a test crate needs no
/// other path to name providers.
#[doc(hidden)]
pub use catena_fabric as fabric;
