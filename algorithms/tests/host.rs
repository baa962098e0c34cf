//! Collectives through the host's shared memory against sequential
//! references: every collective on buffers and on `serde` values, every
//! root, lengths from empty through a mailbox line to many cells, a
//! non-commutative elementwise operation (so rank order shows), calls
//! joined so they run at once, and buffers of the wrong length; on 1..17
//! simulated ranks of one host and on real processes, and on the chain
//! with a rank per simulated host.

use crate::common;

use catena_algorithms::prelude::*;
use catena_sim::{LogGp, Sim, SimRank};
use common::Rng;

type Outcome = std::result::Result<(), String>;
const P: u64 = 1_000_003;

/// The affine map x -> a x + b as (a, b); composing them is associative,
/// not commutative: (f ⊕ g)(x) = g(f(x)).
type Affine = [u64; 2];

fn compose(f: &Affine, g: &Affine) -> Affine {
    [f[0] * g[0] % P, (g[0] * f[1] + g[1]) % P]
}

fn affine(rank: u32, i: usize, seed: u64) -> Affine {
    let mut rng = Rng::new(seed ^ (i as u64) << 20, rank);
    [1 + rng.below(P - 1), rng.below(P)]
}

fn concat(a: &String, b: &String) -> String {
    format!("{a}{b}")
}

/// Lengths in elements of 16 bytes: empty, inside a mailbox slot, at and
/// just past the slot of 17 members (1008 bytes) and of smaller teams
/// (1072), several cells (flow control: more than the cells hold).
const LENGTHS: [usize; 9] = [0, 1, 3, 63, 64, 67, 68, 1500, 20_000];

/// Lengths whose slices (of a reduction among up to 9 members) are long
/// enough to be offered, and one whose slices are not.
const OFFERED_LENGTHS: [usize; 3] = [1500, 20_000, 50_000];

fn fail<T: Rma>(t: &T, what: &str) -> impl Fn(Error) -> String {
    let (rank, what) = (t.rank(), what.to_string());
    move |e| format!("rank {rank}: {what}: {e}")
}

fn expect<V: PartialEq + std::fmt::Debug>(t: &impl Rma, what: &str, got: V, want: V) -> Outcome {
    if got == want {
        return Ok(());
    }
    let show = format!("{got:?}");
    Err(format!(
        "rank {}: {what}: got {}..., want {:?}",
        t.rank(),
        &show[..show.len().min(200)],
        want
    ))
}

