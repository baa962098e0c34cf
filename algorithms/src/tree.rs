//! Tree collectives on a chain: broadcast, reduce, gather, scatter and
//! allgather over a binomial tree whose edges all span 2^d ranks, so every
//! process reaches its parent and children through the chain's neighbour
//! cache. The root's tree covers each side of it; every subtree is a
//! contiguous run of ranks, so non-commutative reductions and gathers keep
//! rank order.

use std::future::Future;
use std::ops::Range;

use catena_fabric::{Rank, Time, Transport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::call::Call;
use crate::chain::{CallTags, Chain, Neighbours, Side};
use crate::codec::{decode, encode};
use crate::error::user_code;
use crate::{Error, Result};

/// One child: its address, the side it lies on and the ranks of its subtree.
#[derive(Clone, Debug)]
struct Child {
    address: Rank,
    side: Side,
    ranks: Range<u32>,
}

/// A process's place in the tree rooted at `root`.
struct Place {
    parent: Option<Rank>,
    /// Nearest first on each side; the root lists its right children first.
    children: Vec<Child>,
    /// The ranks of this process's subtree (its own included).
    ranks: Range<u32>,
}

/// The tree is built in "distance from the root" space: j = |rank - root|
/// on each side, parent j - lowbit(j), children j + 2^d for 2^d < lowbit(j),
/// subtree [j, j + lowbit(j)).
fn place(chain: &Chain, nb: &Neighbours, root: u32) -> Result<Place> {
    let (rank, size) = (chain.rank(), chain.size());
    let address = |side: Side, d: u32| {
        match side {
            Side::Left => nb.left(d),
            Side::Right => nb.right(d),
        }
        .ok_or_else(|| chain_disagrees(chain, d))
    };
    // Ranks of the subtree at distance j (of `n` on that side) as a range.
    let ranks = |side: Side, j: u32, width: u32, n: u32| {
        let width = width.min(n - j);
        match side {
            Side::Right => root + j..root + j + width,
            Side::Left => root + 1 - j - width..root + 1 - j,
        }
    };
    let children_of = |side: Side, j: u32, below: u32, n: u32| {
        (0..32)
            .map(|d| 1u32 << d)
            .take_while(|&step| step < below && u64::from(j) + u64::from(step) < u64::from(n))
            .map(move |step| {
                Ok(Child {
                    address: address(side, step.trailing_zeros())?,
                    side,
                    ranks: ranks(side, j + step, step, n),
                })
            })
            .collect::<Result<Vec<_>>>()
    };
    let (n_right, n_left) = (size - root, root + 1);
    if rank == root {
        let mut children = children_of(Side::Right, 0, u32::MAX, n_right)?;
        children.extend(children_of(Side::Left, 0, u32::MAX, n_left)?);
        return Ok(Place {
            parent: None,
            children,
            ranks: 0..size,
        });
    }
    let (side, j, n) = if rank > root {
        (Side::Right, rank - root, n_right)
    } else {
        (Side::Left, root - rank, n_left)
    };
    let lowbit = 1u32 << j.trailing_zeros();
    let towards_root = match side {
        Side::Right => Side::Left,
        Side::Left => Side::Right,
    };
    Ok(Place {
        parent: Some(address(towards_root, j.trailing_zeros())?),
        children: children_of(side, j, lowbit, n)?,
        ranks: ranks(side, j, lowbit, n),
    })
}

/// A partner 2^d away that the chain's own links do not reach: its members
/// were built with different sizes or links (`Chain::from_links`).
pub(crate) fn chain_disagrees(chain: &Chain, d: u32) -> Error {
    Error::Mismatch {
        what: format!(
            "the chain's shape: rank {} of {} has no partner {} ranks away",
            chain.rank(),
            chain.size(),
            1u64 << d
        ),
    }
}

fn check_root(chain: &Chain, root: u32) -> Result<()> {
    if root >= chain.size() {
        return Err(Error::InvalidArgument(format!(
            "root {root} in a chain of {}",
            chain.size()
        )));
    }
    Ok(())
}

/// [`check_root`], and that this member `holds` the call's data if and only
/// if it is the root (`what` the root takes, for the error).
fn check_root_holds(chain: &Chain, root: u32, holds: bool, what: &str) -> Result<()> {
    check_root(chain, root)?;
    if (chain.rank() == root) != holds {
        return Err(Error::InvalidArgument(format!(
            "{what} on the root and none elsewhere"
        )));
    }
    Ok(())
}

/// The tags of one tree collective, taken when it is called: its own and
/// the neighbour search's, if no earlier call reserved that.
pub(crate) fn reserve(chain: &Chain) -> CallTags {
    chain.reserve_neighbours();
    chain.next_call()
}

/// `value` of the root on every member; the root passes `Some`, the others
/// `None`.
pub fn bcast<'a, T: Transport, V: Serialize + DeserializeOwned + 'a>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    value: Option<V>,
    deadline: Time,
) -> impl Future<Output = Result<V>> + 'a {
    bcast_in(Call::new(t, chain, reserve(chain), deadline), root, value)
}

