//! Chain collectives on real processes against sequential references: random
//! inputs, non-commutative operations (string concatenation, 2x2 matrix
//! products), every root, and chains whose order is not the world's.

use crate::common;

use catena_algorithms::chain::{
    allgather, allreduce, barrier, bcast, double_scan, exscan, exscan_rl, gather, reduce, scan,
    scan_rl, scatter, Chain,
};
use catena_fabric::{Rma, Transport};
use catena_sim::{LogGp, Sim, SimRank};
use common::{deadline, Rng};

type Matrix = [u64; 4];
const MODULUS: u64 = 1_000_003;

/// 2x2 matrix product mod a prime: associative, not commutative.
fn mat_mul(a: &Matrix, b: &Matrix) -> Matrix {
    let m = |x: u64, y: u64| x * y % MODULUS;
    [
        (m(a[0], b[0]) + m(a[1], b[2])) % MODULUS,
        (m(a[0], b[1]) + m(a[1], b[3])) % MODULUS,
        (m(a[2], b[0]) + m(a[3], b[2])) % MODULUS,
        (m(a[2], b[1]) + m(a[3], b[3])) % MODULUS,
    ]
}

fn concat(a: &String, b: &String) -> String {
    format!("{a}{b}")
}

fn fold<A: Clone>(items: &[A], op: impl Fn(&A, &A) -> A) -> Option<A> {
    let (first, rest) = items.split_first()?;
    Some(rest.iter().fold(first.clone(), |acc, x| op(&acc, x)))
}

/// The group's order: group rank g is world rank `order[g]`. Reversed on odd
/// seeds, so that addresses differ from ranks.
fn order(size: u32, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..size).collect();
    if seed % 2 == 1 {
        order.reverse();
    }
    order
}

fn chain_for<T: Rma>(t: &T, order: &[u32], context: u64) -> Chain {
    let g = order.iter().position(|&w| w == t.rank()).expect("a member") as u32;
    let at = |g: Option<u32>| g.and_then(|g| order.get(g as usize).copied());
    Chain::from_links(
        g,
        order.len() as u32,
        t.rank(),
        at(g.checked_sub(1)),
        at(Some(g + 1)),
        context,
    )
    .expect("a valid chain")
}

/// Inputs of every group rank for one case, the same on every process.
struct Inputs {
    words: Vec<String>,
    matrices: Vec<Matrix>,
}

fn inputs(size: u32, seed: u64) -> Inputs {
    let mut words = Vec::new();
    let mut matrices = Vec::new();
    for g in 0..size {
        let mut rng = Rng::new(seed, g);
        let len = rng.below(6) as usize;
        words.push(
            (0..len)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect(),
        );
        matrices.push([0; 4].map(|_| rng.below(MODULUS)));
    }
    Inputs { words, matrices }
}