/// Every collective against its reference, on the world: through host
/// memory if `one_host` (all ranks share it), else on the chain.
async fn every_collective<T: Transport>(
    t: &T,
    seed: u64,
    one_host: bool,
    lengths: &[usize],
) -> Outcome {
    let world = Comm::world(t);
    let (me, n) = (world.rank(), world.size());
    if n > 1 && world.in_host_memory() != one_host {
        return Err(format!(
            "rank {me}: a world of {} with{} host memory",
            if one_host {
                "one host"
            } else {
                "a rank per host"
            },
            if one_host { "out" } else { "" },
        ));
    }
    let mut rng = Rng::new(seed, 0);
    for (i, &len) in lengths.iter().enumerate() {
        let root = rng.below(u64::from(n)) as u32;
        let mine: Vec<Affine> = (0..len).map(|j| affine(me, i * 7 + j, seed)).collect();
        let everyones: Vec<Vec<Affine>> = (0..n)
            .map(|r| (0..len).map(|j| affine(r, i * 7 + j, seed)).collect())
            .collect();
        let of = |r: u32| everyones[r as usize].clone();
        let folded: Vec<Affine> = (0..len)
            .map(|j| {
                (1..n as usize).fold(everyones[0][j], |acc, r| compose(&acc, &everyones[r][j]))
            })
            .collect();

        world
            .ibarrier()
            .await
            .map_err(fail(t, &format!("barrier before length {len}")))?;

        let mut buf = if me == root {
            of(root)
        } else {
            vec![[0; 2]; len]
        };
        world
            .ibcast_into(root, &mut buf)
            .await
            .map_err(fail(t, "bcast_into"))?;
        expect(t, "bcast_into", &buf, &of(root))?;

        let mut out = vec![[0; 2]; len];
        world
            .iallreduce_into(&mine, &mut out, compose)
            .await
            .map_err(fail(t, "allreduce_into"))?;
        expect(t, "allreduce_into", &out, &folded)?;

        let mut at_root = vec![[0; 2]; len];
        let recv = (me == root).then_some(&mut at_root[..]);
        world
            .ireduce_into(root, &mine, recv, compose)
            .await
            .map_err(fail(t, "reduce_into"))?;
        if me == root {
            expect(t, "reduce_into", &at_root, &folded)?;
        }

        let all: Vec<Affine> = (0..n).flat_map(of).collect();
        let mut gathered = vec![[0; 2]; len * n as usize];
        world
            .iallgather_into(&mine, &mut gathered)
            .await
            .map_err(fail(t, "allgather_into"))?;
        expect(t, "allgather_into", &gathered, &all)?;

        let mut at_root = vec![[0; 2]; len * n as usize];
        let recv = (me == root).then_some(&mut at_root[..]);
        world
            .igather_into(root, &mine, recv)
            .await
            .map_err(fail(t, "gather_into"))?;
        if me == root {
            expect(t, "gather_into", &at_root, &all)?;
        }

        let mut piece = vec![[0; 2]; len];
        let send = (me == root).then_some(&all[..]);
        world
            .iscatter_into(root, send, &mut piece)
            .await
            .map_err(fail(t, "scatter_into"))?;
        expect(t, "scatter_into", &piece, &of(me))?;

        // Values of any length through serde: strings of len bytes.
        let text = |r: u32| format!("<{r}:{}>", "x".repeat(len * (r as usize % 3)));
        let everyone: String = (0..n).map(text).collect();
        let sum = world
            .iallreduce(text(me), concat)
            .await
            .map_err(fail(t, "allreduce"))?;
        expect(t, "allreduce", &sum, &everyone)?;
        let reduced = world
            .ireduce(root, text(me), concat)
            .await
            .map_err(fail(t, "reduce"))?;
        expect(t, "reduce", reduced, (me == root).then(|| everyone.clone()))?;
        let scanned = world
            .iscan(text(me), concat)
            .await
            .map_err(fail(t, "scan"))?;
        expect(t, "scan", scanned, (0..=me).map(text).collect::<String>())?;
        let ex = world
            .iexscan(text(me), concat)
            .await
            .map_err(fail(t, "exscan"))?;
        expect(
            t,
            "exscan",
            ex,
            (me > 0).then(|| (0..me).map(text).collect::<String>()),
        )?;
        let value = world
            .ibcast(root, (me == root).then(|| text(root)))
            .await
            .map_err(fail(t, "bcast"))?;
        expect(t, "bcast", value, text(root))?;
        let g = world
            .igather(root, &text(me))
            .await
            .map_err(fail(t, "gather"))?;
        expect(
            t,
            "gather",
            g,
            (me == root).then(|| (0..n).map(text).collect::<Vec<_>>()),
        )?;
        let values = (me == root).then(|| (0..n).map(text).collect::<Vec<_>>());
        let s = world
            .iscatter(root, values)
            .await
            .map_err(fail(t, "scatter"))?;
        expect(t, "scatter", s, text(me))?;
        let ag = world
            .iallgather(&text(me))
            .await
            .map_err(fail(t, "allgather"))?;
        expect(t, "allgather", ag, (0..n).map(text).collect::<Vec<_>>())?;

        // Two calls made before either is awaited run at once.
        let mut a = vec![[0; 2]; len];
        let first = world.iallreduce_into(&mine, &mut a, compose);
        let second = world.iallgather(&text(me));
        let (first, second) = common::join(first, second, seed % 2 == 0).await;
        first.map_err(fail(t, "joined allreduce_into"))?;
        expect(t, "joined allreduce_into", &a, &folded)?;
        let second = second.map_err(fail(t, "joined allgather"))?;
        expect(
            t,
            "joined allgather",
            second,
            (0..n).map(text).collect::<Vec<_>>(),
        )?;
    }
    // A receive buffer of the wrong length is this member's error only.
    let mine = [affine(me, 0, seed)];
    let mut short = vec![[0; 2]; usize::from(me == 0)];
    let got = world.iallreduce_into(&mine, &mut short, compose).await;
    match (me, got) {
        (0, Ok(())) => {}
        (0, Err(e)) => return Err(format!("rank 0: a right buffer failed: {e}")),
        (_, Err(Error::InvalidArgument(_))) => {}
        (_, other) => return Err(format!("rank {me}: a short buffer gave {other:?}")),
    }
    // One member's value of another length fails the allgather on every
    // member (none keeps a buffer with a hole in it), flat or by tree.
    // Short and long (through cells): every writer is drained, so none
    // waits for its deadline.
    for len in [1, 20_000].into_iter().filter(|_| n > 1) {
        let odd = n - 1;
        let mine = vec![affine(me, 1, seed); len + usize::from(me == odd)];
        let mut all = vec![[0; 2]; mine.len() * n as usize];
        match world.iallgather_into(&mine, &mut all).await {
            Err(Error::Mismatch { .. }) => {}
            other => return Err(format!("rank {me}: an odd length {len} gave {other:?}")),
        }
    }
    world.ibarrier().await.map_err(fail(t, "the last barrier"))
}

