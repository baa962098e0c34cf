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

/// The copies to send, grouped by target, and the buffers that grouping
/// them needs; a plan keeps one and refills it each call, so a call
/// allocates nothing once the buffers have grown to its size.
pub(crate) struct Routed<E> {
    /// Every copy, in target order; within a target, in send order.
    pub(crate) staging: Vec<E>,
    /// One run of `staging` per distinct target, in target order.
    pub(crate) runs: Vec<Run>,
    routes: Vec<(u32, u32)>,
    spare: Vec<(u32, u32)>,
    modified: Vec<E>,
}

impl<E> Default for Routed<E> {
    fn default() -> Routed<E> {
        Routed {
            staging: Vec::new(),
            runs: Vec::new(),
            routes: Vec::new(),
            spare: Vec::new(),
            modified: Vec::new(),
        }
    }
}

/// The copies for one target: `staging[start..start + count]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Run {
    pub(crate) target: u32,
    pub(crate) start: usize,
    pub(crate) count: usize,
}

impl<E: Pod> Routed<E> {
    /// Heap bytes held between calls.
    pub(crate) fn held_bytes(&self) -> usize {
        let pair = std::mem::size_of::<(u32, u32)>();
        let element = std::mem::size_of::<E>();
        (self.staging.capacity() + self.modified.capacity()) * element
            + (self.routes.capacity() + self.spare.capacity()) * pair
            + self.runs.capacity() * std::mem::size_of::<Run>()
    }

    /// Nothing to send (staging keeps its contents: only runs say what
    /// in it is to be sent).
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.routes.clear();
        self.modified.clear();
    }

    /// Drops from each run, in order, the first `sent` copies of it (what
    /// its target took this round), and the runs emptied so.
    pub(crate) fn keep_unsent(&mut self, sent: impl IntoIterator<Item = usize>) {
        for (run, sent) in self.runs.iter_mut().zip(sent) {
            run.start += sent;
            run.count -= sent;
        }
        self.runs.retain(|run| run.count > 0);
    }

    /// Routes every element of `send` of group rank `rank` among `size`
    /// ranks and groups the copies, replacing the last call's. A route
    /// function that panics gives `UserCode`, a target past `size`
    /// `TargetOutOfRange`, either before anything is sent (no runs then).
    pub(crate) fn route(
        &mut self,
        send: &[E],
        size: u32,
        rank: u32,
        mut route: impl FnMut(&E, &mut Emit<'_, E>),
    ) -> Result<()> {
        self.clear();
        if send.len() > FIRST_MODIFIED as usize {
            return Err(Error::InvalidArgument(format!(
                "{} elements to send; one call sends at most 2^31",
                send.len()
            )));
        }
        let mut out_of_range = None;
        let (routes, modified) = (&mut self.routes, &mut self.modified);
        user_code("the alltoall route function", || {
            for (i, element) in send.iter().enumerate() {
                let mut emit = Emit {
                    size,
                    item: i as u32,
                    routes: &mut *routes,
                    modified: &mut *modified,
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
        // Copies are numbered in 32 bits where they travel (the sort's keys).
        if self.routes.len() > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{} copies to send; one call sends at most 2^32 - 1",
                self.routes.len()
            )));
        }
        if self.modified.len() > FIRST_MODIFIED as usize {
            return Err(Error::InvalidArgument(format!(
                "{} modified copies; one call sends at most 2^31",
                self.modified.len()
            )));
        }
        let (any, all) = self
            .routes
            .iter()
            .fold((0u32, u32::MAX), |(or, and), &(t, _)| (or | t, and & t));
        let varying = any & !all;
        let element = |item: u32| match item.checked_sub(FIRST_MODIFIED) {
            None => send[item as usize],
            Some(copy) => self.modified[copy as usize],
        };
        if varying <= 0xff {
            // Targets differ in their lowest byte at most (up to 256 ranks,
            // or a neighbourhood): one counting pass places every copy
            // straight into staging, with no sorted list in between.
            let mut at = [0usize; 256];
            for &(t, _) in &self.routes {
                at[(t & 0xff) as usize] += 1;
            }
            let mut sum = 0;
            for (digit, slot) in at.iter_mut().enumerate() {
                if *slot > 0 {
                    let target = (all & !0xff) | digit as u32;
                    self.runs.push(Run {
                        target,
                        start: sum,
                        count: *slot,
                    });
                }
                (*slot, sum) = (sum, sum + *slot);
            }
            // Every slot is written below: grow, never refill, the buffer
            // (it stays from call to call).
            self.staging.truncate(self.routes.len());
            self.staging.resize(self.routes.len(), E::zeroed());
            for &(t, item) in &self.routes {
                let digit = (t & 0xff) as usize;
                self.staging[at[digit]] = element(item);
                at[digit] += 1;
            }
            return Ok(());
        }
        sort_by_target(&mut self.routes, &mut self.spare, varying);
        self.staging.clear();
        self.staging
            .extend(self.routes.iter().map(|&(_, item)| element(item)));
        for (i, &(target, _)) in self.routes.iter().enumerate() {
            add_to_runs(&mut self.runs, target, i);
        }
        Ok(())
    }
}

