//! Strategies (thesis §3.8) pick a new map's representation: `Space` the
//! smallest; `Time` the fastest on 100 random lookups; `Hybrid` the least
//! `α ln T + (1-α) ln S`. The plain packed array is always a candidate:
//! Space and Auto never pick more bytes, and decide without timing.

use std::fmt;
use std::hint::black_box;
use std::time::Instant;

use super::order::OrderStats;
use super::repr::{OrderKind, OrderRepr, SetKind, SetRepr};
use super::stats::Stats;
use super::GroupMapError;

/// How a map's representation is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Strategy {
    /// The fewest bytes.
    Space,
    /// The fastest measured `select` and `rank`; more bytes than the plain
    /// array only for a map faster at `rank` and as fast at `select`.
    Time,
    /// The least `alpha * ln(ns) + (1 - alpha) * ln(bytes)`.
    Hybrid {
        /// The weight of time against bytes, in `0..=1`: 0 is Space, 1 Time.
        alpha: f64,
    },
    /// Hybrid with the thesis's alpha of 0.25, times from a fixed lookup
    /// model (the same choice on every run), never more bytes than the
    /// plain array.
    Auto,
    /// Exactly these representations, or an error where they cannot hold the map.
    Fixed {
        /// The set representation to build.
        set: SetKind,
        /// The order representation to build.
        order: OrderKind,
    },
}

impl Strategy {
    /// The thesis's alpha, which `Auto` uses.
    pub const DEFAULT_ALPHA: f64 = 0.25;

    /// Hybrid with a chosen bias towards time (`alpha` in `0..=1`).
    pub fn hybrid(alpha: f64) -> Result<Strategy, GroupMapError> {
        if (0.0..=1.0).contains(&alpha) {
            Ok(Strategy::Hybrid { alpha })
        } else {
            Err(GroupMapError::BadAlpha { alpha })
        }
    }

    /// `BadAlpha` for a hybrid whose alpha is outside `0..=1` (or NaN):
    /// the enum's field is public, so every builder checks.
    pub(crate) fn check(self) -> Result<(), GroupMapError> {
        match self.alpha() {
            Some(alpha) => Strategy::hybrid(alpha).map(drop),
            None => Ok(()),
        }
    }

    fn alpha(self) -> Option<f64> {
        match self {
            Strategy::Hybrid { alpha } => Some(alpha),
            Strategy::Auto => Some(Strategy::DEFAULT_ALPHA),
            _ => None,
        }
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Strategy::Space => f.write_str("Space"),
            Strategy::Time => f.write_str("Time"),
            Strategy::Hybrid { alpha } => write!(f, "Hybrid(alpha {alpha})"),
            Strategy::Auto => write!(f, "Auto(alpha {})", Strategy::DEFAULT_ALPHA),
            Strategy::Fixed { set, order } => write!(f, "Fixed({set} + {order})"),
        }
    }
}

/// One representation the strategy looked at.
#[derive(Clone, Debug, PartialEq)]
pub struct Measured<K> {
    /// The representation.
    pub kind: K,
    /// The heap bytes it holds (or would hold, where `estimated`).
    pub bytes: usize,
    /// Bytes computed from the statistics rather than by building.
    pub estimated: bool,
    /// Mean ns of a lookup over the random sample, where it was timed.
    pub lookup_ns: Option<f64>,
    /// Mean ns of its part of a random `select`, where it was timed.
    pub select_ns: Option<f64>,
    /// Mean ns of its part of a random `rank`, where it was timed.
    pub rank_ns: Option<f64>,
}

impl<K> Measured<K> {
    fn estimated(kind: K, bytes: usize) -> Measured<K> {
        Measured {
            kind,
            bytes,
            estimated: true,
            lookup_ns: None,
            select_ns: None,
            rank_ns: None,
        }
    }

    fn timed(&mut self, (select_ns, rank_ns): (f64, f64)) {
        self.select_ns = Some(select_ns);
        self.rank_ns = Some(rank_ns);
        self.lookup_ns = Some((select_ns + rank_ns) / 2.0);
    }
}