async fn one_case<T: Transport>(t: &T, seed: u64) -> catena_algorithms::Result<()> {
    let order = order(t.size(), seed);
    let chain = chain_for(t, &order, 100 + seed);
    let (g, n) = (chain.rank() as usize, chain.size() as usize);
    let input = inputs(chain.size(), seed);
    let deadline = deadline(t);

    let s = double_scan(
        t,
        &chain,
        input.words[g].clone(),
        input.matrices[g],
        concat,
        mat_mul,
        deadline,
    )
    .await?;
    assert_eq!(s.inclusive_lr, input.words[..=g].concat(), "seed {seed}");
    assert_eq!(
        s.exclusive_lr,
        (g > 0).then(|| input.words[..g].concat()),
        "seed {seed}"
    );
    assert_eq!(
        Some(s.inclusive_rl),
        fold(&input.matrices[g..], mat_mul),
        "seed {seed}"
    );
    assert_eq!(s.exclusive_rl, fold(&input.matrices[g + 1..], mat_mul));

    let lr = scan(t, &chain, input.matrices[g], mat_mul, deadline).await?;
    assert_eq!(Some(lr), fold(&input.matrices[..=g], mat_mul));
    let ex = exscan(t, &chain, input.matrices[g], mat_mul, deadline).await?;
    assert_eq!(ex, fold(&input.matrices[..g], mat_mul));
    let rl = scan_rl(t, &chain, input.words[g].clone(), concat, deadline).await?;
    assert_eq!(rl, input.words[g..].concat());
    let ex_rl = exscan_rl(t, &chain, input.words[g].clone(), concat, deadline).await?;
    assert_eq!(ex_rl, (g + 1 < n).then(|| input.words[g + 1..].concat()));

    let all = allreduce(t, &chain, input.matrices[g], mat_mul, deadline).await?;
    assert_eq!(Some(all), fold(&input.matrices, mat_mul));

    barrier(t, &chain, deadline).await?;

    // Every root (a few on long chains).
    let roots: Vec<u32> = (0..n as u32)
        .filter(|r| n <= 9 || r % 4 == seed as u32 % 4)
        .collect();
    for &root in &roots {
        let r = reduce(t, &chain, root, input.words[g].clone(), concat, deadline).await?;
        assert_eq!(r, (g as u32 == root).then(|| input.words.concat()));

        let mut rng = Rng::new(seed ^ 0xb0, root);
        // Past the 64 KiB eager ring now and then, so forwarding waits on credit.
        let len = if rng.below(4) == 0 {
            200_000
        } else {
            rng.below(100) as usize
        };
        let payload: Vec<u8> = (0..len).map(|i| (i as u64 * 31 + seed) as u8).collect();
        let got = bcast(
            t,
            &chain,
            root,
            (g as u32 == root).then(|| payload.clone()),
            deadline,
        )
        .await?;
        assert_eq!(got, payload, "bcast from {root}, seed {seed}");

        let gathered = gather(t, &chain, root, &input.words[g], deadline).await?;
        assert_eq!(gathered, (g as u32 == root).then(|| input.words.clone()));

        let mine = scatter(
            t,
            &chain,
            root,
            (g as u32 == root).then(|| input.matrices.clone()),
            deadline,
        )
        .await?;
        assert_eq!(mine, input.matrices[g]);
    }

    let everyone = allgather(t, &chain, &input.words[g], deadline).await?;
    assert_eq!(everyone, input.words);

    let nb = chain.neighbours(t, deadline).await?;
    for d in 0..32 {
        let at = |g: Option<usize>| g.and_then(|g| order.get(g).copied());
        assert_eq!(nb.left(d), at(g.checked_sub(1 << d)));
        assert_eq!(nb.right(d), at(g.checked_add(1 << d).filter(|&r| r < n)));
    }
    Ok(())
}

async fn every_case<T: Transport>(t: &T) -> catena_algorithms::Result<()> {
    for seed in 0..12 {
        one_case(t, seed).await?;
    }
    Ok(())
}

fn collectives<T: Transport + catena_fabric::Blocking>(t: &T) -> catena_fabric::Result<()> {
    catena_fabric::block_on(t, every_case(t)).map_err(common::to_fabric)
}

/// The same cases on the simulator, as many virtual ranks in this process.
#[test]
fn sim_collectives_1_to_33() {
    for n in [1, 2, 5, 8, 13, 33] {
        let sim = Sim::new(n, LogGp::default());
        let (results, _) = sim
            .run(async |t: &SimRank<'_>| every_case(t).await)
            .expect("every rank finishes");
        for (rank, r) in results.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("rank {rank} of {n} on the simulator: {e}"));
        }
    }
}

common::provider_cases! {
    shm_collectives_1: catena_fabric::shm::ShmTransport, 1, &[], collectives;
    shm_collectives_2: catena_fabric::shm::ShmTransport, 2, &[], collectives;
    shm_collectives_5: catena_fabric::shm::ShmTransport, 5, &[], collectives;
    shm_collectives_8: catena_fabric::shm::ShmTransport, 8, &[], collectives;
    shm_collectives_13: catena_fabric::shm::ShmTransport, 13, &[], collectives;
}

#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_shm_collectives_5: catena_fabric::ofi::OfiTransport, 5, &[("CATENA_OFI_PROVIDER", "shm")], collectives;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_shm_collectives_5: catena_fabric::ucx::UcxTransport, 5, &[("UCX_TLS", "posix,cma,self")], collectives;
}

// The same on every network provider across 2 and 3 fake hosts, under
// catena's launcher and under mpiexec.
catena_testkit::across_hosts_tests!(collectives_across_hosts: collectives);
