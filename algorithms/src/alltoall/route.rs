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
    item: u32,
    copies: &'a mut Copies,
    modified: &'a mut Vec<E>,
}

impl<E> Emit<'_, E> {
    /// Sends the element to group rank `rank`.
    pub fn to(&mut self, rank: u32) {
        self.copies.push(rank, self.item);
    }

    /// Sends `copy` to group rank `rank` in the element's place.
    pub fn modified(&mut self, rank: u32, copy: E) {
        // Past 2^31 copies the index wraps: `route` refuses the pass then.
        let item = FIRST_MODIFIED.wrapping_add(self.modified.len() as u32);
        self.modified.push(copy);
        self.copies.push(rank, item);
    }
}

/// The copies a route pass emitted: each one's target and, unless every
/// copy so far is the element at its own position (one target per element,
/// the common case, which then costs 4 bytes a copy), which element it is.
#[derive(Default)]
struct Copies {
    targets: Vec<u32>,
    /// Empty while copy `i` is element `i` for every `i`.
    items: Vec<u32>,
}

impl Copies {
    #[inline(always)]
    fn push(&mut self, target: u32, item: u32) {
        if self.items.is_empty() {
            if item < FIRST_MODIFIED && item as usize == self.targets.len() {
                self.targets.push(target);
                return;
            }
            // The first copy that is not the element at its position: from
            // here on every copy names its element.
            self.items.extend(0..self.targets.len() as u32);
        }
        self.targets.push(target);
        self.items.push(item);
    }

    fn clear(&mut self) {
        self.targets.clear();
        self.items.clear();
    }

    /// Drops the copies of one target per element whose target is negative
    /// (a top bit set), naming the elements of the rest from the first drop.
    fn drop_negative(&mut self) {
        let (mut kept, mut dropped) = (0, false);
        for item in 0..self.targets.len() {
            let target = self.targets[item];
            if target >= FIRST_MODIFIED {
                if !dropped {
                    self.items.extend(0..kept as u32);
                    dropped = true;
                }
                continue;
            }
            self.targets[kept] = target;
            if dropped {
                self.items.push(item as u32);
            }
            kept += 1;
        }
        self.targets.truncate(kept);
    }

