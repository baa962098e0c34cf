//! Scans on a chain by address forwarding (seed 000, figure 1): in round i
//! each process exchanges with the partners 2^i to its left and right and
//! learns the next ones from them, so every scan takes ceil(log2 N) rounds
//! and O(1) memory. The double scan runs both directions at once; the other
//! scans, allreduce and barrier are made of it.

use std::future::Future;

use catena_fabric::{Time, Transport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::call::Call;
use crate::chain::{Chain, Side};
use crate::deadline::check_deadline;
use crate::error::user_code;
use crate::Result;

/// What a double scan yields on one process of rank r in a chain of n, for
/// inputs x (left to right) and y (right to left).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleScan<A, B> {
    /// x_0 ⊕ … ⊕ x_r
    pub inclusive_lr: A,
    /// x_0 ⊕ … ⊕ x_(r-1); `None` on rank 0.
    pub exclusive_lr: Option<A>,
    /// y_r ⊕ … ⊕ y_(n-1): operands stay in chain order.
    pub inclusive_rl: B,
    /// y_(r+1) ⊕ … ⊕ y_(n-1); `None` on the last rank.
    pub exclusive_rl: Option<B>,
}

/// `prefix` ⊕ `value` where the prefix may be empty.
fn after<A: Clone>(prefix: Option<&A>, value: &A, op: &impl Fn(&A, &A) -> A) -> Result<A> {
    match prefix {
        Some(p) => user_code("a scan operation", || op(p, value)),
        None => Ok(value.clone()),
    }
}

/// Left-to-right and right-to-left scans at once, with associative (not
/// necessarily commutative) operations; every member calls it. Like every
/// collective, it takes its tags when called, not when first polled.
pub fn double_scan<'a, T, A, B>(
    t: &'a T,
    chain: &'a Chain,
    x: A,
    y: B,
    op_lr: impl Fn(&A, &A) -> A + 'a,
    op_rl: impl Fn(&B, &B) -> B + 'a,
    deadline: Time,
) -> impl Future<Output = Result<DoubleScan<A, B>>> + 'a
where
    T: Transport,
    A: Serialize + DeserializeOwned + Clone + 'a,
    B: Serialize + DeserializeOwned + Clone + 'a,
{
    let call = Call::new(t, chain, chain.next_call(), deadline);
    double_scan_in(call, x, y, op_lr, op_rl)
}

/// [`double_scan`] with the tags of a call reserved before.
pub(crate) async fn double_scan_in<T, A, B>(
    call: Call<'_, T>,
    x: A,
    y: B,
    op_lr: impl Fn(&A, &A) -> A,
    op_rl: impl Fn(&B, &B) -> B,
) -> Result<DoubleScan<A, B>>
where
    T: Transport,
    A: Serialize + DeserializeOwned + Clone,
    B: Serialize + DeserializeOwned + Clone,
{
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    let (mut left, mut right) = (chain.left(), chain.right());
    // incl_lr covers the ranks (r - 2^i, r], incl_rl covers [r, r + 2^i).
    let (mut incl_lr, mut incl_rl) = (x, y);
    let (mut excl_lr, mut excl_rl): (Option<A>, Option<B>) = (None, None);
    let mut round = 0;
    // At most 32 rounds: `check_hop` ends a chain whose links disagree.
    while left.is_some() || right.is_some() {
        check_deadline(t, deadline, "a scan round")?;
        let tag = tags.round(round)?;
        if let Some(r) = right {
            chain
                .send(t, r, tag, &(chain.hop(left), &incl_lr), deadline)
                .await?;
        }
        if let Some(l) = left {
            chain
                .send(t, l, tag, &(chain.hop(right), &incl_rl), deadline)
                .await?;
        }
        if let Some(l) = left {
            let (hop, part): (_, A) = chain.recv(t, l, tag, deadline).await?;
            left = chain.check_hop(hop, round, Side::Left)?;
            excl_lr = Some(match &excl_lr {
                Some(e) => user_code("a scan operation", || op_lr(&part, e))?,
                None => part.clone(),
            });
            incl_lr = user_code("a scan operation", || op_lr(&part, &incl_lr))?;
        }
        if let Some(r) = right {
            let (hop, part): (_, B) = chain.recv(t, r, tag, deadline).await?;
            right = chain.check_hop(hop, round, Side::Right)?;
            excl_rl = Some(match &excl_rl {
                Some(e) => user_code("a scan operation", || op_rl(e, &part))?,
                None => part.clone(),
            });
            incl_rl = user_code("a scan operation", || op_rl(&incl_rl, &part))?;
        }
        round += 1;
    }
    Ok(DoubleScan {
        inclusive_lr: incl_lr,
        exclusive_lr: excl_lr,
        inclusive_rl: incl_rl,
        exclusive_rl: excl_rl,
    })
}

