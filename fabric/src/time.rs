//! Transport time: nanoseconds since the transport started (virtual in the
//! simulator), so deadlines mean the same thing on every provider.

use std::time::Duration;

/// A point in transport time, in nanoseconds since the transport started;
/// deadlines are `Time`s, compared with [`Rma::now`](crate::Rma::now).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    /// The far future: a deadline that never passes.
    pub const MAX: Time = Time(u64::MAX);

    /// The time `d` after the start; saturates at [`Time::MAX`].
    pub fn from_duration(d: Duration) -> Time {
        Time(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// The time elapsed since the start.
    pub fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The time `d` later, capped at [`Time::MAX`] (so "never" stays never).
    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(Time::from_duration(d).0))
    }

    /// How long after `earlier` this is; zero if it is not later.
    pub fn saturating_sub(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}
