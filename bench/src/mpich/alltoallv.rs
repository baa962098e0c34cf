//! MPICH's alltoallv-based exchange, as `catena-bench alltoall` runs it
//! over MPI: count the elements per target, `MPI_Alltoall` the counts
//! (one int per peer: Bruck's algorithm from 8 ranks on,
//! `MPIR_Alltoall_intra_brucks`, ceil(log2 N) rounds of about N/2 counts;
//! below 8, every pair directly), sort the elements by target, then
//! `MPI_Alltoallv` (`MPIR_Alltoallv_intra_scattered`: a send to and a
//! receive from every peer with a non-zero count).

use bytemuck::Pod;
use catena_fabric::{Rank, Result, Tag, Time, Transport};
use catena_sim::LogGp;

use super::{round_ns, CONTEXT};

/// Bruck's alltoall of one u32 per peer: what every rank counted for this
/// one, by source.
async fn counts<T: Transport>(t: &T, mine: &[u32], deadline: Time) -> Result<Vec<u32>> {
    let (me, n) = (t.rank() as usize, t.size() as usize);
    if n < 8 {
        for (to, c) in mine.iter().enumerate().filter(|&(to, _)| to != me) {
            t.send(to as Rank, CONTEXT, 0, &c.to_le_bytes(), deadline)
                .await?;
        }
        let mut got = vec![0u32; n];
        got[me] = mine[me];
        for (from, g) in got.iter_mut().enumerate().filter(|&(from, _)| from != me) {
            let m = t.recv(Some(from as Rank), CONTEXT, 0, deadline).await?;
            *g = u32::from_le_bytes(m.data[..4].try_into().expect("a count"));
        }
        return Ok(got);
    }
    // Block j is bound for rank me + j; moving by each set bit of j in
    // turn, it arrives at position j of rank me + j.
    let mut blocks: Vec<u32> = (0..n).map(|j| mine[(me + j) % n]).collect();
    let mut pof2 = 1;
    let mut round: Tag = 1;
    while pof2 < n {
        let to = ((me + pof2) % n) as Rank;
        let from = ((me + n - pof2) % n) as Rank;
        let packed: Vec<u8> = (0..n)
            .filter(|j| j & pof2 != 0)
            .flat_map(|j| blocks[j].to_le_bytes())
            .collect();
        t.send(to, CONTEXT, round, &packed, deadline).await?;
        let got = t.recv(Some(from), CONTEXT, round, deadline).await?.data;
        for (j, c) in (0..n).filter(|j| j & pof2 != 0).zip(got.chunks_exact(4)) {
            blocks[j] = u32::from_le_bytes(c.try_into().expect("4 bytes"));
        }
        pof2 <<= 1;
        round += 1;
    }
    Ok((0..n).map(|src| blocks[(me + n - src) % n]).collect())
}

/// Every element of `send` at its target (`target(e)`), into `recv`: the
/// number received.
pub(crate) async fn exchange<T: Transport, E: Pod>(
    t: &T,
    send: &[E],
    recv: &mut [E],
    target: impl Fn(&E) -> u32,
    deadline: Time,
) -> Result<usize> {
    let (me, n) = (t.rank() as usize, t.size() as usize);
    let mut sendcounts = vec![0u32; n];
    for e in send {
        sendcounts[target(e) as usize] += 1;
    }
    let recvcounts = counts(t, &sendcounts, deadline).await?;
    let mut at: Vec<usize> = sendcounts
        .iter()
        .scan(0, |s, &c| Some(std::mem::replace(s, *s + c as usize)))
        .collect();
    let mut sorted = vec![E::zeroed(); send.len()];
    for e in send {
        let to = target(e) as usize;
        sorted[at[to]] = *e;
        at[to] += 1;
    }
    let data = 1 << 22;
    let mut start = 0;
    for (to, &c) in sendcounts.iter().enumerate() {
        let part = &sorted[start..start + c as usize];
        start += c as usize;
        if to == me {
            continue;
        }
        if c > 0 {
            let bytes = bytemuck::cast_slice(part);
            t.send(to as Rank, CONTEXT, data, bytes, deadline).await?;
        }
    }
    let mut filled = 0;
    let own = sendcounts[..me].iter().sum::<u32>() as usize;
    let own = &sorted[own..own + sendcounts[me] as usize];
    for (from, &c) in recvcounts.iter().enumerate() {
        let c = c as usize;
        if from == me {
            recv[filled..filled + c].copy_from_slice(own);
        } else if c > 0 {
            let m = t.recv(Some(from as Rank), CONTEXT, data, deadline).await?;
            let got: &[E] = bytemuck::cast_slice(&m.data);
            recv[filled..filled + c].copy_from_slice(got);
        }
        filled += c;
    }
    Ok(filled)
}

/// The counts' alltoall for `n` (a power of two, from 8) ranks with
/// computation free: round k moves the n/2 counts whose index has bit k.
pub(crate) fn counts_closed_form_ns(m: &LogGp, n: u32) -> f64 {
    f64::from(super::log2(n)) * round_ns(m, 4 * n as usize / 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{Sim, SimRank};
    use std::time::Duration;

    #[test]
    fn every_element_arrives_once_at_its_target() {
        for n in [1u32, 2, 3, 8, 13, 32] {
            let sim = Sim::new(n, LogGp::BGP);
            let (got, _) = sim
                .run(async |t: &SimRank<'_>| {
                    let d = t.deadline_in(Duration::from_secs(10));
                    let me = t.rank();
                    // Element i of rank r: (target, r, i), targets spread.
                    let send: Vec<[u32; 3]> =
                        (0..20).map(|i| [(me * 3 + i * i) % n, me, i]).collect();
                    let mut recv = vec![[0u32; 3]; 20 * n as usize];
                    let k = exchange(t, &send, &mut recv, |e| e[0], d).await.unwrap();
                    recv.truncate(k);
                    recv
                })
                .unwrap();
            let mut all: Vec<[u32; 3]> = Vec::new();
            for (r, got) in got.iter().enumerate() {
                assert!(got.iter().all(|e| e[0] == r as u32), "n = {n}");
                all.extend(got);
            }
            all.sort();
            let mut want: Vec<[u32; 3]> = (0..n)
                .flat_map(|me| (0..20).map(move |i| [(me * 3 + i * i) % n, me, i]))
                .collect();
            want.sort();
            assert_eq!(all, want, "n = {n}");
        }
    }

    #[test]
    fn the_counts_closed_form_is_the_simulated_time() {
        for n in [8u32, 64] {
            let sim = Sim::new(n, LogGp::BGP);
            let (_, report) = sim
                .run(async |t: &SimRank<'_>| {
                    let d = t.deadline_in(Duration::from_secs(10));
                    let mut recv: Vec<u32> = Vec::new();
                    exchange(t, &[], &mut recv, |e: &u32| *e, d).await.unwrap()
                })
                .unwrap();
            let want = counts_closed_form_ns(&LogGp::BGP, n);
            let took = report.completion.as_nanos() as f64;
            assert!((took - want).abs() <= 8.0, "n = {n}: {took} against {want}");
        }
    }
}
