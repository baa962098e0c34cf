//! Deadlines of loops: a wait checks its deadline only while it waits, so a
//! loop whose operations are always ready (a broken chain, a hostile
//! comparator) checks it once per round itself, and ends by the deadline.

use catena_fabric::{Rma, Time};

use crate::Result;

/// `Timeout` once the transport's clock (virtual in the simulator, where
/// every send and receive advances it) has reached `deadline`.
pub(crate) fn check_deadline<T: Rma + ?Sized>(
    t: &T,
    deadline: Time,
    what: &'static str,
) -> Result<()> {
    if t.coarse_now() >= deadline {
        return Err(catena_fabric::Error::Timeout { what }.into());
    }
    Ok(())
}
