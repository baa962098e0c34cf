//! Broadcast inside a host: the length (and a short value itself) travels
//! down a k-nomial tree rotated to the root, each member forwarding what
//! its parent posted; every member copies a longer value straight out of
//! the root's buffer where the root offers it (see `offer`), else out of
//! the cells the root exposes it in (one level, in parallel).

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::mailbox::{arrived, post, read, POISON};
use super::offer::{copy_offered, refused, reply, Offer, Round, Where};
use super::stream::{expose, pull, pull_into, Readers};
use super::tree::{children, member_of, parent, virtual_of};
use super::{select, Op, Team, Way};
use crate::{Error, Result};

/// Where a broadcast's value is: the root's to send, another member's to
/// fill (of the root's length, or any length).
pub(crate) enum Value<'a> {
    /// A buffer every member passes with the same length.
    Fixed(&'a mut [u8]),
    /// The root's bytes; elsewhere filled with what the root sent.
    Any(&'a mut Vec<u8>),
}

/// The root's value into every member's (call `seq`).
pub(crate) async fn bcast<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    value: Value<'_>,
    deadline: Time,
) -> Result<()> {
    let radix = select::tree_radix(team.size(), team.tuning());
    bcast_along(team, seq, root, value, radix, deadline).await
}

/// [`bcast`] along a tree of radix `radix` (a short value's; a long one
/// every member pulls from the root).
pub(crate) async fn bcast_along<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    mut value: Value<'_>,
    radix: u32,
    deadline: Time,
) -> Result<()> {
    let (me, n) = (team.me(), team.size());
    let inline = team.layout().inline();
    let v = virtual_of(me, root, n);
    let children = || children(v, n, radix).map(|c| member_of(c, root, n));
    if me == root {
        let data: &[u8] = match &value {
            Value::Fixed(buf) => buf,
            Value::Any(bytes) => bytes,
        };
        let long = data.len() > inline;
        // A long value's post says where it is.
        let offer = if long {
            Offer::of(team, Op::Bcast, data, data.len())?
        } else {
            None
        };
        let place = Where::from_start(offer.as_ref().map(Offer::handle)).encode();
        for c in children() {
            let carried = if long { &place[..] } else { data };
            post(team, c, seq, data.len() as u64, carried, deadline).await?;
        }
        if offer.is_some() {
            let readers = (0..n).filter(|&m| m != me);
            let refused = refused(team, Round::first(seq), readers, deadline).await?;
            if !refused.is_empty() {
                expose(team, &[(data, Readers::Some(&refused))], CELL, deadline).await?;
            }
        } else if long {
            expose(team, &[(data, Readers::All)], CELL, deadline).await?;
        }
        return Ok(());
    }
    let from = member_of(parent(v, radix).expect("not the root"), root, n);
    let len = arrived(team, from, seq, deadline).await?;
    if len == POISON {
        for c in children() {
            post(team, c, seq, POISON, &[], deadline).await?;
        }
        return Err(Error::Mismatch {
            what: "a member's value has another length than the others'".into(),
        });
    }
    let long = len > inline as u64;
    // A clock read costs a short value's bcast a fifth of its time.
    let began = if long { team.t().now() } else { Time(0) };
    let place = match long {
        true => Where::read(team, from, seq)?,
        false => Where::Cells { first: 0 },
    };
    if long {
        for c in children() {
            post(team, c, seq, len, &place.encode(), deadline).await?;
        }
    }
    let mut scratch = Vec::new();
    let wrong = match &mut value {
        Value::Fixed(buf) if buf.len() as u64 != len => Some(buf.len()),
        _ => None,
    };
    if !long {
        // A short value is copied out first, then passed on from here.
        let into: &mut [u8] = match (&mut value, wrong) {
            (_, Some(_)) => {
                scratch.resize(len as usize, 0);
                &mut scratch
            }
            (Value::Fixed(buf), None) => buf,
            (Value::Any(bytes), None) => {
                bytes.clear();
                bytes.resize(len as usize, 0);
                bytes
            }
        };
        read(team, from, seq, into)?;
        for c in children() {
            post(team, c, seq, len, into, deadline).await?;
        }
    }
    if let (true, Where::Offered { handle, at, .. }) = (long, place) {
        // Copied straight from the root's buffer; cells only if that fails.
        let copied = match (&mut value, wrong) {
            // Nothing wanted, neither copied nor through cells.
            (_, Some(_)) => Ok(true),
            (Value::Fixed(buf), None) => copy_offered(team, root, seq, (handle, at), buf),
            // The length is the root's word: memory for more than an offer
            // holds is taken as the bytes land, through cells.
            (Value::Any(_), None) if len > team.tuning().single_copy_max as u64 => Ok(false),
            (Value::Any(bytes), None) => {
                let len = len as usize;
                bytes.clear();
                match bytes.try_reserve(len) {
                    Ok(()) => {
                        bytes.resize(len, 0);
                        copy_offered(team, root, seq, (handle, at), bytes)
                    }
                    Err(_) => Err(Error::Codec {
                        action: "receive",
                        what: "a bcast value",
                        message: format!("the root sent {len} bytes, more than fit here"),
                    }),
                }
            }
        };
        // The root waits for every reply, whatever became of the copy.
        reply(team, root, Round::first(seq), !matches!(copied, Ok(false)))?;
        if let Some(expected) = wrong {
            return Err(Error::Mismatch {
                what: format!(
                    "bcast lengths: the root sent {len} bytes for a buffer of {expected}"
                ),
            });
        }
        if copied? {
            return team.report(root, seq, Op::Bcast, len as usize, Way::Offer, began);
        }
    }
    if let Some(expected) = wrong {
        if long {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            pull(team, root, 0, len, CELL, |_, _| Ok(()), deadline).await?;
        }
        return Err(Error::Mismatch {
            what: format!("bcast lengths: the root sent {len} bytes for a buffer of {expected}"),
        });
    }
    match (&mut value, long) {
        (_, false) => return Ok(()),
        (Value::Fixed(buf), true) => pull_into(team, root, 0, buf, CELL, deadline).await?,
        (Value::Any(bytes), true) => {
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            bytes.clear();
            pull(
                team,
                root,
                0,
                len,
                CELL,
                |_, chunk| {
                    bytes.try_reserve(chunk.len()).map_err(|_| Error::Codec {
                        action: "receive",
                        what: "a bcast value",
                        message: format!("the root sent {len} bytes, more than fit here"),
                    })?;
                    bytes.extend_from_slice(chunk);
                    Ok(())
                },
                deadline,
            )
            .await?
        }
    }
    match place {
        Where::Cells { .. } => team.report(root, seq, Op::Bcast, len as usize, Way::Cells, began),
        // Refused: the root's choice was an offer.
        Where::Offered { .. } => Ok(()),
    }
}

/// Tells every member waiting in a [`bcast`] from `root` that the value
/// will not come (the call failed at the root on a member's value of
/// another length, as a two-level allreduce does across hosts).
pub(crate) async fn poison<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    deadline: Time,
) -> Result<()> {
    let radix = select::tree_radix(team.size(), team.tuning());
    poison_along(team, seq, root, radix, deadline).await
}

/// Tells every member waiting in a [`bcast_along`] from `root` that the
/// value will not come, the call having failed at the root on a member's
/// value of another length: the poison goes down the same tree.
pub(crate) async fn poison_along<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    root: u32,
    radix: u32,
    deadline: Time,
) -> Result<()> {
    let n = team.size();
    let v = virtual_of(team.me(), root, n);
    for c in children(v, n, radix) {
        post(team, member_of(c, root, n), seq, POISON, &[], deadline).await?;
    }
    Ok(())
}
