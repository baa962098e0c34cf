//! The collectives on `serde` values over a host team: values travel as
//! their encodings, of any length, and reductions and scans fold what an
//! allgather or a gather brought, in rank order (a host has few members,
//! so O(members) values per member is what the operation costs anyway).

use catena_fabric::{HostMemory, Time};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::{allgather_any, bcast, gather_any, scatter_any, Gathered, Team, Value};
use crate::codec::{decode, encode};
use crate::error::user_code;
use crate::scan::DoubleScan;
use crate::{Error, Result};

fn check_root(team: &Team<'_, impl HostMemory>, root: u32) -> Result<()> {
    if root >= team.size() {
        return Err(Error::InvalidArgument(format!(
            "root {root} in a group of {}",
            team.size()
        )));
    }
    Ok(())
}

/// See [`crate::Comm::ibcast`].
pub(crate) async fn bcast_value<T: HostMemory, V: Serialize + DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    value: Option<V>,
    deadline: Time,
) -> Result<V> {
    check_root(team, root)?;
    if (team.me() == root) != value.is_some() {
        return Err(Error::InvalidArgument(
            "bcast takes a value on the root and none elsewhere".into(),
        ));
    }
    let mut bytes = match &value {
        Some(v) => encode(v, "a bcast value")?,
        None => Vec::new(),
    };
    bcast(team, seq, root, Value::Any(&mut bytes), deadline).await?;
    match value {
        Some(v) => Ok(v),
        None => decode(&bytes, "a bcast value"),
    }
}

/// Decodes every member's value, in rank order.
fn decode_all<A: DeserializeOwned>(all: &Gathered, what: &'static str) -> Result<Vec<A>> {
    all.iter().map(|b| decode(b, what)).collect()
}

/// x_0 ⊕ … ⊕ x_(n-1) of at least one value.
fn fold_owned<A>(values: Vec<A>, op: &impl Fn(&A, &A) -> A) -> Result<A> {
    let mut values = values.into_iter();
    let mut acc = values.next().expect("a team has members");
    for x in values {
        acc = user_code("a reduce operation", || op(&acc, &x))?;
    }
    Ok(acc)
}

/// x_0 ⊕ … ⊕ x_(n-1) of at least one value.
pub(crate) fn fold<A: Clone>(values: &[A], op: &impl Fn(&A, &A) -> A) -> Result<A> {
    let mut acc = values[0].clone();
    for x in &values[1..] {
        acc = user_code("a scan operation", || op(&acc, x))?;
    }
    Ok(acc)
}

/// See [`crate::Comm::ireduce`].
pub(crate) async fn reduce_value<T: HostMemory, A: Serialize + DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    x: A,
    op: impl Fn(&A, &A) -> A,
    deadline: Time,
) -> Result<Option<A>> {
    check_root(team, root)?;
    let bytes = encode(&x, "a reduce value")?;
    match gather_any(team, seq, root, &bytes, deadline).await? {
        Some(all) => fold_owned(decode_all::<A>(&all, "a reduce value")?, &op).map(Some),
        None => Ok(None),
    }
}

/// See [`crate::Comm::iallreduce`].
pub(crate) async fn allreduce_value<T: HostMemory, A: Serialize + DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    x: A,
    op: impl Fn(&A, &A) -> A,
    deadline: Time,
) -> Result<A> {
    let bytes = encode(&x, "an allreduce value")?;
    let all = allgather_any(team, seq, &bytes, deadline).await?;
    fold_owned(decode_all::<A>(&all, "an allreduce value")?, &op)
}

/// See [`crate::Comm::idouble_scan`].
pub(crate) async fn double_scan_value<T, A, B>(
    team: &Team<'_, T>,
    seq: u64,
    x: A,
    y: B,
    op_lr: impl Fn(&A, &A) -> A,
    op_rl: impl Fn(&B, &B) -> B,
    deadline: Time,
) -> Result<DoubleScan<A, B>>
where
    T: HostMemory,
    A: Serialize + DeserializeOwned + Clone,
    B: Serialize + DeserializeOwned + Clone,
{
    let (xs, ys) = swap_pairs(team, seq, &x, &y, deadline).await?;
    double_scan_among(&xs, &ys, team.me() as usize, &op_lr, &op_rl)
}

