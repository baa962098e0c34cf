//! Broadcast and allreduce over every torus construction, byte-exact
//! against a sequential reference: 8 shm processes mapped onto a 2x2x2
//! torus (and 2 a node onto 2x2x1), and 512 simulated ranks on an 8x8x8
//! torus with the routed link model and the schedules' routes pinned.

use crate::common;

use catena_algorithms::chain::Chain;
use catena_algorithms::{torus_plan, PipelineConfig, TreeCollective};
use catena_fabric::{Rank, Rma, Transport};
use catena_sim::{Routed, Sim, SimRank};
use catena_topo::trees::{
    auto, binomial, missing_node_colours, missing_node_tree, planes, rectangle, rectangle_colours,
};
use catena_topo::{check, Members, Node, RankMap, Schedule, Topology, Torus};
use common::{deadline, Rng};

const SEED: u64 = 0x7031_5eed;

/// One sub-communicator: its ranks (rank order), root and schedule.
struct Case {
    name: String,
    ranks: Vec<Rank>,
    root: Rank,
    schedule: Schedule,
}

/// Every rank derives the same cases from the seed.
fn cases(torus: &Torus, map: &RankMap, rng: &mut Rng) -> Vec<Case> {
    let n = map.ranks();
    let node = |r: Rank| map.node(r).expect("mapped");
    let all: Vec<Rank> = (0..n).collect();
    let pick = |rng: &mut Rng, ranks: &[Rank]| ranks[rng.below(ranks.len() as u64) as usize];
    let nodes_of = |ranks: &[Rank]| {
        let mut nodes: Vec<Node> = Vec::new();
        for &r in ranks {
            if !nodes.contains(&node(r)) {
                nodes.push(node(r));
            }
        }
        nodes
    };
    let mut out = Vec::new();
    let mut add =
        |name: &str, ranks: Vec<Rank>, root: Rank, make: &dyn Fn(&Members, Node) -> Schedule| {
            let nodes = nodes_of(&ranks);
            let members = Members::new(torus, nodes.iter().copied()).unwrap();
            let schedule = make(&members, node(root));
            check(torus, &members, &schedule, &[]).expect("a valid schedule");
            out.push(Case {
                name: name.into(),
                ranks,
                root,
                schedule,
            });
        };
    let root = pick(rng, &all);
    add("rectangle", all.clone(), root, &|m, r| {
        rectangle(torus, m, r).unwrap()
    });
    if catena_topo::trees::colours_apply(torus) {
        add("rectangle colours", all.clone(), root, &|m, r| {
            rectangle_colours(torus, m, r).unwrap()
        });
    }
    // One node's ranks left out.
    let missing = node(pick(rng, &all));
    let but: Vec<Rank> = all
        .iter()
        .copied()
        .filter(|&r| node(r) != missing)
        .collect();
    let root = pick(rng, &but);
    add("missing node", but.clone(), root, &|m, r| {
        missing_node_tree(torus, m, r).unwrap()
    });
    if catena_topo::trees::missing_node_colours_apply(torus) {
        add("missing node colours", but.clone(), root, &|m, r| {
            missing_node_colours(torus, m, r).unwrap()
        });
    }
    // The upper half of the Z planes.
    let z = torus.dims().len() - 1;
    let upper: Vec<Rank> = all
        .iter()
        .copied()
        .filter(|&r| torus.coordinates(node(r))[z] >= torus.dims()[z] / 2)
        .collect();
    let root = pick(rng, &upper);
    add("planes", upper, root, &|m, r| planes(torus, m, r).unwrap());
    // Random members in random rank order: Auto's chain, and the baseline.
    let mut random: Vec<Rank> = all.iter().copied().filter(|_| rng.below(2) == 0).collect();
    if random.is_empty() {
        random.push(0);
    }
    for i in (1..random.len()).rev() {
        random.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let root = pick(rng, &random);
    let order = nodes_of(&random);
    add("auto (random members)", random.clone(), root, &|_, r| {
        auto(torus, &order, r).unwrap()
    });
    add("binomial", random, root, &|_, r| {
        binomial(torus, &order, r).unwrap()
    });
    out
}

/// Rank r's i-th element of a call: the same on every rank that computes it.
fn value(call: u64, rank: Rank, i: usize) -> u64 {
    let mut rng = Rng::new(SEED ^ call, rank);
    for _ in 0..i % 3 {
        rng.next();
    }
    rng.next().wrapping_add(i as u64)
}

async fn every_case<T: Transport>(
    t: &T,
    torus: &Torus,
    map: &RankMap,
    bytes: usize,
    config: PipelineConfig,
) -> catena_fabric::Result<()> {
    let me = t.rank();
    let fail = |case: &Case, what: &str| {
        catena_fabric::Error::Protocol(format!("{}: rank {me}: {what}", case.name))
    };
    for (k, case) in cases(torus, map, &mut Rng::new(SEED, 0)).iter().enumerate() {
        if !case.ranks.contains(&me) {
            continue;
        }
        let plan = torus_plan(&case.schedule, map, &case.ranks, case.root, me)
            .map_err(common::to_fabric)?;
        let members =
            Chain::of_order(me, &case.ranks, 7000 + k as u64).map_err(common::to_fabric)?;
        let mut tc = TreeCollective::new(t, &members, plan, config, deadline(t))
            .await
            .map_err(common::to_fabric)?;
        // Broadcast: the root's bytes, everywhere.
        let expected: Vec<u8> = (0..bytes)
            .map(|i| value(k as u64, case.root, i) as u8)
            .collect();
        let mut data = if me == case.root {
            expected.clone()
        } else {
            vec![0; bytes]
        };
        tc.bcast(&mut data, deadline(t))
            .await
            .map_err(common::to_fabric)?;
        if data != expected {
            return Err(fail(case, "broadcast bytes differ"));
        }
        // Allreduce: i64 wrapping sum and f64 max over the members.
        let elements = bytes / 8;
        let sum_ref: Vec<i64> = (0..elements)
            .map(|i| {
                case.ranks
                    .iter()
                    .fold(0i64, |a, &r| a.wrapping_add(value(k as u64, r, i) as i64))
            })
            .collect();
        let mut sum: Vec<i64> = (0..elements)
            .map(|i| value(k as u64, me, i) as i64)
            .collect();
        tc.allreduce(
            &mut sum,
            |acc, other| {
                for (a, b) in acc.iter_mut().zip(other) {
                    *a = a.wrapping_add(*b);
                }
            },
            deadline(t),
        )
        .await
        .map_err(common::to_fabric)?;
        if sum != sum_ref {
            return Err(fail(case, "allreduce sums differ"));
        }
        let f = |r: Rank, i: usize| (value(k as u64 + 99, r, i) % 1_000_000) as f64 / 7.0;
        let max_ref: Vec<f64> = (0..elements)
            .map(|i| case.ranks.iter().map(|&r| f(r, i)).fold(f64::MIN, f64::max))
            .collect();
        let mut max: Vec<f64> = (0..elements).map(|i| f(me, i)).collect();
        tc.allreduce(
            &mut max,
            |acc, other| {
                for (a, b) in acc.iter_mut().zip(other) {
                    *a = a.max(*b);
                }
            },
            deadline(t),
        )
        .await
        .map_err(common::to_fabric)?;
        if max
            .iter()
            .map(|x| x.to_bits())
            .ne(max_ref.iter().map(|x| x.to_bits()))
        {
            return Err(fail(case, "allreduce maxima differ"));
        }
    }
    Ok(())
}

fn config(chunk: usize) -> PipelineConfig {
    PipelineConfig { chunk, slots: 3 }
}

fn shm_one_rank_a_node(t: &catena_fabric::shm::ShmTransport) -> catena_fabric::Result<()> {
    let torus = Torus::new(&[2, 2, 2]).unwrap();
    let map = RankMap::row_major(&torus, t.size(), 1).unwrap();
    catena_fabric::block_on(t, every_case(t, &torus, &map, 100_003, config(4096)))
}

fn shm_two_ranks_a_node(t: &catena_fabric::shm::ShmTransport) -> catena_fabric::Result<()> {
    let torus = Torus::new(&[2, 2, 1]).unwrap();
    let map = RankMap::row_major(&torus, t.size(), 2).unwrap();
    catena_fabric::block_on(t, every_case(t, &torus, &map, 40_000, config(1000)))
}

#[test]
fn shm_torus_trees_2x2x2() {
    catena_testkit::run_case_on::<catena_fabric::shm::ShmTransport>(
        &catena_testkit::test_name(module_path!(), "shm_torus_trees_2x2x2"),
        8,
        catena_testkit::Starter::Launcher,
        &[],
        shm_one_rank_a_node,
    );
}

#[test]
fn shm_torus_trees_two_ranks_a_node() {
    catena_testkit::run_case_on::<catena_fabric::shm::ShmTransport>(
        &catena_testkit::test_name(module_path!(), "shm_torus_trees_two_ranks_a_node"),
        8,
        catena_testkit::Starter::Launcher,
        &[],
        shm_two_ranks_a_node,
    );
}

/// 512 virtual ranks on the 8x8x8 torus model, routes pinned to the
/// schedules' own (the cases are derived the same way inside).
#[test]
fn sim_torus_trees_8x8x8() {
    let torus = Torus::new(&[8, 8, 8]).unwrap();
    let map = RankMap::row_major(&torus, 512, 1).unwrap();
    let mut model = Routed::new(torus.clone(), 1);
    for case in cases(&torus, &map, &mut Rng::new(SEED, 0)) {
        model.pin_schedule(&case.schedule).unwrap();
    }
    let sim = Sim::new(torus.nodes(), model);
    let (results, report) = sim
        .run(async |t: &SimRank<'_>| every_case(t, &torus, &map, 6000, config(1024)).await)
        .expect("every rank finishes");
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank} of 512 on the simulator: {e}"));
    }
    assert!(report.messages > 0);
}

