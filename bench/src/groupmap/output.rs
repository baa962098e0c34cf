//! What a run leaves: the CSV (one row per map and representation), a
//! bytes-against-random-select scatter plot per class and one for Table 6.1
//! (the thesis's Figures 5.3, 5.7, 5.11, 5.14, 5.18), and a summary on stdout.

use std::collections::BTreeMap;
use std::path::Path;

use catena_groupmap::{OrderKind, SetKind};
use plotters::style::{RGBColor, BLACK};

use super::{classes, Row, What, STRATEGIES};
use crate::plot::{self, Marks, Shape};
use crate::report::{quantile, Table};

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

fn cell(v: Option<f64>, decimals: usize) -> String {
    v.map_or(String::new(), |v| format!("{v:.decimals$}"))
}

/// bytes / bound, where the bound is not zero (a full world needs no bits).
fn ratio(r: &Row) -> Option<f64> {
    r.bytes.filter(|_| r.bound > 0.0).map(|b| b / r.bound)
}

pub(super) fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(&[
        "workload",
        "map",
        "members",
        "world",
        "permuted",
        "what",
        "set",
        "order",
        "bytes",
        "bytes_per_bound",
        "build_us",
        "seq_select_ns",
        "rand_select_ns",
        "rand_rank_ns",
        "note",
    ]);
    for r in rows {
        let bytes = match r.what {
            What::Bound => Some(r.bound),
            _ => r.bytes,
        };
        let timing = |f: fn(&super::Timing) -> f64| cell(r.timing.as_ref().map(f), 1);
        t.row(vec![
            r.workload.clone(),
            r.map.to_string(),
            r.members.to_string(),
            r.world.to_string(),
            r.permuted.to_string(),
            r.what(),
            r.set.map_or(String::new(), |s| s.to_string()),
            r.order.map_or(String::new(), |o| o.to_string()),
            cell(bytes, if r.what == What::Bound { 1 } else { 0 }),
            if r.what == What::Bound {
                "1".to_string()
            } else {
                cell(ratio(r), 4)
            },
            timing(|t| t.build_us),
            timing(|t| t.seq_select_ns),
            timing(|t| t.rand_select_ns),
            timing(|t| t.rand_rank_ns),
            r.note.replace(',', ";"),
        ]);
    }
    t
}

/// Tableau 10: a colour per set representation, the same in every plot.
const SET_COLORS: [RGBColor; 9] = [
    RGBColor(78, 121, 167),
    RGBColor(242, 142, 43),
    RGBColor(225, 87, 89),
    RGBColor(118, 183, 178),
    RGBColor(89, 161, 79),
    RGBColor(237, 201, 72),
    RGBColor(176, 122, 161),
    RGBColor(255, 157, 167),
    RGBColor(156, 117, 95),
];
const VEC_COLOR: RGBColor = RGBColor(90, 90, 90);

/// A representation's colour is its set's, its shape its order's.
fn style(set: SetKind, order: OrderKind) -> (RGBColor, Shape) {
    let s = SetKind::ALL.iter().position(|&k| k == set).unwrap_or(0);
    let shape = match order {
        OrderKind::Sorted => Shape::Circle,
        OrderKind::Blocks => Shape::Square,
        OrderKind::Packed => Shape::Triangle,
        OrderKind::Shortcuts => Shape::Wedge,
        OrderKind::Wavelet => Shape::Diamond,
    };
    (SET_COLORS[s % SET_COLORS.len()], shape)
}

const STRATEGY_SHAPES: [Shape; 3] = [Shape::Ring, Shape::Frame, Shape::Cross];

/// One scatter plot per class and one for Table 6.1; returns the files.
pub(super) fn plots(rows: &[Row], dir: &Path) -> Result<Vec<String>> {
    let mut groups: Vec<String> = Vec::new();
    for r in rows {
        let group = if r.in_table() {
            "table"
        } else {
            r.workload.as_str()
        };
        if !groups.iter().any(|g| g == group) {
            groups.push(group.to_string());
        }
    }
    let mut written = Vec::new();
    for group in groups {
        let of_group = rows.iter().filter(|r| {
            if group == "table" {
                r.in_table()
            } else {
                r.workload == group
            }
        });
        // Keyed by (set, order), so the legend comes in a fixed order.
        let mut reprs: BTreeMap<(Option<SetKind>, Option<OrderKind>), Marks> = BTreeMap::new();
        let mut strategies: Vec<Marks> = STRATEGIES
            .iter()
            .zip(STRATEGY_SHAPES)
            .map(|(&(name, _), shape)| Marks {
                name: format!("strategy:{name}"),
                shape,
                color: BLACK,
                points: Vec::new(),
            })
            .collect();
        for r in of_group {
            let (Some(bytes), Some(t)) = (r.bytes, r.timing) else {
                continue;
            };
            let point = (t.rand_select_ns, bytes);
            if let What::Strategy(name) = r.what {
                let i = STRATEGIES.iter().position(|s| s.0 == name).unwrap_or(0);
                strategies[i].points.push(point);
                continue;
            }
            let (color, shape) = match (r.set, r.order) {
                (Some(s), Some(o)) => style(s, o),
                _ => (VEC_COLOR, Shape::Circle),
            };
            reprs
                .entry((r.set, r.order))
                .or_insert_with(|| Marks {
                    name: r.what(),
                    shape,
                    color,
                    points: Vec::new(),
                })
                .points
                .push(point);
        }
        let marks: Vec<Marks> = reprs
            .into_values()
            .chain(strategies.into_iter().filter(|m| !m.points.is_empty()))
            .collect();
        let (title, file) = if group == "table" {
            ("Table 6.1".to_string(), "groupmap-table.png".to_string())
        } else {
            (format!("Class {group}"), format!("groupmap-{group}.png"))
        };
        let title = format!("{title}: bytes against random select time, every map");
        let path = dir.join(file);
        plot::log_log_scatter(&path, &title, "random select, ns", "bytes", &marks)?;
        written.push(path.display().to_string());
    }
    Ok(written)
}