/// What a strategy chose and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The strategy that chose.
    pub strategy: Strategy,
    /// The set representation it chose.
    pub set: SetKind,
    /// The order representation it chose.
    pub order: OrderKind,
    /// Every set representation it weighed, with its bytes and time.
    pub sets: Vec<Measured<SetKind>>,
    /// Every order representation it weighed, with its bytes and time.
    pub orders: Vec<Measured<OrderKind>>,
    /// The choice in a sentence, for logs and benchmarks.
    pub reason: String,
}

/// Lookups timed per representation, as in the thesis.
const SAMPLE: usize = 100;
/// Ranks timed on the plain array, whose rank scans (half members, half not).
const SCANS: usize = 8;
/// Rounds of the sample; the fastest counts, to shed interrupts.
const ROUNDS: usize = 5;
/// Time takes the smallest of the representations at most this factor (and
/// a nanosecond) slower than the fastest.
const TIME_TIE: f64 = 1.1;
/// Time and Hybrid do not build a representation estimated at more than
/// this many times a plain 4-byte array (a bitmap of a sparse set in a huge
/// world would take gigabytes).
const BUILD_LIMIT: usize = 8;

/// Even `Fixed` refuses a representation estimated at over this many bytes
/// and over `BUILD_LIMIT` plain arrays: a bitmap or complement of two ranks
/// of a 2^32 world would take gigabytes.
const FIXED_FLOOR: usize = 64 << 20;

/// What building `kind` over these members takes at most, where known: its
/// heap, and the list of holes `Complement` makes (8 bytes a hole) before
/// coding them.
fn build_bytes(kind: SetKind, stats: &Stats) -> Option<usize> {
    let heap = SetRepr::estimate_heap_bytes(kind, stats)?;
    let holes = stats.span() - u64::from(stats.len);
    let scratch = if kind == SetKind::Complement {
        usize::try_from(holes.saturating_mul(8)).unwrap_or(usize::MAX)
    } else {
        0
    };
    Some(heap.saturating_add(scratch))
}

pub(crate) struct Choice {
    pub set: SetRepr,
    pub order: OrderRepr,
    pub report: Report,
}

