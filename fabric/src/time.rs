//! Transport time: nanoseconds since the transport started (virtual in the
//! simulator), so deadlines mean the same thing on every provider.

use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Time(pub u64);

impl Time {
    pub const MAX: Time = Time(u64::MAX);

    pub fn from_duration(d: Duration) -> Time {
        Time(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    pub fn saturating_add(self, d: Duration) -> Time {
        Time(self.0.saturating_add(Time::from_duration(d).0))
    }

    pub fn saturating_sub(self, earlier: Time) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}
