//! The gathers, scatters and allgathers of a communicator across hosts, in
//! two levels: a host's values meet at its leader through host memory, the
//! leaders pass whole hosts' runs of values along their chain, and each
//! leader deals its host's run in host memory. A host's values are a run of
//! the result only where it holds consecutive ranks; elsewhere they stay
//! flat.

use catena_fabric::{Time, Transport};

use super::{check_root, on_host, Built, LevelsCall};
use crate::chain::CallTags;
use crate::codec::{decode, encode};
use crate::comm::collectives::Value;
use crate::comm::Comm;
use crate::doubling;
use crate::host;
use crate::tree::{allgather_bytes_in, gather_bytes_in, reduce_with, scatter_bytes_in, scatter_in};
use crate::{Error, Result};

/// Encoded values of consecutive members, in rank order: a host's, or a
/// run of hosts', as the leaders pass them.
type Run = Vec<Vec<u8>>;

/// `a` followed by `b`: the leaders' fold of runs (and of the hosts'
/// sizes), in rank order.
fn joined<X>(mut a: Vec<X>, b: Vec<X>) -> Result<Vec<X>> {
    a.extend(b);
    Ok(a)
}

/// The runs of consecutive members that hosts of `sizes` members hold, in
/// order, cut from all the members' `values`.
fn cut(values: Run, sizes: &[u64]) -> Result<Vec<Run>> {
    // The sizes come from the other leaders: a sum past u64 is a lie too.
    let members = sizes
        .iter()
        .try_fold(0u64, |sum, &size| sum.checked_add(size));
    if members != Some(values.len() as u64) {
        return Err(Error::Mismatch {
            what: format!(
                "a scatter across hosts: the hosts hold {members:?} members, the root dealt {}",
                values.len()
            ),
        });
    }
    let mut values = values.into_iter();
    Ok(sizes
        .iter()
        .map(|&size| values.by_ref().take(size as usize).collect())
        .collect())
}

/// `all` if it holds one value per member of a communicator of `size`
/// (the leaders' runs came from peers, whose counts the join trusts).
fn check_count(all: Run, size: u32) -> Result<Run> {
    if all.len() == size as usize {
        return Ok(all);
    }
    Err(Error::Codec {
        action: "decode",
        what: "the hosts' runs of gathered values",
        message: format!("{} values for {size} members", all.len()),
    })
}

/// `Codec` unless a leader's run holds one value per member of its host.
fn check_run(run: &Run, members: u32) -> Result<()> {
    if run.len() == members as usize {
        return Ok(());
    }
    Err(Error::Codec {
        action: "decode",
        what: "a host's run of scattered values",
        message: format!("{} values for {members} members", run.len()),
    })
}

impl<'a, 't, T: Transport, F: Copy> LevelsCall<'a, 't, T, F> {
    /// This host's members' `mine` in rank order on its leader (`None` on
    /// the other members), as this call's first host call.
    async fn host_run(&self, mine: Vec<u8>, deadline: Time) -> Result<Option<Run>> {
        let (up, team) = (self.seqs().0, self.levels.team.as_ref());
        on_host(team, up, deadline, async {
            let Some(team) = team else {
                return Ok(Some(vec![mine]));
            };
            let all = host::gather_any(team, up, 0, &mine, deadline).await?;
            Ok(all.map(|all| all.iter().map(<[u8]>::to_vec).collect()))
        })
        .await
    }

    /// Every member's `mine`, in rank order, on every member: each host's
    /// run to its leader, the runs by recursive doubling across the leaders,
    /// the whole from each leader through its host.
    pub(super) async fn allgather_run(
        &self,
        comm: &Comm<'t, T>,
        built: &Built,
        mine: Vec<u8>,
        deadline: Time,
    ) -> Result<Run> {
        let host = self.host_run(mine, deadline).await;
        let all = match (host, built.leaders_call(comm.t, (self.k, 0), deadline)) {
            (Ok(Some(run)), Some(call)) => {
                let join = |a: &Run, b: &Run| a.iter().chain(b).cloned().collect();
                doubling::allreduce(call, run, join).await.map(Some)
            }
            (other, _) => other,
        };
        self.leader_to_members(built, all, deadline).await
    }
}

