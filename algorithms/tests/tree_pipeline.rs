//! The tree pipeline on real processes and on the simulator: hand-made plans
//! (chains, binomial and random trees, two and three colours) carry
//! broadcasts of random bytes and allreduces (wrapping i64 sums, f64 maxima,
//! a user struct) checked against sequential references, many calls on one
//! set-up; and plans, configurations and calls that disagree must fail.

use crate::common;

use std::ops::Range;
use std::time::Duration;

use bytemuck::{Pod, Zeroable};
use catena_algorithms::chain::Chain;
use catena_algorithms::{Error, PipelineConfig, TreeCollective, TreePlace, TreePlan};
use catena_fabric::{Rank, Rma, Transport};
use catena_sim::{LogGp, Sim, SimRank};
use common::{deadline, Rng};

/// A tree over ranks 0..n: each rank's parent (`None` at the root).
type Tree = Vec<Option<Rank>>;

/// The ranks other than `root`, shuffled, after `root`.
fn root_first(n: u32, root: Rank, rng: &mut Rng) -> Vec<Rank> {
    let mut order: Vec<Rank> = (0..n).filter(|&r| r != root).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order.insert(0, root);
    order
}

fn chain(n: u32, root: Rank, rng: &mut Rng) -> Tree {
    let order = root_first(n, root, rng);
    let mut tree = vec![None; n as usize];
    for pair in order.windows(2) {
        tree[pair[1] as usize] = Some(pair[0]);
    }
    tree
}

/// Parent of v (counted from the root) is v without its lowest set bit.
fn binomial(n: u32, root: Rank) -> Tree {
    (0..n)
        .map(|r| {
            let v = (r + n - root) % n;
            (v != 0).then(|| (v & (v - 1)) + root).map(|p| p % n)
        })
        .collect()
}

/// Each rank, in random order, hangs below a random earlier one.
fn random_tree(n: u32, root: Rank, rng: &mut Rng) -> Tree {
    let order = root_first(n, root, rng);
    let mut tree = vec![None; n as usize];
    for i in 1..order.len() {
        tree[order[i] as usize] = Some(order[rng.below(i as u64) as usize]);
    }
    tree
}

fn place(tree: &Tree, rank: Rank) -> TreePlace {
    TreePlace {
        parent: tree[rank as usize],
        children: (0..tree.len() as Rank)
            .filter(|&c| tree[c as usize] == Some(rank))
            .collect(),
    }
}

fn plan_for(trees: &[Tree], rank: Rank, concurrent_allreduce: bool) -> TreePlan {
    TreePlan {
        colours: trees.iter().map(|tree| place(tree, rank)).collect(),
        concurrent_allreduce,
    }
}

/// The plans every size runs, the same on every process: a name, one tree
/// per colour (all rooted at one random rank), and whether reduce and
/// broadcast overlap.
fn schedules(n: u32, seed: u64) -> Vec<(&'static str, Vec<Tree>, bool)> {
    let mut rng = Rng::new(seed, 0);
    let root = rng.below(u64::from(n)) as Rank;
    let mut random = || random_tree(n, root, &mut rng);
    let (a, b, c) = (random(), random(), random());
    let mut rng = Rng::new(seed, 1);
    let line = chain(n, root, &mut rng);
    vec![
        ("chain", vec![line.clone()], false),
        ("binomial tree", vec![binomial(n, root)], true),
        ("random tree", vec![a.clone()], false),
        ("2 colours", vec![binomial(n, root), b.clone()], true),
        (
            "2 colours, reduce then broadcast",
            vec![b, line.clone()],
            false,
        ),
        (
            "3 colours",
            vec![line.clone(), binomial(n, root), c.clone()],
            true,
        ),
        (
            "3 colours, reduce then broadcast",
            vec![c, a, binomial(n, root)],
            false,
        ),
    ]
}

/// A user element: the smallest and largest value seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Span {
    min: i64,
    max: i64,
}

fn wrapping_sum(acc: &mut [i64], other: &[i64]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.wrapping_add(*b);
    }
}

