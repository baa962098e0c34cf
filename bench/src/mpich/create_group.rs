//! MPICH's `MPI_Comm_create_group` (src/mpi/comm/comm_impl.c): only the
//! group's members take part; they agree on a context id by
//! `MPIR_Get_contextid_sparse_group`, an allreduce (bitwise and) of the
//! 64-word context mask over the group (`MPII_Allreduce_group`, recursive
//! doubling in group order), then each builds the new communicator's rank
//! map from the group, O(members). The group arrives as the list of its
//! world ranks, as MPICH's group object holds it.

use catena_fabric::{Rank, Result, Time, Transport};
use catena_sim::LogGp;

use super::allreduce::{allreduce, closed_form_ns as allreduce_ns};
use super::split::{and, MASK_BYTES};

/// This member's rank in the new communicator; `None` off the group.
pub(crate) async fn create_group<T: Transport>(
    t: &T,
    members: &[Rank],
    deadline: Time,
) -> Result<Option<u32>> {
    let Some(me) = members.iter().position(|&r| r == t.rank()) else {
        return Ok(None);
    };
    let mask = vec![0xff; MASK_BYTES];
    allreduce(t, members, me, mask, and, 1 << 21, deadline).await?;
    // The new communicator's map: a copy of the group's list.
    let map: Vec<Rank> = members.to_vec();
    Ok(Some(
        map.iter().position(|&r| r == t.rank()).unwrap_or(me) as u32
    ))
}

/// Its virtual time for a group of `g` (a power of two) members with
/// computation free.
pub(crate) fn closed_form_ns(m: &LogGp, g: u32) -> f64 {
    allreduce_ns(m, g, MASK_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{Sim, SimRank};
    use std::time::Duration;

    #[test]
    fn members_get_their_place_and_others_none() {
        let n = 16;
        let members: Vec<Rank> = (0..n).filter(|r| r % 2 == 1).rev().collect();
        let sim = Sim::new(n, LogGp::BGP);
        let (got, report) = sim
            .run(async |t: &SimRank<'_>| {
                let d = t.deadline_in(Duration::from_secs(10));
                create_group(t, &members, d).await.unwrap()
            })
            .unwrap();
        for r in 0..n {
            let want = members.iter().position(|&m| m == r).map(|p| p as u32);
            assert_eq!(got[r as usize], want, "rank {r}");
        }
        let want = closed_form_ns(&LogGp::BGP, 8);
        let took = report.completion.as_nanos() as f64;
        assert!((took - want).abs() <= 8.0, "{took} against {want}");
    }
}