impl<'a, 't, T: Transport> LevelsCall<'a, 't, T> {
    /// Every member's `mine`, in rank order, on the root (`None`
    /// elsewhere): each host's run to its leader, the runs along a tree of
    /// the leaders to rank 0, and from there to the root where it is
    /// another.
    async fn gather_run(
        &self,
        comm: &Comm<'t, T>,
        built: &Built,
        root: u32,
        mine: Vec<u8>,
        deadline: Time,
    ) -> Result<Option<Run>> {
        let host = self.host_run(mine, deadline).await;
        let all = match (host, built.leaders_call(comm.t, (self.k, 0), deadline)) {
            (Ok(Some(run)), Some(call)) => reduce_with(call, 0, run, joined).await,
            (other, _) => other,
        };
        let down = self.seqs().1;
        on_host(self.levels.team.as_ref(), down, deadline, async { Ok(()) }).await?;
        self.to_root(comm, root, all?, deadline).await
    }

    /// Member r gets the r-th of the root's `values`: to rank 0 first where
    /// the root is another; rank 0 learns the hosts' sizes along a tree of
    /// the leaders, deals each leader its host's run along the same tree,
    /// and each leader deals its run through its host.
    async fn scatter_run(
        &self,
        comm: &Comm<'t, T>,
        built: &Built,
        root: u32,
        values: Option<Run>,
        deadline: Time,
    ) -> Result<Vec<u8>> {
        let t = comm.t;
        let (up, down) = self.seqs();
        let team = self.levels.team.as_ref();
        on_host(team, up, deadline, async { Ok(()) }).await?;
        let held = self.to_first(comm, root, values, deadline).await;
        let members = team.map_or(1, |team| team.size());
        let run = match (
            held,
            built.leaders_call(t, (self.k, 0), deadline),
            built.leaders_call(t, (self.k, 1), deadline),
        ) {
            (Ok(values), Some(sizes_call), Some(deal)) => {
                let sizes = reduce_with(sizes_call, 0, vec![u64::from(members)], joined).await;
                let runs = match (sizes, values) {
                    (Ok(Some(sizes)), Some(values)) => cut(values, &sizes).map(Some),
                    (sizes, _) => sizes.map(|_| None),
                };
                match runs {
                    Ok(runs) => scatter_in::<T, Run>(deal, 0, runs).await.map(Some),
                    Err(e) => Err(e),
                }
            }
            (held, ..) => held.map(|_| None),
        };
        let leads = built.leaders.is_some();
        on_host(team, down, deadline, async {
            let Some(team) = team else {
                let mut run = run?.expect("alone, this member leads");
                check_run(&run, 1)?;
                return Ok(run.pop().expect("one value"));
            };
            // A leader that failed leaves its host's members to their
            // deadline, as a flat scatter would.
            match (leads, run) {
                (true, Ok(run)) => {
                    let run = run.expect("a leader holds its host's run");
                    check_run(&run, team.size())?;
                    let pieces: Vec<&[u8]> = run.iter().map(|v| &v[..]).collect();
                    host::scatter_any(team, down, 0, Some(&pieces), deadline).await
                }
                (true, Err(e)) => Err(e),
                (false, own) => {
                    let got = host::scatter_any(team, down, 0, None, deadline).await;
                    own.and(got)
                }
            }
        })
        .await
    }

