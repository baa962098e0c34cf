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
mod bins;
pub(crate) mod bitonic;
mod cheng;
pub(crate) mod dense;
mod fault;
mod gather_scatter;
mod hash;
mod item;
mod mix;
pub(crate) mod numbering;
mod radix;
mod sorted;

use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::str::FromStr;

use catena_fabric::{Rank, Time, Transport};
use serde::{Deserialize, Serialize};

use crate::call::Call;
use crate::chain::{Calls, Chain};
use crate::codec::{encode, Wire};
use crate::context::Proposal;
use crate::{Error, Result};
use fault::Faults;
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

/// `Some(color)` joins the group of that color, `None` none
/// (`MPI_UNDEFINED`).
impl<C> From<Option<C>> for Color<C> {
    fn from(color: Option<C>) -> Color<C> {
        color.map_or(Color::NotMember, Color::Is)
    }
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

/// The split algorithms of the paper, selectable by name (`Display` and
/// `FromStr` agree: "Bitonic", "Cheng128", ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Allgather over the chain, then a local sort: O(N) memory (baseline).
    AllgatherGroup,
    /// Gather to rank 0 merging sorted runs on the way, scatter back: O(N)
    /// at the root (baseline).
    GatherScatter,
    /// Sample sort on ceil(N/M) processes holding at most M items each
    /// (M a power of two; the paper used 128 to 8192): O(M + N/M) memory
    /// on those processes, O(1) on the others.
    Cheng(u32),
    /// Batcher's bitonic network on the chain, any N: O(log^2 N) rounds,
    /// O(log N) memory.
    Bitonic,
    /// Divide and conquer on the digits of the packed color and an integer
    /// key (keys in their natural order: [`split`], not [`split_by`]).
    Radix,
    /// Iterated hashing of the packed color into bins, splitting the chain
    /// by exclusive scans, until one color remains; Bitonic reorders after.
    Hash,
    /// Hash, finishing chains shorter than 64 with AllgatherGroup.
    Hash64,
    /// On a communicator in host memory, one allgather of colors and keys
    /// through shared memory and a local sort (the dense path); elsewhere
    /// AllgatherGroup.
    Dense,
    /// Dense on a communicator in host memory; elsewhere the paper's
    /// findings, with thresholds from the simulator (BG/P-like LogGP,
    /// computation charged, docs/scaling.md): the serial GatherScatter up to
    /// [`AUTO_SERIAL_MAX_REORDER`] processes when reordering and
    /// [`AUTO_SERIAL_MAX_SPLIT`] when only splitting; above, Bitonic when
    /// reordering and Hash when only splitting.
    Auto,
}

/// Up to this many parent processes `Auto` sorts serially when reordering:
/// with computation charged, GatherScatter ties Bitonic at 16 processes in
/// the simulator and is 1.7x slower at 64 (free, it won up to 1K).
pub const AUTO_SERIAL_MAX_REORDER: u32 = 16;
/// Up to this many `Auto` sorts serially when only splitting (Hash beats
/// GatherScatter in the simulator from 64 processes, and ties at 16).
pub const AUTO_SERIAL_MAX_SPLIT: u32 = 16;

/// Below this chain length Hash64 finishes with AllgatherGroup.
pub const HASH64_SERIAL_BELOW: u32 = 64;

/// The items a Cheng sorter may hold: a power of two in this range.
pub const CHENG_MAX_ITEMS: std::ops::RangeInclusive<u32> = 2..=1 << 20;

impl Algorithm {
    /// Every algorithm, Cheng with the paper's smallest, middle and largest M.
    pub const ALL: [Algorithm; 11] = [
        Algorithm::AllgatherGroup,
        Algorithm::GatherScatter,
        Algorithm::Cheng(128),
        Algorithm::Cheng(1024),
        Algorithm::Cheng(8192),
        Algorithm::Bitonic,
        Algorithm::Radix,
        Algorithm::Hash,
        Algorithm::Hash64,
        Algorithm::Dense,
        Algorithm::Auto,
    ];

