//! Strategies (thesis §3.8) pick a new map's representation: `Space` the
//! smallest, from sizes computed off the statistics where it can; `Time` the
//! fastest on 100 random lookups; `Hybrid` the least `α ln T + (1-α) ln S`.

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
    /// The fastest measured `select` and `rank`.
    Time,
    /// The least `alpha * ln(ns) + (1 - alpha) * ln(bytes)`.
    Hybrid {
        /// The weight of time against bytes, in `0..=1`: 0 is Space, 1 Time.
        alpha: f64,
    },
    /// Hybrid with the thesis's alpha of 0.25.
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
            sets: vec![Measured {
                kind: SetKind::Stride,
                bytes: 0,
                estimated: true,
                lookup_ns: None,
            }],
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
    let timed = strategy != Strategy::Space;
    let mut sample = Sample::new(members, stats, pi);

    let mut sets = Vec::new();
    let mut built_sets = Vec::new();
    let mut skipped = Vec::new();
    for kind in SetKind::ALL {
        if !SetRepr::fits(kind, stats) {
            continue;
        }
        let estimate = SetRepr::estimate_heap_bytes(kind, stats);
        if timed && build_bytes(kind, stats).is_some_and(|b| b > BUILD_LIMIT * array_bytes) {
            skipped.push(kind.name());
            continue;
        }
        match (estimate, timed) {
            (Some(bytes), false) => sets.push(Measured {
                kind,
                bytes,
                estimated: true,
                lookup_ns: None,
            }),
            _ => {
                let Some(set) = SetRepr::build(kind, members, stats) else {
                    continue;
                };
                let lookup_ns = timed.then(|| sample.time_set(&set));
                sets.push(Measured {
                    kind,
                    bytes: set.heap_bytes(),
                    estimated: false,
                    lookup_ns,
                });
                built_sets.push(set);
            }
        }
    }

    let mut orders = Vec::new();
    let mut built_orders = Vec::new();
    let order_kinds: &[OrderKind] = if identity {
        &[OrderKind::Sorted]
    } else {
        &[OrderKind::Blocks, OrderKind::Packed, OrderKind::Wavelet]
    };
    for &kind in order_kinds {
        let estimate = OrderRepr::estimate_heap_bytes(kind, order_stats);
        if timed && estimate > BUILD_LIMIT * array_bytes {
            skipped.push(kind.name());
            continue;
        }
        if timed {
            let Some(order) = OrderRepr::build(kind, pi, order_stats) else {
                continue;
            };
            let lookup_ns = Some(sample.time_order(&order));
            orders.push(Measured {
                kind,
                bytes: order.heap_bytes(),
                estimated: false,
                lookup_ns,
            });
            built_orders.push(order);
        } else {
            orders.push(Measured {
                kind,
                bytes: estimate,
                estimated: true,
                lookup_ns: None,
            });
        }
    }

    let fixed_bytes = std::mem::size_of::<super::GroupMap>();
    let bytes =
        |s: &Measured<SetKind>, o: &Measured<OrderKind>| (fixed_bytes + s.bytes + o.bytes) as f64;
    let ns = |s: &Measured<SetKind>, o: &Measured<OrderKind>| {
        s.lookup_ns.unwrap_or(0.0) + o.lookup_ns.unwrap_or(0.0)
    };
    let combos = || (0..sets.len()).flat_map(|i| (0..orders.len()).map(move |j| (i, j)));
    let least = |score: &dyn Fn(usize, usize) -> f64| {
        combos().min_by(|&(a, b), &(c, d)| score(a, b).total_cmp(&score(c, d)))
    };
    let best = match strategy {
        Strategy::Space => least(&|i, j| bytes(&sets[i], &orders[j])),
        Strategy::Time => {
            // 100 warm lookups cannot tell apart times within a few percent:
            // among those that tie with the fastest, take the smallest.
            let fastest = combos()
                .map(|(i, j)| ns(&sets[i], &orders[j]))
                .fold(f64::INFINITY, f64::min);
            let tie = fastest * TIME_TIE + 1.0;
            least(&|i, j| {
                let t = ns(&sets[i], &orders[j]);
                if t <= tie {
                    bytes(&sets[i], &orders[j])
                } else {
                    f64::INFINITY
                }
            })
        }
        _ => {
            let alpha = strategy.alpha().unwrap_or(Strategy::DEFAULT_ALPHA);
            least(&|i, j| {
                alpha * ns(&sets[i], &orders[j]).max(0.5).ln()
                    + (1.0 - alpha) * bytes(&sets[i], &orders[j]).ln()
            })
        }
    };
    let (i, j) = best.ok_or(GroupMapError::NotApplicable {
        representation: "every representation",
        why: "none was small enough to try",
    })?;
    let (set_kind, order_kind) = (sets[i].kind, orders[j].kind);
    let set = match built_sets.into_iter().find(|s| s.kind() == set_kind) {
        Some(set) => set,
        None => SetRepr::build(set_kind, members, stats).ok_or(GroupMapError::NotApplicable {
            representation: set_kind.name(),
            why: "it refused the members it was estimated for",
        })?,
    };
    let order = match built_orders.into_iter().find(|o| o.kind() == order_kind) {
        Some(order) => order,
        None => {
            OrderRepr::build(order_kind, pi, order_stats).ok_or(GroupMapError::NotApplicable {
                representation: order_kind.name(),
                why: "the order is not sorted",
            })?
        }
    };
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
    let set = SetRepr::build(set_kind, members, stats).ok_or(GroupMapError::NotApplicable {
        representation: set_kind.name(),
        why: match set_kind {
            SetKind::Stride => "the members are not evenly spaced",
            SetKind::Bdd => "its BDD would be larger than a plain array",
            _ => "the representation refused the members",
        },
    })?;
    let order =
        OrderRepr::build(order_kind, pi, order_stats).ok_or(GroupMapError::NotApplicable {
            representation: order_kind.name(),
            why: "the group's order is not the sorted order of its members",
        })?;
    let report = Report {
        strategy,
        set: set_kind,
        order: order_kind,
        sets: vec![Measured {
            kind: set_kind,
            bytes: set.heap_bytes(),
            estimated: false,
            lookup_ns: None,
        }],
        orders: vec![Measured {
            kind: order_kind,
            bytes: order.heap_bytes(),
            estimated: false,
            lookup_ns: None,
        }],
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

    fn time_set(&mut self, set: &SetRepr) -> f64 {
        let n = set.len();
        best_of(|| {
            let mut acc = 0u32;
            if n > 0 {
                for &i in &self.sorted_indices {
                    acc = acc.wrapping_add(set.select(black_box(i)));
                }
            }
            for &w in &self.world_ranks {
                acc = acc.wrapping_add(set.rank(black_box(w)).unwrap_or(0));
            }
            acc
        })
    }

    fn time_order(&mut self, order: &OrderRepr) -> f64 {
        best_of(|| {
            let mut acc = 0u32;
            for &i in &self.sorted_indices {
                acc = acc.wrapping_add(order.to_sorted(black_box(i)));
                acc = acc.wrapping_add(order.to_group(black_box(i)));
            }
            acc
        })
    }
}

/// Mean ns a lookup over the fastest of `ROUNDS` rounds of `2 * SAMPLE`.
fn best_of(mut round: impl FnMut() -> u32) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        black_box(round());
        best = best.min(start.elapsed().as_nanos() as f64);
    }
    best / (2 * SAMPLE) as f64
}

pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
