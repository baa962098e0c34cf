//! Batcher's bitonic sort on a chain, for any N (Lang's formulation: sort
//! the halves in opposite directions, then merge with compare-exchanges at
//! the greatest power of two below the length). Every partner lies 2^d
//! ranks away, so the chain's neighbour cache reaches it: O(log^2 N) rounds,
//! O(log N) memory. Each process walks only the recursion that contains it,
//! on an explicit stack of O(log N) frames. A comparator that panics stops
//! comparing on its process, which still exchanges, so the network's
//! messages never depend on the comparator; the placement step then fails.

use std::cmp::Ordering;

use catena_fabric::Transport;

use super::fault::Faults;
use super::item::{cmp_slots, Item, KeyOrder};
use crate::call::Call;
use crate::codec::Wire;
use crate::deadline::check_deadline;
use crate::tree::chain_disagrees;
use crate::Result;

#[derive(Clone, Copy, Debug)]
enum Frame {
    Sort { lo: u32, n: u32, ascending: bool },
    Merge { lo: u32, n: u32, ascending: bool },
}

/// The greatest power of two below `n` (n >= 2).
fn power_below(n: u32) -> u32 {
    1 << (31 - (n - 1).leading_zeros())
}

/// One compare-exchange of a process: with the partner 2^d ranks away (to
/// the right where this process is the lower one), the lower one keeping
/// the smaller (`ascending`) or the larger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Exchange {
    pub(crate) d: u32,
    pub(crate) lower: bool,
    pub(crate) ascending: bool,
}

/// The compare-exchanges rank `p` of `n` takes part in, in network order:
/// the same for single items (the split) and for blocks (alltoall's sort).
/// Only the recursion containing `p` is walked, on a stack of O(log n).
pub(crate) fn schedule(p: u32, n: u32) -> impl Iterator<Item = Exchange> {
    let mut stack = vec![Frame::Sort {
        lo: 0,
        n,
        ascending: true,
    }];
    std::iter::from_fn(move || {
        while let Some(frame) = stack.pop() {
            match frame {
                Frame::Sort { lo, n, ascending } if n > 1 => {
                    let m = n / 2;
                    stack.push(Frame::Merge { lo, n, ascending });
                    stack.push(if p < lo + m {
                        Frame::Sort {
                            lo,
                            n: m,
                            ascending: !ascending,
                        }
                    } else {
                        Frame::Sort {
                            lo: lo + m,
                            n: n - m,
                            ascending,
                        }
                    });
                }
                Frame::Merge { lo, n, ascending } if n > 1 => {
                    let m = power_below(n);
                    stack.push(if p < lo + m {
                        Frame::Merge {
                            lo,
                            n: m,
                            ascending,
                        }
                    } else {
                        Frame::Merge {
                            lo: lo + m,
                            n: n - m,
                            ascending,
                        }
                    });
                    let d = m.trailing_zeros();
                    if p < lo + n - m {
                        return Some(Exchange {
                            d,
                            lower: true,
                            ascending,
                        });
                    } else if p >= lo + m {
                        return Some(Exchange {
                            d,
                            lower: false,
                            ascending,
                        });
                    }
                }
                _ => {}
            }
        }
        None
    })
}

/// Leaves the chain sorted: the process of rank i holds the i-th smallest
/// slot (`None`, a non-member's, sorts last). Returns this process's slot
/// and what its comparator did wrong. Takes the tags of one call, on a
/// chain whose neighbour search is reserved ([`crate::tree::reserve`]).
pub(crate) async fn sort<T: Transport, K: Wire + Clone>(
    call: Call<'_, T>,
    mine: Option<Item<K>>,
    order: KeyOrder<'_, K>,
) -> Result<(Option<Item<K>>, Faults)> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    let nb = chain.reserved_neighbours(t, deadline).await?;
    // One tag for the whole sort: two partners meet in the same global order
    // and messages between two processes arrive in order.
    let tag = tags.round(0)?;
    let p = chain.rank();
    let mut slot = mine;
    let mut faults = Faults::default();
    for Exchange {
        d,
        lower,
        ascending,
    } in schedule(p, chain.size())
    {
        check_deadline(t, deadline, "a bitonic merge round")?;
        let address = if lower { nb.right(d) } else { nb.left(d) };
        let address = address.ok_or_else(|| chain_disagrees(chain, d))?;
        chain.send(t, address, tag, &slot, deadline).await?;
        let theirs: Option<Item<K>> = chain.recv(t, address, tag, deadline).await?;
        // Both partners compare (lower, upper) in that order, so even an
        // inconsistent comparator cannot duplicate an item.
        let (low, high) = if lower {
            (slot, theirs)
        } else {
            (theirs, slot)
        };
        let ord = if faults.flags().is_none() {
            faults.absorb(cmp_slots(&low, &high, order))?
        } else {
            None
        };
        // After a panic, keep both items where they are.
        let ord = ord.unwrap_or(Ordering::Equal);
        let swap = if ascending {
            ord == Ordering::Greater
        } else {
            ord == Ordering::Less
        };
        let (low, high) = if swap { (high, low) } else { (low, high) };
        slot = if lower { low } else { high };
    }
    Ok((slot, faults))
}