/// The sequential split of members `0..n` by `colors` (`None`: no group)
/// and `keys`: the members of `me`'s group in order.
fn reference<K: Ord + Clone>(colors: &[Option<u32>], keys: &[K], me: u32) -> Option<Vec<u32>> {
    let color = colors[me as usize]?;
    let mut group: Vec<(K, u32)> = (0..colors.len() as u32)
        .filter(|&m| colors[m as usize] == Some(color))
        .map(|m| (keys[m as usize].clone(), m))
        .collect();
    group.sort();
    Some(group.into_iter().map(|(_, m)| m).collect())
}

/// Checks that `comm` is the group `members` (world ranks in order) and
/// that its collectives work, in host memory when it has two members.
async fn check_group<T: Transport>(
    t: &T,
    comm: &Comm<'_, T>,
    members: &[u32],
    what: &str,
) -> Outcome {
    let at = members.iter().position(|&m| m == t.rank());
    if at != Some(comm.rank() as usize) || comm.size() as usize != members.len() {
        return Err(format!(
            "rank {}: {what}: {comm:?} for {members:?}",
            t.rank()
        ));
    }
    if comm.in_host_memory() != (members.len() > 1) {
        return Err(format!("rank {}: {what}: host memory {comm:?}", t.rank()));
    }
    let sum = comm
        .iallreduce(t.rank(), |a, b| a + b)
        .await
        .map_err(fail(t, what))?;
    expect(t, what, sum, members.iter().sum())?;
    let order = comm.iallgather(&t.rank()).await.map_err(fail(t, what))?;
    expect(t, what, order, members.to_vec())
}

