//! Allreduce by recursive doubling on a chain of a power-of-two size: in
//! round d each member swaps its partial fold with the member 2^d away
//! (found in the tree collectives' neighbour cache), so a call takes log2 N
//! rounds of one exchange each where the double scan's rounds send two.
//! Partial folds cover aligned blocks of ranks, so an associative operation
//! folds in rank order.

use catena_fabric::Transport;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::call::Call;
use crate::deadline::check_deadline;
use crate::error::user_code;
use crate::tree::chain_disagrees;
use crate::Result;

/// Whether a chain of `size` members can take [`allreduce`].
pub(crate) fn fits(size: u32) -> bool {
    size.is_power_of_two()
}

/// x_0 ⊕ … ⊕ x_(n-1) on every member of a chain whose size [`fits`], with
/// the tags of a call reserved before (and the neighbour search).
pub(crate) async fn allreduce<T: Transport, A: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    x: A,
    op: impl Fn(&A, &A) -> A,
) -> Result<A> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    debug_assert!(fits(chain.size()));
    let neighbours = chain.reserved_neighbours(t, deadline).await?;
    let rank = chain.rank();
    let mut acc = x;
    let mut d = 0;
    while d < 32 && 1u32 << d < chain.size() {
        check_deadline(t, deadline, "a recursive doubling round")?;
        let tag = tags.round(d)?;
        // This member's block is the left half of the pair's where bit d
        // of its rank is clear.
        let left_half = rank & (1 << d) == 0;
        let partner = match left_half {
            true => neighbours.right(d),
            false => neighbours.left(d),
        };
        let partner = partner.ok_or_else(|| chain_disagrees(chain, d))?;
        chain.send(t, partner, tag, &acc, deadline).await?;
        let part: A = chain.recv(t, partner, tag, deadline).await?;
        acc = user_code("an allreduce operation", || match left_half {
            true => op(&acc, &part),
            false => op(&part, &acc),
        })?;
        d += 1;
    }
    Ok(acc)
}