/// [`bcast`] with tags reserved before (and the neighbour search).
pub(crate) async fn bcast_in<T: Transport, V: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    root: u32,
    value: Option<V>,
) -> Result<V> {
    let bytes = value.as_ref().map(|v| encode(v, "a bcast value"));
    let bytes = bcast_bytes_in(call, root, bytes.transpose()?).await?;
    match value {
        Some(v) => Ok(v),
        None => decode(&bytes, "a bcast value"),
    }
}

/// [`bcast`] of a byte payload, forwarded as it came (no encoding pass):
/// the root's `bytes` on every member (the root gets its own back).
pub fn bcast_bytes<'a, T: Transport>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    bytes: Option<Vec<u8>>,
    deadline: Time,
) -> impl Future<Output = Result<Vec<u8>>> + 'a {
    bcast_bytes_in(Call::new(t, chain, reserve(chain), deadline), root, bytes)
}

/// [`bcast_bytes`] with tags reserved before (and the neighbour search).
pub(crate) async fn bcast_bytes_in<T: Transport>(
    call: Call<'_, T>,
    root: u32,
    bytes: Option<Vec<u8>>,
) -> Result<Vec<u8>> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    check_root_holds(chain, root, bytes.is_some(), "bcast takes a value")?;
    let nb = chain.reserved_neighbours(t, deadline).await?;
    let me = place(chain, &nb, root)?;
    let bytes = match (me.parent, bytes) {
        (None, Some(bytes)) => bytes,
        (Some(p), _) => chain.recv_bytes(t, p, tags.round(0)?, deadline).await?,
        (None, None) => unreachable!("the root has a value (checked above)"),
    };
    // Intermediate processes forward the bytes as they came.
    for child in &me.children {
        chain
            .send_bytes(t, child.address, tags.round(0)?, &bytes, deadline)
            .await?;
    }
    Ok(bytes)
}

/// x_0 ⊕ … ⊕ x_(n-1) on the root (`None` elsewhere), in chain order.
pub fn reduce<'a, T: Transport, A: Serialize + DeserializeOwned + 'a>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    x: A,
    op: impl Fn(&A, &A) -> A + 'a,
    deadline: Time,
) -> impl Future<Output = Result<Option<A>>> + 'a {
    let call = Call::new(t, chain, reserve(chain), deadline);
    let combine = move |a: A, b: A| user_code("a reduce operation", || op(&a, &b));
    reduce_with(call, root, x, combine)
}