async fn every_split<T: Transport>(t: &T, seed: u64) -> Outcome {
    let world = Comm::world(t);
    let (me, n) = (world.rank(), world.size());
    for round in 0..4u64 {
        let mut rng = Rng::new(seed, round as u32 + 100);
        let colors: Vec<Option<u32>> = (0..n)
            .map(|_| Some(rng.below(3) as u32).filter(|&c| c < 2 || round == 0))
            .collect();
        let keys: Vec<i64> = (0..n).map(|_| rng.below(4) as i64 - 2).collect();
        let texts: Vec<String> = keys.iter().map(|k| format!("k{}", k + 7)).collect();
        // Integer keys sort by their images.
        let got = world
            .isplit(colors[me as usize], keys[me as usize])
            .await
            .map_err(fail(t, "split"))?;
        let want = reference(&colors, &keys, me);
        match (&got, &want) {
            (Some(c), Some(w)) => check_group(t, c, w, "split by integer keys").await?,
            (None, None) => {}
            _ => return Err(format!("rank {me}: split gave {got:?} for {want:?}")),
        }
        // Keys ordered by a comparator, checked across each group.
        let got = world
            .isplit_by(
                colors[me as usize],
                texts[me as usize].clone(),
                |a: &String, b| b.cmp(a),
            )
            .await
            .map_err(fail(t, "split_by"))?;
        let reversed: Vec<std::cmp::Reverse<String>> =
            texts.iter().cloned().map(std::cmp::Reverse).collect();
        let want = reference(&colors, &reversed, me);
        match (&got, &want) {
            (Some(c), Some(w)) => check_group(t, c, w, "split by a comparator").await?,
            (None, None) => {}
            _ => return Err(format!("rank {me}: split_by gave {got:?} for {want:?}")),
        }
        // A dup keeps the group and the order, with a team of its own.
        let dup = world.idup().await.map_err(fail(t, "dup"))?;
        check_group(t, &dup, &(0..n).collect::<Vec<_>>(), "dup").await?;
        // A nested split of the split.
        if let Some(c) = &got {
            let nested = c
                .isplit_by_color(Some(c.rank() % 2))
                .await
                .map_err(fail(t, "nested"))?;
            let members: Vec<u32> = want.as_ref().expect("a member").to_vec();
            let mine: Vec<u32> = members
                .iter()
                .enumerate()
                .filter(|(i, _)| i % 2 == c.rank() as usize % 2)
                .map(|(_, &m)| m)
                .collect();
            check_group(
                t,
                nested.as_ref().expect("a member"),
                &mine,
                "a nested split",
            )
            .await?;
        }
    }
    // A group its members create alone gets a team of its own.
    let order: Vec<u32> = (0..n).rev().filter(|r| r % 3 != 1).collect();
    if order.contains(&me) {
        let map = GroupMap::from_ranks(n, &order, Strategy::Auto).map_err(|e| e.to_string())?;
        let created = world
            .icreate_group(map, 7, CreateAlgorithm::Direct)
            .await
            .map_err(fail(t, "create_group"))?;
        check_group(
            t,
            created.as_ref().expect("a member"),
            &order,
            "a created group",
        )
        .await?;
    }
    // A comparator that answers differently on different processes fails
    // the split on every process.
    let lies = world
        .isplit_by(
            Some(0),
            me,
            move |a: &u32, b: &u32| if me % 2 == 0 { a.cmp(b) } else { b.cmp(a) },
        )
        .await;
    match (lies, n) {
        (Err(Error::UserCode { .. }), 3..) | (Ok(_), 1..=2) => {}
        (other, _) if n > 2 => return Err(format!("rank {me}: a lying comparator gave {other:?}")),
        _ => {}
    }
    // Processes that pass different key types fail alike.
    let mixed = match me % 2 {
        0 => world.isplit(Some(0), me).await,
        _ => world.isplit(Some(0), u64::from(me)).await,
    };
    match (mixed, n) {
        (Err(Error::Mismatch { .. }), 2..) | (Ok(_), 1) => {}
        (other, _) => return Err(format!("rank {me}: mixed key types gave {other:?}")),
    }
    // Many splits one after another reuse their regions.
    for i in 0..300u32 {
        let c = world
            .isplit(Some((me + i) % 2), me)
            .await
            .map_err(fail(t, "a split in a loop"))?;
        drop(c);
    }
    world.ibarrier().await.map_err(fail(t, "the last barrier"))
}

#[test]
fn sim_host_splits_1_to_9() {
    for n in [1, 2, 3, 4, 5, 9] {
        for seed in 0..3 {
            let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| every_split(t, seed).await)
                .unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"));
            let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
            assert!(failed.is_empty(), "{n} ranks, seed {seed}: {failed:#?}");
        }
    }
}

fn splits<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_split(t, 5)).map_err(catena_fabric::Error::Protocol)
}

#[test]
fn sim_host_collectives_1_to_17() {
    let sizes: Vec<u32> = std::env::var("HOST_SIZES")
        .map(|s| s.split(",").map(|x| x.parse().unwrap()).collect())
        .unwrap_or(vec![1, 2, 3, 4, 5, 8, 9, 16, 17]);
    for n in sizes {
        for seed in 0..2 {
            let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
            let (results, report) = sim
                .run(async |t: &SimRank<'_>| every_collective(t, seed, true, &LENGTHS).await)
                .unwrap_or_else(|e| panic!("{n} ranks, seed {seed}: {e}"));
            eprintln!(
                "{n} ranks, seed {seed}: {:?} virtual, {} events, {:?}",
                report.completion, report.events, report.wall
            );
            let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
            assert!(failed.is_empty(), "{n} ranks, seed {seed}: {failed:#?}");
        }
    }
}

/// Long values copied once out of their writer's buffer, where some
/// members cannot (they take the data through cells) or none offers.
#[test]
fn sim_host_single_copies_refused_or_off() {
    for n in [2, 5, 9] {
        let refused = [1, n - 1];
        let sims = [
            Sim::new(n, LogGp::default()).with_single_copy_refused(refused),
            Sim::new(n, LogGp::default()).with_single_copy(false),
        ];
        for sim in sims {
            let sim = sim.with_ranks_per_host(n);
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| {
                    every_collective(t, 4, true, &OFFERED_LENGTHS).await?;
                    odd_lengths(t, 9).await
                })
                .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
            let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
            assert!(failed.is_empty(), "{n} ranks: {failed:#?}");
        }
    }
}

