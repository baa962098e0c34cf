//! Resolves a world rank to its provider address. The flat table is the one
//! O(N) structure the design allows; a distributed directory can replace it
//! behind the same trait.

use crate::{Error, Rank, Result};

/// Maps world ranks to the address blobs providers connect with.
pub trait Directory {
    /// The number of ranks in the job.
    fn size(&self) -> u32;
    /// The address blob `rank` published at start-up.
    fn address(&self, rank: Rank) -> Result<&[u8]>;
}

/// Every rank's address, as gathered by the bootstrap.
pub struct FlatDirectory {
    addresses: Vec<Box<[u8]>>,
}

impl FlatDirectory {
    /// The table of `addresses`, indexed by rank.
    pub fn new(addresses: Vec<Vec<u8>>) -> FlatDirectory {
        FlatDirectory {
            addresses: addresses.into_iter().map(Vec::into_boxed_slice).collect(),
        }
    }
}

impl Directory for FlatDirectory {
    fn size(&self) -> u32 {
        self.addresses.len() as u32
    }

    fn address(&self, rank: Rank) -> Result<&[u8]> {
        self.addresses
            .get(rank as usize)
            .map(|a| &a[..])
            .ok_or(Error::InvalidRank {
                rank,
                size: self.size(),
            })
    }
}
