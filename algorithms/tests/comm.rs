//! Communicators against sequential references: every collective, send and
//! receive by group rank, and rank translation, on communicators from
//! world, dup, split, create_group (both algorithms) and a split of a
//! created group, on 1..33 simulated ranks and on real processes; the map
//! of each agrees with its chain's order on every member.

use crate::common;

use catena_algorithms::prelude::*;
use std::time::Duration;

use catena_fabric::Rank;
use catena_sim::{LogGp, Sim, SimRank};
use common::Rng;

type Outcome = std::result::Result<(), String>;

fn fail(what: &'static str, t: &impl Rma) -> impl Fn(Error) -> String {
    let rank = t.rank();
    move |e| format!("rank {rank}: {what}: {e}")
}

fn concat(a: &String, b: &String) -> String {
    format!("{a}{b}")
}

/// Checks `comm` against `members`, its world ranks in group order.
async fn check<T: Transport>(t: &T, comm: &Comm<'_, T>, members: &[Rank], seed: u64) -> Outcome {
    let e = fail("a collective", t);
    let (rank, size) = (comm.rank() as usize, comm.size() as usize);
    let label = |w: &Rank| format!("{w},");
    if size != members.len() || members[rank] != t.rank() {
        return Err(format!(
            "rank {}: rank {rank} of {size}, expected to be at {:?} of {members:?}",
            t.rank(),
            members.iter().position(|&w| w == t.rank())
        ));
    }
    // The map agrees with the chain's order, both ways.
    let map = comm.igroup_map().await.map_err(&e)?;
    let listed: Vec<Rank> = map.iter().collect();
    let outsider = (0..t.size()).find(|w| !members.contains(w));
    let outsider_rank = match outsider {
        Some(w) => comm.group_rank_of(w).map_err(&e)?,
        None => None,
    };
    let mine = comm.group_rank_of(t.rank()).map_err(&e)?;
    if listed != members || outsider_rank.is_some() || mine != Some(rank as u32) {
        return Err(format!("rank {}: map {listed:?} for {members:?}", t.rank()));
    }
    let root = (seed % size as u64) as u32;
    let all: String = members.iter().map(label).collect();
    let prefix: String = members[..=rank].iter().map(label).collect();
    let me = label(&t.rank());
    let sum = comm.iallreduce(me.clone(), concat).await.map_err(&e)?;
    let scanned = comm.iscan(me.clone(), concat).await.map_err(&e)?;
    let exscanned = comm.iexscan(me.clone(), concat).await.map_err(&e)?;
    let both = comm
        .idouble_scan(me.clone(), me.clone(), concat, concat)
        .await
        .map_err(&e)?;
    let reduced = comm.ireduce(root, me.clone(), concat).await.map_err(&e)?;
    let value = (rank as u32 == root).then(|| seed.to_string());
    let bcast: String = comm.ibcast(root, value).await.map_err(&e)?;
    let gathered = comm.igather(root, &t.rank()).await.map_err(&e)?;
    let values = (rank as u32 == root).then(|| members.iter().map(|w| w * 7).collect());
    let scattered: Rank = comm.iscatter(root, values).await.map_err(&e)?;
    let everyone: Vec<Rank> = comm.iallgather(&t.rank()).await.map_err(&e)?;
    comm.ibarrier().await.map_err(&e)?;
    let is_root = rank as u32 == root;
    let suffix: String = members[rank..].iter().map(label).collect();
    let wrong = [
        (sum != all, "allreduce"),
        (scanned != prefix, "scan"),
        (
            exscanned.unwrap_or_default() != prefix[..prefix.len() - me.len()],
            "exscan",
        ),
        (both.inclusive_rl != suffix, "double scan"),
        (reduced != is_root.then(|| all.clone()), "reduce"),
        (bcast != seed.to_string(), "bcast"),
        (gathered != is_root.then(|| members.to_vec()), "gather"),
        (scattered != t.rank() * 7, "scatter"),
        (everyone != members, "allgather"),
    ];
    if let Some((_, what)) = wrong.iter().find(|(bad, _)| *bad) {
        return Err(format!("rank {}: {what} on {members:?}", t.rank()));
    }
    // A ring by group rank: each sends to the next, receives from the last.
    let (next, last) = ((rank + 1) % size, (rank + size - 1) % size);
    comm.isend(next as u32, 9, &(t.rank(), seed))
        .await
        .map_err(&e)?;
    let got: (Rank, u64) = comm.irecv(last as u32, 9).await.map_err(&e)?;
    if got != (members[last], seed) {
        return Err(format!(
            "rank {}: received {got:?} from group rank {last}",
            t.rank()
        ));
    }
    Ok(())
}