fn max(acc: &mut [f64], other: &[f64]) {
    for (a, b) in acc.iter_mut().zip(other) {
        *a = a.max(*b);
    }
}

fn widen(acc: &mut [Span], other: &[Span]) {
    for (a, b) in acc.iter_mut().zip(other) {
        a.min = a.min.min(b.min);
        a.max = a.max.max(b.max);
    }
}

fn to_f64(v: u64) -> f64 {
    (v as i64 >> 11) as f64 / 1024.0
}

fn to_span(v: u64) -> Span {
    let v = v.rotate_left(17) as i64;
    Span { min: v, max: v }
}

/// Allreduce inputs and their references. Call `call` gives rank r the
/// inputs of row (r + call) mod n, shifted by 7 * call elements, so every
/// call's contributions and results differ from the last one's, while one
/// reference (computed once) serves all calls.
struct Inputs {
    seed: u64,
    n: u32,
    sums: Vec<i64>,
    maxima: Vec<f64>,
    spans: Vec<Span>,
}

impl Inputs {
    fn base(seed: u64, row: u32, i: usize) -> u64 {
        Rng::new(seed ^ (i as u64).wrapping_mul(0x2545_F491_4F6C_DD1D), row).next()
    }

    fn new(seed: u64, n: u32, elements: usize) -> Inputs {
        let mut sums = vec![0i64; elements];
        let mut maxima = vec![f64::NEG_INFINITY; elements];
        let mut spans = vec![
            Span {
                min: i64::MAX,
                max: i64::MIN
            };
            elements
        ];
        for row in 0..n {
            for i in 0..elements {
                let v = Inputs::base(seed, row, i);
                wrapping_sum(&mut sums[i..=i], &[v as i64]);
                max(&mut maxima[i..=i], &[to_f64(v)]);
                widen(&mut spans[i..=i], &[to_span(v)]);
            }
        }
        Inputs {
            seed,
            n,
            sums,
            maxima,
            spans,
        }
    }

    fn shifted(&self, call: usize, i: usize) -> usize {
        (i + 7 * call) % self.sums.len()
    }

    fn value(&self, call: usize, rank: Rank, i: usize) -> u64 {
        let row = (rank + call as u32) % self.n;
        Inputs::base(self.seed, row, self.shifted(call, i))
    }
}

