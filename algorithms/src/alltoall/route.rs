//! The local pass every variant starts with: the caller's route function
//! sends each element to one rank, several, none, or sends modified copies;
//! the copies are then grouped by target by a stable radix sort into one
//! staging buffer, one contiguous run per target. O(n + k) memory for n
//! copies and k distinct targets; nothing is P long.

use bytemuck::Pod;

use crate::error::user_code;
use crate::{Error, Result};

/// Where the route function sends one element: call [`Emit::to`] once per
/// target (none drops the element), or [`Emit::modified`] to send a changed
/// copy instead (ZMPI's tproc, tprocs and tproc_mod forms in one).
pub struct Emit<'a, E> {
    size: u32,
    item: u32,
    routes: &'a mut Vec<(u32, u32)>,
    modified: &'a mut Vec<E>,
    out_of_range: &'a mut Option<u32>,
}

impl<E> Emit<'_, E> {
    /// Sends the element to group rank `rank`.
    pub fn to(&mut self, rank: u32) {
        self.push(rank, self.item);
    }

    /// Sends `copy` to group rank `rank` in the element's place.
    pub fn modified(&mut self, rank: u32, copy: E) {
        // Past 2^31 copies the index wraps: `route` refuses the pass then.
        let item = FIRST_MODIFIED.wrapping_add(self.modified.len() as u32);
        self.modified.push(copy);
        self.push(rank, item);
    }

    fn push(&mut self, rank: u32, item: u32) {
        if rank >= self.size && self.out_of_range.is_none() {
            *self.out_of_range = Some(rank);
        }
        self.routes.push((rank, item));
    }
}

/// Items below this index are send-buffer positions, the rest modified
/// copies; so at most 2^31 elements per call and process, each way.
const FIRST_MODIFIED: u32 = 1 << 31;

/// The copies to send, grouped by target.
pub(crate) struct Routed<E> {
    /// Every copy, in target order; within a target, in send order.
    pub(crate) staging: Vec<E>,
    /// One run of `staging` per distinct target, in target order.
    pub(crate) runs: Vec<Run>,
}

/// The copies for one target: `staging[start..start + count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) target: u32,
    pub(crate) start: usize,
    pub(crate) count: usize,
}

/// Routes every element of `send` of group rank `rank` among `size` ranks
/// and groups the copies. A route function that panics gives `UserCode`, a
/// target past `size` `TargetOutOfRange`, either before anything is sent.
pub(crate) fn route<E: Pod>(
    send: &[E],
    size: u32,
    rank: u32,
    mut route: impl FnMut(&E, &mut Emit<'_, E>),
) -> Result<Routed<E>> {
    if send.len() > FIRST_MODIFIED as usize {
        return Err(Error::InvalidArgument(format!(
            "{} elements to send; one call sends at most 2^31",
            send.len()
        )));
    }
    let mut routes = Vec::with_capacity(send.len());
    let mut modified = Vec::new();
    let mut out_of_range = None;
    user_code("the alltoall route function", || {
        for (i, element) in send.iter().enumerate() {
            let mut emit = Emit {
                size,
                item: i as u32,
                routes: &mut routes,
                modified: &mut modified,
                out_of_range: &mut out_of_range,
            };
            route(element, &mut emit);
        }
    })?;
    if let Some(target) = out_of_range {
        return Err(Error::TargetOutOfRange {
            target,
            size,
            process: rank,
        });
    }
    if modified.len() > FIRST_MODIFIED as usize {
        return Err(Error::InvalidArgument(format!(
            "{} modified copies; one call sends at most 2^31",
            modified.len()
        )));
    }
    sort_by_target(&mut routes);
    let staging = routes
        .iter()
        .map(|&(_, item)| match item.checked_sub(FIRST_MODIFIED) {
            None => send[item as usize],
            Some(copy) => modified[copy as usize],
        })
        .collect();
    let mut runs: Vec<Run> = Vec::new();
    for (i, &(target, _)) in routes.iter().enumerate() {
        match runs.last_mut() {
            Some(run) if run.target == target => run.count += 1,
            _ => runs.push(Run {
                target,
                start: i,
                count: 1,
            }),
        }
    }
    Ok(Routed { staging, runs })
}

/// Sorts by target, keeping send order within a target: LSD radix on the
/// bytes of the target that vary (one pass up to 256 ranks, none when all
/// go to one target), with 256 counters: nothing grows with the group.
fn sort_by_target(routes: &mut Vec<(u32, u32)>) {
    let (any, all) = routes
        .iter()
        .fold((0u32, u32::MAX), |(or, and), &(t, _)| (or | t, and & t));
    let varying = any & !all;
    let mut spare = vec![(0u32, 0u32); routes.len()];
    for shift in [0, 8, 16, 24] {
        if (varying >> shift) & 0xff == 0 {
            continue;
        }
        let mut at = [0usize; 256];
        for &(t, _) in routes.iter() {
            at[((t >> shift) & 0xff) as usize] += 1;
        }
        let mut sum = 0;
        for slot in at.iter_mut() {
            (*slot, sum) = (sum, sum + *slot);
        }
        for &route in routes.iter() {
            let digit = ((route.0 >> shift) & 0xff) as usize;
            spare[at[digit]] = route;
            at[digit] += 1;
        }
        std::mem::swap(routes, &mut spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_grouped_by_target_in_send_order() {
        let send: Vec<u32> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        let routed = route(&send, 70_000, 0, |e, to| {
            // Targets spread over three bytes; some dropped, some doubled.
            match e % 5 {
                0 => {}
                1 => {
                    to.to(e * 67);
                    to.modified(3, e + 1_000_000);
                }
                _ => to.to(e * 67),
            }
        })
        .unwrap();
        let mut expected: Vec<(u32, u32)> = Vec::new();
        for &e in &send {
            match e % 5 {
                0 => {}
                1 => expected.extend([(e * 67, e), (3, e + 1_000_000)]),
                _ => expected.push((e * 67, e)),
            }
        }
        expected.sort_by_key(|&(t, _)| t); // stable: send order within a target
        let got: Vec<u32> = routed.staging.clone();
        assert_eq!(got, expected.iter().map(|&(_, e)| e).collect::<Vec<_>>());
        let mut next = 0;
        for run in &routed.runs {
            assert_eq!(run.start, next);
            assert!(expected[run.start..run.start + run.count]
                .iter()
                .all(|&(t, _)| t == run.target));
            next += run.count;
        }
        assert_eq!(next, expected.len());
        assert!(routed.runs.windows(2).all(|w| w[0].target < w[1].target));
    }

    #[test]
    fn bad_targets_and_panics_are_errors_not_crashes() {
        let send = [1u64, 2, 3];
        let err = route(&send, 3, 1, |e, to| to.to(*e as u32)).err().unwrap();
        assert!(matches!(
            err,
            Error::TargetOutOfRange {
                target: 3,
                size: 3,
                process: 1
            }
        ));
        let err = route(&send, 3, 1, |_, _| panic!("no route")).err().unwrap();
        assert!(matches!(err, Error::UserCode { .. }));
        assert!(route(&send, 3, 1, |_, _| {}).unwrap().runs.is_empty());
    }
}