/// `translate` both ways between `comm` (world ranks `members` in order)
/// and the world, against the list.
async fn translations<T: Transport>(
    t: &T,
    comm: &Comm<'_, T>,
    world: &Comm<'_, T>,
    members: &[Rank],
) -> Outcome {
    let e = fail("translate", t);
    let ranks: Vec<u32> = (0..comm.size()).collect();
    let to_world = comm.translate(&ranks, world).map_err(&e)?;
    let everyone: Vec<u32> = (0..world.size()).collect();
    let from_world = world.translate(&everyone, comm).map_err(&e)?;
    let expected_from: Vec<Option<u32>> = everyone
        .iter()
        .map(|w| members.iter().position(|m| m == w).map(|g| g as u32))
        .collect();
    let expected_to: Vec<Option<u32>> = members.iter().map(|&w| Some(w)).collect();
    if to_world != expected_to || from_world != expected_from {
        return Err(format!(
            "rank {}: translate gave {to_world:?} and {from_world:?}",
            t.rank()
        ));
    }
    Ok(())
}

/// Colors (a third stay out) and keys from `seed`, the same on every rank.
fn colors_and_keys(n: u32, seed: u64) -> Vec<(Option<u32>, u32)> {
    let mut rng = Rng::new(seed, 1);
    (0..n)
        .map(|_| {
            let color = rng.below(4) as u32;
            ((color < 3).then_some(color), rng.below(5) as u32)
        })
        .collect()
}

/// The sequential split: the members of each rank's group, in order.
fn reference_split(parent: &[Rank], choices: &[(Option<u32>, u32)], me: Rank) -> Option<Vec<Rank>> {
    let at = parent.iter().position(|&w| w == me)?;
    let color = choices[at].0?;
    let mut group: Vec<(u32, usize)> = (0..parent.len())
        .filter(|&p| choices[p].0 == Some(color))
        .map(|p| (choices[p].1, p))
        .collect();
    group.sort_unstable();
    Some(group.into_iter().map(|(_, p)| parent[p]).collect())
}

async fn every_case<T: Transport>(t: &T, seed: u64) -> Outcome {
    let e = fail("making a communicator", t);
    let n = t.size();
    let world_members: Vec<Rank> = (0..n).collect();
    let mut world = Comm::world(t).with_timeout(common::TIMEOUT);
    check(t, &world, &world_members, seed).await?;

    let dup = world.idup().await.map_err(&e)?;
    check(t, &dup, &world_members, seed + 1).await?;

    let choices = colors_and_keys(n, seed);
    let split = world.isplit(choices[t.rank() as usize].0, choices[t.rank() as usize].1);
    let split = split.await.map_err(&e)?;
    let expected = reference_split(&world_members, &choices, t.rank());
    match (&split, &expected) {
        (Some(comm), Some(members)) => {
            check(t, comm, members, seed + 2).await?;
            translations(t, comm, &world, members).await?;
        }
        (None, None) => {}
        _ => {
            return Err(format!(
                "rank {}: split membership {split:?} vs {expected:?}",
                t.rank()
            ))
        }
    }

    // The same split by each algorithm, chosen on the world in use (no dup,
    // no rebuilt communicator); what it makes keeps the choice.
    for algorithm in Algorithm::ALL {
        world.set_algorithm(algorithm);
        let (color, key) = choices[t.rank() as usize];
        let again = world.isplit(color, key).await.map_err(&e)?;
        let members = again.as_ref().map(|c| (c.algorithm(), c.size()));
        let want = expected.as_ref().map(|m| (algorithm, m.len() as u32));
        if members != want {
            return Err(format!(
                "rank {}: split by {algorithm}: {members:?}, want {want:?}",
                t.rank()
            ));
        }
        if let (Some(comm), Some(members)) = (&again, &expected) {
            check(t, comm, members, seed + 6).await?;
        }
    }
    world.set_algorithm(Algorithm::Auto);

    // Created groups: a random subset in random order, by both algorithms
    // (only members call), then a split of the direct one.
    let order = common::random_group(&mut Rng::new(seed, 2), n);
    if order.contains(&t.rank()) {
        for (tag, algorithm) in [
            (1, CreateAlgorithm::Direct),
            (2, CreateAlgorithm::RecursiveMerge),
        ] {
            let map = GroupMap::from_ranks(n, &order, Strategy::Auto).map_err(|e| e.to_string())?;
            let created = dup.icreate_group(map, tag, algorithm).await.map_err(&e)?;
            let created = created.ok_or_else(|| format!("rank {}: not in its group", t.rank()))?;
            check(t, &created, &order, seed + 3).await?;
            if algorithm == CreateAlgorithm::Direct {
                let choices = colors_and_keys(order.len() as u32, seed + 4);
                let at = created.rank() as usize;
                let nested = created
                    .isplit(choices[at].0, choices[at].1)
                    .await
                    .map_err(&e)?;
                let expected = reference_split(&order, &choices, t.rank());
                match (&nested, &expected) {
                    (Some(comm), Some(members)) => check(t, comm, members, seed + 5).await?,
                    (None, None) => {}
                    _ => return Err(format!("rank {}: nested split {nested:?}", t.rank())),
                }
            }
        }
    }
    world.ibarrier().await.map_err(&e)
}