/// [`reduce`] with tags reserved before (and the neighbour search) and a
/// fallible operation that consumes its operands (the left one first).
pub(crate) async fn reduce_with<T: Transport, A: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    root: u32,
    x: A,
    mut combine: impl FnMut(A, A) -> Result<A>,
) -> Result<Option<A>> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    check_root(chain, root)?;
    let nb = chain.reserved_neighbours(t, deadline).await?;
    let me = place(chain, &nb, root)?;
    let mut acc = x;
    for child in &me.children {
        let part: A = chain
            .recv(t, child.address, tags.round(0)?, deadline)
            .await?;
        acc = match child.side {
            Side::Right => combine(acc, part)?,
            Side::Left => combine(part, acc)?,
        };
    }
    match me.parent {
        Some(p) => {
            chain.send(t, p, tags.round(0)?, &acc, deadline).await?;
            Ok(None)
        }
        None => Ok(Some(acc)),
    }
}

/// Every member's `x`, in rank order, on the root (`None` elsewhere).
pub fn gather<'a, T: Transport, V: Serialize + DeserializeOwned + 'a>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    x: &V,
    deadline: Time,
) -> impl Future<Output = Result<Option<Vec<V>>>> + 'a {
    let call = Call::new(t, chain, reserve(chain), deadline);
    let x = encode(x, "a gather value");
    async move {
        let blobs = gather_bytes_in(call, root, x?).await?;
        blobs
            .map(|all| all.iter().map(|b| decode(b, "a gather value")).collect())
            .transpose()
    }
}

/// [`gather`] of byte payloads, forwarded without re-encoding.
pub fn gather_bytes<'a, T: Transport>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    x: Vec<u8>,
    deadline: Time,
) -> impl Future<Output = Result<Option<Vec<Vec<u8>>>>> + 'a {
    gather_bytes_in(Call::new(t, chain, reserve(chain), deadline), root, x)
}

/// [`gather_bytes`] with tags reserved before (and the neighbour search).
pub(crate) async fn gather_bytes_in<T: Transport>(
    call: Call<'_, T>,
    root: u32,
    x: Vec<u8>,
) -> Result<Option<Vec<Vec<u8>>>> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    check_root(chain, root)?;
    let nb = chain.reserved_neighbours(t, deadline).await?;
    let me = place(chain, &nb, root)?;
    // Left subtrees arrive nearest first, so they are prepended in turn.
    let mut left: Vec<Vec<Vec<u8>>> = Vec::new();
    let mut right = vec![x];
    for child in &me.children {
        let part: Vec<Vec<u8>> = chain
            .recv(t, child.address, tags.round(0)?, deadline)
            .await?;
        if part.len() != child.ranks.len() {
            return Err(Error::Codec {
                action: "decode",
                what: "a gathered subtree",
                message: format!("{} items for {} ranks", part.len(), child.ranks.len()),
            });
        }
        match child.side {
            Side::Right => right.extend(part),
            Side::Left => left.push(part),
        }
    }
    let mut all: Vec<Vec<u8>> = left.into_iter().rev().flatten().collect();
    all.extend(right);
    match me.parent {
        Some(p) => {
            chain.send(t, p, tags.round(0)?, &all, deadline).await?;
            Ok(None)
        }
        None => Ok(Some(all)),
    }
}

/// Hands member r the r-th of the root's `values` (`Some` on the root only,
/// one per member).
pub fn scatter<'a, T: Transport, V: Serialize + DeserializeOwned + 'a>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    values: Option<Vec<V>>,
    deadline: Time,
) -> impl Future<Output = Result<V>> + 'a {
    scatter_in(Call::new(t, chain, reserve(chain), deadline), root, values)
}

/// [`scatter`] with tags reserved before (and the neighbour search).
pub(crate) async fn scatter_in<T: Transport, V: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    root: u32,
    values: Option<Vec<V>>,
) -> Result<V> {
    let blobs = values
        .map(|all| {
            all.iter()
                .map(|v| encode(v, "a scatter value"))
                .collect::<Result<Vec<_>>>()
        })
        .transpose()?;
    decode(
        &scatter_bytes_in(call, root, blobs).await?,
        "a scatter value",
    )
}