    /// A number naming the algorithm, the same on every process.
    pub(crate) fn id(self) -> u32 {
        match self {
            Algorithm::AllgatherGroup => 0,
            Algorithm::GatherScatter => 1,
            Algorithm::Bitonic => 2,
            Algorithm::Radix => 3,
            Algorithm::Hash => 4,
            Algorithm::Hash64 => 5,
            Algorithm::Auto => 6,
            Algorithm::Dense => 7,
            Algorithm::Cheng(m) => 64 + m,
        }
    }

    fn check(self) -> Result<()> {
        match self {
            Algorithm::Cheng(m) if !(m.is_power_of_two() && CHENG_MAX_ITEMS.contains(&m)) => {
                Err(Error::InvalidArgument(format!(
                    "Cheng{m}: M must be a power of two from {} to {}",
                    CHENG_MAX_ITEMS.start(),
                    CHENG_MAX_ITEMS.end()
                )))
            }
            _ => Ok(()),
        }
    }

    /// What `Auto` becomes for a parent of `size` processes.
    fn resolve(self, size: u32, reorder: bool) -> Algorithm {
        match self {
            Algorithm::Auto if reorder && size <= AUTO_SERIAL_MAX_REORDER => {
                Algorithm::GatherScatter
            }
            Algorithm::Auto if size <= AUTO_SERIAL_MAX_SPLIT => Algorithm::GatherScatter,
            Algorithm::Auto if reorder => Algorithm::Bitonic,
            Algorithm::Auto => Algorithm::Hash,
            Algorithm::Dense => Algorithm::AllgatherGroup,
            chosen => chosen,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Algorithm::AllgatherGroup => f.write_str("AllgatherGroup"),
            Algorithm::GatherScatter => f.write_str("GatherScatter"),
            Algorithm::Cheng(m) => write!(f, "Cheng{m}"),
            Algorithm::Bitonic => f.write_str("Bitonic"),
            Algorithm::Radix => f.write_str("Radix"),
            Algorithm::Hash => f.write_str("Hash"),
            Algorithm::Hash64 => f.write_str("Hash64"),
            Algorithm::Dense => f.write_str("Dense"),
            Algorithm::Auto => f.write_str("Auto"),
        }
    }
}

impl FromStr for Algorithm {
    type Err = Error;

    fn from_str(s: &str) -> Result<Algorithm> {
        let cheng = s
            .get(..5)
            .filter(|p| p.eq_ignore_ascii_case("cheng"))
            .and_then(|_| s[5..].parse().ok())
            .map(Algorithm::Cheng);
        let named = Algorithm::ALL
            .into_iter()
            .find(|a| a.to_string().eq_ignore_ascii_case(s));
        let found = cheng.or(named).ok_or_else(|| {
            let known: Vec<_> = Algorithm::ALL.iter().map(|a| a.to_string()).collect();
            Error::InvalidArgument(format!(
                "unknown split algorithm {s:?}; known: {} (Cheng with any M)",
                known.join(", ")
            ))
        })?;
        found.check()?;
        Ok(found)
    }
}

/// A member's new group: its chain node, the group's number (groups ordered
/// by their lowest parent rank) and how many groups the split made.
#[derive(Debug)]
pub struct Group {
    /// This member's node in the new group's chain (rank, size, neighbours).
    pub chain: Chain,
    /// The group's number, 0.., in the order of the groups' lowest parent
    /// ranks (the same on every member of every group).
    pub id: u32,
    /// How many groups the split made.
    pub count: u32,
    /// Every member's place, in group order, where its members offered
    /// regions for a team (a group of at most `MAX_MEMBERS` on hosts of
    /// several ranks).
    pub(crate) places: Option<Box<[numbering::Place]>>,
}

/// What a split gives one process.
#[derive(Debug)]
pub enum Split {
    /// The process is a member of this new group.
    Member(Group),
    /// The process passed `Color::NotMember`; `groups` were made without it.
    NotMember {
        /// How many groups the split made.
        groups: u32,
    },
}