fn on_sim<R>(n: u32, body: impl AsyncFn(&SimRank<'_>) -> R) -> Vec<R> {
    Sim::new(n, LogGp::default())
        .run(body)
        .expect("every rank finishes")
        .0
}

#[test]
fn sim_communicators_1_to_33() {
    for n in [1, 2, 3, 5, 8, 13, 33] {
        for seed in 0..3 {
            let results = on_sim(n, async |t: &SimRank<'_>| every_case(t, seed).await);
            for r in results {
                r.unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"));
            }
        }
    }
}

/// The same cases with every rank on one simulated host: the world and
/// what is split or dup'ed from it run in host memory (dense splits), the
/// created groups on their chains.
#[test]
fn sim_communicators_in_host_memory() {
    for n in [2, 3, 5, 8, 13] {
        for seed in 0..3 {
            let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| every_case(t, seed).await)
                .expect("every rank finishes");
            for r in results {
                r.unwrap_or_else(|e| panic!("{n} ranks on one host, seed {seed}: {e}"));
            }
        }
    }
}

/// The same cases across simulated hosts: the world, its dups, and what
/// is split (dense across hosts where every host holds consecutive ranks,
/// on the chain where they are dealt in turn) or created across them take
/// two levels.
#[test]
fn sim_communicators_across_hosts() {
    for (n, per_host, dealt) in [(4, 2, false), (8, 4, false), (13, 4, false), (33, 8, false)]
        .into_iter()
        .chain([(8, 3, true), (13, 4, true)])
    {
        for seed in 0..3 {
            let sim = Sim::new(n, LogGp::default());
            let sim = match dealt {
                true => sim.with_ranks_dealt_over(per_host),
                false => sim.with_ranks_per_host(per_host),
            };
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| every_case(t, seed).await)
                .expect("every rank finishes");
            for r in results {
                r.unwrap_or_else(|e| {
                    panic!("{n} ranks, {per_host} a host (dealt {dealt}), seed {seed}: {e}")
                });
            }
        }
    }
}

fn communicators<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_case(t, 7)).map_err(catena_fabric::Error::Protocol)
}

common::provider_cases! {
    shm_communicators_1: catena_fabric::shm::ShmTransport, 1, &[], communicators;
    shm_communicators_4: catena_fabric::shm::ShmTransport, 4, &[], communicators;
    shm_communicators_9: catena_fabric::shm::ShmTransport, 9, &[], communicators;
    shm_communicators_33: catena_fabric::shm::ShmTransport, 33, &[], communicators;
}

catena_testkit::across_hosts_tests!(communicators_across_hosts: communicators);

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_shm_communicators_5: catena_fabric::ofi::OfiTransport, 5, &[("CATENA_OFI_PROVIDER", "shm")], communicators;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_shm_communicators_5: catena_fabric::ucx::UcxTransport, 5, &[("UCX_TLS", "posix,cma,self")], communicators;
}