pub(crate) fn choose(
    strategy: Strategy,
    members: &[u32],
    stats: &Stats,
    pi: &[u32],
    order_stats: &OrderStats,
) -> Result<Choice, GroupMapError> {
    let identity = order_stats.is_identity(pi);
    if let Strategy::Fixed { set, order } = strategy {
        return fixed(strategy, set, order, members, stats, pi, order_stats);
    }
    if stats.stride.is_some() && identity {
        let set = SetRepr::build(SetKind::Stride, members, stats).expect("a stride fits");
        let reason = "the members form a stride in sorted order: O(1) bytes and time beat \
                      every other representation, nothing else was tried"
            .to_string();
        let report = Report {
            strategy,
            set: SetKind::Stride,
            order: OrderKind::Sorted,
            sets: vec![Measured::estimated(SetKind::Stride, 0)],
            orders: Vec::new(),
            reason,
        };
        return Ok(Choice {
            set,
            order: OrderRepr::Sorted,
            report,
        });
    }

    let array_bytes = 4 * stats.len as usize + 4096;
    // Only Time and a caller's own Hybrid measure; Space and Auto decide
    // from sizes and the lookup model alone, the same on every run.
    let timed = matches!(strategy, Strategy::Time | Strategy::Hybrid { .. });
    let mut sample = Sample::new(members, stats, pi);
    // The plain packed array of this group is always a candidate.
    let plain_kind = SetKind::Plain;
    let in_group_order: Vec<u32> = match identity {
        true => Vec::new(),
        false => pi.iter().map(|&s| members[s as usize]).collect(),
    };
    let set_input = |kind: SetKind| -> &[u32] {
        match kind {
            SetKind::Plain if !identity => &in_group_order,
            _ => members,
        }
    };

    let mut sets = Vec::new();
    let mut built_sets = Vec::new();
    let mut skipped = Vec::new();
    for kind in SetKind::ALL {
        if !SetRepr::fits(kind, stats) {
            continue;
        }
        let estimate = SetRepr::estimate_heap_bytes(kind, stats);
        if timed
            && kind != plain_kind
            && build_bytes(kind, stats).is_some_and(|b| b > BUILD_LIMIT * array_bytes)
        {
            skipped.push(kind.name());
            continue;
        }
        match (estimate, timed) {
            (Some(bytes), false) => sets.push(Measured::estimated(kind, bytes)),
            _ => {
                let Some(set) = SetRepr::build(kind, set_input(kind), stats) else {
                    continue;
                };
                let mut measured = Measured::estimated(kind, set.heap_bytes());
                measured.estimated = false;
                if timed {
                    measured.timed(sample.time_set(&set));
                }
                sets.push(measured);
                built_sets.push(set);
            }
        }
    }

    let mut orders = Vec::new();
    let mut built_orders = Vec::new();
    let order_kinds: &[OrderKind] = if identity {
        &[OrderKind::Sorted]
    } else {
        // `Sorted` here is the identity over the plain array.
        &[
            OrderKind::Blocks,
            OrderKind::Packed,
            OrderKind::Shortcuts,
            OrderKind::Wavelet,
            OrderKind::Sorted,
        ]
    };
    for &kind in order_kinds {
        let estimate = OrderRepr::estimate_heap_bytes(kind, order_stats);
        if timed && estimate > BUILD_LIMIT * array_bytes {
            skipped.push(kind.name());
            continue;
        }
        if timed && kind != OrderKind::Sorted {
            let Some(order) = OrderRepr::build(kind, pi, order_stats) else {
                continue;
            };
            let mut measured = Measured::estimated(kind, order.heap_bytes());
            measured.estimated = false;
            measured.timed(sample.time_order(&order));
            orders.push(measured);
            built_orders.push(order);
        } else {
            let mut measured = Measured::estimated(kind, estimate);
            if timed {
                measured.timed((0.0, 0.0));
            }
            orders.push(measured);
        }
    }

    let fixed_bytes = std::mem::size_of::<super::GroupMap>();
    let bytes = |i: usize, j: usize| fixed_bytes + sets[i].bytes + orders[j].bytes;
    // Select is set.select(order.to_sorted(g)), rank order.to_group(set.rank(w)).
    let lookup_ns = |i: usize, j: usize| -> (f64, f64) {
        let (set, order) = (&sets[i], &orders[j]);
        match (
            set.select_ns.zip(set.rank_ns),
            order.select_ns.zip(order.rank_ns),
        ) {
            (Some((ss, sr)), Some((os, or))) => (ss + os, sr + or),
            _ => {
                let (ss, sr) = model_set_ns(set.kind, stats);
                let (os, or) = model_order_ns(order.kind, order_stats);
                (ss + os, sr + or)
            }
        }
    };
    let mean_ns = |i: usize, j: usize| {
        let (select, rank) = lookup_ns(i, j);
        (select + rank) / 2.0
    };
    // The plain array pairs only with the identity, and the identity of a
    // permuted group only with the plain array.
    let pairs = |i: usize, j: usize| {
        identity || (sets[i].kind == SetKind::Plain) == (orders[j].kind == OrderKind::Sorted)
    };
    let combos: Vec<(usize, usize)> = (0..sets.len())
        .flat_map(|i| (0..orders.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| pairs(i, j))
        .collect();
    let plain = combos
        .iter()
        .copied()
        .find(|&(i, _)| sets[i].kind == plain_kind)
        .ok_or(GroupMapError::NotApplicable {
            representation: plain_kind.name(),
            why: "the plain array could not be sized",
        })?;
    let cap = bytes(plain.0, plain.1);
    let least = |score: &dyn Fn(usize, usize) -> f64| {
        combos
            .iter()
            .copied()
            .min_by(|&(a, b), &(c, d)| score(a, b).total_cmp(&score(c, d)))
    };
    let hybrid = |alpha: f64, i: usize, j: usize| {
        alpha * mean_ns(i, j).max(0.5).ln() + (1.0 - alpha) * (bytes(i, j) as f64).ln()
    };
    let best = match strategy {
        Strategy::Space => least(&|i, j| bytes(i, j) as f64),
        Strategy::Time => {
            // 100 warm lookups cannot tell apart times within a few percent:
            // among those that tie with the fastest, take the smallest. A map
            // larger than the plain array must also beat it at rank and
            // match it at select.
            let (plain_select, plain_rank) = lookup_ns(plain.0, plain.1);
            let worth = |i: usize, j: usize| {
                let (select, rank) = lookup_ns(i, j);
                bytes(i, j) <= cap || select <= plain_select * TIME_TIE + 1.0 && rank < plain_rank
            };
            let fastest = combos
                .iter()
                .filter(|&&(i, j)| worth(i, j))
                .map(|&(i, j)| mean_ns(i, j))
                .fold(f64::INFINITY, f64::min);
            let tie = fastest * TIME_TIE + 1.0;
            least(&|i, j| match worth(i, j) && mean_ns(i, j) <= tie {
                true => bytes(i, j) as f64,
                false => f64::INFINITY,
            })
        }
        Strategy::Auto => least(&|i, j| match bytes(i, j) <= cap {
            true => hybrid(Strategy::DEFAULT_ALPHA, i, j),
            false => f64::INFINITY,
        }),
        _ => {
            let alpha = strategy.alpha().unwrap_or(Strategy::DEFAULT_ALPHA);
            least(&|i, j| hybrid(alpha, i, j))
        }
    };
    let (mut i, mut j) = best.ok_or(GroupMapError::NotApplicable {
        representation: "every representation",
        why: "none was small enough to try",
    })?;
    let build =
        |i: usize, j: usize, built_sets: &mut Vec<SetRepr>, built_orders: &mut Vec<OrderRepr>| {
            let set = take_set(built_sets, sets[i].kind, set_input(sets[i].kind), stats)?;
            let order = take_order(built_orders, orders[j].kind, pi, order_stats)?;
            Ok::<_, GroupMapError>((set, order))
        };
    let (mut set, mut order) = build(i, j, &mut built_sets, &mut built_orders)?;
    // An estimate that undershot must not carry Space or Auto past the cap.
    let capped = matches!(strategy, Strategy::Space | Strategy::Auto);
    if capped && fixed_bytes + set.heap_bytes() + order.heap_bytes() > cap {
        (i, j) = plain;
        (set, order) = build(i, j, &mut built_sets, &mut built_orders)?;
    }
    let (set_kind, order_kind) = (sets[i].kind, orders[j].kind);
    // The report gives the chosen representations' real bytes.
    (sets[i].bytes, sets[i].estimated) = (set.heap_bytes(), false);
    (orders[j].bytes, orders[j].estimated) = (order.heap_bytes(), false);
    let reason = explain(
        strategy,
        &sets[i],
        &orders[j],
        sets.len(),
        orders.len(),
        &skipped,
    );
    let report = Report {
        strategy,
        set: set_kind,
        order: order_kind,
        sets,
        orders,
        reason,
    };
    Ok(Choice { set, order, report })
}

/// The built `kind` from `built`, or built now.
fn take_set(
    built: &mut Vec<SetRepr>,
    kind: SetKind,
    members: &[u32],
    stats: &Stats,
) -> Result<SetRepr, GroupMapError> {
    match built.iter().position(|s| s.kind() == kind) {
        Some(at) => Ok(built.swap_remove(at)),
        None => SetRepr::build(kind, members, stats).ok_or(GroupMapError::NotApplicable {
            representation: kind.name(),
            why: "it refused the members it was estimated for",
        }),
    }
}

/// The built `kind` from `built`, or built now; `Sorted` is the identity
/// (over a sorted set, or over the plain array, which holds group order).
fn take_order(
    built: &mut Vec<OrderRepr>,
    kind: OrderKind,
    pi: &[u32],
    order_stats: &OrderStats,
) -> Result<OrderRepr, GroupMapError> {
    match built.iter().position(|o| o.kind() == kind) {
        Some(at) => Ok(built.swap_remove(at)),
        None if kind == OrderKind::Sorted => Ok(OrderRepr::Sorted),
        None => OrderRepr::build(kind, pi, order_stats).ok_or(GroupMapError::NotApplicable {
            representation: kind.name(),
            why: "the order is not sorted",
        }),
    }
}

/// The lookup model Auto decides by: ns of a random `select` and `rank`
/// per set representation, the medians `catena-bench groupmap` measured on
/// the development machine (docs/groupmap.md), with the size terms that
/// make some grow. Measured once so a choice never depends on a run.
fn model_set_ns(kind: SetKind, stats: &Stats) -> (f64, f64) {
    let log_n = f64::from(stats.len.max(2)).log2();
    match kind {
        SetKind::Stride => (5.0, 5.0),
        SetKind::Runs => (10.0, 14.0),
        SetKind::Bitmap => (35.0, 15.0),
        SetKind::EliasFano => (30.0, 20.0),
        SetKind::Complement => (60.0, 20.0),
        SetKind::Bdd => (25.0, 25.0),
        SetKind::Packed => (3.0, 3.0 * log_n),
        SetKind::Indexed => (9.0, 14.0),
        SetKind::Compressed => (1500.0, 1500.0),
        // A scan reads half the members for a member, all for a stranger.
        SetKind::Plain => (3.0, 0.75 * f64::from(stats.len)),
    }
}

/// The order layer's share of a `select` (pi) and a `rank` (pi^-1).
fn model_order_ns(kind: OrderKind, stats: &OrderStats) -> (f64, f64) {
    match kind {
        OrderKind::Sorted => (0.0, 0.0),
        OrderKind::Blocks => {
            let log_blocks = f64::from(stats.blocks.max(2)).log2();
            (3.0 * log_blocks, 3.0 * log_blocks)
        }
        OrderKind::Packed => (3.0, 3.0),
        // About STEP dependent reads of pi: 70-120 ns measured.
        OrderKind::Shortcuts => (3.0, 90.0),
        OrderKind::Wavelet => (200.0, 270.0),
    }
}

fn explain(
    strategy: Strategy,
    set: &Measured<SetKind>,
    order: &Measured<OrderKind>,
    set_count: usize,
    order_count: usize,
    skipped: &[&str],
) -> String {
    let ns = |m: Option<f64>| m.map_or(String::new(), |ns| format!(", {ns:.1} ns a lookup"));
    let what = match strategy {
        Strategy::Space => "fewest bytes".to_string(),
        Strategy::Time => format!(
            "smallest of those within {:.0}% + 1 ns of the fastest on {} timed lookups",
            (TIME_TIE - 1.0) * 100.0,
            2 * SAMPLE
        ),
        _ => format!(
            "least alpha*ln(ns) + (1-alpha)*ln(bytes), alpha {}",
            strategy.alpha().unwrap_or(Strategy::DEFAULT_ALPHA)
        ),
    };
    let mut reason = format!(
        "{what} among {set_count} set and {order_count} order representations: {} ({} B{}) + {} ({} B{})",
        set.kind,
        set.bytes,
        ns(set.lookup_ns),
        order.kind,
        order.bytes,
        ns(order.lookup_ns)
    );
    if !skipped.is_empty() {
        reason += &format!(
            "; not built, estimated over {BUILD_LIMIT}x a plain array: {}",
            skipped.join(", ")
        );
    }
    reason
}

fn fixed(
    strategy: Strategy,
    set_kind: SetKind,
    order_kind: OrderKind,
    members: &[u32],
    stats: &Stats,
    pi: &[u32],
    order_stats: &OrderStats,
) -> Result<Choice, GroupMapError> {
    let array_bytes = 4 * stats.len as usize + 4096;
    if build_bytes(set_kind, stats)
        .is_some_and(|b| b > (BUILD_LIMIT * array_bytes).max(FIXED_FLOOR))
    {
        return Err(GroupMapError::NotApplicable {
            representation: set_kind.name(),
            why: "it would take over 64 MiB and 8 times a plain array for these members",
        });
    }
    // The plain array holds group order itself: the identity goes with it.
    let plain = set_kind == SetKind::Plain;
    if plain && order_kind != OrderKind::Sorted {
        return Err(GroupMapError::NotApplicable {
            representation: order_kind.name(),
            why: "the plain array holds group order itself: pair it with Sorted",
        });
    }
    let in_group_order: Vec<u32>;
    let set_members = match plain {
        true => {
            in_group_order = pi.iter().map(|&s| members[s as usize]).collect();
            &in_group_order
        }
        false => members,
    };
    let set = SetRepr::build(set_kind, set_members, stats).ok_or(GroupMapError::NotApplicable {
        representation: set_kind.name(),
        why: match set_kind {
            SetKind::Stride => "the members are not evenly spaced",
            SetKind::Bdd => "its BDD would be larger than a plain array",
            _ => "the representation refused the members",
        },
    })?;
    let order = match plain {
        true => OrderRepr::Sorted,
        false => {
            OrderRepr::build(order_kind, pi, order_stats).ok_or(GroupMapError::NotApplicable {
                representation: order_kind.name(),
                why: "the group's order is not the sorted order of its members",
            })?
        }
    };
    let mut set_measured = Measured::estimated(set_kind, set.heap_bytes());
    set_measured.estimated = false;
    let mut order_measured = Measured::estimated(order_kind, order.heap_bytes());
    order_measured.estimated = false;
    let report = Report {
        strategy,
        set: set_kind,
        order: order_kind,
        sets: vec![set_measured],
        orders: vec![order_measured],
        reason: "fixed by the caller".to_string(),
    };
    Ok(Choice { set, order, report })
}

/// The random lookups a strategy times, drawn once per map.
struct Sample {
    sorted_indices: Vec<u32>,
    world_ranks: Vec<u32>,
}

impl Sample {
    fn new(members: &[u32], stats: &Stats, pi: &[u32]) -> Sample {
        let mut state = u64::from(stats.len) ^ (u64::from(stats.max) << 32) ^ pi.len() as u64;
        let mut next = |bound: u32| (splitmix64(&mut state) % u64::from(bound.max(1))) as u32;
        let n = stats.len;
        let sorted_indices = (0..SAMPLE).map(|_| next(n)).collect();
        // Half members, half anywhere in the world, so rank pays for misses too.
        let world_ranks = (0..SAMPLE)
            .map(|k| {
                if k % 2 == 0 && n > 0 {
                    members[next(n) as usize]
                } else {
                    next(stats.world)
                }
            })
            .collect();
        Sample {
            sorted_indices,
            world_ranks,
        }
    }

    /// Mean ns of a random `select` and of a random `rank`.
    fn time_set(&mut self, set: &SetRepr) -> (f64, f64) {
        let n = set.len();
        let select = best_of(|| {
            let mut acc = 0u32;
            if n > 0 {
                for &i in &self.sorted_indices {
                    acc = acc.wrapping_add(set.select(black_box(i)));
                }
            }
            acc
        });
        // The plain array's rank is a scan: a few tell its time as well.
        let ranks = match set.kind() {
            SetKind::Plain => &self.world_ranks[..SCANS],
            _ => &self.world_ranks[..],
        };
        let rank = best_of_n(ranks.len(), || {
            let mut acc = 0u32;
            for &w in ranks {
                acc = acc.wrapping_add(set.rank(black_box(w)).unwrap_or(0));
            }
            acc
        });
        (select, rank)
    }

    /// Mean ns of pi (a `select`'s share) and of pi^-1 (a `rank`'s).
    fn time_order(&mut self, order: &OrderRepr) -> (f64, f64) {
        let to_sorted = best_of(|| {
            let mut acc = 0u32;
            for &i in &self.sorted_indices {
                acc = acc.wrapping_add(order.to_sorted(black_box(i)));
            }
            acc
        });
        let to_group = best_of(|| {
            let mut acc = 0u32;
            for &i in &self.sorted_indices {
                acc = acc.wrapping_add(order.to_group(black_box(i)));
            }
            acc
        });
        (to_sorted, to_group)
    }
}

/// Mean ns a lookup over the fastest of `ROUNDS` rounds of `SAMPLE`.
fn best_of(round: impl FnMut() -> u32) -> f64 {
    best_of_n(SAMPLE, round)
}

/// Mean ns a lookup over the fastest of `ROUNDS` rounds of `lookups`.
fn best_of_n(lookups: usize, mut round: impl FnMut() -> u32) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        black_box(round());
        best = best.min(start.elapsed().as_nanos() as f64);
    }
    best / lookups.max(1) as f64
}

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