    /// Which element copy `copy` is.
    fn item(&self, copy: usize) -> u32 {
        match self.items.is_empty() {
            true => copy as u32,
            false => self.items[copy],
        }
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
    copies: Copies,
    /// (target, item) of every copy, and as many more, for the radix sort
    /// where targets differ in more than their lowest byte.
    routes: Vec<(u32, u32)>,
    spare: Vec<(u32, u32)>,
    modified: Vec<E>,
    /// A visiting call's piece, read out of the window.
    pub(crate) piece: Vec<E>,
}

impl<E> Default for Routed<E> {
    fn default() -> Routed<E> {
        Routed {
            staging: Vec::new(),
            runs: Vec::new(),
            copies: Copies::default(),
            routes: Vec::new(),
            spare: Vec::new(),
            modified: Vec::new(),
            piece: Vec::new(),
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
        let word = std::mem::size_of::<u32>();
        (self.staging.capacity() + self.modified.capacity() + self.piece.capacity()) * element
            + (self.copies.targets.capacity() + self.copies.items.capacity()) * word
            + (self.routes.capacity() + self.spare.capacity()) * pair
            + self.runs.capacity() * std::mem::size_of::<Run>()
    }

    /// Nothing to send (staging keeps its contents: only runs say what
    /// in it is to be sent).
    pub(crate) fn clear(&mut self) {
        self.runs.clear();
        self.copies.clear();
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
        self.begin(send.len())?;
        let (copies, modified) = (&mut self.copies, &mut self.modified);
        user_code("the alltoall route function", || {
            for (i, element) in send.iter().enumerate() {
                let mut emit = Emit {
                    item: i as u32,
                    copies: &mut *copies,
                    modified: &mut *modified,
                };
                route(element, &mut emit);
            }
        })?;
        self.group(send, size, rank)
    }

    /// [`Routed::route`] where each element goes to one rank at most:
    /// `targets` writes every element's target at once, into a slice of
    /// one per element (a negative one drops it), with no call per
    /// element; the slice is the plan's, kept from call to call.
    pub(crate) fn route_targets(
        &mut self,
        send: &[E],
        size: u32,
        rank: u32,
        targets: impl FnOnce(&[E], &mut [i32]),
    ) -> Result<()> {
        self.begin(send.len())?;
        let written = &mut self.copies.targets;
        written.resize(send.len(), 0);
        user_code("the alltoall route function", || {
            targets(send, bytemuck::cast_slice_mut(written))
        })?;
        // A negative target, read as a u32, has its top bit set: drops are
        // rare, so only then are the copies gone over again, in place.
        if written.iter().fold(0, |or, &t| or | t) >= FIRST_MODIFIED {
            self.copies.drop_negative();
        }
        self.group(send, size, rank)
    }

    /// Clears the last call's copies for a call of `elements` to send,
    /// which must fit the copies' 31-bit element numbers.
    fn begin(&mut self, elements: usize) -> Result<()> {
        self.clear();
        if elements > FIRST_MODIFIED as usize {
            return Err(Error::InvalidArgument(format!(
                "{elements} elements to send; one call sends at most 2^31"
            )));
        }
        Ok(())
    }

    /// Groups the copies a route pass emitted by target (runs of staging).
    fn group(&mut self, send: &[E], size: u32, rank: u32) -> Result<()> {
        // Copies are numbered in 32 bits where they travel (the sort's keys).
        let count = self.copies.targets.len();
        if count > u32::MAX as usize {
            return Err(Error::InvalidArgument(format!(
                "{count} copies to send; one call sends at most 2^32 - 1"
            )));
        }
        if self.modified.len() > FIRST_MODIFIED as usize {
            return Err(Error::InvalidArgument(format!(
                "{} modified copies; one call sends at most 2^31",
                self.modified.len()
            )));
        }
        // One pass over the targets (which vectorizes): the largest, and
        // the bits in which they differ.
        let (any, all, most) = self
            .copies
            .targets
            .iter()
            .fold((0u32, u32::MAX, 0u32), |(or, and, most), &t| {
                (or | t, and & t, most.max(t))
            });
        if count > 0 && most >= size {
            return Err(Error::TargetOutOfRange {
                target: most,
                size,
                process: rank,
            });
        }
        let varying = any & !all;
        if varying <= 0xff {
            self.place_by_low_byte(send, all & !0xff);
            return Ok(());
        }
        let element = |item: u32| match item.checked_sub(FIRST_MODIFIED) {
            None => send[item as usize],
            Some(copy) => self.modified[copy as usize],
        };
        let copies = &self.copies;
        self.routes.clear();
        self.routes
            .extend((copies.targets.iter().enumerate()).map(|(i, &t)| (t, copies.item(i))));
        sort_by_target(&mut self.routes, &mut self.spare, varying);
        self.staging.clear();
        self.staging
            .extend(self.routes.iter().map(|&(_, item)| element(item)));
        for (i, &(target, _)) in self.routes.iter().enumerate() {
            add_to_runs(&mut self.runs, target, i);
        }
        Ok(())
    }

    /// Groups the copies where targets differ in their lowest byte at most
    /// (up to 256 ranks, or a neighbourhood; `base` is what they share):
    /// one counting pass places every copy straight into staging, with no
    /// sorted list in between.
    fn place_by_low_byte(&mut self, send: &[E], base: u32) {
        let targets = &self.copies.targets[..];
        let n = targets.len();
        // The copies in four consecutive quarters, each counted and placed
        // with counters of its own, the four in one loop: a copy does not
        // wait on the increment for the copy before it when both have one
        // target (the counters' stores would chain the loop otherwise).
        let part = n.div_ceil(QUARTERS);
        let mut counts = [[0u32; 256]; QUARTERS];
        by_quarters(n, part, |q, i| counts[q][(targets[i] & 0xff) as usize] += 1);
        let mut at = [[0usize; 256]; QUARTERS];
        let mut sum = 0;
        for digit in 0..256 {
            let start = sum;
            for q in 0..QUARTERS {
                at[q][digit] = sum;
                sum += counts[q][digit] as usize;
            }
            if sum > start {
                self.runs.push(Run {
                    target: base | digit as u32,
                    start,
                    count: sum - start,
                });
            }
        }
        // Every slot is written below: grow, never refill, the buffer (it
        // stays from call to call).
        self.staging.truncate(n);
        self.staging.resize(n, E::zeroed());
        let staging = &mut self.staging[..];
        let mut place = |q: usize, i: usize, value: E| {
            let slot = &mut at[q][(targets[i] & 0xff) as usize];
            staging[*slot] = value;
            *slot += 1;
        };
        match &self.copies.items[..] {
            // Copy i is element i.
            [] => by_quarters(n, part, |q, i| place(q, i, send[i])),
            items => by_quarters(n, part, |q, i| {
                let value = match items[i].checked_sub(FIRST_MODIFIED) {
                    None => send[items[i] as usize],
                    Some(copy) => self.modified[copy as usize],
                };
                place(q, i, value)
            }),
        }
    }
}

/// How many interleaved passes [`Routed::place_by_low_byte`] makes.
const QUARTERS: usize = 4;

/// Calls `visit(q, i)` for every index `i < n`, where quarter `q` holds
/// indices `q * part .. (q + 1) * part` (`part` is `n` / 4 rounded up):
/// the quarters' `j`-th indices one after the other, so each quarter's
/// visits are in index order.
#[inline(always)]
fn by_quarters(n: usize, part: usize, mut visit: impl FnMut(usize, usize)) {
    // The last quarter is the shortest (empty if n < 3 * part + 1).
    let last = n.saturating_sub((QUARTERS - 1) * part);
    for j in 0..last {
        for q in 0..QUARTERS {
            visit(q, q * part + j);
        }
    }
    for q in 0..QUARTERS - 1 {
        for i in q * part + last..((q + 1) * part).min(n) {
            visit(q, i);
        }
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

    /// Routes `send` by `emit` (copies of each element: (target, value))
    /// and checks staging and runs against a stable sort of the copies.
    fn check_against_sort(send: &[u32], size: u32, emit: impl Fn(usize, u32) -> Vec<(u32, u32)>) {
        let mut routed = Routed::default();
        let mut i = 0;
        routed
            .route(send, size, 0, |&e, to| {
                for (target, value) in emit(i, e) {
                    match value == e {
                        true => to.to(target),
                        false => to.modified(target, value),
                    }
                }
                i += 1;
            })
            .unwrap();
        let mut expected: Vec<(u32, u32)> = (send.iter().enumerate())
            .flat_map(|(i, &e)| emit(i, e))
            .collect();
        expected.sort_by_key(|&(t, _)| t);
        let values: Vec<u32> = expected.iter().map(|&(_, v)| v).collect();
        assert_eq!(routed.staging, values);
        let mut runs: Vec<Run> = Vec::new();
        for (at, &(target, _)) in expected.iter().enumerate() {
            add_to_runs(&mut runs, target, at);
        }
        assert_eq!(routed.runs, runs);
    }

    #[test]
    fn one_copy_per_element_and_a_change_of_pattern_midway() {
        // Element i's one target, over one byte (counting pass) or three
        // (radix passes); then the same with the pattern broken at 70 %
        // of the elements (a dropped element, two copies, a modified copy), so that the
        // copies made before the break must keep their elements.
        // Short sends too: the placement works in four quarters.
        for (len, size) in [0, 1, 2, 3, 5, 9, 13, 1003]
            .into_iter()
            .flat_map(|len| [2, 7, 256, 70_000].map(|size| (len, size)))
        {
            let send: Vec<u32> = (0..len).map(|i| (i * 7919) % 1000).collect();
            let target = move |e: u32| e.wrapping_mul(2_654_435_761) % size;
            check_against_sort(&send, size, |_, e| vec![(target(e), e)]);
            for break_with in 0..3 {
                let at = len as usize * 7 / 10;
                check_against_sort(&send, size, |i, e| match (i == at, break_with) {
                    (true, 0) => vec![],
                    (true, 1) => vec![(target(e), e), ((target(e) + 1) % size, e)],
                    (true, _) => vec![(target(e), e ^ 0x8000_0000)],
                    _ => vec![(target(e), e)],
                });
            }
        }
    }

    #[test]
    fn targets_written_at_once_group_as_those_emitted_one_by_one() {
        // Drops nowhere, scattered, from the start, everywhere: the first
        // drop is where copies start naming their elements.
        type Drop = fn(usize, usize) -> bool;
        let drops: [Drop; 4] = [
            |_, _| false,
            |i, _| i % 7 == 3,
            |i, len| i < len / 2,
            |_, _| true,
        ];
        for (len, size) in [0, 1, 5, 1003]
            .into_iter()
            .flat_map(|len| [2, 256, 70_000].map(|size| (len, size)))
        {
            let send: Vec<u32> = (0..len).map(|i| (i * 7919) % 1000).collect();
            for drop in drops {
                let target = |i: usize, e: u32| match drop(i, len as usize) {
                    true => -1 - (e as i32 % 3),
                    false => (e.wrapping_mul(2_654_435_761) % size) as i32,
                };
                let mut one = Routed::default();
                let mut i = 0;
                one.route(&send, size, 0, |&e, to| {
                    if let Ok(t) = u32::try_from(target(i, e)) {
                        to.to(t);
                    }
                    i += 1;
                })
                .unwrap();
                let mut all = Routed::default();
                all.route_targets(&send, size, 0, |send, targets| {
                    for (i, (t, &e)) in targets.iter_mut().zip(send).enumerate() {
                        *t = target(i, e);
                    }
                })
                .unwrap();
                assert_eq!(all.staging, one.staging, "{len} elements, {size} ranks");
                assert_eq!(all.runs, one.runs, "{len} elements, {size} ranks");
            }
        }
        let mut routed = Routed::default();
        let err = routed
            .route_targets(&[1u8, 2], 2, 1, |_, t| t.fill(2))
            .unwrap_err();
        assert!(matches!(err, Error::TargetOutOfRange { target: 2, .. }));
        let err = routed
            .route_targets(&[1u8, 2], 2, 1, |_, _| panic!("no targets"))
            .unwrap_err();
        assert!(matches!(err, Error::UserCode { .. }));
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
