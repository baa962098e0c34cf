//! The seed's sort variant: every copy is keyed by (target, source,
//! position), the keyed copies are sorted across the group by the split's
//! Bitonic schedule with whole blocks in place of single items (each
//! compare-exchange a merge-split; blocks padded to the largest with keys
//! that sort last, as the network needs equal blocks), and the balancing
//! step sends each process's sorted block, now a few contiguous target
//! ranges, to the targets by `PutStable`. Stable; O(log^2 P) exchanges of
//! a whole block, so slower than the direct variants, as the seed found.

use bytemuck::Pod;
use catena_fabric::Transport;

use super::route::{add_to_runs, Routed};
use super::{AlltoallPlan, Landing, PlanCall};
use crate::call::Call;
use crate::chain::{CallTags, Chain};
use crate::deadline::check_deadline;
use crate::groupmap::GroupMap;
use crate::scan::allreduce_in;
use crate::split::bitonic::{schedule, Exchange};
use crate::tree::chain_disagrees;
use crate::Result;

/// Key bytes per record: target, source, position, big-endian, so that
/// records compare as their bytes do.
const KEY: usize = 12;
/// The key of padding: after every real one (a target is below the size).
const PAD: [u8; KEY] = [0xff; KEY];

/// The tags a sort call takes when called: the block-size allreduce, and
/// the network (with the chain's neighbour search, if not reserved yet).
#[derive(Clone, Copy, Debug)]
pub(super) struct SortTags {
    largest: CallTags,
    network: CallTags,
}

impl SortTags {
    pub(super) fn take(chain: &Chain) -> SortTags {
        SortTags {
            largest: chain.next_call(),
            network: crate::tree::reserve(chain),
        }
    }
}

/// Keeps in `mine` the lower (or upper) `block` records of the merge of two
/// sorted runs of `block` records of `record` bytes.
fn merge_split(mine: &[u8], theirs: &[u8], record: usize, lower: bool) -> Vec<u8> {
    let n = mine.len() / record;
    let (a, b) = (
        |i: usize| &mine[i * record..(i + 1) * record],
        |i: usize| &theirs[i * record..(i + 1) * record],
    );
    let mut out = Vec::with_capacity(mine.len());
    if lower {
        let (mut i, mut j) = (0, 0);
        while out.len() < mine.len() {
            let take_a = j == n || (i < n && a(i)[..KEY] <= b(j)[..KEY]);
            out.extend_from_slice(if take_a { a(i) } else { b(j) });
            (i, j) = if take_a { (i + 1, j) } else { (i, j + 1) };
        }
    } else {
        let (mut i, mut j) = (n, n);
        let mut reversed = Vec::with_capacity(n);
        while reversed.len() < n {
            let take_a = j == 0 || (i > 0 && a(i - 1)[..KEY] > b(j - 1)[..KEY]);
            reversed.push(if take_a { a(i - 1) } else { b(j - 1) });
            (i, j) = if take_a { (i - 1, j) } else { (i, j - 1) };
        }
        for r in reversed.into_iter().rev() {
            out.extend_from_slice(r);
        }
    }
    out
}

impl<T: Transport, E: Pod> AlltoallPlan<'_, '_, T, E> {
    /// [`super::Variant::Sort`].
    pub(super) async fn sort(
        &self,
        call: &PlanCall,
        tags: SortTags,
        map: &GroupMap,
        local: Result<()>,
        routed: &mut Routed<E>,
        recv: &mut [E],
    ) -> Result<usize> {
        let (t, chain, deadline) = (self.comm.transport(), self.comm.chain(), call.deadline);
        let me = self.comm.rank();
        let size = std::mem::size_of::<E>();
        let record = KEY + size;
        let mine = if local.is_ok() {
            routed.staging.len()
        } else {
            0
        };
        let largest = |a: &u64, b: &u64| *a.max(b);
        let block = allreduce_in(
            Call::new(t, chain, tags.largest, deadline),
            mine as u64,
            largest,
        )
        .await?;
        let block = block as usize;
        // This process's block, already in key order (runs by target, each
        // in staging order), then padding.
        let mut records = Vec::with_capacity(block * record);
        let runs = if local.is_ok() { &routed.runs[..] } else { &[] };
        for run in runs {
            for i in run.start..run.start + run.count {
                records.extend_from_slice(&run.target.to_be_bytes());
                records.extend_from_slice(&me.to_be_bytes());
                records.extend_from_slice(&(i as u32).to_be_bytes());
                records.extend_from_slice(bytemuck::bytes_of(&routed.staging[i]));
            }
        }
        while records.len() < block * record {
            records.extend_from_slice(&PAD);
            records.extend(std::iter::repeat_n(0, size));
        }
        let records = network(t, chain, tags.network, records, record, deadline).await?;
        // The balancing step: the sorted block, by target, through PutStable.
        routed.clear();
        routed.staging.clear();
        for (i, r) in records
            .chunks_exact(record)
            .take_while(|r| r[..KEY] != PAD)
            .enumerate()
        {
            let target = u32::from_be_bytes(r[..4].try_into().expect("4 bytes"));
            routed.staging.push(bytemuck::pod_read_unaligned(&r[KEY..]));
            add_to_runs(&mut routed.runs, target, i);
        }
        self.put(call, map, local, routed, Landing::Buffer(recv))
            .await
    }
}

/// The split's Bitonic schedule over blocks: every compare-exchange
/// exchanges whole blocks with the partner 2^d ranks away and keeps the
/// lower or upper half of their merge.
async fn network<T: Transport>(
    t: &T,
    chain: &Chain,
    tags: CallTags,
    mut records: Vec<u8>,
    record: usize,
    deadline: catena_fabric::Time,
) -> Result<Vec<u8>> {
    let nb = chain.reserved_neighbours(t, deadline).await?;
    let tag = tags.round(0)?;
    for Exchange {
        d,
        lower,
        ascending,
    } in schedule(chain.rank(), chain.size())
    {
        check_deadline(t, deadline, "a sort round")?;
        let address = if lower { nb.right(d) } else { nb.left(d) };
        let address = address.ok_or_else(|| chain_disagrees(chain, d))?;
        chain
            .send_bytes(t, address, tag, &records, deadline)
            .await?;
        let theirs = chain.recv_bytes(t, address, tag, deadline).await?;
        if theirs.len() != records.len() {
            return Err(crate::Error::Mismatch {
                what: format!(
                    "sort blocks: {} bytes from a partner, {} here",
                    theirs.len(),
                    records.len()
                ),
            });
        }
        // Ascending: the lower process keeps the smaller half.
        records = merge_split(&records, &theirs, record, lower == ascending);
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(keys: &[u8]) -> Vec<u8> {
        keys.iter()
            .flat_map(|&k| {
                let mut r = vec![0u8; KEY + 1];
                r[KEY - 1] = k;
                r[KEY] = k;
                r
            })
            .collect()
    }

    #[test]
    fn merge_split_keeps_the_right_half() {
        let (a, b) = (records(&[1, 4, 6, 9]), records(&[2, 3, 7, 8]));
        assert_eq!(merge_split(&a, &b, KEY + 1, true), records(&[1, 2, 3, 4]));
        assert_eq!(merge_split(&a, &b, KEY + 1, false), records(&[6, 7, 8, 9]));
        assert_eq!(merge_split(&b, &a, KEY + 1, false), records(&[6, 7, 8, 9]));
    }
}
