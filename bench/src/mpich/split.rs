//! MPICH's `MPI_Comm_split` (`MPIR_Comm_split_intra` in
//! src/mpi/comm/comm_split.c): an allgather of every rank's (color, key),
//! two ints; a local pass over all N pairs that keeps this color's members
//! and sorts them by (key, parent rank); then a context id agreed by
//! `MPIR_Get_contextid_sparse` on the parent, an allreduce (bitwise and) of
//! the 64-word context mask. The new communicator's rank map is the sorted
//! list, O(members) per rank. Not modelled: the node-local and node-root
//! sub-communicators `MPIR_Comm_commit` makes for a multi-node result.

use catena_fabric::{Rank, Result, Time, Transport};
use catena_sim::LogGp;

use super::allgather::allgather;
use super::allreduce::allreduce;

/// MPICH's context mask: `MPIR_MAX_CONTEXT_MASK` (64) 32-bit words.
pub(crate) const MASK_BYTES: usize = 256;

/// Bitwise and, the mask's reduction.
pub(crate) fn and(acc: &mut [u8], x: &[u8]) {
    for (a, b) in acc.iter_mut().zip(x) {
        *a &= b;
    }
}

/// The local step: from every rank's (color, key), this rank's place and
/// its new group's size, and the group's parent ranks in new-rank order.
pub(crate) fn place(all: &[(i32, i32)], me: usize) -> (u32, Vec<Rank>) {
    let color = all[me].0;
    let mut mine: Vec<(i32, Rank)> = all
        .iter()
        .enumerate()
        .filter(|(_, c)| c.0 == color)
        .map(|(r, c)| (c.1, r as Rank))
        .collect();
    mine.sort_unstable();
    let rank = mine
        .iter()
        .position(|&(_, r)| r as usize == me)
        .expect("this rank is of its own color");
    (rank as u32, mine.into_iter().map(|(_, r)| r).collect())
}

/// This rank's (new rank, new size) after splitting the world by `color`
/// and `key`.
pub(crate) async fn split<T: Transport>(
    t: &T,
    color: i32,
    key: i32,
    deadline: Time,
) -> Result<(u32, u32)> {
    let mut pair = color.to_le_bytes().to_vec();
    pair.extend_from_slice(&key.to_le_bytes());
    let bytes = allgather(t, &pair, 0, deadline).await?;
    let all: Vec<(i32, i32)> = bytes
        .chunks_exact(8)
        .map(|c| {
            let word = |i: usize| i32::from_le_bytes(c[i..i + 4].try_into().expect("4 bytes"));
            (word(0), word(4))
        })
        .collect();
    let (rank, members) = place(&all, t.rank() as usize);
    let world: Vec<Rank> = (0..t.size()).collect();
    let mask = vec![0xff; MASK_BYTES];
    allreduce(t, &world, t.rank() as usize, mask, and, 1 << 20, deadline).await?;
    Ok((rank, members.len() as u32))
}

/// Its virtual time for `n` (a power of two) ranks with computation free:
/// the allgather of 8-byte pairs, then the context mask's allreduce.
pub(crate) fn closed_form_ns(m: &LogGp, n: u32) -> f64 {
    super::allgather::closed_form_ns(m, n, 8) + super::allreduce::closed_form_ns(m, n, MASK_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{Sim, SimRank};
    use std::time::Duration;

    fn color(r: u32) -> i32 {
        (r * 7 % 3) as i32
    }

    fn key(r: u32) -> i32 {
        (r as i32 * 5) % 4
    }

    #[test]
    fn places_follow_key_then_parent_rank() {
        for n in [1u32, 2, 5, 16] {
            let sim = Sim::new(n, LogGp::BGP);
            let (got, report) = sim
                .run(async |t: &SimRank<'_>| {
                    let d = t.deadline_in(Duration::from_secs(10));
                    split(t, color(t.rank()), key(t.rank()), d).await.unwrap()
                })
                .unwrap();
            for r in 0..n {
                let mut group: Vec<(i32, u32)> = (0..n)
                    .filter(|&s| color(s) == color(r))
                    .map(|s| (key(s), s))
                    .collect();
                group.sort();
                let at = group.iter().position(|g| g.1 == r).unwrap() as u32;
                assert_eq!(
                    got[r as usize],
                    (at, group.len() as u32),
                    "n = {n}, rank {r}"
                );
            }
            if n.is_power_of_two() {
                let want = closed_form_ns(&LogGp::BGP, n);
                let took = report.completion.as_nanos() as f64;
                assert!(
                    (took - want).abs() <= 64.0,
                    "n = {n}: {took} against {want}"
                );
            }
        }
    }
}