/// The root's bytes for call `call`.
fn bytes(seed: u64, call: usize, len: usize) -> Vec<u8> {
    let mut rng = Rng::new(seed, 1000 + call as u32);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// Checks a stream's pieces: within each colour's share in order, each at
/// most a chunk, together covering 0..len once.
struct Order {
    shares: Vec<Range<usize>>,
    next: Vec<usize>,
    chunk: usize,
}

impl Order {
    fn new(len: usize, colours: usize, chunk: usize) -> Order {
        // The first len mod k colours carry one element more.
        let (base, extra) = (len / colours, len % colours);
        let start = |c: usize| c * base + c.min(extra);
        let shares: Vec<Range<usize>> = (0..colours).map(|c| start(c)..start(c + 1)).collect();
        let next = shares.iter().map(|s| s.start).collect();
        Order {
            shares,
            next,
            chunk,
        }
    }

    fn piece(&mut self, offset: usize, len: usize) {
        let c = self
            .shares
            .iter()
            .position(|s| s.contains(&offset))
            .unwrap_or_else(|| panic!("a piece at {offset} outside every share"));
        assert_eq!(offset, self.next[c], "colour {c} out of order");
        assert!(
            len <= self.chunk,
            "a piece of {len} in chunks of {}",
            self.chunk
        );
        assert!(
            offset + len <= self.shares[c].end,
            "a piece past colour {c}'s share"
        );
        self.next[c] += len;
    }

    fn check_done(&self) {
        for (c, share) in self.shares.iter().enumerate() {
            assert_eq!(self.next[c], share.end, "colour {c} ended early");
        }
    }
}

/// How much data a run moves: bytes of the big broadcast and elements of
/// the big allreduce, and which rings it tries: (chunk bytes, slots).
struct Scale {
    big_bytes: usize,
    big_elements: usize,
    rings: &'static [(usize, usize)],
}

const SEED: u64 = 0x7ee5;

/// Every call kind on one set-up, several times, against the references.
async fn calls_on_one_setup<T: Transport>(
    t: &T,
    tc: &mut TreeCollective<'_, T>,
    root: Rank,
    colours: usize,
    chunk: usize,
    scale: &Scale,
    inputs: &Inputs,
) -> catena_algorithms::Result<()> {
    let me = t.rank();
    let d = deadline(t);
    let byte_lens = [0, 1, chunk - 1, 3 * chunk + 17, scale.big_bytes];
    let element_chunk = chunk / 8;
    let element_lens = [
        0,
        1,
        element_chunk.saturating_sub(1),
        3 * element_chunk + 5,
        scale.big_elements,
    ];
    for (call, (&len, &elements)) in byte_lens.iter().zip(&element_lens).enumerate() {
        let expected = bytes(SEED, call, len);
        let mut data = if me == root {
            expected.clone()
        } else {
            vec![0xa5; len]
        };
        tc.bcast(&mut data, d).await?;
        assert_eq!(data, expected, "bcast of {len} bytes, rank {me}");

        // The stream form, checking order, on the same lengths.
        let mut order = Order::new(len, colours, chunk);
        let mut got = vec![0xa5u8; len];
        tc.bcast_stream(
            len,
            |offset, out| {
                assert_eq!(me, root, "a source called off the root");
                out.copy_from_slice(&expected[offset..offset + out.len()]);
            },
            |offset, piece| {
                order.piece(offset, piece.len());
                got[offset..offset + piece.len()].copy_from_slice(piece);
            },
            d,
        )
        .await?;
        order.check_done();
        assert_eq!(got, expected, "bcast_stream of {len} bytes, rank {me}");

        let call = call * 3;
        let mut sums: Vec<i64> = (0..elements)
            .map(|i| inputs.value(call, me, i) as i64)
            .collect();
        tc.allreduce(&mut sums, wrapping_sum, d).await?;
        for (i, got) in sums.iter().enumerate() {
            assert_eq!(
                *got,
                inputs.sums[inputs.shifted(call, i)],
                "sum {i} of {elements}"
            );
        }

        let call = call + 1;
        let mut order = Order::new(elements, colours, element_chunk);
        let mut maxima = vec![f64::NAN; elements];
        tc.allreduce_stream(
            elements,
            |offset, out: &mut [f64]| {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = to_f64(inputs.value(call, me, offset + i));
                }
            },
            max,
            |offset, piece| {
                order.piece(offset, piece.len());
                maxima[offset..offset + piece.len()].copy_from_slice(piece);
            },
            d,
        )
        .await?;
        order.check_done();
        for (i, got) in maxima.iter().enumerate() {
            assert_eq!(
                *got,
                inputs.maxima[inputs.shifted(call, i)],
                "max {i} of {elements}"
            );
        }

        let call = call + 1;
        let mut spans: Vec<Span> = (0..elements)
            .map(|i| to_span(inputs.value(call, me, i)))
            .collect();
        tc.allreduce(&mut spans, widen, d).await?;
        for (i, got) in spans.iter().enumerate() {
            assert_eq!(
                *got,
                inputs.spans[inputs.shifted(call, i)],
                "span {i} of {elements}"
            );
        }
    }
    Ok(())
}

async fn every_plan<T: Transport>(
    t: &T,
    scale: &Scale,
    inputs: &Inputs,
) -> catena_algorithms::Result<()> {
    for (p, (name, trees, concurrent)) in schedules(t.size(), SEED).into_iter().enumerate() {
        for (k, &(chunk, slots)) in scale.rings.iter().enumerate() {
            let config = PipelineConfig { chunk, slots };
            let world = Chain::world(t, 500 + (p * scale.rings.len() + k) as u64);
            let plan = plan_for(&trees, t.rank(), concurrent);
            let root = trees[0].iter().position(Option::is_none).expect("a root") as Rank;
            let mut tc = TreeCollective::new(t, &world, plan, config, deadline(t)).await?;
            calls_on_one_setup(t, &mut tc, root, trees.len(), chunk, scale, inputs)
                .await
                .inspect_err(|e| eprintln!("rank {}: {name}, chunk {chunk}: {e}", t.rank()))?;
        }
    }
    Ok(())
}

