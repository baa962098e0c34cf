//! `catena-bench tree loads`: the link loads of each construction against
//! the binomial baseline, from the checker, with the bandwidth term of the
//! spec's time model: pipelined trees move M·load/k per link; the
//! (unpipelined) binomial tree pays Σ_j L_j·M over its rounds.

use catena_topo::trees::binomial_rounds;
use catena_topo::{both_ways_load, check, schedule_loads, Members, Schedule, Topology, Torus};

use super::cases::{Case, Group, NotFound};
use crate::report::Table;

type Result<T, E = Box<dyn std::error::Error>> = std::result::Result<T, E>;

/// Loads of several schedules running at once: the largest directed load,
/// and with every edge reversed too (a concurrent allreduce).
fn combined(torus: &Torus, schedules: &[&Schedule]) -> Result<(u32, u32)> {
    let mut loads = vec![0u32; torus.links() as usize];
    for s in schedules {
        for (l, n) in schedule_loads(torus, s)?.into_iter().enumerate() {
            loads[l] += n;
        }
    }
    let max = loads.iter().copied().max().unwrap_or(0);
    Ok((max, both_ways_load(torus, &loads)))
}

pub fn table(torus: &Torus, cases: &[std::result::Result<Case, NotFound>]) -> Result<Table> {
    let mut table = Table::new(&[
        "case",
        "schedule",
        "colours",
        "max_load",
        "allreduce_load",
        "depth_hops",
        "stages",
        "binomial_round_loads",
        "model_speedup",
        "note",
    ]);
    for case in cases {
        let case = match case {
            Ok(case) => case,
            Err(missing) => {
                let mut row = vec![missing.name.into(), "not found".into()];
                row.resize(9, String::new());
                row.push(missing.why.replace(',', ";"));
                table.row(row);
                continue;
            }
        };
        let mut depth = (0, 0);
        for g in &case.groups {
            let c = check(torus, &members(torus, g)?, &g.ours, &[])?;
            check(torus, &members(torus, g)?, &g.binomial, &[])?;
            depth = (depth.0.max(c.depth_hops), depth.1.max(c.stages));
        }
        let ours: Vec<&Schedule> = case.groups.iter().map(|g| &g.ours).collect();
        let (max_load, allreduce_load) = combined(torus, &ours)?;
        let colours = case.groups[0].ours.colours.len() as u32;
        // Rounds of all groups run together: round j's load is summed.
        let mut rounds: Vec<Vec<(u32, u32)>> = Vec::new();
        for g in &case.groups {
            for (j, edges) in binomial_rounds(torus, &g.order, g.root)?.iter().enumerate() {
                if rounds.len() <= j {
                    rounds.push(Vec::new());
                }
                rounds[j].extend(edges.iter().map(|e| (e.parent, e.child)));
            }
        }
        let round_loads: Vec<u32> = rounds
            .iter()
            .map(|pairs| {
                catena_topo::link_loads(torus, pairs)
                    .into_iter()
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let binomial_cost: u32 = round_loads.iter().sum();
        let ours_cost = f64::from(max_load) / f64::from(colours);
        let bins: Vec<&Schedule> = case.groups.iter().map(|g| &g.binomial).collect();
        let (bin_load, bin_allreduce) = combined(torus, &bins)?;
        let note = case.groups[0].ours.fallback.clone().unwrap_or_default();
        table.row(vec![
            case.name.into(),
            names(&case.groups),
            colours.to_string(),
            max_load.to_string(),
            allreduce_load.to_string(),
            depth.0.to_string(),
            depth.1.to_string(),
            format!("{round_loads:?}").replace(',', ""),
            format!("{:.1}", f64::from(binomial_cost) / ours_cost),
            note.replace(',', ";"),
        ]);
        table.row(vec![
            case.name.into(),
            "Binomial".into(),
            "1".into(),
            bin_load.to_string(),
            bin_allreduce.to_string(),
            String::new(),
            String::new(),
            String::new(),
            "1.0".into(),
            "all rounds at once (pipelined)".into(),
        ]);
    }
    Ok(table)
}

fn members(torus: &Torus, g: &Group) -> Result<Members> {
    Ok(Members::new(torus, g.order.iter().copied())?)
}

fn names(groups: &[Group]) -> String {
    let first = groups[0].ours.construction.to_string();
    if groups.len() > 1 {
        format!("{first} x{}", groups.len())
    } else {
        first
    }
}
