//! Alltoall_specific against a sequential reference (every process
//! regenerates every source's elements, routes them and keeps what is aimed
//! at it): every variant, on random and very unequal loads (including
//! none), everything to one target, drops, duplicates, modified copies;
//! stable order checked exactly, unstable delivery as a multiset; receive
//! capacity exactly enough and one short (`ReceiveOverflow` on every
//! process, the receive buffer untouched, the plan usable after); a target
//! out of range and a panicking route function (the same error on every
//! process, before the deadline); a split's communicator; plans reused
//! across calls; neighbourhood plans; the in-place form in one round and
//! in many; the visiting form; and runs offered to host peers, copied by
//! them or refused.

use crate::common;

use std::time::Duration;

use bytemuck::{Pod, Zeroable};
use catena_algorithms::prelude::*;
use catena_sim::{LogGp, Sim, SimRank};
use common::Rng;

/// An element that says where it came from, so order can be checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Pod, Zeroable)]
#[repr(C)]
struct Item {
    source: u32,
    position: u32,
    /// A value the route function reads its decision from.
    draw: u32,
    /// 0 for an element as sent, else the target a modified copy was made for.
    copy_for: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Load {
    /// Random counts 0..300, rank 1 holding ten times more, rank 2 none;
    /// each element to one random target, dropped, duplicated (2 or 3
    /// targets, maybe one twice) or sent as modified copies.
    Mixed,
    /// Every element of every process to rank `size / 2`.
    OneTarget,
    /// Each element to its source's left or right neighbour or itself.
    Neighbours,
}

/// The neighbourhood of `Load::Neighbours`: left, self, right (both ways).
fn ring(me: u32, size: u32) -> AlltoallPeers {
    let around = vec![(me + size - 1) % size, me, (me + 1) % size];
    AlltoallPeers {
        sources: around.clone(),
        targets: around,
    }
}

fn ring_target(e: &Item, size: u32) -> u32 {
    (e.source + size - 1 + e.draw % 3) % size
}

fn count(load: Load, seed: u64, rank: u32) -> usize {
    let base = Rng::new(seed, rank).below(300) as usize;
    match (load, rank) {
        (Load::Mixed, 1) => base * 10,
        (Load::Mixed, 2) => 0,
        _ => base,
    }
}

fn elements(load: Load, seed: u64, rank: u32) -> Vec<Item> {
    let mut rng = Rng::new(seed ^ 0xabcd, rank);
    (0..count(load, seed, rank))
        .map(|position| Item {
            source: rank,
            position: position as u32,
            draw: rng.next() as u32,
            copy_for: 0,
        })
        .collect()
}

/// The route every process runs: a pure function of the element.
fn route(load: Load, size: u32, e: &Item, to: &mut Emit<'_, Item>) {
    let d = e.draw;
    match load {
        Load::OneTarget => to.to(size / 2),
        Load::Neighbours => to.to(ring_target(e, size)),
        Load::Mixed => match d % 8 {
            0 => {}
            1 => {
                to.to((d >> 3) % size);
                to.to((d >> 13) % size);
                to.to((d >> 3) % size);
            }
            2 => {
                let target = (d >> 3) % size;
                to.modified(
                    target,
                    Item {
                        copy_for: target + 1,
                        ..*e
                    },
                );
                to.to((d >> 17) % size);
            }
            _ => to.to((d >> 3) % size),
        },
    }
}

/// What `me` must receive, in stable order (sources by rank, each in send
/// order, an element's copies in emit order).
fn reference(load: Load, seed: u64, size: u32, me: u32) -> Vec<Item> {
    let mut expected = Vec::new();
    for source in 0..size {
        for e in elements(load, seed, source) {
            let d = e.draw;
            let mut targets: Vec<(u32, Item)> = Vec::new();
            match load {
                Load::OneTarget => targets.push((size / 2, e)),
                Load::Neighbours => targets.push((ring_target(&e, size), e)),
                Load::Mixed => match d % 8 {
                    0 => {}
                    1 => targets.extend([
                        ((d >> 3) % size, e),
                        ((d >> 13) % size, e),
                        ((d >> 3) % size, e),
                    ]),
                    2 => {
                        let target = (d >> 3) % size;
                        let copy = Item {
                            copy_for: target + 1,
                            ..e
                        };
                        targets.extend([(target, copy), ((d >> 17) % size, e)]);
                    }
                    _ => targets.push(((d >> 3) % size, e)),
                },
            }
            expected.extend(
                targets
                    .into_iter()
                    .filter(|(t, _)| *t == me)
                    .map(|(_, e)| e),
            );
        }
    }
    expected
}

fn is_stable(variant: AlltoallVariant, stable: bool) -> bool {
    stable
        || matches!(
            variant,
            AlltoallVariant::Alltoallv | AlltoallVariant::PutStable | AlltoallVariant::Sort
        )
}

/// One exchange of `load` on `comm` with `variant`, checked; twice on one
/// plan, so both parities of its window words are used.
async fn check_exchange<T: Transport>(
    comm: &Comm<'_, T>,
    load: Load,
    seed: u64,
    options: AlltoallOptions,
) -> Result<(), String> {
    let (size, me) = (comm.size(), comm.rank());
    let send = elements(load, seed, me);
    let expected = reference(load, seed, size, me);
    let sentinel = Item {
        source: u32::MAX,
        ..Item::zeroed()
    };
    let where_ = |e: &dyn std::fmt::Display| format!("{options:?} {load:?} rank {me}/{size}: {e}");
    let plan = comm
        .alltoall_plan::<Item>(expected.len(), options)
        .map_err(|e| where_(&e))?;
    for round in 0..2 {
        let mut recv = vec![sentinel; expected.len() + 3];
        let got = plan
            .iexchange(&send, &mut recv, |e, to| route(load, size, e, to))
            .await
            .map_err(|e| where_(&format!("round {round}: {e}")))?;
        let mut received = recv[..got].to_vec();
        if recv[got..].iter().any(|e| *e != sentinel) {
            return Err(where_(&"wrote past the count it returned"));
        }
        let mut wanted = expected.clone();
        if !is_stable(options.variant, options.stable) {
            received.sort();
            wanted.sort();
        }
        if received != wanted {
            return Err(where_(&format!(
                "round {round}: got {} elements, {} expected; first difference at {:?}",
                received.len(),
                wanted.len(),
                received.iter().zip(&wanted).position(|(a, b)| a != b)
            )));
        }
    }
    Ok(())
}

/// Capacity one short on rank `short`: `ReceiveOverflow` naming it on every
/// process, with each one's own need, and `recv` untouched; then the same
/// plan delivers when given room (a new plan, since capacity is a plan's).
async fn check_overflow<T: Transport>(
    comm: &Comm<'_, T>,
    seed: u64,
    variant: AlltoallVariant,
) -> Result<(), String> {
    let (size, me, load) = (comm.size(), comm.rank(), Load::OneTarget);
    let short = size / 2;
    let send = elements(load, seed, me);
    let need = reference(load, seed, size, me).len();
    if reference(load, seed, size, short).is_empty() {
        return Ok(()); // nothing to overflow with (every count drew 0)
    }
    let room = if me == short { need - 1 } else { need };
    let plan = comm
        .alltoall_plan::<Item>(room, AlltoallOptions::new(variant))
        .map_err(|e| e.to_string())?;
    let mut recv = vec![Item::zeroed(); room];
    let result = plan
        .iexchange(&send, &mut recv, |e, to| route(load, size, e, to))
        .await;
    match result {
        Err(Error::ReceiveOverflow {
            required,
            capacity,
            process,
        }) if required == need as u64 && capacity == room as u64 && process == short => {}
        other => return Err(format!("{variant:?} rank {me}: {other:?}")),
    }
    if recv.iter().any(|e| *e != Item::zeroed()) {
        return Err(format!(
            "{variant:?} rank {me}: an overflowing call delivered"
        ));
    }
    // The plan stays sound: the next call (other parity) with no elements.
    let got = plan
        .iexchange(&[], &mut recv, |e, to| route(load, size, e, to))
        .await;
    match got {
        Ok(0) => Ok(()),
        other => Err(format!("{variant:?} rank {me}: after overflow {other:?}")),
    }
}

/// A bad target on rank `bad`, or a panic there: the same error everywhere.
async fn check_faults<T: Transport>(
    comm: &Comm<'_, T>,
    variant: AlltoallVariant,
) -> Result<(), String> {
    let (size, me) = (comm.size(), comm.rank());
    let bad = size - 1;
    let send: Vec<Item> = (0..5)
        .map(|i| Item {
            draw: me * 7 + i,
            ..Item::zeroed()
        })
        .collect();
    let mut recv = vec![Item::zeroed(); 5 * size as usize];
    let options = AlltoallOptions::new(variant);
    let out_of_range = comm
        .ialltoall_specific(&send, &mut recv, options, |e, to| {
            to.to(if me == bad { size + 7 } else { e.draw % size })
        })
        .await;
    match out_of_range {
        Err(Error::TargetOutOfRange {
            target,
            size: s,
            process,
        }) if target == size + 7 && s == size && process == bad => {}
        other => return Err(format!("{variant:?} rank {me}: bad target gave {other:?}")),
    }
    let panicked = comm
        .ialltoall_specific(&send, &mut recv, options, |e, to| {
            assert!(me != bad, "a route function that fails");
            to.to(e.draw % size)
        })
        .await;
    match panicked {
        Err(Error::UserCode { .. }) => {}
        other => return Err(format!("{variant:?} rank {me}: a panic gave {other:?}")),
    }
    // A receive buffer shorter than the plan's capacity on one process.
    let plan = comm
        .alltoall_plan::<Item>(recv.len(), options)
        .map_err(|e| e.to_string())?;
    let short = if me == bad {
        recv.len() - 1
    } else {
        recv.len()
    };
    let result = plan
        .iexchange(&send, &mut recv[..short], |e, to| to.to(e.draw % size))
        .await;
    match result {
        Err(Error::InvalidArgument(why)) if me == bad || why.contains(&format!("rank {bad}")) => {}
        other => {
            return Err(format!(
                "{variant:?} rank {me}: a short buffer gave {other:?}"
            ))
        }
    }
    // Zero-sized elements carry nothing to count by: refused.
    if !matches!(
        comm.alltoall_plan::<()>(4, options),
        Err(Error::InvalidArgument(_))
    ) {
        return Err(format!("{variant:?} rank {me}: a plan of () was made"));
    }
    // Capacities no window can hold are refused where the plan is made
    // (the variants that receive into the window).
    let in_window = matches!(
        variant,
        AlltoallVariant::Put | AlltoallVariant::PutStable | AlltoallVariant::Sort
    );
    match comm.alltoall_plan::<Item>(usize::MAX / 8, options) {
        Err(Error::InvalidArgument(_)) if in_window => Ok(()),
        Ok(_) if !in_window => Ok(()),
        other => Err(format!(
            "{variant:?} rank {me}: a huge plan gave {:?}",
            other.err()
        )),
    }
}

/// Neighbourhood plans on a ring: delivery as the reference says, both
/// orders; an edge listed at one end only is `Mismatch` everywhere; a
/// target outside the list and a target short of room fail the call
/// there and at its neighbours, and no process hangs.
async fn check_neighbours<T: Transport>(comm: &Comm<'_, T>, seed: u64) -> Result<(), String> {
    let (size, me, load) = (comm.size(), comm.rank(), Load::Neighbours);
    let send = elements(load, seed, me);
    let expected = reference(load, seed, size, me);
    for variant in [AlltoallVariant::Put, AlltoallVariant::PutStable] {
        let options = AlltoallOptions::new(variant);
        let plan = comm
            .ialltoall_plan_among::<Item>(expected.len(), options, ring(me, size))
            .await
            .map_err(|e| format!("rank {me}: {e}"))?;
        for round in 0..3 {
            let mut recv = vec![Item::zeroed(); expected.len()];
            let got = plan
                .iexchange(&send, &mut recv, |e, to| route(load, size, e, to))
                .await
                .map_err(|e| format!("{variant:?} rank {me} round {round}: {e}"))?;
            let mut received = recv[..got].to_vec();
            let mut wanted = expected.clone();
            if variant == AlltoallVariant::Put {
                received.sort();
                wanted.sort();
            }
            if received != wanted {
                return Err(format!(
                    "{variant:?} rank {me} round {round}: wrong delivery"
                ));
            }
        }
    }
    // Rank 0 lists a target that does not list it.
    let mut lopsided = ring(me, size);
    if me == 0 && size > 3 {
        lopsided.targets.push(2);
    }
    let made = comm
        .ialltoall_plan_among::<Item>(8, AlltoallOptions::default(), lopsided)
        .await;
    match made {
        Err(Error::Mismatch { .. }) if size > 3 => {}
        Ok(_) if size <= 3 => {}
        other => return Err(format!("rank {me}: a lopsided list gave {:?}", other.err())),
    }
    // Rank `size - 1` routes outside its list; rank 0 is one short of room.
    let plan = comm
        .ialltoall_plan_among::<Item>(
            expected.len().saturating_sub((me == 0) as usize),
            AlltoallOptions::default(),
            ring(me, size),
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut recv = vec![Item::zeroed(); expected.len()];
    let stray = size - 1;
    let result = plan
        .iexchange(&send, &mut recv, |e, to| {
            if me == stray && size > 3 {
                to.to((me + 2) % size);
            } else {
                route(load, size, e, to);
            }
        })
        .await;
    // The stray process and rank 0 (short of room, or the stray's target)
    // must fail; a process that succeeds must have received exactly its
    // reference (none of its sources failed).
    let stray_fails = size > 3;
    let must_fail =
        (me == stray && stray_fails) || (me == 0 && (stray_fails || !expected.is_empty()));
    match (&result, me) {
        (Err(Error::InvalidArgument(_)), m) if m == stray && stray_fails => {}
        (Err(Error::ReceiveOverflow { process: 0, .. }), 0) => {}
        (Err(Error::Neighbourhood(_)), m) if m != stray || !stray_fails => {}
        (Ok(got), _) if !must_fail => {
            let mut received = recv[..*got].to_vec();
            let mut wanted = expected.clone();
            received.sort();
            wanted.sort();
            if received != wanted {
                return Err(format!(
                    "rank {me}: a neighbourhood call that succeeded delivered wrongly"
                ));
            }
        }
        _ => return Err(format!("rank {me}: a faulty neighbourhood gave {result:?}")),
    }
    if result.is_err() && recv.iter().any(|e| *e != Item::zeroed()) {
        return Err(format!("rank {me}: a failed neighbourhood call delivered"));
    }
    Ok(())
}

/// One visiting exchange of `load` on `plan`: what the visitor saw, in
/// pieces of at most 16 KiB, sorted; the count the call yielded must match.
async fn visited<T: Transport>(
    plan: &AlltoallPlan<'_, '_, T, Item>,
    load: Load,
    send: &[Item],
    size: u32,
) -> Result<Vec<Item>, Error> {
    let (mut seen, mut largest) = (Vec::new(), 0);
    let got = plan
        .iexchange_visit(
            send,
            |e, to| route(load, size, e, to),
            |piece| {
                largest = largest.max(piece.len());
                seen.extend_from_slice(piece);
            },
        )
        .await?;
    assert!(
        largest * size_of::<Item>() <= 16 << 10,
        "a piece of {largest}"
    );
    assert_eq!(got, seen.len(), "the count against what was visited");
    seen.sort();
    Ok(seen)
}

/// The visiting form on `Put` plans, the full form and a neighbourhood:
/// the visitor sees the reference multiset, three calls on one plan (both
/// parities of its window words) and an ordinary call after them; a stable
/// plan refuses it on every process and stays usable; a visitor that
/// panics on rank 0 fails rank 0 alone, and the plan goes on.
async fn check_visit<T: Transport>(comm: &Comm<'_, T>, seed: u64) -> Result<(), String> {
    let (size, me) = (comm.size(), comm.rank());
    let put = AlltoallOptions::new(AlltoallVariant::Put);
    let at =
        |what: &str, e: &dyn std::fmt::Display| format!("visit, rank {me}/{size}, {what}: {e}");
    for load in [Load::Mixed, Load::Neighbours] {
        let send = elements(load, seed, me);
        let mut expected = reference(load, seed, size, me);
        let plan = match load {
            Load::Neighbours => {
                comm.ialltoall_plan_among(expected.len(), put, ring(me, size))
                    .await
            }
            _ => comm.alltoall_plan::<Item>(expected.len(), put),
        }
        .map_err(|e| at("plan", &e))?;
        expected.sort();
        for round in 0..3 {
            let seen = visited(&plan, load, &send, size)
                .await
                .map_err(|e| at(&format!("{load:?} round {round}"), &e))?;
            if seen != expected {
                return Err(at(
                    &format!("{load:?} round {round}"),
                    &format!("saw {} elements, {} expected", seen.len(), expected.len()),
                ));
            }
        }
        let mut recv = vec![Item::zeroed(); expected.len()];
        let got = plan
            .iexchange(&send, &mut recv, |e, to| route(load, size, e, to))
            .await
            .map_err(|e| at("an ordinary call after", &e))?;
        recv[..got].sort();
        if recv[..got] != expected[..] {
            return Err(at("an ordinary call after", &"wrong delivery"));
        }
    }
    let load = Load::Mixed;
    let send = elements(load, seed, me);
    let mut expected = reference(load, seed, size, me);
    expected.sort();
    let stable = comm
        .alltoall_plan::<Item>(expected.len(), put.stable())
        .map_err(|e| at("plan", &e))?;
    match visited(&stable, load, &send, size).await {
        Err(Error::InvalidArgument(_)) => {}
        other => return Err(at("a stable plan", &format!("{other:?}"))),
    }
    let mut recv = vec![Item::zeroed(); expected.len()];
    stable
        .iexchange(&send, &mut recv, |e, to| route(load, size, e, to))
        .await
        .map_err(|e| at("the stable plan after", &e))?;
    let plan = comm
        .alltoall_plan::<Item>(expected.len(), put)
        .map_err(|e| at("plan", &e))?;
    let panicking = plan
        .iexchange_visit(
            &send,
            |e, to| route(load, size, e, to),
            |_| assert!(me != 0, "a visitor panics on purpose"),
        )
        .await;
    match panicking {
        Err(Error::UserCode { .. }) if me == 0 && !expected.is_empty() => {}
        Ok(n) if (me != 0 || expected.is_empty()) && n == expected.len() => {}
        other => return Err(at("a panicking visitor", &format!("{other:?}"))),
    }
    let seen = visited(&plan, load, &send, size)
        .await
        .map_err(|e| at("after a panicking visitor", &e))?;
    if seen != expected {
        return Err(at("after a panicking visitor", &"wrong delivery"));
    }
    Ok(())
}

/// In place on a Put plan: `data` ends as the reference multiset, with room
/// for one round and with room for a fifth (several rounds), twice per plan
/// and around an ordinary call on the same plan (the window words' parity
/// must stay in step); a bad target fails every process alike.
async fn check_in_place<T: Transport>(comm: &Comm<'_, T>, seed: u64) -> Result<(), String> {
    let (size, me) = (comm.size(), comm.rank());
    let put = AlltoallOptions::new(AlltoallVariant::Put);
    for load in [Load::Mixed, Load::OneTarget] {
        let mut wanted = reference(load, seed, size, me);
        wanted.sort();
        let mine = count(load, seed, me);
        for room in [wanted.len().max(mine) + 1, (wanted.len() + mine) / 5 + 8] {
            let plan = comm
                .alltoall_plan::<Item>(room, put)
                .map_err(|e| e.to_string())?;
            for step in 0..3 {
                let mut data = elements(load, seed, me);
                if step == 1 {
                    // An ordinary call between two in-place ones.
                    let mut recv = vec![Item::zeroed(); room];
                    let got = plan
                        .iexchange(&[], &mut recv, |e, to| route(load, size, e, to))
                        .await;
                    if got.as_ref().ok() != Some(&0) {
                        return Err(format!("rank {me}: an empty call gave {got:?}"));
                    }
                }
                plan.iexchange_in_place(&mut data, |e, to| route(load, size, e, to))
                    .await
                    .map_err(|e| format!("{load:?} room {room} rank {me}: {e}"))?;
                data.sort();
                if data != wanted {
                    return Err(format!(
                        "{load:?} room {room} rank {me} step {step}: {} elements, {} expected",
                        data.len(),
                        wanted.len()
                    ));
                }
            }
        }
    }
    if size > 1 {
        let plan = comm
            .alltoall_plan::<Item>(64, put)
            .map_err(|e| e.to_string())?;
        let mut data = vec![Item::zeroed(); 5];
        let bad = plan
            .iexchange_in_place(&mut data, |_, to| to.to(if me == 0 { size } else { 0 }))
            .await;
        match bad {
            Err(Error::TargetOutOfRange { process: 0, .. }) => {}
            other => {
                return Err(format!(
                    "rank {me}: in place with a bad target gave {other:?}"
                ))
            }
        }
    }
    Ok(())
}

async fn every_case<T: Transport>(t: &T, seed: u64) -> Result<(), String> {
    let world = Comm::world(t).with_timeout(Duration::from_secs(100));
    for variant in AlltoallVariant::ALL {
        for load in [Load::Mixed, Load::OneTarget] {
            check_exchange(&world, load, seed, AlltoallOptions::new(variant)).await?;
        }
        if variant == AlltoallVariant::Sendrecv {
            let stable = AlltoallOptions::new(variant).stable();
            check_exchange(&world, Load::Mixed, seed, stable).await?;
        }
        check_overflow(&world, seed, variant).await?;
        if world.size() > 1 {
            check_faults(&world, variant).await?;
        }
    }
    check_neighbours(&world, seed).await?;
    check_in_place(&world, seed).await?;
    check_visit(&world, seed).await?;
    // On a split's communicator (its map loaded by the first lookup).
    let half = world
        .isplit(Some(world.rank() % 2), u32::MAX - world.rank())
        .await
        .map_err(|e| e.to_string())?
        .expect("every rank has a color");
    for variant in [AlltoallVariant::Put, AlltoallVariant::Alltoallv] {
        check_exchange(&half, Load::Mixed, seed + 1, AlltoallOptions::new(variant)).await?;
    }
    world.ibarrier().await.map_err(|e| e.to_string())
}

#[test]
fn sim_alltoall_1_to_33() {
    for n in [1, 2, 3, 5, 8, 13, 33] {
        for seed in 0..2 {
            let results = Sim::new(n, LogGp::default())
                .run(async |t: &SimRank<'_>| every_case(t, seed).await)
                .expect("every rank finishes")
                .0;
            for r in results {
                r.unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"));
            }
        }
    }
}

/// Every case with runs offered to host peers and copied out by them (from
/// one element on), and with one rank whose copies the system refuses, so
/// that its sources put what it could not copy.
#[test]
fn sim_alltoall_offered_runs_copied_and_refused() {
    let tuning = catena_fabric::config::HostTuning {
        single_copy_min: std::mem::size_of::<Item>(),
        ..Default::default()
    };
    for n in [2, 5, 8] {
        for refused in [vec![], vec![1]] {
            let results = Sim::new(n, LogGp::default())
                .with_ranks_per_host(4)
                .with_host_tuning(tuning)
                .with_single_copy_refused(refused.clone())
                .run(async |t: &SimRank<'_>| every_case(t, 3).await)
                .expect("every rank finishes")
                .0;
            let errors: Vec<String> = results.into_iter().filter_map(Result::err).collect();
            assert!(
                errors.is_empty(),
                "{n} ranks, refused {refused:?}: {errors:#?}"
            );
        }
    }
}

/// A target whose single copies fail (as one from an offer withdrawn under
/// it does) fails its call with that error, while the sources that offered
/// to it learn it takes nothing and finish theirs, and its own targets
/// copy what it offered before it leaves: nobody waits for a deadline.
#[test]
fn sim_a_target_whose_copies_fail_lets_its_sources_finish() {
    let tuning = catena_fabric::config::HostTuning {
        single_copy_min: std::mem::size_of::<Item>(),
        ..Default::default()
    };
    let (n, failing, per_target) = (5u32, 2u32, 4u32);
    let results = Sim::new(n, LogGp::default())
        .with_ranks_per_host(n)
        .with_host_tuning(tuning)
        .with_single_copy_failing([failing])
        .run(async |t: &SimRank<'_>| {
            let world = Comm::world(t).with_timeout(Duration::from_secs(100));
            let me = world.rank();
            let send: Vec<Item> = (0..n * per_target)
                .map(|i| Item {
                    source: me,
                    position: i,
                    draw: i % n,
                    ..Item::zeroed()
                })
                .collect();
            let mut recv = vec![Item::zeroed(); send.len()];
            let options = AlltoallOptions::new(AlltoallVariant::Put);
            let got = world
                .ialltoall_specific(&send, &mut recv, options, |e, to| to.to(e.draw))
                .await;
            let mine = |e: &Item| e.draw == me;
            let whole = got
                .as_ref()
                .is_ok_and(|&got| got == (n * per_target) as usize && recv[..got].iter().all(mine));
            (got.map_err(|e| e.to_string()), whole, t.now())
        })
        .expect("every rank finishes")
        .0;
    for (rank, (got, whole, at)) in results.into_iter().enumerate() {
        assert!(
            at < catena_fabric::Time::from_duration(Duration::from_secs(1)),
            "rank {rank} finished at {at:?}: {got:?}"
        );
        if rank as u32 == failing {
            let failed = got.expect_err("the failing rank's call fails");
            assert!(failed.contains("by the simulation's choice"), "{failed}");
        } else {
            assert!(whole, "rank {rank}: {got:?}");
        }
    }
}

/// Rank 0 calls the ordinary exchange and offers its runs to its host
/// peers, which call the visiting one: each of them fails with `Mismatch`
/// (never a timeout), and rank 0, its offers declined, finishes too.
#[test]
fn sim_a_visit_among_offers_fails_with_mismatch() {
    let tuning = catena_fabric::config::HostTuning {
        single_copy_min: std::mem::size_of::<Item>(),
        ..Default::default()
    };
    let n = 4u32;
    let results = Sim::new(n, LogGp::default())
        .with_ranks_per_host(n)
        .with_host_tuning(tuning)
        .run(async |t: &SimRank<'_>| {
            let world = Comm::world(t).with_timeout(Duration::from_secs(100));
            let me = world.rank();
            let send: Vec<Item> = (0..4 * n)
                .map(|i| Item {
                    source: me,
                    draw: i % n,
                    ..Item::zeroed()
                })
                .collect();
            let options = AlltoallOptions::new(AlltoallVariant::Put);
            let plan = world.alltoall_plan::<Item>(send.len(), options).unwrap();
            let mut recv = vec![Item::zeroed(); send.len()];
            let got = match me {
                0 => {
                    plan.iexchange(&send, &mut recv, |e, to| to.to(e.draw))
                        .await
                }
                _ => {
                    plan.iexchange_visit(&send, |e, to| to.to(e.draw), |_| {})
                        .await
                }
            };
            (got, t.now())
        })
        .expect("every rank finishes")
        .0;
    for (rank, (got, at)) in results.into_iter().enumerate() {
        assert!(
            at < catena_fabric::Time::from_duration(Duration::from_secs(1)),
            "rank {rank} finished at {at:?}: {got:?}"
        );
        match got {
            Err(Error::Mismatch { what }) if rank > 0 => assert!(what.contains("visiting")),
            // Rank 0 finished (in time, above), whatever its offers met.
            other => assert!(rank == 0, "rank {rank}: {other:?}"),
        }
    }
}

fn alltoall<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_case(t, 11)).map_err(catena_fabric::Error::Protocol)
}

common::provider_cases! {
    shm_alltoall_1: catena_fabric::shm::ShmTransport, 1, &[], alltoall;
    shm_alltoall_4: catena_fabric::shm::ShmTransport, 4, &[], alltoall;
    shm_alltoall_9: catena_fabric::shm::ShmTransport, 9, &[], alltoall;
    shm_alltoall_33: catena_fabric::shm::ShmTransport, 33, &[], alltoall;
    shm_alltoall_offered_4: catena_fabric::shm::ShmTransport, 4, &[("CATENA_HOST_SINGLE_COPY_MIN", "16")], alltoall;
}

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_shm_alltoall_5: catena_fabric::ofi::OfiTransport, 5, &[("CATENA_OFI_PROVIDER", "shm")], alltoall;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_shm_alltoall_5: catena_fabric::ucx::UcxTransport, 5, &[("UCX_TLS", "posix,cma,self")], alltoall;
}