fn median(values: impl Iterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.collect();
    (!v.is_empty()).then(|| quantile(&mut v, 0.5))
}

/// The representation chosen most often and its share, e.g. `Bitmap+Sorted 61%`.
fn most_chosen<'a>(rows: impl Iterator<Item = &'a Row>) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut total = 0;
    for r in rows {
        *counts
            .entry(r.representation().unwrap_or_else(|| "failed".into()))
            .or_default() += 1;
        total += 1;
    }
    match counts.into_iter().max_by_key(|c| c.1) {
        Some((repr, count)) => format!("{repr} {:.0}%", 100.0 * count as f64 / total as f64),
        None => String::new(),
    }
}

/// The summary on stdout: per class and strategy the medians over its maps;
/// per Table 6.1 communicator, each strategy's map. The plain array is shown
/// for scale.
pub(super) fn summary(rows: &[Row]) {
    let compared = |r: &&Row| matches!(r.what, What::Strategy(_) | What::Vec);
    let mut classes = Table::new(&[
        "class",
        "maps",
        "what",
        "chose most often",
        "med bytes",
        "med bound",
        "med bytes/bound",
        "med select ns",
        "med rank ns",
    ]);
    let mut names: Vec<&str> = Vec::new();
    for r in rows.iter().filter(|r| !r.in_table()) {
        if !names.contains(&r.workload.as_str()) {
            names.push(&r.workload);
        }
    }
    let has_classes = !names.is_empty();
    for name in names {
        let of_class: Vec<&Row> = rows.iter().filter(|r| r.workload == name).collect();
        let maps = of_class.iter().filter(|r| r.what == What::Bound).count();
        let whats = STRATEGIES
            .iter()
            .map(|s| What::Strategy(s.0))
            .chain([What::Vec]);
        for what in whats {
            let these: Vec<&Row> = of_class
                .iter()
                .copied()
                .filter(|r| r.what == what)
                .collect();
            let timed = |f: fn(&super::Timing) -> f64| {
                cell(
                    median(these.iter().filter_map(|r| r.timing.as_ref().map(f))),
                    1,
                )
            };
            classes.row(vec![
                name.to_string(),
                maps.to_string(),
                these.first().map_or_else(String::new, |r| r.what()),
                if what == What::Vec {
                    String::new()
                } else {
                    most_chosen(these.iter().copied())
                },
                cell(median(these.iter().filter_map(|r| r.bytes)), 0),
                cell(median(these.iter().map(|r| r.bound)), 0),
                cell(median(these.iter().filter_map(|r| ratio(r))), 3),
                timed(|t| t.rand_select_ns),
                timed(|t| t.rand_rank_ns),
            ]);
        }
    }
    let mut table = Table::new(&[
        "comm",
        "description",
        "members",
        "what",
        "chose",
        "bytes",
        "bound",
        "bytes/bound",
        "select ns",
        "rank ns",
    ]);
    let mut has_table = false;
    for r in rows.iter().filter(|r| r.in_table()).filter(compared) {
        has_table = true;
        let id: usize = r.workload[1..].parse().unwrap_or(0);
        table.row(vec![
            r.workload.clone(),
            classes::TABLE
                .get(id.wrapping_sub(1))
                .unwrap_or(&"")
                .to_string(),
            r.members.to_string(),
            r.what(),
            if r.what == What::Vec {
                String::new()
            } else {
                r.representation().unwrap_or_default()
            },
            cell(r.bytes, 0),
            cell(Some(r.bound), 0),
            cell(ratio(r), 3),
            cell(r.timing.map(|t| t.rand_select_ns), 1),
            cell(r.timing.map(|t| t.rand_rank_ns), 1),
        ]);
    }
    if has_classes {
        println!("Classes A-E: medians over each class's maps (bound: log2 C(world, n) [+ log2 n!] bits)");
        classes.print();
    }
    if has_table {
        if has_classes {
            println!();
        }
        println!("Table 6.1 communicators");
        table.print();
    }
}
