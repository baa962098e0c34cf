//! What every process learns in a call's one agreement step, before any
//! element moves: whether some process failed locally (its route function
//! panicked, it routed to a rank outside the group, it passed a bad
//! argument) or some target lacks room. Each then fails alike, with an
//! error naming the problem and the process, instead of waiting for the
//! deadline; nothing is delivered.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The call's faults so far, combined over processes by [`Outcome::merge`]
/// (each field keeps the lowest group rank that reported it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Outcome {
    panicked: Option<u32>,
    /// (process, its bad target, the group size).
    bad_target: Option<(u32, u32, u32)>,
    bad_argument: Option<u32>,
    /// A process that needs more room than it has.
    overflow: Option<u32>,
}

fn lowest<T: Copy + Ord>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        _ => a.or(b),
    }
}

impl Outcome {
    /// What `rank`'s own local pass (routing, argument checks) found.
    pub(crate) fn of_local(rank: u32, local: &Result<impl Sized>) -> Outcome {
        let mut outcome = Outcome::default();
        match local {
            Ok(_) => {}
            Err(Error::UserCode { .. }) => outcome.panicked = Some(rank),
            Err(Error::TargetOutOfRange { target, size, .. }) => {
                outcome.bad_target = Some((rank, *target, *size))
            }
            Err(_) => outcome.bad_argument = Some(rank),
        }
        outcome
    }

    /// Notes that target `rank` lacks room.
    pub(crate) fn overflowing(mut self, rank: u32) -> Outcome {
        self.overflow = lowest(self.overflow, Some(rank));
        self
    }

    pub(crate) fn merge(a: &Outcome, b: &Outcome) -> Outcome {
        Outcome {
            panicked: lowest(a.panicked, b.panicked),
            bad_target: lowest(a.bad_target, b.bad_target),
            bad_argument: lowest(a.bad_argument, b.bad_argument),
            overflow: lowest(a.overflow, b.overflow),
        }
    }

    /// The error a process without a local error of its own returns,
    /// `None` if the call may go on; `required`/`capacity` are its own need
    /// and room, for an overflow.
    pub(crate) fn error(&self, required: u64, capacity: u64) -> Option<Error> {
        if let Some(process) = self.panicked {
            return Some(Error::UserCode {
                what: "the alltoall route function",
                message: format!("panicked on group rank {process}"),
            });
        }
        if let Some((process, target, size)) = self.bad_target {
            return Some(Error::TargetOutOfRange {
                target,
                size,
                process,
            });
        }
        if let Some(process) = self.bad_argument {
            return Some(Error::InvalidArgument(format!(
                "group rank {process} passed an invalid argument to the alltoall"
            )));
        }
        self.overflow.map(|process| Error::ReceiveOverflow {
            required,
            capacity,
            process,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_reporting_process_is_named_and_panics_come_first() {
        let a = Outcome::default().overflowing(7);
        let b = Outcome::of_local(
            3,
            &Err::<(), _>(Error::TargetOutOfRange {
                target: 40,
                size: 9,
                process: 3,
            }),
        )
        .overflowing(2);
        let c = Outcome::of_local(5, &Err::<(), _>(Error::InvalidArgument("x".into())));
        let all = Outcome::merge(&Outcome::merge(&a, &b), &c);
        assert!(matches!(
            all.error(0, 0),
            Some(Error::TargetOutOfRange {
                target: 40,
                size: 9,
                process: 3
            })
        ));
        let only_overflow = Outcome::merge(&a, &Outcome::default().overflowing(2));
        assert!(matches!(
            only_overflow.error(12, 10),
            Some(Error::ReceiveOverflow {
                required: 12,
                capacity: 10,
                process: 2
            })
        ));
        assert!(Outcome::default().error(5, 10).is_none());
    }
}
