//! MPICH's allgather of equal blocks over a power-of-two communicator
//! (`MPIR_Allgather_intra_recursive_doubling`): log2 p rounds, the block
//! held doubling each round. MPICH picks it while the total is under
//! `MPIR_CVAR_ALLGATHER_LONG_MSG_SIZE` (512 KiB) and the ring above; the
//! baseline keeps recursive doubling at every size, the cheaper of the two
//! under LogGP ((N - 1) rounds of o + L + o for the ring), so the
//! comparison is the kindest to MPICH. Other sizes take the ring.

use catena_fabric::{Result, Tag, Time, Transport};
use catena_sim::LogGp;

use super::{exchange, log2, round_ns, CONTEXT};

/// Every rank's `block` (all of one length), in rank order; tags from `tag`
/// on (at most 32 for a power of two, `n` for the ring).
pub(crate) async fn allgather<T: Transport>(
    t: &T,
    block: &[u8],
    tag: Tag,
    deadline: Time,
) -> Result<Vec<u8>> {
    let (me, n) = (t.rank() as usize, t.size() as usize);
    let k = block.len();
    let mut all = vec![0u8; k * n];
    all[me * k..(me + 1) * k].copy_from_slice(block);
    if n.is_power_of_two() {
        let mut mask = 1;
        let mut round = 0;
        while mask < n {
            // This rank holds the blocks of its aligned run of `mask` ranks.
            let start = me & !(mask - 1);
            let theirs = (me ^ mask) & !(mask - 1);
            let mine = all[start * k..(start + mask) * k].to_vec();
            let peer = (me ^ mask) as u32;
            let got = exchange(t, peer, tag + round, &mine, deadline).await?;
            all[theirs * k..(theirs + mask) * k].copy_from_slice(&got);
            mask <<= 1;
            round += 1;
        }
    } else {
        let (right, left) = (((me + 1) % n) as u32, ((me + n - 1) % n) as u32);
        for step in 0..n - 1 {
            let send = (me + n - step) % n;
            let recv = (me + n - step - 1) % n;
            let out = all[send * k..(send + 1) * k].to_vec();
            let round = tag + step as Tag;
            t.send(right, CONTEXT, round, &out, deadline).await?;
            let got = t.recv(Some(left), CONTEXT, round, deadline).await?;
            all[recv * k..(recv + 1) * k].copy_from_slice(&got.data);
        }
    }
    Ok(all)
}

/// Its virtual time for `n` (a power of two) ranks of `block` bytes each,
/// computation free: round i moves 2^i blocks.
pub(crate) fn closed_form_ns(m: &LogGp, n: u32, block: usize) -> f64 {
    (0..log2(n)).map(|i| round_ns(m, block << i)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{Sim, SimRank};
    use std::time::Duration;

    fn run(n: u32) -> (Vec<Vec<u8>>, Duration) {
        let sim = Sim::new(n, LogGp::BGP);
        let (out, report) = sim
            .run(async |t: &SimRank<'_>| {
                let d = t.deadline_in(Duration::from_secs(10));
                let block = [t.rank() as u8, 7, (t.rank() * 3) as u8];
                allgather(t, &block, 0, d).await.unwrap()
            })
            .unwrap();
        (out, report.completion)
    }

    #[test]
    fn every_rank_gets_every_block_in_order() {
        for n in [1u32, 2, 3, 4, 7, 16] {
            let want: Vec<u8> = (0..n).flat_map(|r| [r as u8, 7, (r * 3) as u8]).collect();
            let (got, _) = run(n);
            assert!(got.iter().all(|g| *g == want), "n = {n}");
        }
    }

    #[test]
    fn the_closed_form_is_the_simulated_time() {
        for n in [2u32, 16, 128] {
            let (_, took) = run(n);
            let want = closed_form_ns(&LogGp::BGP, n, 3);
            assert!(
                (took.as_nanos() as f64 - want).abs() <= f64::from(log2(n)),
                "n = {n}: simulated {took:?}, closed form {want} ns"
            );
        }
    }
}