const SHM_SCALE: Scale = Scale {
    big_bytes: 200_000,
    big_elements: 25_000,
    // Small rings that wrap many times, and the default one.
    rings: &[(64, 2), (1000, 2), (16 << 10, 4)],
};

/// Across hosts every chunk of a small ring costs a loopback TCP round
/// trip: fewer, larger chunks keep the cases to seconds.
const NETWORK_SCALE: Scale = Scale {
    big_bytes: 20_000,
    big_elements: 2_500,
    rings: &[(1000, 2), (16 << 10, 4)],
};

fn every_plan_blocking<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    let inputs = Inputs::new(SEED, t.size(), SHM_SCALE.big_elements.max(1000));
    catena_fabric::block_on(t, every_plan(t, &SHM_SCALE, &inputs)).map_err(common::to_fabric)
}

fn every_plan_over_network<T: Transport + catena_fabric::Blocking>(
    t: &T,
) -> catena_fabric::Result<()> {
    let inputs = Inputs::new(SEED, t.size(), NETWORK_SCALE.big_elements.max(1000));
    catena_fabric::block_on(t, every_plan(t, &NETWORK_SCALE, &inputs)).map_err(common::to_fabric)
}

macro_rules! shm_cases {
    ($($name:ident: $ranks:expr;)*) => {$(
        #[test]
        fn $name() {
            catena_testkit::run_case_on::<catena_fabric::shm::ShmTransport>(
                &catena_testkit::test_name(module_path!(), stringify!($name)),
                $ranks,
                catena_testkit::Starter::Launcher,
                &[],
                every_plan_blocking,
            );
        }
    )*};
}

shm_cases! {
    shm_tree_pipeline_1: 1;
    shm_tree_pipeline_3: 3;
    shm_tree_pipeline_8: 8;
}

fn sim_every_plan(n: u32, scale: &Scale) {
    let inputs = Inputs::new(SEED, n, scale.big_elements.max(1000));
    let sim = Sim::new(n, LogGp::default());
    let (results, _) = sim
        .run(async |t: &SimRank<'_>| every_plan(t, scale, &inputs).await)
        .expect("every rank finishes");
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank} of {n} on the simulator: {e}"));
    }
}

#[test]
fn sim_tree_pipeline_1_2_7() {
    let scale = Scale {
        big_bytes: 20_000,
        big_elements: 2_500,
        rings: &[(64, 2), (1000, 2)],
    };
    for n in [1, 2, 7] {
        sim_every_plan(n, &scale);
    }
}

#[test]
fn sim_tree_pipeline_512() {
    let scale = Scale {
        big_bytes: 3_000,
        big_elements: 300,
        rings: &[(64, 2)],
    };
    sim_every_plan(512, &scale);
}