/// Counts staging slot `at`, which holds a copy for `target`, in the last
/// run if it is `target`'s, else in a new one.
pub(crate) fn add_to_runs(runs: &mut Vec<Run>, target: u32, at: usize) {
    match runs.last_mut() {
        Some(run) if run.target == target => run.count += 1,
        _ => runs.push(Run {
            target,
            start: at,
            count: 1,
        }),
    }
}

/// Sorts by target, keeping send order within a target: LSD radix on the
/// bytes of the target that vary (`varying`: the bits that differ), with
/// 256 counters: nothing grows with the group.
fn sort_by_target(routes: &mut Vec<(u32, u32)>, spare: &mut Vec<(u32, u32)>, varying: u32) {
    spare.clear();
    spare.resize(routes.len(), (0, 0));
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
        std::mem::swap(routes, spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_grouped_by_target_in_send_order() {
        let send: Vec<u32> = (0..1000).map(|i| (i * 7919) % 1000).collect();
        // Targets over three bytes (radix passes), and within one byte
        // above a common base (the counting pass).
        type Target = fn(u32) -> u32;
        let spread: [(Target, u32); 2] = [(|e| e * 67, 3), (|e| 1024 + e % 200, 1030)];
        for (target, copy_to) in spread {
            let mut routed = Routed::default();
            routed
                .route(&send, 70_000, 0, |e, to| match e % 5 {
                    0 => {}
                    1 => {
                        to.to(target(*e));
                        to.modified(copy_to, e + 1_000_000);
                    }
                    _ => to.to(target(*e)),
                })
                .unwrap();
            let mut expected: Vec<(u32, u32)> = Vec::new();
            for &e in &send {
                match e % 5 {
                    0 => {}
                    1 => expected.extend([(target(e), e), (copy_to, e + 1_000_000)]),
                    _ => expected.push((target(e), e)),
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
    }

    #[test]
    fn bad_targets_and_panics_are_errors_not_crashes() {
        let send = [1u64, 2, 3];
        let mut routed = Routed::default();
        let err = routed
            .route(&send, 3, 1, |e, to| to.to(*e as u32))
            .err()
            .unwrap();
        assert!(matches!(
            err,
            Error::TargetOutOfRange {
                target: 3,
                size: 3,
                process: 1
            }
        ));
        let err = routed
            .route(&send, 3, 1, |_, _| panic!("no route"))
            .err()
            .unwrap();
        assert!(matches!(err, Error::UserCode { .. }));
        routed
            .route(&send, 3, 1, |e, to| to.to(*e as u32 % 3))
            .unwrap();
        routed.route(&send, 3, 1, |_, _| {}).unwrap();
        assert!(routed.runs.is_empty() && routed.staging.is_empty());
    }
}
