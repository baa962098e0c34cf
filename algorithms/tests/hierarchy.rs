//! The host structure of a communicator against references: the split by
//! host holds exactly the world ranks that report the same host, in world
//! order; one leader per host; the two-level allreduce and broadcast equal
//! the flat ones (a non-commutative string fold shows the order, a sum the
//! value). On simulated hosts of several sizes, and on real processes
//! across fake hosts on every network provider.

use crate::common;

use catena_algorithms::prelude::*;
use catena_fabric::Rank;
use catena_sim::{LogGp, Sim, SimRank};

fn fail(what: &'static str, rank: Rank) -> impl Fn(Error) -> catena_fabric::Error {
    move |e| catena_fabric::Error::Bootstrap(format!("rank {rank}: {what}: {e}"))
}

/// Checks the hierarchy of the world on `t`; `hosts` are every world
/// rank's host, as every rank learns it by an allgather.
async fn check<T: Transport>(t: &T) -> catena_fabric::Result<()> {
    let rank = t.rank();
    let world = Comm::world(t).with_timeout(common::TIMEOUT);
    let hosts: Vec<u64> = world
        .iallgather(&t.host())
        .await
        .map_err(fail("allgather", rank))?;
    let h = world.ihierarchy().await.map_err(fail("hierarchy", rank))?;
    let mates: Vec<Rank> = (0..t.size())
        .filter(|&w| hosts[w as usize] == t.host())
        .collect();
    let local_world: Vec<Rank> = h
        .local
        .iallgather(&rank)
        .await
        .map_err(fail("local", rank))?;
    assert_eq!(local_world, mates, "rank {rank}: the ranks of my host");
    let mut leaders: Vec<Rank> = Vec::new();
    for (w, host) in hosts.iter().enumerate() {
        if !hosts[..w].contains(host) {
            leaders.push(w as Rank);
        }
    }
    assert_eq!(h.leads(), leaders.contains(&rank), "rank {rank} leads");
    if let Some(l) = &h.leaders {
        let got: Vec<Rank> = l.iallgather(&rank).await.map_err(fail("leaders", rank))?;
        assert_eq!(got, leaders, "rank {rank}: the leaders");
    }
    let sum = h
        .iallreduce(u64::from(rank) * 3 + 1, |a, b| a + b)
        .await
        .map_err(fail("two-level allreduce", rank))?;
    let n = u64::from(t.size());
    assert_eq!(sum, 3 * n * (n - 1) / 2 + n, "rank {rank}: the sum");
    let max = h
        .iallreduce(rank, |a, b| *a.max(b))
        .await
        .map_err(fail("two-level max", rank))?;
    assert_eq!(max, t.size() - 1);
    let value = (rank == 0).then(|| format!("from 0 of {}", t.size()));
    let got = h
        .ibcast(value)
        .await
        .map_err(fail("two-level bcast", rank))?;
    assert_eq!(got, format!("from 0 of {}", t.size()), "rank {rank}: bcast");
    // Still usable beside the world: the flat allreduce agrees.
    let flat = world
        .iallreduce(u64::from(rank) * 3 + 1, |a, b| a + b)
        .await
        .map_err(fail("flat allreduce", rank))?;
    assert_eq!(flat, sum);
    Ok(())
}

fn check_blocking<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, check(t))
}

#[test]
fn sim_hierarchy_matches_the_host_placement() {
    for (n, per_host) in [(1, 1), (5, 1), (7, 3), (12, 4), (33, 8), (16, 16)] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(per_host);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| check(t).await)
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("rank {rank} of {n}, {per_host} per host: {e}"));
        }
    }
}

common::provider_cases! {
    shm_hierarchy_4: catena_fabric::shm::ShmTransport, 4, &[], check_blocking;
}

catena_testkit::across_hosts_tests!(hierarchy_across_hosts: check_blocking);
