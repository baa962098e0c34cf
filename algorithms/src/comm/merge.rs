//! The seed's own group-collective creation (Dinan et al., EuroMPI 2011),
//! kept as a baseline: from a communicator of one, ceil(log2 g) rounds in
//! which neighbouring blocks of 2^k members make an intercommunicator
//! (their leaders swap over the parent, each broadcasts in its block) and
//! merge it (an allreduce over both). Each round agrees two contexts, so
//! creation takes O(log^2 g) rounds where the direct one takes O(log g).

use catena_fabric::{ContextId, Tag, Time, Transport};

use super::create::{chain_of, Votes};
use crate::call::Call;
use crate::chain::{CallTags, Chain};
use crate::context::Proposal;
use crate::groupmap::GroupMap;
use crate::scan::allreduce_in;
use crate::tree::bcast;
use crate::Result;

/// The new chain of group rank `rank` of `map`; `parent_context` is the
/// parent's creation context, where the leaders of each round swap their
/// blocks' proposals with the tags of call `tag`.
pub(super) async fn create<T: Transport>(
    t: &T,
    map: &GroupMap,
    rank: u32,
    parent_context: ContextId,
    tag: Tag,
    votes: Votes,
    deadline: Time,
) -> Result<Chain> {
    let (g, world) = (map.len(), t.size());
    let leaders = CallTags::of_call(tag);
    // MPI_Comm_dup(MPI_COMM_SELF): a block of one with a context of its own.
    let (mut lo, mut hi) = (rank, rank + 1);
    let mut block = chain_of(map, rank, (lo, hi), Proposal::new(t).context(world)?)?;
    let (mut size, mut round) = (1u32, 0u32);
    while size < g {
        let id = rank / size;
        let partner = if id % 2 == 0 {
            ((id + 1) * size < g).then(|| ((id + 1) * size, ((id + 2) * size).min(g)))
        } else {
            Some(((id - 1) * size, id * size))
        };
        if let Some((partner_lo, partner_hi)) = partner {
            // Intercomm_create: the block agrees its side's context...
            let mine = Proposal::new(t);
            let ours = allreduce_in(
                Call::new(t, &block, block.next_call(), deadline),
                mine,
                Proposal::leftmost,
            )
            .await?;
            // ...its leader swaps it with the other block's leader...
            let theirs = if rank == lo {
                let peer = map.select(partner_lo)?;
                let tag = leaders.round(round)?;
                let swap = Chain::from_links(0, 2, t.rank(), None, Some(peer), parent_context)?;
                swap.send(t, peer, tag, &ours, deadline).await?;
                Some(swap.recv::<T, Proposal>(t, peer, tag, deadline).await?)
            } else {
                None
            };
            // ...and broadcasts the other side's in its block.
            let theirs = bcast(t, &block, 0, theirs, deadline).await?;
            let left_side = if id % 2 == 0 { ours } else { theirs };
            let intercomm = left_side.context(world)?;
            // Intercomm_merge: both blocks agree the merged group's context.
            let (merged_lo, merged_hi) = (lo.min(partner_lo), hi.max(partner_hi));
            let merging = chain_of(map, rank, (merged_lo, merged_hi), intercomm)?;
            let fresh = Votes {
                proposal: Proposal::new(t),
                ..votes
            };
            let all = allreduce_in(
                Call::new(t, &merging, merging.next_call(), deadline),
                fresh,
                Votes::combine,
            )
            .await?;
            (lo, hi) = (merged_lo, merged_hi);
            block = chain_of(map, rank, (lo, hi), all.check(world)?)?;
        }
        size = size.saturating_mul(2);
        round += 1;
    }
    Ok(block)
}