/// Every member's `x` and `y`, in rank order, on every member.
pub(crate) async fn swap_pairs<T, A, B>(
    team: &Team<'_, T>,
    seq: u64,
    x: &A,
    y: &B,
    deadline: Time,
) -> Result<(Vec<A>, Vec<B>)>
where
    T: HostMemory,
    A: Serialize + DeserializeOwned,
    B: Serialize + DeserializeOwned,
{
    let bytes = encode(&(x, y), "a scan value")?;
    let all = allgather_any(team, seq, &bytes, deadline).await?;
    let pairs: Vec<(A, B)> = decode_all(&all, "a scan value")?;
    Ok(pairs.into_iter().unzip())
}

/// Member `me`'s double scan of the members' `xs` and `ys` (at least
/// one each).
pub(crate) fn double_scan_among<A: Clone, B: Clone>(
    xs: &[A],
    ys: &[B],
    me: usize,
    op_lr: &impl Fn(&A, &A) -> A,
    op_rl: &impl Fn(&B, &B) -> B,
) -> Result<DoubleScan<A, B>> {
    let exclusive_lr = (me > 0).then(|| fold(&xs[..me], op_lr)).transpose()?;
    let inclusive_lr = fold(&xs[..=me], op_lr)?;
    let exclusive_rl = (me + 1 < ys.len())
        .then(|| fold(&ys[me + 1..], op_rl))
        .transpose()?;
    let inclusive_rl = fold(&ys[me..], op_rl)?;
    Ok(DoubleScan {
        inclusive_lr,
        exclusive_lr,
        inclusive_rl,
        exclusive_rl,
    })
}

/// See [`crate::Comm::igather`]; `bytes` is this member's value, encoded.
pub(crate) async fn gather_value<T: HostMemory, V: DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    bytes: Vec<u8>,
    deadline: Time,
) -> Result<Option<Vec<V>>> {
    check_root(team, root)?;
    match gather_any(team, seq, root, &bytes, deadline).await? {
        Some(all) => decode_all(&all, "a gather value").map(Some),
        None => Ok(None),
    }
}

/// See [`crate::Comm::iscatter`].
pub(crate) async fn scatter_value<T: HostMemory, V: Serialize + DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    values: Option<Vec<V>>,
    deadline: Time,
) -> Result<V> {
    check_root(team, root)?;
    if (team.me() == root) != values.is_some() {
        return Err(Error::InvalidArgument(
            "scatter takes values on the root and none elsewhere".into(),
        ));
    }
    let encoded = match &values {
        Some(v) if v.len() != team.size() as usize => {
            return Err(Error::InvalidArgument(format!(
                "scatter of {} values over {} members",
                v.len(),
                team.size()
            )))
        }
        Some(v) => Some(
            v.iter()
                .map(|v| encode(v, "a scatter value"))
                .collect::<Result<Vec<_>>>()?,
        ),
        None => None,
    };
    let pieces: Option<Vec<&[u8]>> = encoded.as_ref().map(|e| e.iter().map(|b| &b[..]).collect());
    let mine = scatter_any(team, seq, root, pieces.as_deref(), deadline).await?;
    decode(&mine, "a scatter value")
}

/// See [`crate::Comm::iallgather`]; `bytes` is this member's value, encoded.
pub(crate) async fn allgather_value<T: HostMemory, V: DeserializeOwned>(
    team: &Team<'_, T>,
    seq: u64,
    bytes: Vec<u8>,
    deadline: Time,
) -> Result<Vec<V>> {
    let all = allgather_any(team, seq, &bytes, deadline).await?;
    decode_all(&all, "an allgather value")
}
