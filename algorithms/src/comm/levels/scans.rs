//! The double scan of a communicator across hosts (and so its scans and
//! exscans) in two levels: a host's members swap their values in host
//! memory, the leaders double-scan their hosts' totals along their chain,
//! and each leader hands its host the totals of the hosts before and after
//! it. The folds are in rank order, so only where hosts hold consecutive
//! ranks; elsewhere flat.

use catena_fabric::{Time, Transport};

use super::{on_host, LevelsCall};
use crate::comm::collectives::Value;
use crate::comm::Comm;
use crate::error::user_code;
use crate::host::values::{double_scan_among, fold, swap_pairs};
use crate::scan::{double_scan_in, DoubleScan};
use crate::Result;

/// `a ⊕ b` where either may be missing (an empty run of members).
fn joined<A>(a: Option<A>, b: Option<A>, op: &impl Fn(&A, &A) -> A) -> Result<Option<A>> {
    match (a, b) {
        (Some(a), Some(b)) => user_code("a scan operation", || op(&a, &b)).map(Some),
        (a, b) => Ok(a.or(b)),
    }
}

/// `a ⊕ b` where `a` may be missing.
fn after<A>(a: Option<A>, b: A, op: &impl Fn(&A, &A) -> A) -> Result<A> {
    match a {
        Some(a) => user_code("a scan operation", || op(&a, &b)),
        None => Ok(b),
    }
}

/// `a ⊕ b` where `b` may be missing.
fn before<A>(a: A, b: Option<A>, op: &impl Fn(&A, &A) -> A) -> Result<A> {
    match b {
        Some(b) => user_code("a scan operation", || op(&a, &b)),
        None => Ok(a),
    }
}

impl<'a, 't, T: Transport> LevelsCall<'a, 't, T> {
    /// See [`Comm::idouble_scan`].
    pub(in crate::comm) async fn double_scan<A, B>(
        self,
        comm: &Comm<'t, T>,
        (x, y): (A, B),
        op_lr: impl Fn(&A, &A) -> A,
        op_rl: impl Fn(&B, &B) -> B,
        deadline: Time,
    ) -> Result<DoubleScan<A, B>>
    where
        A: Value + Clone,
        B: Value + Clone,
    {
        let Some(built) = self.serving(comm, true, deadline).await? else {
            return double_scan_in(self.flat(comm, deadline), x, y, op_lr, op_rl).await;
        };
        let (up, team) = (self.seqs().0, self.levels.team.as_ref());
        let swapped = on_host(team, up, deadline, async {
            match team {
                Some(team) => swap_pairs(team, up, &x, &y, deadline).await,
                None => Ok((vec![x], vec![y])),
            }
        })
        .await;
        // This member's scan within its host, and on a leader its host's
        // totals to scan across the leaders with.
        let leads = built.leaders.is_some();
        let within = swapped.and_then(|(xs, ys)| {
            let me = team.map_or(0, |team| team.me()) as usize;
            let scan = double_scan_among(&xs, &ys, me, &op_lr, &op_rl)?;
            let totals = match leads {
                true => Some((fold(&xs, &op_lr)?, fold(&ys, &op_rl)?)),
                false => None,
            };
            Ok((scan, totals))
        });
        let (scan, across) = match within {
            Ok((scan, totals)) => {
                let call = built.leaders_call(comm.t, (self.k, 0), deadline);
                let across = match (totals, call) {
                    (Some((x, y)), Some(call)) => double_scan_in(call, x, y, &op_lr, &op_rl)
                        .await
                        .map(|hosts| Some((hosts.exclusive_lr, hosts.exclusive_rl))),
                    _ => Ok(None),
                };
                (Some(scan), across)
            }
            Err(e) => (None, Err(e)),
        };
        let (hosts_before, hosts_after) = self.leader_to_members(&built, across, deadline).await?;
        let scan = scan.expect("a member whose own part failed got its error");
        Ok(DoubleScan {
            inclusive_lr: after(hosts_before.clone(), scan.inclusive_lr, &op_lr)?,
            exclusive_lr: joined(hosts_before, scan.exclusive_lr, &op_lr)?,
            inclusive_rl: before(scan.inclusive_rl, hosts_after.clone(), &op_rl)?,
            exclusive_rl: joined(scan.exclusive_rl, hosts_after, &op_rl)?,
        })
    }
}