/// [`scatter`] of byte payloads.
pub fn scatter_bytes<'a, T: Transport>(
    t: &'a T,
    chain: &'a Chain,
    root: u32,
    values: Option<Vec<Vec<u8>>>,
    deadline: Time,
) -> impl Future<Output = Result<Vec<u8>>> + 'a {
    scatter_bytes_in(Call::new(t, chain, reserve(chain), deadline), root, values)
}

/// [`scatter_bytes`] with tags reserved before (and the neighbour search).
pub(crate) async fn scatter_bytes_in<T: Transport>(
    call: Call<'_, T>,
    root: u32,
    values: Option<Vec<Vec<u8>>>,
) -> Result<Vec<u8>> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    check_root_holds(chain, root, values.is_some(), "scatter takes values")?;
    if let Some(v) = &values {
        if v.len() != chain.size() as usize {
            return Err(Error::InvalidArgument(format!(
                "scatter of {} values over {} members",
                v.len(),
                chain.size()
            )));
        }
    }
    let nb = chain.reserved_neighbours(t, deadline).await?;
    let me = place(chain, &nb, root)?;
    let mut mine: Vec<Vec<u8>> = match (me.parent, values) {
        (None, Some(v)) => v,
        (Some(p), _) => {
            let got: Vec<Vec<u8>> = chain.recv(t, p, tags.round(0)?, deadline).await?;
            if got.len() != me.ranks.len() {
                return Err(Error::Codec {
                    action: "decode",
                    what: "a scattered subtree",
                    message: format!("{} items for {} ranks", got.len(), me.ranks.len()),
                });
            }
            got
        }
        (None, None) => unreachable!("the root has values (checked above)"),
    };
    let first = me.ranks.start;
    for child in &me.children {
        let part = &mine[(child.ranks.start - first) as usize..(child.ranks.end - first) as usize];
        chain
            .send(t, child.address, tags.round(0)?, part, deadline)
            .await?;
    }
    Ok(std::mem::take(&mut mine[(chain.rank() - first) as usize]))
}

/// Every member's `x`, in rank order, on every member (O(N) memory, as the
/// operation implies): a gather to rank 0 and a broadcast.
pub fn allgather<'a, T: Transport, V: Serialize + DeserializeOwned + 'a>(
    t: &'a T,
    chain: &'a Chain,
    x: &V,
    deadline: Time,
) -> impl Future<Output = Result<Vec<V>>> + 'a {
    let call = Call::new(t, chain, reserve_allgather(chain), deadline);
    let x = encode(x, "an allgather value");
    async move { allgather_in(call, x?).await }
}

/// The tags of an [`allgather`], taken when it is called: its gather's
/// (with the neighbour search's, if no earlier call reserved that) and its
/// broadcast's.
pub(crate) fn reserve_allgather(chain: &Chain) -> [CallTags; 2] {
    [reserve(chain), chain.next_call()]
}

/// [`allgather`] of an encoded value with the tags of its gather and its
/// broadcast reserved before (and the neighbour search).
pub(crate) async fn allgather_in<T: Transport, V: DeserializeOwned>(
    call: Call<'_, T, [CallTags; 2]>,
    x: Vec<u8>,
) -> Result<Vec<V>> {
    let all = allgather_bytes_in(call, x).await?;
    all.iter()
        .map(|b| decode(b, "an allgather value"))
        .collect()
}

/// [`allgather_in`] of byte payloads: every member's `x` as it came.
pub(crate) async fn allgather_bytes_in<T: Transport>(
    call: Call<'_, T, [CallTags; 2]>,
    x: Vec<u8>,
) -> Result<Vec<Vec<u8>>> {
    let [gather, bcast] = call.tags;
    let all = gather_bytes_in(call.on(call.chain, gather), 0, x).await?;
    bcast_in(call.on(call.chain, bcast), 0, all).await
}