/// Each simulated rank's result of `body`.
fn on_sim<R>(n: u32, body: impl AsyncFn(&SimRank<'_>) -> R) -> Vec<R> {
    let sim = Sim::new(n, LogGp::default());
    sim.run(body).expect("every rank finishes").0
}

/// In virtual time, so waiting for it costs nothing.
const SHORT: Duration = Duration::from_millis(10);

/// Sets up `plan` and broadcasts 100 bytes, asserting that it returned by
/// the deadline (give or take the few polls a timeout may be late).
async fn setup_and_bcast<T: Transport>(
    t: &T,
    plan: TreePlan,
    config: PipelineConfig,
) -> catena_algorithms::Result<()> {
    let deadline = t.deadline_in(SHORT);
    let outcome = async {
        let world = Chain::world(t, 7);
        let mut tc = TreeCollective::new(t, &world, plan, config, deadline).await?;
        tc.bcast(&mut [7; 100], deadline).await
    }
    .await;
    assert!(
        t.now() < deadline.saturating_add(SHORT),
        "rank {} returned at {:?}, past its deadline {deadline:?}",
        t.rank(),
        t.now()
    );
    outcome
}

fn small_config() -> PipelineConfig {
    PipelineConfig {
        chunk: 64,
        slots: 2,
    }
}

fn is_mismatch<V>(r: &catena_algorithms::Result<V>) -> bool {
    matches!(r, Err(Error::Mismatch { .. }))
}

#[test]
fn sim_a_child_naming_another_parent_fails() {
    // Binomial over 7 from 0: rank 4's children are 5 and 6; rank 6 claims 5.
    let tree = binomial(7, 0);
    let results = on_sim(7, async |t: &SimRank<'_>| {
        let mut plan = plan_for(std::slice::from_ref(&tree), t.rank(), false);
        if t.rank() == 6 {
            plan.colours[0].parent = Some(5);
        }
        setup_and_bcast(t, plan, small_config()).await
    });
    assert!(is_mismatch(&results[6]), "the child: {:?}", results[6]);
    assert!(
        is_mismatch(&results[4]),
        "the parent it rejected: {:?}",
        results[4]
    );
    // The root waits for 4, and 5 for chunks from 4; 1 to 3 may well finish.
    for rank in [0, 5] {
        assert!(results[rank].is_err(), "rank {rank} succeeded");
    }
}

#[test]
fn sim_colours_with_different_roots_fail() {
    let trees = [binomial(5, 0), binomial(5, 3)];
    let results = on_sim(5, async |t: &SimRank<'_>| {
        setup_and_bcast(t, plan_for(&trees, t.rank(), true), small_config()).await
    });
    for (rank, r) in results.iter().enumerate() {
        assert!(is_mismatch(r), "rank {rank}: {r:?}");
    }
}

#[test]
fn sim_a_child_with_other_terms_fails() {
    let tree = chain(3, 0, &mut Rng::new(1, 0));
    let results = on_sim(3, async |t: &SimRank<'_>| {
        let mut config = small_config();
        if tree[t.rank() as usize].is_some() && place(&tree, t.rank()).children.is_empty() {
            config.chunk = 128;
        }
        setup_and_bcast(
            t,
            plan_for(std::slice::from_ref(&tree), t.rank(), false),
            config,
        )
        .await
    });
    let mismatched = results.iter().filter(|r| is_mismatch(r)).count();
    assert_eq!(mismatched, 2, "the leaf and its parent: {results:?}");
    assert!(results.iter().all(|r| r.is_err()), "{results:?}");
}

#[test]
fn sim_calls_that_disagree_fail_and_poison_the_setup() {
    // A star around rank 0: every child checks the root's header itself.
    let star: Tree = (0..4).map(|r| (r != 0).then_some(0)).collect();
    let results = on_sim(4, async |t: &SimRank<'_>| {
        let deadline = t.deadline_in(SHORT);
        let plan = plan_for(std::slice::from_ref(&star), t.rank(), false);
        let mut tc =
            TreeCollective::new(t, &Chain::world(t, 7), plan, small_config(), deadline).await?;
        let len = if t.rank() == 0 { 100 } else { 99 };
        let first = tc.bcast(&mut vec![1; len], deadline).await;
        let again = tc.bcast(&mut vec![1; len], deadline).await;
        assert!(
            matches!(again, Err(Error::InvalidArgument(_))),
            "a call after a failed one: {again:?}"
        );

        // Another set-up: a broadcast against allreduces of as many bytes.
        let deadline = t.deadline_in(SHORT);
        let plan = plan_for(std::slice::from_ref(&star), t.rank(), false);
        let mut tc =
            TreeCollective::new(t, &Chain::world(t, 8), plan, small_config(), deadline).await?;
        let second = if t.rank() == 0 {
            tc.bcast(&mut [0; 8], deadline).await
        } else {
            tc.allreduce(&mut [0i64], wrapping_sum, deadline).await
        };
        Ok::<_, Error>((first, second))
    });
    for (rank, r) in results.into_iter().enumerate() {
        let (first, second) = r.expect("set-up works");
        if rank == 0 {
            assert!(
                first.is_err() && second.is_err(),
                "the root: {first:?} {second:?}"
            );
        } else {
            assert!(is_mismatch(&first), "rank {rank}, length: {first:?}");
            assert!(is_mismatch(&second), "rank {rank}, kind: {second:?}");
        }
    }
}

