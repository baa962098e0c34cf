//! Allreduce by recursive doubling on a chain: in round d each member swaps
//! its partial fold with the member 2^d away (found in the tree
//! collectives' neighbour cache), so a call takes log2 N rounds of one
//! exchange each where the double scan's rounds send two. Partial folds
//! cover aligned blocks of ranks, so an associative operation folds in rank
//! order. On N = 2^k + r members the first 2r pair up first, as in MPICH:
//! the left one of each pair hands its value to the right one and gets the
//! result back at the end, and the 2^k survivors double on a chain of
//! their own, whose neighbour cache is searched once, like the chain's.

use catena_fabric::Transport;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::call::Call;
use crate::chain::{Chain, Neighbours};
use crate::deadline::check_deadline;
use crate::error::user_code;
use crate::tree::chain_disagrees;
use crate::Result;

/// The round of the hand-over before the doubling (its rounds follow) and
/// of the result's way back to the members that handed over.
const HAND_OVER: u32 = 0;
const HAND_BACK: u32 = 40;

/// Reserves the neighbour searches of [`allreduce`] (the chain's, and the
/// survivors' where the size is no power of two) if no call did.
pub(crate) fn reserve_searches(chain: &Chain) {
    chain.reserve_neighbours();
    if !chain.size().is_power_of_two() {
        chain.reserve_survivors();
    }
}

/// Where the survivors of a chain of `n` members lie: member `v` of the
/// survivors is this rank of the chain.
struct Survivors {
    /// Members paired up before the doubling: 2 x `paired`.
    paired: u32,
}

impl Survivors {
    fn of(n: u32) -> Survivors {
        let doubling = 1u32 << (31 - n.leading_zeros());
        Survivors {
            paired: n - doubling,
        }
    }

    /// The chain rank of survivor `v`.
    fn rank(&self, v: u32) -> u32 {
        match v < self.paired {
            true => 2 * v + 1,
            false => v + self.paired,
        }
    }
}

/// x_0 ⊕ … ⊕ x_(n-1) on every member, with the tags of a call reserved
/// before and the searches [`reserve_searches`] reserved.
pub(crate) async fn allreduce<T: Transport, A: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    x: A,
    op: impl Fn(&A, &A) -> A,
) -> Result<A> {
    let (t, chain, tags, deadline) = (call.t, call.chain, call.tags, call.deadline);
    let fold = |left: &A, right: &A| user_code("an allreduce operation", || op(left, right));
    let neighbours = chain.reserved_neighbours(t, deadline).await?;
    let at = |d: u32, right: bool| {
        let partner = match right {
            true => neighbours.right(d),
            false => neighbours.left(d),
        };
        partner.ok_or_else(|| chain_disagrees(chain, d))
    };
    let (rank, n) = (chain.rank(), chain.size());
    let survivors = Survivors::of(n);
    let paired = rank < 2 * survivors.paired;
    let (acc, v) = match (paired, rank % 2) {
        (true, 0) => {
            let right = at(0, true)?;
            chain
                .send(t, right, tags.round(HAND_OVER)?, &x, deadline)
                .await?;
            return chain.recv(t, right, tags.round(HAND_BACK)?, deadline).await;
        }
        (true, _) => {
            let left = at(0, false)?;
            let part: A = chain
                .recv(t, left, tags.round(HAND_OVER)?, deadline)
                .await?;
            (fold(&part, &x)?, rank / 2)
        }
        (false, _) => (x, rank - survivors.paired),
    };
    let among = match survivors.paired {
        0 => neighbours.clone(),
        _ => {
            let link = |w: u32| {
                let distance = survivors.rank(v).abs_diff(survivors.rank(w));
                at(distance / 2, w > v)
            };
            let left = v.checked_sub(1).map(link).transpose()?;
            let doubling = n - survivors.paired;
            let right = (v + 1 < doubling).then(|| link(v + 1)).transpose()?;
            let own =
                Chain::from_links(v, doubling, chain.address(), left, right, chain.context())?;
            chain.reserved_survivors(t, &own, deadline).await?
        }
    };
    let doubling = n - survivors.paired;
    let total = double(call, &among, (v, doubling), acc, &fold).await?;
    if paired {
        let left = at(0, false)?;
        chain
            .send(t, left, tags.round(HAND_BACK)?, &total, deadline)
            .await?;
    }
    Ok(total)
}

/// The doubling among the survivors: member `v` of `size` (a power of
/// two), whose partners at distances 2^d are `among`.
async fn double<T: Transport, A: Serialize + DeserializeOwned>(
    call: Call<'_, T>,
    among: &Neighbours,
    (v, size): (u32, u32),
    mut acc: A,
    fold: &impl Fn(&A, &A) -> Result<A>,
) -> Result<A> {
    let Call {
        t,
        chain,
        tags,
        deadline,
    } = call;
    let mut d = 0;
    while d < 32 && 1u32 << d < size {
        check_deadline(t, deadline, "a recursive doubling round")?;
        // This member's block is the left half of the pair's where bit d
        // of its number is clear.
        let left_half = v & (1 << d) == 0;
        let partner = match left_half {
            true => among.right(d),
            false => among.left(d),
        };
        let partner = partner.ok_or_else(|| chain_disagrees(chain, d))?;
        let tag = tags.round(HAND_OVER + 1 + d)?;
        chain.send(t, partner, tag, &acc, deadline).await?;
        let part: A = chain.recv(t, partner, tag, deadline).await?;
        acc = match left_half {
            true => fold(&acc, &part)?,
            false => fold(&part, &acc)?,
        };
        d += 1;
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use catena_fabric::Rma;
    use catena_sim::{LogGp, Sim, SimRank};

    /// Every member's fold is the sequential one, in rank order (a
    /// non-commutative concatenation), on chains of every size to 40, over
    /// two calls (the second on the searches' caches).
    #[test]
    fn folds_in_rank_order_on_chains_of_every_size() {
        for n in 1..=40u32 {
            let sim = Sim::new(n, LogGp::default());
            let (results, _) = sim
                .run(async |t: &SimRank<'_>| -> Result<Vec<String>> {
                    let chain = Chain::world(t, 64);
                    let mut got = Vec::new();
                    for call in 0..2 {
                        reserve_searches(&chain);
                        let tags = chain.next_call();
                        let deadline = t.deadline_in(std::time::Duration::from_secs(60));
                        let call_of = Call::new(t, &chain, tags, deadline);
                        let word = format!("<{}.{call}>", t.rank());
                        got.push(allreduce(call_of, word, |a, b| format!("{a}{b}")).await?);
                    }
                    Ok(got)
                })
                .expect("every rank finishes");
            for (rank, r) in results.into_iter().enumerate() {
                let got = r.unwrap_or_else(|e| panic!("{n} ranks, rank {rank}: {e}"));
                for (call, fold) in got.iter().enumerate() {
                    let want: String = (0..n).map(|r| format!("<{r}.{call}>")).collect();
                    assert_eq!(fold, &want, "{n} ranks, rank {rank}, call {call}");
                }
            }
        }
    }
}
