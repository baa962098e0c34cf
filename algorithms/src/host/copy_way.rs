//! Which way a writer's long data goes to its readers: copied once, out of
//! the writer's buffer (an offer), or twice, through its cells. Which is
//! faster depends on the machine (a cross-memory copy ran near a memcpy's
//! speed on one VM and at a third to a ninth of it on another), so a
//! writer learns it, per operation and size class: from how long its
//! readers report each read took where it only writes (bcast, gather,
//! scatter), from how long its own calls took where every member writes
//! and reads (allgather, reductions). A team learns for itself; a dup's
//! starts from its parent's.

use std::cell::RefCell;

/// The way long data went, or is to go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Way {
    Offer = 0,
    Cells = 1,
}

/// What long data moves in: a collective's value, a reduction's slices (a
/// reduce's, or an allreduce's first round), an allreduce's reduced
/// slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Bcast = 0,
    Gather = 1,
    Scatter = 2,
    Allgather = 3,
    Slices = 4,
    Allreduce = 5,
}

impl Op {
    /// The operations whose readers report (the first three), each in a
    /// word of its own.
    pub(crate) const REPORTED: usize = 3;

    /// Whether a writer learns from its readers' reports (it writes and
    /// they read), rather than from its own calls' times (every member
    /// writes and reads: a reader's time would leave out the copies its
    /// own writing costs it).
    pub(crate) fn reported(self) -> bool {
        (self as usize) < Op::REPORTED
    }
}

/// After both ways of a class were measured, two of every this many
/// choices in it take the way that was slower, so that a change (in the
/// load, or in what the program's readers do) is seen: two, as the first
/// call after a change of way runs on cold caches and counts for nothing.
const RETRY_EVERY: u32 = 128;
/// The largest time a report carries, in ns per KiB (4 ms: slower reads
/// say the same).
const MAX_NS_PER_KIB: u64 = (1 << 22) - 1;
/// Size classes (log2 of the bytes a reader copies) a report can name.
const CLASSES: u64 = 64;

/// A reader's word to a writer: how long it took to get the data of call
/// `seq` (low 32 bits) of `op`, of size class `class`, that went by `way`
/// (or, where members time their own calls, how long a member's call
/// took, which never leaves it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Report {
    seq: u32,
    op: Op,
    class: u8,
    way: Way,
    ns_per_kib: u32,
}

impl Report {
    /// The report of a read of `bytes` (more than a mailbox slot) that took
    /// `ns`.
    pub(crate) fn of(seq: u64, op: Op, bytes: usize, way: Way, ns: u64) -> Report {
        let ns_per_kib =
            (u128::from(ns) * 1024 / bytes.max(1) as u128).min(u128::from(MAX_NS_PER_KIB)) as u32;
        Report {
            seq: seq as u32,
            op,
            class: class(bytes),
            way,
            ns_per_kib,
        }
    }

    pub(crate) fn encode(self) -> u64 {
        u64::from(self.seq) << 32
            | (self.op as u64) << 29
            | u64::from(self.class) << 23
            | (self.way as u64) << 22
            | u64::from(self.ns_per_kib)
    }

    /// The report a reader stored in `op`'s word, `None` for a word that
    /// is none or names another operation (what a peer stores is its
    /// word: garbage only makes a writer choose worse).
    pub(crate) fn decode(op: Op, word: u64) -> Option<Report> {
        if word == 0 || word >> 29 & 7 != op as u64 {
            return None;
        }
        let class = (word >> 23 & 63) as u8;
        let way = match word >> 22 & 1 {
            0 => Way::Offer,
            _ => Way::Cells,
        };
        Some(Report {
            seq: (word >> 32) as u32,
            op,
            class,
            way,
            ns_per_kib: (word & MAX_NS_PER_KIB) as u32,
        })
    }
}

/// The size class of `bytes`: its log2, rounded down.
fn class(bytes: usize) -> u8 {
    (bytes.max(1).ilog2() as u64).min(CLASSES - 1) as u8
}

/// What a writer learnt of one operation's size class.
#[derive(Clone)]
struct Arms {
    op: Op,
    class: u8,
    /// Per way, a moving average of the reported ns per KiB (0: none yet).
    cost: [u32; 2],
    chosen: u32,
    /// The way of the last report taken in, and the first call reported
    /// since the way changed (its reports are not counted).
    last: Option<(Way, u32)>,
}

/// What a writer learnt of its readers' reads: a few entries (one per
/// operation and size class it wrote long data in).
#[derive(Default)]
pub(crate) struct Learnt {
    arms: RefCell<Vec<Arms>>,
}

impl Learnt {
    fn with_arms<R>(&self, op: Op, class: u8, f: impl FnOnce(&mut Arms) -> R) -> R {
        let mut arms = self.arms.borrow_mut();
        let i = match arms.iter().position(|a| a.op == op && a.class == class) {
            Some(i) => i,
            None => {
                arms.push(Arms {
                    op,
                    class,
                    cost: [0; 2],
                    chosen: 0,
                    last: None,
                });
                arms.len() - 1
            }
        };
        f(&mut arms[i])
    }

    /// What `parent` learnt, for a team of the same processes (a dup):
    /// the costs and how many choices were made (so the slower way's
    /// retries keep their period), but no call's way, since this team's
    /// first call runs on a region of its own, cold whichever way it goes.
    pub(crate) fn inherit(&self, parent: &Learnt) {
        let mut arms = parent.arms.borrow().clone();
        for arm in &mut arms {
            arm.last = None;
        }
        *self.arms.borrow_mut() = arms;
    }