#[test]
fn sim_bad_configurations_are_refused() {
    let results = on_sim(2, async |t: &SimRank<'_>| {
        let d = t.deadline_in(SHORT);
        let pair: Tree = vec![None, Some(0)];
        let good = || plan_for(std::slice::from_ref(&pair), t.rank(), false);
        let refused = |r: catena_algorithms::Result<TreeCollective<'_, SimRank<'_>>>, what| {
            assert!(
                matches!(r, Err(Error::InvalidArgument(_))),
                "{what} on rank {}",
                t.rank()
            );
        };
        for (chunk, slots) in [(0, 2), (64, 0), (0, 0)] {
            let config = PipelineConfig { chunk, slots };
            refused(
                TreeCollective::new(t, &Chain::world(t, 9), good(), config, d).await,
                "a config with zero chunk or slots",
            );
        }
        let no_colours = TreePlan::default();
        refused(
            TreeCollective::new(t, &Chain::world(t, 9), no_colours, small_config(), d).await,
            "a plan without colours",
        );
        let mut own_child = good();
        own_child.colours[0].children.push(t.rank());
        refused(
            TreeCollective::new(t, &Chain::world(t, 9), own_child, small_config(), d).await,
            "a rank its own child",
        );
        let mut outside = good();
        outside.colours[0].children.push(2);
        refused(
            TreeCollective::new(t, &Chain::world(t, 9), outside, small_config(), d).await,
            "a child outside the job",
        );

        // Elements larger than a chunk are refused before any message, and
        // leave the set-up usable.
        let config = PipelineConfig {
            chunk: 4,
            ..small_config()
        };
        let mut tc = TreeCollective::new(t, &Chain::world(t, 10), good(), config, d).await?;
        let wide = tc.allreduce(&mut [1i64; 3], wrapping_sum, d).await;
        assert!(matches!(wide, Err(Error::InvalidArgument(_))), "{wide:?}");
        let mut data = if t.rank() == 0 {
            vec![3; 10]
        } else {
            vec![0; 10]
        };
        tc.bcast(&mut data, d).await?;
        assert_eq!(data, [3; 10]);
        Ok::<_, Error>(())
    });
    for (rank, r) in results.into_iter().enumerate() {
        r.unwrap_or_else(|e| panic!("rank {rank}: {e}"));
    }
}

#[test]
fn sim_a_panicking_operation_is_user_code() {
    let tree = binomial(7, 0);
    let results = on_sim(7, async |t: &SimRank<'_>| {
        let d = t.deadline_in(SHORT);
        let plan = plan_for(std::slice::from_ref(&tree), t.rank(), true);
        let mut tc = TreeCollective::new(t, &Chain::world(t, 11), plan, small_config(), d).await?;
        let op = |_: &mut [i64], _: &[i64]| panic!("an operation that panics");
        tc.allreduce(&mut [1i64; 20], op, d).await
    });
    // Only processes whose children are all leaves get to fold; the rest
    // wait for partials that never come.
    for (rank, r) in results.iter().enumerate() {
        let children = place(&tree, rank as Rank).children;
        let folds = !children.is_empty()
            && children
                .iter()
                .all(|&c| place(&tree, c).children.is_empty());
        match r {
            Err(Error::UserCode { message, .. }) if folds => {
                assert_eq!(message, "an operation that panics")
            }
            Err(_) if !folds => {}
            other => panic!("rank {rank}: {other:?}"),
        }
    }
}

// The same on every network provider across 2 and 3 fake hosts, under
// catena's launcher and under mpiexec.
catena_testkit::across_hosts_tests!(tree_pipeline_across_hosts: every_plan_over_network);