impl Split {
    /// The new group, if this process is a member.
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

/// What a split takes on its parent when it is called, before its first
/// await, so that splits get their tags and contexts in call order however
/// their futures are polled: the calls it makes on the parent (numbered in
/// program order) and the neighbour search, and a context id to propose.
/// A caller that runs a split later (a communicator's two levels, built by
/// its first collective that needs them) reserves one when it is made.
pub(crate) struct Reserved {
    calls: Calls,
    context: Proposal,
}

/// Calls a split makes on its parent: the agreement, at most
/// `PLACEMENT_CALLS` to place members, and the numbering.
const AGREEMENT_CALLS: u32 = 1;
const PLACEMENT_CALLS: u32 = 3;
const NUMBERING_CALLS: u32 = 1;

impl Reserved {
    pub(crate) fn on<T: Transport>(t: &T, parent: &Chain) -> Reserved {
        parent.reserve_neighbours();
        Reserved {
            calls: parent.reserve(AGREEMENT_CALLS + PLACEMENT_CALLS + NUMBERING_CALLS),
            context: Proposal::new(t),
        }
    }

    /// The context id this split proposes (which a dense split that runs
    /// instead proposes too).
    pub(crate) fn proposal(&self) -> Proposal {
        self.context
    }
}

/// What the caller asks of a split: the same on the chain's path and on a
/// team's dense one, so both agree and place alike.
pub(crate) struct Request<C, K, O> {
    pub(crate) color: Color<C>,
    pub(crate) key: Key<K>,
    pub(crate) order: O,
    /// The key's order-preserving integer image, where the order is the
    /// key's own and the key an integer: Radix and the dense path sort by it.
    pub(crate) image: Option<Vec<u8>>,
    pub(crate) algorithm: Algorithm,
}

impl<C, K: Ord + 'static> Request<C, K, fn(&K, &K) -> Ordering> {
    /// A split by the key's own order.
    pub(crate) fn own_order(color: Color<C>, key: Key<K>, algorithm: Algorithm) -> Self {
        let image = match &key {
            Key::Is(k) => radix::integer_image(k),
            Key::ParentOrder => None,
        };
        Request {
            color,
            key,
            order: K::cmp,
            image,
            algorithm,
        }
    }
}

impl<C, K, O: Fn(&K, &K) -> Ordering> Request<C, K, O> {
    /// A split by the caller's `order` on the keys.
    pub(crate) fn by(color: Color<C>, key: Key<K>, order: O, algorithm: Algorithm) -> Self {
        Request {
            color,
            key,
            order,
            image: None,
            algorithm,
        }
    }
}

/// [`split_by`] with the key's own order; Radix needs this form and a
/// primitive integer key.
pub fn split<'a, T, C, K>(
    t: &'a T,
    parent: &'a Chain,
    color: Color<C>,
    key: Key<K>,
    algorithm: Algorithm,
    deadline: Time,
) -> impl Future<Output = Result<Split>> + 'a
where
    T: Transport,
    C: Serialize + 'a,
    K: Wire + Clone + Ord + 'static,
{
    let request = Request::own_order(color, key, algorithm);
    split_offering(t, parent, request, numbering::NoOffer, deadline)
}

/// Splits `parent` by color, ordering each group by `order` on the keys,
/// then by parent rank. Every process of `parent` calls it with the same
/// color and key types and the same algorithm; a disagreement is an error
/// on every process. Splits called one after the other may run concurrently
/// (their futures joined), as MPI's nonblocking collectives may.
pub fn split_by<'a, T, C, K>(
    t: &'a T,
    parent: &'a Chain,
    color: Color<C>,
    key: Key<K>,
    order: impl Fn(&K, &K) -> Ordering + 'a,
    algorithm: Algorithm,
    deadline: Time,
) -> impl Future<Output = Result<Split>> + 'a
where
    T: Transport,
    C: Serialize + 'a,
    K: Wire + Clone + 'a,
{
    let request = Request::by(color, key, order, algorithm);
    split_offering(t, parent, request, numbering::NoOffer, deadline)
}