/// Plans that cannot be served are refused by name, before any traffic.
#[test]
fn bad_plans_are_refused() {
    let torus = Torus::new(&[2, 2, 2]).unwrap();
    let map = RankMap::row_major(&torus, 8, 1).unwrap();
    let all: Vec<Rank> = (0..8).collect();
    let s = rectangle(&torus, &Members::all(&torus), 0).unwrap();
    let refused = |schedule: &Schedule, ranks: &[Rank], root: Rank, me: Rank| {
        matches!(
            torus_plan(schedule, &map, ranks, root, me),
            Err(catena_algorithms::Error::InvalidArgument(_))
        )
    };
    assert!(torus_plan(&s, &map, &all, 0, 5).is_ok());
    assert!(refused(&s, &all, 3, 5), "root rank off the schedule's root");
    assert!(refused(&s, &all[1..], 1, 0), "me outside the ranks");
    assert!(refused(&s, &[0, 9], 0, 0), "a rank outside the map");
    let mut none = s.clone();
    none.colours.clear();
    assert!(refused(&none, &all, 0, 5), "no colours");
    // Node 7 runs a member the schedule does not reach.
    let z0 = planes(&torus, &Members::new(&torus, [0, 2, 4, 6]).unwrap(), 0).unwrap();
    assert!(torus_plan(&z0, &map, &[0, 2, 4, 6, 7], 0, 6).is_ok());
    assert!(refused(&z0, &[0, 2, 4, 6, 7], 0, 7));
}
