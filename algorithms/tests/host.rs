//! Collectives through the host's shared memory against sequential
//! references: every collective on buffers and on `serde` values, every
//! root, lengths from empty through a mailbox line to many cells, a
//! non-commutative elementwise operation (so rank order shows), calls
//! joined so they run at once, and buffers of the wrong length; on 1..17
//! simulated ranks of one host and on real processes.

mod common;

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

async fn every_collective<T: Transport>(t: &T, seed: u64) -> Outcome {
    let world = Comm::world(t);
    let (me, n) = (world.rank(), world.size());
    if n > 1 && !world.in_host_memory() {
        return Err(format!(
            "rank {me}: a world of one host without host memory"
        ));
    }
    let mut rng = Rng::new(seed, 0);
    for (i, &len) in LENGTHS.iter().enumerate() {
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
    world.ibarrier().await.map_err(fail(t, "the last barrier"))
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
                .run(async |t: &SimRank<'_>| every_collective(t, seed).await)
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

fn collectives<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_collective(t, 11)).map_err(catena_fabric::Error::Protocol)
}

common::provider_cases! {
    shm_host_collectives_2: catena_fabric::shm::ShmTransport, 2, &[], collectives;
    shm_host_collectives_5: catena_fabric::shm::ShmTransport, 5, &[], collectives;
    shm_host_collectives_9: catena_fabric::shm::ShmTransport, 9, &[], collectives;
}

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_host_collectives_3: catena_fabric::ofi::OfiTransport, 3, &[("CATENA_OFI_PROVIDER", "shm")], collectives;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_host_collectives_3: catena_fabric::ucx::UcxTransport, 3, &[("UCX_TLS", "posix,cma,self")], collectives;
}