    /// Takes in a reader's report, or a member's time of its own call.
    pub(crate) fn learn(&self, report: Report) {
        self.with_arms(report.op, report.class, |arms| {
            // The first call reported after the way changed ran on cold
            // caches (the other way's lines, or fresh pages).
            let cold = match arms.last {
                Some((way, first)) if way == report.way => report.seq == first,
                _ => {
                    arms.last = Some((report.way, report.seq));
                    true
                }
            };
            if cold {
                return;
            }
            let cost = &mut arms.cost[report.way as usize];
            let seen = u64::from(report.ns_per_kib.max(1));
            // A quarter of the weight on the newest, which counts as at
            // most twice the average: a stray slow read (its reader
            // descheduled) moves the choice only if it lasts.
            *cost = match u64::from(*cost) {
                0 => seen as u32,
                old => ((3 * old + seen.min(2 * old)) / 4) as u32,
            };
        });
    }

    /// The way to send `copied` bytes per reader of `op`: each way until
    /// it was measured (an offer first), then the faster, the other two
    /// times in [`RETRY_EVERY`].
    pub(crate) fn choose(&self, op: Op, copied: usize) -> Way {
        self.with_arms(op, class(copied), |arms| {
            arms.chosen = arms.chosen.wrapping_add(1);
            let [offer, cells] = arms.cost;
            let (best, other) = match (offer, cells) {
                (0, _) => return Way::Offer,
                (_, 0) => return Way::Cells,
                _ if offer <= cells => (Way::Offer, Way::Cells),
                _ => (Way::Cells, Way::Offer),
            };
            match arms.chosen % RETRY_EVERY < 2 {
                true => other,
                false => best,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_round_trip_and_garbage_names_no_operation() {
        let report = Report::of(7, Op::Scatter, 100 << 10, Way::Cells, 5_000);
        assert_eq!(report.class, 16);
        assert_eq!(report.ns_per_kib, 50);
        assert_eq!(Report::decode(Op::Scatter, report.encode()), Some(report));
        // In another operation's word: not taken.
        assert_eq!(Report::decode(Op::Gather, report.encode()), None);
        // Slower than the word holds: the most it holds.
        let slow = Report::of(1, Op::Allreduce, 1 << 20, Way::Offer, u64::MAX);
        assert_eq!(slow.ns_per_kib as u64, MAX_NS_PER_KIB);
        assert_eq!(Report::decode(Op::Allreduce, slow.encode()), Some(slow));
        assert_eq!(Report::decode(Op::Bcast, 0), None);
        assert_eq!(Report::decode(Op::Bcast, 7 << 29), None);
    }

    #[test]
    fn a_writer_tries_both_ways_then_keeps_the_faster() {
        let learnt = Learnt::default();
        let seq = std::cell::Cell::new(0);
        let report = |way, ns| {
            seq.set(seq.get() + 1);
            Report::of(seq.get(), Op::Bcast, 64 << 10, way, ns)
        };
        let choose = || learnt.choose(Op::Bcast, 100 << 10);
        // Offers until a read of one is reported that is not the first
        // call's (on cold caches), then cells until the same.
        assert_eq!(choose(), Way::Offer);
        learnt.learn(report(Way::Offer, 60_000));
        assert_eq!(choose(), Way::Offer);
        learnt.learn(report(Way::Offer, 6_000));
        assert_eq!(choose(), Way::Cells);
        // Two readers' reports of the cold call.
        let cold = report(Way::Cells, 30_000);
        learnt.learn(cold);
        learnt.learn(cold);
        assert_eq!(choose(), Way::Cells);
        learnt.learn(report(Way::Cells, 3_000));
        // Then the faster, and the slower for two calls in RETRY_EVERY.
        let offers = || {
            (0..2 * RETRY_EVERY)
                .filter(|_| choose() == Way::Offer)
                .count() as u32
        };
        assert_eq!(offers(), 4);
        // Another class, and another operation, start afresh.
        assert_eq!(learnt.choose(Op::Bcast, 1 << 20), Way::Offer);
        assert_eq!(learnt.choose(Op::Gather, 64 << 10), Way::Offer);
        // One read ten times slower does not change the choice; reads
        // that stay slow do.
        learnt.learn(report(Way::Cells, 30_000));
        assert_eq!(offers(), 4);
        for _ in 0..4 {
            learnt.learn(report(Way::Cells, 30_000));
        }
        assert_eq!(offers(), 2 * RETRY_EVERY - 4);
    }

    #[test]
    fn an_heir_keeps_the_choice_and_counts_its_first_call_cold() {
        // A report of 64 KiB read at `per_kib` ns per KiB.
        let report =
            |seq, way, per_kib: u64| Report::of(seq, Op::Gather, 64 << 10, way, per_kib * 64);
        let choose = |learnt: &Learnt| learnt.choose(Op::Gather, 64 << 10);
        let parent = Learnt::default();
        for seq in 1..=2 {
            assert_eq!(choose(&parent), Way::Offer);
            parent.learn(report(seq, Way::Offer, 9_000));
        }
        for seq in 3..=4 {
            assert_eq!(choose(&parent), Way::Cells);
            parent.learn(report(seq, Way::Cells, 1_000));
        }
        let heir = Learnt::default();
        heir.inherit(&parent);
        // Past the parent's four choices, the faster until the 128th.
        let cells = (5..RETRY_EVERY - 1)
            .filter(|_| choose(&heir) == Way::Cells)
            .count();
        assert_eq!(cells, RETRY_EVERY as usize - 6);
        // Its first call (the heir's own seq 1) ran cold, by the parent's
        // way: not counted (counted, the cells would cost 1250 and the
        // offers' 1201 below would win).
        heir.learn(report(1, Way::Cells, 1_000_000));
        heir.learn(report(2, Way::Offer, 1));
        for seq in 3..10 {
            heir.learn(report(seq, Way::Offer, 1));
        }
        assert_eq!(choose(&heir), Way::Cells);
    }
}