/// Long values of one size class, call after call: each writer offers the
/// first, sends the second through its cells, then takes the way its
/// readers reported faster (the other now and then), so calls of both ways
/// follow each other on the same cells and mailboxes.
#[test]
fn sim_host_ways_learnt_call_after_call() {
    for n in [2, 3, 5] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| every_collective(t, 6, true, &[5_000; 6]).await)
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{n} ranks: {failed:#?}");
    }
}

/// A writer takes the way that was faster (for a bcast, as its readers
/// report; for an allreduce's two rounds, the slices and the reduced
/// slices, by its own calls' times): where a single copy costs 20 times a
/// copy through host memory, its long bcasts and allreduces go through
/// cells but for the first calls, which try both ways; where it costs a
/// twentieth, nearly all are offered.
#[test]
fn sim_host_writers_learn_the_faster_way() {
    const CALLS: u64 = 40;
    for (factor, offers) in [(20.0, 1..=6), (0.05, CALLS - 6..=CALLS)] {
        let sim = Sim::new(3, LogGp::default())
            .with_ranks_per_host(3)
            .with_single_copy_cost(factor);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| {
                let world = Comm::world(t);
                let bcasts = long_bcasts(t, &world, CALLS, "world").await?;
                let mine = vec![u64::from(t.rank()) + 1; 40_000];
                let mut sum = vec![0u64; mine.len()];
                for call in 0..CALLS {
                    let allreduce = world.iallreduce_into(&mine, &mut sum, |a, b| a + b).await;
                    allreduce.map_err(fail(t, &format!("allreduce {call}")))?;
                    if sum.iter().any(|&x| x != 6) {
                        return Err(format!("rank {}: allreduce {call} wrong", t.rank()));
                    }
                }
                Ok([bcasts, t.offers_made() - bcasts])
            })
            .unwrap_or_else(|e| panic!("factor {factor}: {e}"));
        let made: Vec<[u64; 2]> = results
            .into_iter()
            .collect::<std::result::Result<_, _>>()
            .unwrap_or_else(|e| panic!("factor {factor}: {e}"));
        let bcasts: Vec<u64> = made.iter().map(|m| m[0]).collect();
        assert!(offers.contains(&bcasts[0]), "factor {factor}: {made:?}");
        assert_eq!(bcasts[1..], [0, 0], "factor {factor}");
        // Two offers a call, one a round.
        let rounds = *offers.start() * 2..=*offers.end() * 2;
        for &[_, allreduces] in &made {
            assert!(rounds.contains(&allreduces), "factor {factor}: {made:?}");
        }
    }
}

/// `calls` bcasts of 100 KiB from `comm`'s rank 0, each checked, and the
/// offers this rank made in them.
async fn long_bcasts(
    t: &SimRank<'_>,
    comm: &Comm<'_, SimRank<'_>>,
    calls: u64,
    what: &str,
) -> std::result::Result<u64, String> {
    let before = t.offers_made();
    let mut buf = vec![0u8; 100 << 10];
    for call in 0..calls {
        if comm.rank() == 0 {
            buf.fill(call as u8);
        }
        let bcast = comm.ibcast_into(0, &mut buf).await;
        bcast.map_err(fail(t, &format!("{what} bcast {call}")))?;
        if buf.iter().any(|&b| b != call as u8) {
            return Err(format!("rank {}: {what} bcast {call} wrong", t.rank()));
        }
    }
    Ok(t.offers_made() - before)
}