    /// See [`Comm::igather`].
    pub(in crate::comm) async fn gather_value<V: Value>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        mine: Result<Vec<u8>>,
        deadline: Time,
    ) -> Result<Option<Vec<V>>> {
        let all = self.gather_bytes(comm, root, mine, deadline).await?;
        all.map(|all| all.iter().map(|b| decode(b, "a gather value")).collect())
            .transpose()
    }

    /// [`LevelsCall::gather_value`] of encoded values, `mine` this
    /// member's (or the error encoding it met).
    pub(in crate::comm) async fn gather_bytes(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        mine: Result<Vec<u8>>,
        deadline: Time,
    ) -> Result<Option<Run>> {
        let Some(built) = self.serving(comm, true, deadline).await? else {
            return gather_bytes_in(self.flat(comm, deadline), root, mine?).await;
        };
        match check_root(comm, root).and(mine) {
            Ok(mine) => {
                let all = self.gather_run(comm, &built, root, mine, deadline).await?;
                all.map(|all| check_count(all, comm.size())).transpose()
            }
            Err(e) => self.pass(deadline).await.and(Err(e)),
        }
    }

    /// See [`Comm::iscatter`].
    pub(in crate::comm) async fn scatter_value<V: Value>(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        values: Option<Vec<V>>,
        deadline: Time,
    ) -> Result<V> {
        let encoded = values
            .map(|all| {
                all.iter()
                    .map(|v| encode(v, "a scatter value"))
                    .collect::<Result<Run>>()
            })
            .transpose();
        let mine = self.scatter_bytes(comm, root, encoded, deadline).await?;
        decode(&mine, "a scatter value")
    }

    /// [`LevelsCall::scatter_value`] of encoded values (or the error
    /// encoding them met, on the root).
    pub(in crate::comm) async fn scatter_bytes(
        self,
        comm: &Comm<'t, T>,
        root: u32,
        values: Result<Option<Run>>,
        deadline: Time,
    ) -> Result<Vec<u8>> {
        let Some(built) = self.serving(comm, true, deadline).await? else {
            return scatter_bytes_in(self.flat(comm, deadline), root, values?).await;
        };
        let checked =
            check_root(comm, root).and(values).and_then(|values| {
                if (comm.rank() == root) != values.is_some() {
                    return Err(Error::InvalidArgument(
                        "scatter takes values on the root and none elsewhere".into(),
                    ));
                }
                match &values {
                    Some(v) if v.len() != comm.size() as usize => Err(Error::InvalidArgument(
                        format!("scatter of {} values over {} members", v.len(), comm.size()),
                    )),
                    _ => Ok(values),
                }
            });
        match checked {
            Ok(values) => self.scatter_run(comm, &built, root, values, deadline).await,
            Err(e) => self.pass(deadline).await.and(Err(e)),
        }
    }
}

impl<'a, 't, T: Transport> LevelsCall<'a, 't, T, [CallTags; 2]> {
    /// See [`Comm::iallgather`].
    pub(in crate::comm) async fn allgather_value<V: Value>(
        self,
        comm: &Comm<'t, T>,
        mine: Result<Vec<u8>>,
        deadline: Time,
    ) -> Result<Vec<V>> {
        let all = self.allgather_bytes(comm, mine, deadline).await?;
        all.iter()
            .map(|b| decode(b, "an allgather value"))
            .collect()
    }

    /// [`LevelsCall::allgather_value`] of encoded values.
    pub(in crate::comm) async fn allgather_bytes(
        self,
        comm: &Comm<'t, T>,
        mine: Result<Vec<u8>>,
        deadline: Time,
    ) -> Result<Run> {
        let Some(built) = self.serving(comm, true, deadline).await? else {
            return allgather_bytes_in(self.flat(comm, deadline), mine?).await;
        };
        match mine {
            Ok(mine) => {
                let all = self.allgather_run(comm, &built, mine, deadline).await?;
                check_count(all, comm.size())
            }
            Err(e) => self.pass(deadline).await.and(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_another_count_are_refused() {
        let all: Run = vec![vec![1], vec![2]];
        assert_eq!(check_count(all.clone(), 2).unwrap(), all);
        for size in [1, 3] {
            let refused = check_count(all.clone(), size);
            assert!(matches!(refused, Err(Error::Codec { .. })), "{size}");
        }
    }

    #[test]
    fn runs_are_cut_by_the_hosts_sizes_and_lies_refused() {
        let values: Run = (0..5u8).map(|v| vec![v]).collect();
        let runs = cut(values.clone(), &[2, 0, 3]).unwrap();
        assert_eq!(
            runs,
            [
                vec![vec![0], vec![1]],
                vec![],
                vec![vec![2], vec![3], vec![4]]
            ]
        );
        for sizes in [&[2, 2][..], &[3, 3], &[u64::MAX, 6]] {
            let refused = cut(values.clone(), sizes);
            assert!(matches!(refused, Err(Error::Mismatch { .. })), "{sizes:?}");
        }
    }
}