/// Left-to-right inclusive scan: x_0 ⊕ … ⊕ x_r.
pub fn scan<'a, T: Transport, A: Serialize + DeserializeOwned + Clone + 'a>(
    t: &'a T,
    chain: &'a Chain,
    x: A,
    op: impl Fn(&A, &A) -> A + 'a,
    deadline: Time,
) -> impl Future<Output = Result<A>> + 'a {
    let s = double_scan(t, chain, x, (), op, |_, _| (), deadline);
    async move { Ok(s.await?.inclusive_lr) }
}

/// Left-to-right exclusive scan: x_0 ⊕ … ⊕ x_(r-1), `None` on rank 0.
pub fn exscan<'a, T: Transport, A: Serialize + DeserializeOwned + Clone + 'a>(
    t: &'a T,
    chain: &'a Chain,
    x: A,
    op: impl Fn(&A, &A) -> A + 'a,
    deadline: Time,
) -> impl Future<Output = Result<Option<A>>> + 'a {
    let s = double_scan(t, chain, x, (), op, |_, _| (), deadline);
    async move { Ok(s.await?.exclusive_lr) }
}

/// Right-to-left inclusive scan: y_r ⊕ … ⊕ y_(n-1).
pub fn scan_rl<'a, T: Transport, B: Serialize + DeserializeOwned + Clone + 'a>(
    t: &'a T,
    chain: &'a Chain,
    y: B,
    op: impl Fn(&B, &B) -> B + 'a,
    deadline: Time,
) -> impl Future<Output = Result<B>> + 'a {
    let s = double_scan(t, chain, (), y, |_, _| (), op, deadline);
    async move { Ok(s.await?.inclusive_rl) }
}

/// Right-to-left exclusive scan: y_(r+1) ⊕ … ⊕ y_(n-1), `None` on the last rank.
pub fn exscan_rl<'a, T: Transport, B: Serialize + DeserializeOwned + Clone + 'a>(
    t: &'a T,
    chain: &'a Chain,
    y: B,
    op: impl Fn(&B, &B) -> B + 'a,
    deadline: Time,
) -> impl Future<Output = Result<Option<B>>> + 'a {
    let s = double_scan(t, chain, (), y, |_, _| (), op, deadline);
    async move { Ok(s.await?.exclusive_rl) }
}

/// x_0 ⊕ … ⊕ x_(n-1) on every member, in log2 N rounds of one double scan.
pub fn allreduce<'a, T: Transport, A: Serialize + DeserializeOwned + Clone + 'a>(
    t: &'a T,
    chain: &'a Chain,
    x: A,
    op: impl Fn(&A, &A) -> A + 'a,
    deadline: Time,
) -> impl Future<Output = Result<A>> + 'a {
    let call = Call::new(t, chain, chain.next_call(), deadline);
    allreduce_in(call, x, op)
}

/// [`allreduce`] with the tags of a call reserved before.
pub(crate) async fn allreduce_in<T: Transport, A: Serialize + DeserializeOwned + Clone>(
    call: Call<'_, T>,
    x: A,
    op: impl Fn(&A, &A) -> A,
) -> Result<A> {
    let own = x.clone();
    let s = double_scan_in(call, x.clone(), x, &op, &op).await?;
    let left_and_own = after(s.exclusive_lr.as_ref(), &own, &op)?;
    match s.exclusive_rl {
        Some(right) => user_code("a scan operation", || op(&left_and_own, &right)),
        None => Ok(left_and_own),
    }
}

/// Returns once every member has entered.
pub fn barrier<'a, T: Transport>(
    t: &'a T,
    chain: &'a Chain,
    deadline: Time,
) -> impl Future<Output = Result<()>> + 'a {
    let s = double_scan(t, chain, (), (), |_, _| (), |_, _| (), deadline);
    async move {
        s.await?;
        Ok(())
    }
}
