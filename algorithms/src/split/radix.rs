//! Radix (seed 000, section 3.2): a most-significant-digit radix sort by
//! divide and conquer on the chain. Each member's digits are its packed
//! color (length first, so colors of one length line up) then its integer
//! key; each level splits the chain by the first 4-bit digit on which its
//! members differ (`bins`), down to chains of equal digits, which stay in
//! parent order. On the way back up each level links the last member of a
//! bin to the first of the next, giving the sorted chain of all members.
//! O(digits) memory; O(log N) rounds per level.

use std::any::Any;

use catena_fabric::{Rank, Transport};

use super::agreement::Agreed;
use super::bins::{split_by_bin, FIRST_DERIVED_CALL};
use super::fault::Faults;
use super::item::Item;
use super::{sorted, Placement};
use crate::call::Call;
use crate::chain::{Calls, Chain};
use crate::codec::Wire;
use crate::scan::allreduce;
use crate::{Error, Result};

const BINS: usize = 16;

/// Radix keeps per-level collective calls apart below this many digit bytes.
pub(crate) const MAX_DIGIT_BYTES: usize = 1 << 16;

/// The error of a split where some member asked for Radix with a key or
/// color it cannot sort (every process returns it alike).
pub(crate) fn refused() -> Error {
    Error::InvalidArgument(format!(
        "Radix sorts primitive integer keys in their own order (split, not split_by) \
         and packed colors of at most {} bytes; a member passed another",
        MAX_DIGIT_BYTES - 20
    ))
}

/// Collective calls the sorted chain makes (its placement), then those each
/// level makes on its chain: distinct tags for chains sharing processes.
const SORTED_CALLS: u32 = sorted::CALLS;
const CALLS_PER_LEVEL: u32 = 3;

/// The key as big-endian bytes that order as the integer does (sign bit
/// flipped), or `None` when the key is not a primitive integer.
pub(crate) fn integer_image(key: &dyn Any) -> Option<Vec<u8>> {
    macro_rules! unsigned {
        ($($t:ty),*) => {$(
            if let Some(k) = key.downcast_ref::<$t>() {
                return Some(k.to_be_bytes().to_vec());
            }
        )*};
    }
    macro_rules! signed {
        ($($t:ty => $u:ty),*) => {$(
            if let Some(k) = key.downcast_ref::<$t>() {
                return Some(((*k as $u) ^ (1 << (<$u>::BITS - 1))).to_be_bytes().to_vec());
            }
        )*};
    }
    unsigned!(u8, u16, u32, u64, u128, usize);
    signed!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, i128 => u128, isize => usize);
    None
}

/// A member's digits: color length, color, key image.
pub(crate) fn digits(color: &[u8], key: Option<&[u8]>) -> Result<Vec<u8>> {
    let length = u32::try_from(color.len()).map_err(|_| too_long(color.len()))?;
    let mut out = length.to_be_bytes().to_vec();
    out.extend_from_slice(color);
    out.extend_from_slice(key.unwrap_or_default());
    if out.len() > MAX_DIGIT_BYTES {
        return Err(too_long(color.len()));
    }
    Ok(out)
}

fn too_long(bytes: usize) -> Error {
    Error::InvalidArgument(format!(
        "Radix sorts packed colors of at most {} bytes; this one has {bytes}",
        MAX_DIGIT_BYTES - 4 - 16
    ))
}

/// The 4-bit digit at `position` (two per byte, high first).
fn digit(digits: &[u8], position: usize) -> usize {
    let byte = digits[position / 2];
    usize::from(if position % 2 == 0 {
        byte >> 4
    } else {
        byte & 15
    })
}

/// The first digit position where `a` and `b` differ (they have equal
/// length: equal colors' lengths lead both).
fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    let byte = a.iter().zip(b).position(|(x, y)| x != y)?;
    Some(byte * 2 + usize::from(a[byte] >> 4 == b[byte] >> 4))
}

/// One level of the descent: the chain that was split and this process's bin.
struct Level {
    chain: Chain,
    bin: usize,
    /// Members of `chain` in lower bins.
    below: u32,
}

/// Where a bin's sorted run begins and ends.
type Ends = Vec<(Option<Rank>, Option<Rank>)>;

/// Places each member; `mine` is this process's item and digits if it is a
/// member. Takes one of `calls` on the parent; the chains it derives are
/// its alone.
pub(crate) async fn place<T: Transport, K: Wire + Clone>(
    mut call: Call<'_, T, Calls>,
    mine: Option<(Item<K>, Vec<u8>)>,
    agreed: Agreed,
) -> Result<Option<Placement>> {
    let (t, parent, deadline) = (call.t, call.chain, call.deadline);
    let (members, context) = (agreed.members, agreed.context);
    let bin = usize::from(mine.is_none());
    let members_chain = split_by_bin(call.next()?, bin, 2, context).await?;
    let Some((item, digits)) = mine else {
        return Ok(None);
    };
    let level_calls = |level: u32| FIRST_DERIVED_CALL + SORTED_CALLS + CALLS_PER_LEVEL * level;
    let mut chain = members_chain.chain.counting_calls_from(level_calls(0));
    let mut path: Vec<Level> = Vec::new();
    while chain.size() > 1 {
        let range = (digits.clone(), digits.clone());
        let (lowest, highest) = allreduce(
            t,
            &chain,
            range,
            |a, b| (a.0.clone().min(b.0.clone()), a.1.clone().max(b.1.clone())),
            deadline,
        )
        .await?;
        let Some(position) = first_difference(&lowest, &highest) else {
            break;
        };
        let bin = digit(&digits, position);
        let call = Call::new(t, &chain, chain.next_call(), deadline);
        let split = split_by_bin(call, bin, BINS, context).await?;
        let next = split
            .chain
            .counting_calls_from(level_calls(path.len() as u32 + 1));
        path.push(Level {
            chain,
            bin,
            below: split.below,
        });
        chain = next;
    }
    // Equal digits: parent order, which every split kept.
    let (mut left, mut right) = (chain.left(), chain.right());
    let mut position = chain.rank();
    let me = parent.address();
    for level in path.iter().rev() {
        let mut ends: Ends = vec![(None, None); BINS];
        ends[level.bin] = (left.is_none().then_some(me), right.is_none().then_some(me));
        let ends = allreduce(
            t,
            &level.chain,
            ends,
            |a, b| {
                a.iter()
                    .zip(b)
                    .map(|(a, b)| (a.0.or(b.0), a.1.or(b.1)))
                    .collect()
            },
            deadline,
        )
        .await?;
        if left.is_none() {
            left = ends[..level.bin].iter().rev().find_map(|e| e.1);
        }
        if right.is_none() {
            right = ends[level.bin + 1..].iter().find_map(|e| e.0);
        }
        position += level.below;
    }
    let sorted_chain = Chain::from_links(position, members, me, left, right, context)?
        .counting_calls_from(FIRST_DERIVED_CALL);
    // Radix runs no user code and orders colors by length, then bytes.
    let faults = Faults::default();
    let calls = Call::new(
        t,
        &sorted_chain,
        sorted_chain.reserve(sorted::CALLS),
        deadline,
    );
    sorted::place(calls, Some(item), true, faults, false).await
}
