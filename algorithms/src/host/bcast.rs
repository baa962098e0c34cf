//! Broadcast inside a host: the length (and a short value itself) travels
//! down a k-nomial tree rotated to the root, each member forwarding what
//! its parent posted; a longer value is exposed by the root in its cells
//! and every other member copies it straight out (one level, in parallel).

use catena_fabric::{HostMemory, Time};

use super::layout::CELL;
use super::mailbox::{post, take};
use super::stream::{expose, pull, pull_into, Readers};
use super::tree::{children, member_of, parent, virtual_of};
use super::{select, Team};
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
    mut value: Value<'_>,
    deadline: Time,
) -> Result<()> {
    let (me, n) = (team.me(), team.size());
    let (radix, inline) = (select::radix(n), team.layout().inline());
    let v = virtual_of(me, root, n);
    let got = match me == root {
        true => None,
        false => {
            let from = member_of(parent(v, radix).expect("not the root"), root, n);
            Some(take(team, from, seq, deadline).await?)
        }
    };
    // A long value's post carries the index of its first chunk: 0.
    const FIRST: [u8; 8] = [0; 8];
    let (len, carried): (u64, &[u8]) = match (&got, &value) {
        (Some(post), _) if post.len > inline as u64 => (post.len, &FIRST),
        (Some(post), _) => (post.len, post.bytes()),
        (None, Value::Fixed(data)) => (data.len() as u64, data),
        (None, Value::Any(data)) => (data.len() as u64, data),
    };
    let long = len > inline as u64;
    let carried = if long { &FIRST[..] } else { carried };
    for c in children(v, n, radix) {
        post(team, member_of(c, root, n), seq, len, carried, deadline).await?;
    }
    if me == root {
        if long {
            let data: &[u8] = match &value {
                Value::Fixed(buf) => buf,
                Value::Any(bytes) => bytes,
            };
            expose(team, &[(data, Readers::All)], CELL, deadline).await?;
        }
        return Ok(());
    }
    let head = got.expect("not the root");
    match &mut value {
        Value::Fixed(buf) if buf.len() as u64 != len => {
            if long {
                let len = usize::try_from(len).unwrap_or(usize::MAX);
                pull(team, root, 0, len, CELL, |_, _| Ok(()), deadline).await?;
            }
            Err(Error::Mismatch {
                what: format!(
                    "bcast lengths: the root sent {len} bytes for a buffer of {}",
                    buf.len()
                ),
            })
        }
        Value::Fixed(buf) if !long => {
            buf.copy_from_slice(head.bytes());
            Ok(())
        }
        Value::Fixed(buf) => pull_into(team, root, 0, buf, CELL, deadline).await,
        Value::Any(bytes) if !long => {
            bytes.clear();
            bytes.extend_from_slice(head.bytes());
            Ok(())
        }
        Value::Any(bytes) => {
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
            .await
        }
    }
}