/// A dup starts from what its parent learnt of which way long data goes
/// (where offers cost 20 times a copy, the dup's writers make none), on
/// one host and in each host's team of two; a group of fewer members
/// learns afresh (its root offers first).
#[test]
fn sim_host_dups_keep_what_their_parent_learnt() {
    const CALLS: u64 = 40;
    for hosts in [1, 2] {
        let sim = Sim::new(3 * hosts, LogGp::default())
            .with_ranks_per_host(3)
            .with_single_copy_cost(20.0);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| {
                let bcasts = |comm, what| long_bcasts(t, comm, CALLS, what);
                let world = Comm::world(t);
                let learnt = bcasts(&world, "world").await?;
                let dup = world.idup().await.map_err(fail(t, "dup"))?;
                let kept = bcasts(&dup, "dup").await?;
                let pair = world.isplit_by_color(Some(u8::from(t.rank() < 2))).await;
                let pair = pair
                    .map_err(fail(t, "split"))?
                    .expect("every rank has a color");
                let afresh = match pair.size() {
                    2 => bcasts(&pair, "pair").await?,
                    _ => 0,
                };
                Ok([learnt, kept, afresh])
            })
            .unwrap_or_else(|e| panic!("{hosts} hosts: {e}"));
        let made: Vec<[u64; 3]> = results
            .into_iter()
            .collect::<std::result::Result<_, String>>()
            .unwrap_or_else(|e| panic!("{hosts} hosts: {e}"));
        // Each host's first rank writes to its team.
        for (rank, &[learnt, kept, afresh]) in made.iter().enumerate() {
            let writes = rank % 3 == 0;
            assert_eq!((1..=6).contains(&learnt), writes, "{hosts} hosts: {made:?}");
            assert_eq!(kept, 0, "{hosts} hosts: {made:?}");
            assert_eq!(
                (1..=6).contains(&afresh),
                rank == 0,
                "{hosts} hosts: {made:?}"
            );
        }
    }
}

/// The same collectives with a rank per simulated host: on the chain, the
/// buffer collectives' bytes forwarded without an encoding pass.
#[test]
fn sim_chain_collectives_1_to_9() {
    for n in [1, 2, 3, 5, 9] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| every_collective(t, 3, false, &LENGTHS).await)
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{n} ranks: {failed:#?}");
    }
}

fn collectives<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_collective(t, 11, true, &LENGTHS))
        .map_err(catena_fabric::Error::Protocol)
}

fn odd_lengths_blocking<T: Transport + catena_fabric::Blocking>(
    t: &T,
) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, odd_lengths(t, 13)).map_err(catena_fabric::Error::Protocol)
}

common::provider_cases! {
    shm_host_collectives_2: catena_fabric::shm::ShmTransport, 2, &[], collectives;
    shm_host_collectives_5: catena_fabric::shm::ShmTransport, 5, &[], collectives;
    shm_host_collectives_9: catena_fabric::shm::ShmTransport, 9, &[], collectives;
    shm_host_odd_lengths_5: catena_fabric::shm::ShmTransport, 5, &[], odd_lengths_blocking;
    shm_host_splits_2: catena_fabric::shm::ShmTransport, 2, &[], splits;
    shm_host_splits_5: catena_fabric::shm::ShmTransport, 5, &[], splits;
}

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_host_collectives_3: catena_fabric::ofi::OfiTransport, 3, &[("CATENA_OFI_PROVIDER", "shm")], collectives;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_host_collectives_3: catena_fabric::ucx::UcxTransport, 3, &[("UCX_TLS", "posix,cma,self")], collectives;
}

/// A world over several hosts splits by its chain; the groups that lie on
/// one host get a team from the regions offered in the numbering step, the
/// others none, and both compute alike (groups of the ranks of one host,
/// then of ranks spread over every host).
#[test]
fn sim_chain_splits_give_one_host_groups_a_team() {
    for (n, per_host) in [(6, 3), (12, 4), (10, 3)] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(per_host);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| {
                let world = Comm::world(t);
                if world.in_host_memory() {
                    return Err(format!(
                        "rank {}: a world over hosts in host memory",
                        t.rank()
                    ));
                }
                let me = world.rank();
                let host: Vec<u32> = (0..n).filter(|r| r / per_host == me / per_host).collect();
                let local = world
                    .isplit(Some(me / per_host), -i64::from(me))
                    .await
                    .map_err(fail(t, "split by host"))?
                    .expect("a member");
                let reversed: Vec<u32> = host.iter().rev().copied().collect();
                check_group(t, &local, &reversed, "split by host").await?;
                let across: Vec<u32> = (0..n).filter(|r| r % per_host == me % per_host).collect();
                let spread = world
                    .isplit(Some(me % per_host), i64::from(me))
                    .await
                    .map_err(fail(t, "split across hosts"))?
                    .expect("a member");
                if spread.in_host_memory() {
                    return Err(format!("rank {me}: a group over hosts in host memory"));
                }
                let sum = spread
                    .iallreduce(me, |a, b| a + b)
                    .await
                    .map_err(fail(t, "allreduce across hosts"))?;
                expect(t, "allreduce across hosts", sum, across.iter().sum())
            })
            .expect("every rank finishes");
        for r in results {
            r.unwrap_or_else(|e| panic!("{n} ranks, {per_host} a host: {e}"));
        }
    }
}

