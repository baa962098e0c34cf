//! The generalized split (seed 000, section 3): every process of a parent
//! chain passes a color and a key of any type, and members of equal color
//! become a new chain ordered by key, then by parent rank. No process ever
//! holds an O(N) table except in the serial-sort algorithms that exist as
//! baselines (AllgatherGroup, GatherScatter).
//!
//! Groups are numbered in the order of their lowest parent rank, which every
//! algorithm can compute without sorting colors.

mod agreement;
mod allgather_group;
mod bitonic;
mod gather_scatter;
mod hash;
mod item;
mod numbering;
mod sorted;

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use crate::chain::Chain;
use crate::codec::{encode, Wire};
use crate::{Error, Result};
use item::Item;

/// A process's color.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Color<C> {
    /// Members of equal color form one group.
    Is(C),
    /// This process joins no group (`MPI_UNDEFINED`).
    NotMember,
    /// Do not split: every member joins one group (reorder only). Members
    /// must all pass it or all pass colors.
    Everyone,
}

/// A process's key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key<K> {
    /// Order within the group by this key (ties by parent rank).
    Is(K),
    /// Do not reorder: order by parent rank. Members must all pass it or
    /// all pass keys.
    ParentOrder,
}

/// The split algorithms of the paper, selectable by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Allgather over the chain, then a local sort: O(N) memory (baseline).
    AllgatherGroup,
    /// Gather to rank 0 merging sorted runs on the way, scatter back: O(N)
    /// at the root (baseline).
    GatherScatter,
    /// Batcher's bitonic network on the chain, any N: O(log^2 N) rounds,
    /// O(log N) memory.
    Bitonic,
    /// Iterated hashing of the packed color into bins, splitting the chain
    /// by exclusive scans, until one color remains; Bitonic reorders after.
    Hash,
    /// Hash, finishing chains shorter than 64 with AllgatherGroup.
    Hash64,
    /// The paper's findings: AllgatherGroup up to [`AUTO_SERIAL_MAX`]
    /// processes, else Bitonic when reordering and Hash when only splitting.
    Auto,
}

/// Up to this many parent processes `Auto` picks a serial sort.
pub const AUTO_SERIAL_MAX: u32 = 32;

/// Below this chain length Hash64 finishes with AllgatherGroup.
pub const HASH64_SERIAL_BELOW: u32 = 64;

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::AllgatherGroup,
        Algorithm::GatherScatter,
        Algorithm::Bitonic,
        Algorithm::Hash,
        Algorithm::Hash64,
        Algorithm::Auto,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::AllgatherGroup => "AllgatherGroup",
            Algorithm::GatherScatter => "GatherScatter",
            Algorithm::Bitonic => "Bitonic",
            Algorithm::Hash => "Hash",
            Algorithm::Hash64 => "Hash64",
            Algorithm::Auto => "Auto",
        }
    }

    /// What `Auto` becomes for a parent of `size` processes.
    fn resolve(self, size: u32, reorder: bool) -> Algorithm {
        match self {
            Algorithm::Auto if size <= AUTO_SERIAL_MAX => Algorithm::AllgatherGroup,
            Algorithm::Auto if reorder => Algorithm::Bitonic,
            Algorithm::Auto => Algorithm::Hash,
            chosen => chosen,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Algorithm> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                let known: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                Error::InvalidArgument(format!(
                    "unknown split algorithm {s:?}; known: {}",
                    known.join(", ")
                ))
            })
    }
}

/// A member's new group: its chain node, the group's number (groups ordered
/// by their lowest parent rank) and how many groups the split made.
#[derive(Debug)]
pub struct Group {
    pub chain: Chain,
    pub id: u32,
    pub count: u32,
}

/// What a split gives one process.
#[derive(Debug)]
pub enum Split {
    Member(Group),
    /// The process passed `Color::NotMember`; `groups` were made without it.
    NotMember {
        groups: u32,
    },
}

impl Split {
    pub fn group(&self) -> Option<&Group> {
        match self {
            Split::Member(g) => Some(g),
            Split::NotMember { .. } => None,
        }
    }

    /// The new group, or `Error::InvalidArgument` saying this process is
    /// not a member.
    pub fn into_group(self) -> Result<Group> {
        match self {
            Split::Member(g) => Ok(g),
            Split::NotMember { .. } => Err(Error::InvalidArgument(
                "this process is not a member of any group of the split".into(),
            )),
        }
    }
}

/// A member's place in its new chain, before groups are numbered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Placement {
    pub rank: u32,
    pub size: u32,
    pub left: Option<Rank>,
    pub right: Option<Rank>,
}

/// [`split_by`] with the key's own order.
pub async fn split<T, C, K>(
    t: &T,
    parent: &Chain,
    color: Color<C>,
    key: Key<K>,
    algorithm: Algorithm,
    deadline: Time,
) -> Result<Split>
where
    T: Transport,
    C: Serialize,
    K: Wire + Clone + Ord,
{
    split_by(t, parent, color, key, K::cmp, algorithm, deadline).await
}

/// Splits `parent` by color, ordering each group by `order` on the keys,
/// then by parent rank. Every process of `parent` calls it with the same
/// color and key types and the same algorithm; a disagreement is an error
/// on every process.
pub async fn split_by<T, C, K>(
    t: &T,
    parent: &Chain,
    color: Color<C>,
    key: Key<K>,
    order: impl Fn(&K, &K) -> Ordering,
    algorithm: Algorithm,
    deadline: Time,
) -> Result<Split>
where
    T: Transport,
    C: Serialize,
    K: Wire + Clone,
{
    let agreed = agreement::agree::<T, C, K>(t, parent, &color, &key, algorithm, deadline).await?;
    let me = match color {
        Color::NotMember => None,
        color => Some(Item {
            color: match color {
                Color::Is(c) => encode(&c, "a color")?,
                _ => Vec::new(),
            },
            key: match key {
                Key::Is(k) => Some(k),
                Key::ParentOrder => None,
            },
            parent_rank: parent.rank(),
            address: parent.address(),
        }),
    };
    let order: item::KeyOrder<'_, K> = &order;
    let placement = if agreed.members == 0 {
        None
    } else {
        match algorithm.resolve(parent.size(), agreed.reorder) {
            Algorithm::AllgatherGroup => {
                allgather_group::place(t, parent, me, order, deadline).await?
            }
            Algorithm::GatherScatter => {
                gather_scatter::place(t, parent, me, order, deadline).await?
            }
            Algorithm::Bitonic => {
                let member = me.is_some();
                let slot = bitonic::sort(t, parent, me, order, deadline).await?;
                sorted::place(t, parent, slot, member, deadline).await?
            }
            Algorithm::Hash => hash::place(t, parent, me, agreed, order, None, deadline).await?,
            Algorithm::Hash64 => {
                let serial_below = Some(HASH64_SERIAL_BELOW);
                hash::place(t, parent, me, agreed, order, serial_below, deadline).await?
            }
            Algorithm::Auto => unreachable!("resolved above"),
        }
    };
    numbering::number(t, parent, placement, agreed, deadline).await
}
