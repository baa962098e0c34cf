//! A split's failure carried as data: a process whose comparator panicked,
//! or whose step found the comparator is not a total order, keeps taking
//! part in the steps that follow with a fault flag, so every process learns
//! of it at the next step that reaches them all and fails alike, instead of
//! the others waiting for the deadline.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The message of `Fault::NOT_A_TOTAL_ORDER`'s error.
const NOT_A_TOTAL_ORDER: &str = "is not a total order (or answers differently on different \
                                 processes): the processes placed items inconsistently";

/// What went wrong somewhere: a set of flags, combined by `union`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Fault(u8);

impl Fault {
    pub(crate) const NONE: Fault = Fault(0);
    /// The key comparator panicked on some process.
    pub(crate) const PANICKED: Fault = Fault(1);
    /// Processes placed items inconsistently: the comparator is not a total
    /// order, or answers differently on different processes.
    pub(crate) const NOT_A_TOTAL_ORDER: Fault = Fault(2);
    /// Two different colors have equal digests (Cheng sorts by digest).
    pub(crate) const COLORS_COLLIDE: Fault = Fault(4);

    pub(crate) fn union(self, other: Fault) -> Fault {
        Fault(self.0 | other.0)
    }

    pub(crate) fn is_none(self) -> bool {
        self == Fault::NONE
    }

    /// The error of a process that did not see the fault happen itself.
    fn error(self) -> Error {
        let comparator = |message: &str| Error::UserCode {
            what: "the key comparator",
            message: message.into(),
        };
        if self.0 & Fault::PANICKED.0 != 0 {
            comparator("panicked on another process")
        } else if self.0 & Fault::NOT_A_TOTAL_ORDER.0 != 0 {
            comparator(NOT_A_TOTAL_ORDER)
        } else {
            Error::InvalidArgument(
                "two different colors have equal 64-bit digests, which Cheng sorts by; \
                 use another algorithm"
                    .into(),
            )
        }
    }
}

/// This process's view of a split's faults: the flags it knows of and the
/// error it saw itself, if any (a panic's message).
#[derive(Debug, Default)]
pub(crate) struct Faults {
    seen: Fault,
    own: Option<Error>,
}

impl Faults {
    /// The value of a step that runs user code, or `None` having recorded
    /// its `UserCode` error; any other error ends the split here.
    pub(crate) fn absorb<T>(&mut self, result: Result<T>) -> Result<Option<T>> {
        match result {
            Ok(v) => Ok(Some(v)),
            Err(e @ Error::UserCode { .. }) => {
                let inconsistent =
                    matches!(&e, Error::UserCode { message, .. } if message == NOT_A_TOTAL_ORDER);
                self.seen = self.seen.union(if inconsistent {
                    Fault::NOT_A_TOTAL_ORDER
                } else {
                    Fault::PANICKED
                });
                self.own.get_or_insert(e);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Records what other processes reported, or what a check found here.
    pub(crate) fn learn(&mut self, fault: Fault) {
        self.seen = self.seen.union(fault);
    }

    /// The flags to send on.
    pub(crate) fn flags(&self) -> Fault {
        self.seen
    }

    /// `Ok` if nothing went wrong anywhere this process knows of; else this
    /// process's own error, or one saying what went wrong elsewhere.
    pub(crate) fn check(self) -> Result<()> {
        match (self.own, self.seen.is_none()) {
            (Some(e), _) => Err(e),
            (None, true) => Ok(()),
            (None, false) => Err(self.seen.error()),
        }
    }
}