/// The split `request` asks for, offering a region of this rank's host
/// arena to its new group.
pub(crate) fn split_offering<'a, T, C, K, O>(
    t: &'a T,
    parent: &'a Chain,
    request: Request<C, K, O>,
    offer: impl numbering::Offering + 'a,
    deadline: Time,
) -> impl Future<Output = Result<Split>> + 'a
where
    T: Transport,
    C: Serialize + 'a,
    K: Wire + Clone + 'a,
    O: Fn(&K, &K) -> Ordering + 'a,
{
    let call = Call::new(t, parent, Reserved::on(t, parent), deadline);
    run(call, request, offer)
}

/// The split, with what it reserved when it was called.
pub(crate) async fn run<T, C, K, O>(
    call: Call<'_, T, Reserved>,
    request: Request<C, K, O>,
    offer: impl numbering::Offering,
) -> Result<Split>
where
    T: Transport,
    C: Serialize,
    K: Wire + Clone,
    O: Fn(&K, &K) -> Ordering,
{
    let Request {
        color,
        key,
        order,
        image,
        algorithm,
    } = request;
    algorithm.check()?;
    let member = !matches!(color, Color::NotMember);
    let packed_color = match &color {
        Color::Is(c) => encode(c, "a color")?,
        _ => Vec::new(),
    };
    let digits = match (&key, algorithm) {
        (Key::Is(_), Algorithm::Radix) if image.is_none() => None,
        (_, Algorithm::Radix) => radix::digits(&packed_color, image.as_deref()).ok(),
        _ => None,
    };
    let radix_refused = member && algorithm == Algorithm::Radix && digits.is_none();
    let Call {
        t,
        chain: parent,
        tags: Reserved { calls, context },
        deadline,
    } = call;
    let mut call = Call::new(t, parent, calls, deadline);
    let agreed = agreement::agree::<T, C, K>(
        call.next()?,
        context,
        &color,
        &key,
        algorithm,
        radix_refused,
        member && offer.offer().is_some(),
    )
    .await?;
    let placing = call.take(PLACEMENT_CALLS)?;
    if agreed.radix_refused {
        return Err(radix::refused());
    }
    let me = member.then(|| {
        let key = match key {
            Key::Is(k) => Some(k),
            Key::ParentOrder => None,
        };
        Item::new(packed_color, key, parent.rank(), parent.address())
    });
    let placed = if agreed.members == 0 {
        Ok(None)
    } else {
        place(placing, me, digits, member, agreed, &order, algorithm).await
    };
    // A comparator fault goes to every process through the numbering step.
    let mut faults = Faults::default();
    let placement = faults.absorb(placed)?.flatten();
    numbering::number(call.next()?, placement, faults, agreed, offer).await
}

/// This process's placement by `algorithm` (`me`: its item if a member),
/// taking at most `PLACEMENT_CALLS` of `calls` on the parent.
async fn place<T, K>(
    mut call: Call<'_, T, Calls>,
    me: Option<Item<K>>,
    digits: Option<Vec<u8>>,
    member: bool,
    agreed: agreement::Agreed,
    order: item::KeyOrder<'_, K>,
    algorithm: Algorithm,
) -> Result<Option<Placement>>
where
    T: Transport,
    K: Wire + Clone,
{
    Ok(match algorithm.resolve(call.chain.size(), agreed.reorder) {
        Algorithm::AllgatherGroup => allgather_group::place(call, me, order).await?,
        Algorithm::GatherScatter => gather_scatter::place(call, me, order).await?,
        Algorithm::Cheng(max_items) => cheng::place(call, me, agreed, max_items, order).await?,
        Algorithm::Bitonic => {
            let (slot, faults) = bitonic::sort(call.next()?, me, order).await?;
            let calls = call.take(sorted::CALLS)?;
            sorted::place(calls, slot, member, faults, true).await?
        }
        Algorithm::Radix => radix::place(call, me.zip(digits), agreed).await?,
        Algorithm::Hash => hash::place(call, me, agreed, order, None).await?,
        Algorithm::Hash64 => {
            let serial_below = Some(HASH64_SERIAL_BELOW);
            hash::place(call, me, agreed, order, serial_below).await?
        }
        Algorithm::Auto | Algorithm::Dense => unreachable!("resolved above"),
    })
}