/// What one collective gave a member whose length differs from the
/// others' (`odd`) or whose data depends on it.
fn odd_outcome(op: &str, len: usize, odd: u32, root: u32, me: u32, got: Result<()>) -> Outcome {
    match got {
        Err(Error::Mismatch { .. }) => Ok(()),
        Ok(()) => Err(format!(
            "rank {me}: {op} of {len} with member {odd}'s odd length, root {root}: Ok"
        )),
        Err(e) => Err(format!(
            "rank {me}: {op} of {len} with member {odd}'s odd length, root {root}: {e}"
        )),
    }
}

/// One member's buffers one element longer than everyone else's: the
/// members whose result would depend on it get `Mismatch`, and none
/// waits for its deadline.
async fn odd_lengths<T: Transport>(t: &T, seed: u64) -> Outcome {
    let world = Comm::world(t).with_timeout(std::time::Duration::from_secs(30));
    let (me, n) = (world.rank(), world.size());
    if n < 2 {
        return Ok(());
    }
    for len in [1usize, 20_000] {
        for odd in [n - 1, n / 2] {
            for root in [0, odd] {
                let extra = usize::from(me == odd);
                let mine = vec![affine(me, 1, seed); len + extra];
                let mut out = vec![[0; 2]; len + extra];
                let got = world.iallreduce_into(&mine, &mut out, compose).await;
                odd_outcome("allreduce", len, odd, root, me, got)?;

                let mut at_root = vec![[0; 2]; len + extra];
                let recv = (me == root).then_some(&mut at_root[..]);
                let got = world.ireduce_into(root, &mine, recv, compose).await;
                if me == root || got.is_err() {
                    odd_outcome("reduce", len, odd, root, me, got)?;
                }

                // The root of a bcast or a scatter has nothing to learn:
                // the member whose length differs from the root's fails.
                let mut buf = mine.clone();
                let got = world.ibcast_into(root, &mut buf).await;
                if me != root && (me == odd || odd == root) || got.is_err() {
                    odd_outcome("bcast", len, odd, root, me, got)?;
                }

                let mut at_root = vec![[0; 2]; (len + extra) * n as usize];
                let recv = (me == root).then_some(&mut at_root[..]);
                let got = world.igather_into(root, &mine, recv).await;
                if me == root || got.is_err() {
                    odd_outcome("gather", len, odd, root, me, got)?;
                }

                let all = vec![affine(me, 2, seed); (len + extra) * n as usize];
                let send = (me == root).then_some(&all[..]);
                let mut piece = vec![[0; 2]; len + extra];
                let got = world.iscatter_into(root, send, &mut piece).await;
                if me != root && (me == odd || odd == root) || got.is_err() {
                    odd_outcome("scatter", len, odd, root, me, got)?;
                }
                world
                    .ibarrier()
                    .await
                    .map_err(fail(t, "the barrier after an odd length"))?;
            }
        }
    }
    Ok(())
}

#[test]
fn sim_host_odd_lengths_2_to_17() {
    for n in [2, 3, 4, 5, 8, 9, 16, 17] {
        let sim = Sim::new(n, LogGp::default()).with_ranks_per_host(n);
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| odd_lengths(t, 7).await)
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{n} ranks: {failed:#?}");
    }
}

/// The same on the chain, a rank per simulated host: its reductions fold
/// values of different lengths into a poison.
#[test]
fn sim_chain_odd_lengths_2_to_9() {
    for n in [2, 3, 5, 9] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| odd_lengths(t, 7).await)
            .unwrap_or_else(|e| panic!("{n} ranks: {e}"));
        let failed: Vec<String> = results.into_iter().filter_map(Result::err).collect();
        assert!(failed.is_empty(), "{n} ranks: {failed:#?}");
    }
}
