//! Chains whose links are cyclic or inconsistent (built by hand with
//! `Chain::from_links`): every member's call ends by its deadline with a
//! typed error, never a wrong result or a spin, on the simulator and on shm.

use crate::common;

use std::time::Duration;

use catena_algorithms::chain::{allreduce, bcast, Chain};
use catena_algorithms::Error;
use catena_fabric::{Rank, Rma, Transport};
use catena_sim::{LogGp, Sim, SimRank};

/// A member's view of a hand-built chain: (rank, size, left, right).
type Links = (u32, u32, Option<Rank>, Option<Rank>);

/// Shapes of 4 processes (addressed 0..4) that are not one chain.
fn shapes() -> Vec<(&'static str, [Links; 4])> {
    vec![
        // Everyone claims a middle rank, links close a ring.
        (
            "a ring",
            [
                (1, 3, Some(3), Some(1)),
                (1, 3, Some(0), Some(2)),
                (1, 3, Some(1), Some(3)),
                (1, 3, Some(2), Some(0)),
            ],
        ),
        // Two chains of 2 that claim to be one of 4: the sum would be 2.
        (
            "two halves claiming 4",
            [
                (0, 4, None, Some(1)),
                (3, 4, Some(0), None),
                (0, 4, None, Some(3)),
                (3, 4, Some(2), None),
            ],
        ),
        // Members that disagree on the size.
        (
            "sizes that differ",
            [
                (0, 4, None, Some(1)),
                (1, 4, Some(0), Some(2)),
                (2, 3, Some(1), None),
                (3, 4, Some(2), None),
            ],
        ),
        // One link points past its neighbour.
        (
            "a link that skips",
            [
                (0, 4, None, Some(1)),
                (1, 4, Some(0), Some(3)),
                (2, 4, Some(1), Some(3)),
                (3, 4, Some(2), None),
            ],
        ),
    ]
}

fn chain_of<T: Rma>(t: &T, links: &[Links; 4], context: u64) -> Chain {
    let (rank, size, left, right) = links[t.rank() as usize];
    Chain::from_links(rank, size, t.rank(), left, right, context).expect("locally valid links")
}

/// Whether `e` is one of the errors a broken chain may give: the shape
/// disagreement seen, or the deadline reached waiting for a partner that
/// the broken links never let answer.
fn shape_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Mismatch { .. } | Error::Transport(catena_fabric::Error::Timeout { .. })
    )
}

/// Every shape: allreduce and bcast fail on every member, by the deadline
/// (checked where time is virtual, so a loaded machine cannot fail it).
async fn broken_chains_fail<T: Transport>(t: &T, virtual_time: bool) -> Vec<String> {
    let mut wrong = Vec::new();
    for (i, (name, links)) in shapes().into_iter().enumerate() {
        let chain = chain_of(t, &links, 900 + i as u64);
        let deadline = t.deadline_in(Duration::from_secs(2));
        let got = allreduce(t, &chain, 1u32, |a, b| a.wrapping_add(*b), deadline).await;
        if !got.as_ref().is_err_and(shape_error) {
            wrong.push(format!("{name}: rank {} allreduce gave {got:?}", t.rank()));
        }
        let root_value = (chain.rank() == 0).then_some(7u8);
        let got = bcast(t, &chain, 0, root_value, deadline).await;
        if !got.as_ref().is_err_and(shape_error) {
            wrong.push(format!("{name}: rank {} bcast gave {got:?}", t.rank()));
        }
        // Past the deadline by at most one round's costs.
        let late = t.now().saturating_sub(deadline);
        if virtual_time && late > Duration::from_millis(1) {
            wrong.push(format!("{name}: rank {} ended {late:?} late", t.rank()));
        }
    }
    wrong
}

#[test]
fn sim_broken_chains_fail_on_every_member_by_the_deadline() {
    let sim = Sim::new(4, LogGp::default());
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| broken_chains_fail(t, true).await)
        .expect("every rank finishes");
    let wrong: Vec<String> = results.into_iter().flatten().collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn shm_broken_chains_fail_on_every_member_by_the_deadline() {
    catena_testkit::run_case(
        &catena_testkit::test_name(
            module_path!(),
            "shm_broken_chains_fail_on_every_member_by_the_deadline",
        ),
        4,
        |t| {
            let wrong = catena_fabric::block_on(t, broken_chains_fail(t, false));
            // Meet on a sound chain, so nobody leaves while others still wait.
            let world = Chain::world(t, 990);
            let deadline = common::deadline(t);
            catena_fabric::block_on(t, catena_algorithms::chain::barrier(t, &world, deadline))
                .map_err(common::to_fabric)?;
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(catena_fabric::Error::Protocol(format!("{wrong:#?}")))
            }
        },
    );
}

#[test]
fn links_that_cannot_belong_to_a_chain_are_refused() {
    let me = 5;
    for (left, right) in [(Some(me), Some(6)), (Some(4), Some(me)), (Some(4), Some(4))] {
        let got = Chain::from_links(1, 3, me, left, right, 1);
        assert!(
            matches!(got, Err(Error::InvalidArgument(_))),
            "left {left:?}, right {right:?} gave {got:?}"
        );
    }
}