/// A lookup only some members make: the members of a child call
/// `child.translate(.., &parent)` while the parent's map is not loaded.
/// It is refused at once (it used to start the parent's collective load
/// and wait for the parent's other members until the deadline); once
/// every parent member loaded it, the same call answers. Where the parent
/// holds its map from the start (in host memory), it answers at once.
async fn translate_to_a_parent_without_its_map<T: Transport>(t: &T) -> Outcome {
    let e = fail("translate to the parent", t);
    let (rank, n) = (t.rank(), t.size());
    let world = Comm::world(t).with_timeout(Duration::from_secs(5));
    let parent = world.isplit(Some(0u32), n - rank).await.map_err(&e)?;
    let parent = parent.ok_or("no parent")?;
    let held = parent.held_group_map().is_some();
    let child = parent.isplit(Some(rank % 2), rank).await.map_err(&e)?;
    let child = child.ok_or("no child")?;
    let evens = rank % 2 == 0;
    // The evens' rank 0 is world rank 0: the parent's last (reversed keys).
    let want = vec![Some(n - 1)];
    if evens {
        let limit = t.deadline_in(Duration::from_secs(2));
        match child.translate(&[0], &parent) {
            Err(Error::InvalidArgument(why)) if !held && why.contains("not loaded") => {}
            Ok(got) if held && got == want => {}
            other => return Err(format!("rank {rank}: {other:?} (held: {held})")),
        }
        if t.now() > limit {
            return Err(format!("rank {rank}: answered only after its deadline"));
        }
    }
    parent.igroup_map().await.map_err(&e)?;
    child.igroup_map().await.map_err(&e)?;
    if evens {
        let got = child.translate(&[0], &parent).map_err(&e)?;
        if got != want {
            return Err(format!(
                "rank {rank}: child rank 0 is {got:?} in the parent"
            ));
        }
    }
    world.ibarrier().await.map_err(&e)
}

#[test]
fn sim_translate_to_a_parent_without_its_map() {
    for n in [2, 5, 8] {
        for per_host in [1, n] {
            let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(per_host);
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| translate_to_a_parent_without_its_map(t).await)
                .expect("every rank finishes");
            for r in results {
                r.unwrap_or_else(|e| panic!("{n} ranks, {per_host} per host: {e}"));
            }
        }
    }
}

/// Point-to-point on a split-made communicator whose map is not held: a
/// send, a receive and a rank lookup are refused at once, naming the fix
/// (a send used to start the collective map load, and a pair of members
/// exchanging a message waited in it for the others until the deadline).
/// After the named collective load, the same ring of messages runs.
async fn point_to_point_before_the_map_is_loaded<T: Transport>(t: &T) -> Outcome {
    let e = fail("point-to-point on a split", t);
    let rank = t.rank();
    let world = Comm::world(t).with_timeout(Duration::from_secs(5));
    let half = world.isplit(Some(rank % 2), rank).await.map_err(&e)?;
    let half = half.ok_or("no group")?;
    let (me, size) = (half.rank(), half.size());
    let (next, last) = ((me + 1) % size, (me + size - 1) % size);
    if half.held_group_map().is_none() {
        let limit = t.deadline_in(Duration::from_secs(2));
        let refused = |what: &str, got: Result<String>| match got {
            Err(Error::InvalidArgument(why)) if why.contains("not loaded") => Ok(()),
            other => Err(format!("rank {rank}: {what} gave {other:?}")),
        };
        refused(
            "send",
            half.isend(next, 3, &rank).await.map(|()| String::new()),
        )?;
        refused("recv", half.irecv(last, 3).await)?;
        refused(
            "world_rank_of",
            half.world_rank_of(0).map(|w| w.to_string()),
        )?;
        if t.now() > limit {
            return Err(format!("rank {rank}: refused only after its deadline"));
        }
        half.igroup_map().await.map_err(&e)?;
    }
    half.isend(next, 4, &rank).await.map_err(&e)?;
    let got: Rank = half.irecv(last, 4).await.map_err(&e)?;
    // The reference: the half of one parity, in world order by its keys.
    let want = rank % 2 + 2 * last;
    let looked_up = half.world_rank_of(last).map_err(&e)?;
    if got != want || looked_up != want {
        return Err(format!(
            "rank {rank}: got {got} from group rank {last} (world {looked_up}), want {want}"
        ));
    }
    world.ibarrier().await.map_err(&e)
}

#[test]
fn sim_point_to_point_before_the_map_is_loaded() {
    for n in [2, 5, 8] {
        for per_host in [1, n] {
            let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(per_host);
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| point_to_point_before_the_map_is_loaded(t).await)
                .expect("every rank finishes");
            for r in results {
                r.unwrap_or_else(|e| panic!("{n} ranks, {per_host} per host: {e}"));
            }
        }
    }
}
