//! Splitting a chain into one chain per bin, keeping the order within each
//! bin, by one double scan of per-bin (nearest address, count) tables:
//! O(bins) memory and O(log N) rounds. Hash bins colors by hash values,
//! Radix by digits.

use catena_fabric::{ContextId, Rank, Transport};

use crate::call::Call;
use crate::chain::Chain;
use crate::scan::double_scan_in;
use crate::Result;

/// Chains derived inside a split count their collective calls from here,
/// clear of the calls a user makes on the final chain of the same context.
pub(crate) const FIRST_DERIVED_CALL: u32 = 1 << 20;

/// Per bin: the nearest process of that bin on one side and how many there are.
type Table = Vec<(Option<Rank>, u32)>;

/// This process's part of a chain split by bins.
pub(crate) struct BinSplit {
    /// The chain of this process's bin, counting calls on from the parent's.
    pub chain: Chain,
    /// Processes of the parent chain in lower bins.
    pub below: u32,
}

/// Splits `chain` into one chain per bin (`bins` bins, this process in
/// `mine`), with the tags of one call on it.
pub(crate) async fn split_by_bin<T: Transport>(
    call: Call<'_, T>,
    mine: usize,
    bins: usize,
    context: ContextId,
) -> Result<BinSplit> {
    let chain = call.chain;
    let mut table: Table = vec![(None, 0); bins];
    table[mine] = (Some(chain.address()), 1);
    // The left part's nearest is its rightmost, the right part's its leftmost.
    let lr = |a: &Table, b: &Table| -> Table {
        a.iter()
            .zip(b)
            .map(|(a, b)| (b.0.or(a.0), a.1 + b.1))
            .collect()
    };
    let rl = |a: &Table, b: &Table| -> Table {
        a.iter()
            .zip(b)
            .map(|(a, b)| (a.0.or(b.0), a.1 + b.1))
            .collect()
    };
    let s = double_scan_in(call, table.clone(), table, lr, rl).await?;
    let count = |side: &Option<Table>, bin: usize| side.as_ref().map_or(0, |e| e[bin].1);
    let nearest = |side: &Option<Table>| side.as_ref().and_then(|e| e[mine].0);
    let (before, after) = (count(&s.exclusive_lr, mine), count(&s.exclusive_rl, mine));
    let below = (0..mine)
        .map(|bin| count(&s.exclusive_lr, bin) + count(&s.exclusive_rl, bin))
        .sum();
    // A chain split from one in the new context continues its count; one
    // split from the parent (another context) starts afresh, whatever calls
    // its members have reserved on the parent meanwhile.
    let calls = if chain.context() == context {
        chain.calls_made()
    } else {
        FIRST_DERIVED_CALL
    };
    let chain = Chain::from_links(
        before,
        before + 1 + after,
        chain.address(),
        nearest(&s.exclusive_lr),
        nearest(&s.exclusive_rl),
        context,
    )?
    .counting_calls_from(calls);
    Ok(BinSplit { chain, below })
}
