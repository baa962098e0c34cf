//! MPICH's allreduce for short messages (`MPIR_Allreduce_intra_recursive_
//! doubling`, the default below `MPIR_CVAR_ALLREDUCE_SHORT_MSG_SIZE`,
//! 2 KiB): ranks beyond the largest power of two first fold into a
//! partner, then log2 p rounds of exchange-and-combine, then the folded
//! ranks get the result back. Over any subset of world ranks, in the
//! order given (`MPII_Allreduce_group`, what create_group's context id
//! agreement runs).

use catena_fabric::{Rank, Result, Tag, Time, Transport};
use catena_sim::LogGp;

use super::{exchange, log2, round_ns, CONTEXT};

/// `x` combined by `op` over `members` (this rank is `members[me]`), with
/// tags from `tag` on (at most 34 of them).
pub(crate) async fn allreduce<T: Transport>(
    t: &T,
    members: &[Rank],
    me: usize,
    mut x: Vec<u8>,
    op: impl Fn(&mut [u8], &[u8]),
    tag: Tag,
    deadline: Time,
) -> Result<Vec<u8>> {
    let n = members.len();
    let pof2 = if n == 0 { 0 } else { 1usize << n.ilog2() };
    let rem = n - pof2;
    // Ranks below 2 rem pair up: the even one hands its value over and
    // waits; the odd one goes on as rank me / 2.
    let new_rank = if me < 2 * rem {
        if me % 2 == 0 {
            t.send(members[me + 1], CONTEXT, tag, &x, deadline).await?;
            None
        } else {
            let got = t
                .recv(Some(members[me - 1]), CONTEXT, tag, deadline)
                .await?;
            op(&mut x, &got.data);
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    let world = |r: usize| {
        if r < rem {
            members[2 * r + 1]
        } else {
            members[r + rem]
        }
    };
    if let Some(r) = new_rank {
        let mut mask = 1;
        let mut round = 1;
        while mask < pof2 {
            let got = exchange(t, world(r ^ mask), tag + round, &x, deadline).await?;
            op(&mut x, &got);
            mask <<= 1;
            round += 1;
        }
    }
    if me < 2 * rem {
        let last = tag + 33;
        if me % 2 == 1 {
            t.send(members[me - 1], CONTEXT, last, &x, deadline).await?;
        } else {
            x = t
                .recv(Some(members[me + 1]), CONTEXT, last, deadline)
                .await?
                .data;
        }
    }
    Ok(x)
}

/// Its virtual time for `n` (a power of two) ranks and `bytes` per value,
/// computation free.
pub(crate) fn closed_form_ns(m: &LogGp, n: u32, bytes: usize) -> f64 {
    f64::from(log2(n)) * round_ns(m, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{Sim, SimRank};
    use std::time::Duration;

    fn add(acc: &mut [u8], x: &[u8]) {
        let s = u64::from_le_bytes(acc[..8].try_into().unwrap())
            + u64::from_le_bytes(x[..8].try_into().unwrap());
        acc[..8].copy_from_slice(&s.to_le_bytes());
    }

    fn run(n: u32) -> (Vec<u64>, Duration) {
        let sim = Sim::new(n, LogGp::BGP);
        let members: Vec<Rank> = (0..n).collect();
        let (out, report) = sim
            .run(async |t: &SimRank<'_>| {
                let d = t.deadline_in(Duration::from_secs(10));
                let x = u64::from(t.rank() + 1).to_le_bytes().to_vec();
                let got = allreduce(t, &members, t.rank() as usize, x, add, 0, d).await;
                u64::from_le_bytes(got.unwrap()[..8].try_into().unwrap())
            })
            .unwrap();
        (out, report.completion)
    }

    #[test]
    fn sums_on_every_rank_at_any_size() {
        for n in [1u32, 2, 3, 5, 6, 8, 13] {
            let (sums, _) = run(n);
            let want = u64::from(n) * u64::from(n + 1) / 2;
            assert!(sums.iter().all(|&s| s == want), "n = {n}: {sums:?}");
        }
    }

    #[test]
    fn the_closed_form_is_the_simulated_time() {
        for n in [2u32, 8, 64] {
            let (_, took) = run(n);
            let want = closed_form_ns(&LogGp::BGP, n, 8);
            assert!(
                (took.as_nanos() as f64 - want).abs() <= f64::from(log2(n)),
                "n = {n}: simulated {took:?}, closed form {want} ns"
            );
        }
    }
}
