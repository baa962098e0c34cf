//! The dense split (issue 32): one allgather of every member's color, key,
//! context proposal, host and the region its new group's team would use,
//! then a local sort of its own group. The allgather runs through the
//! host's shared memory for a communicator on one host, in two levels for
//! one across hosts ([`Swap`]). Members check the same agreement as the chain
//! split's (every process sees every record, so a disagreement fails all
//! alike); a user comparator's answers are checked across the group in a
//! second call, so one that lies fails every process instead of making
//! groups that disagree. Integer keys sort by their images, no comparator.

use std::cmp::Ordering;

use std::cell::Cell;

use catena_fabric::{HostMemory, Rank, Transport};
use serde::Serialize;

use super::agreement::{disagreement, modes, types, KEYED, SPLIT};
use super::item::KeyOrder;
use super::mix::digest;
use super::numbering::Place;
use super::{Color, Group, Key, Request, Split};
use crate::chain::Chain;
use crate::codec::{decode, encode_appended, Wire};
use crate::context::Proposal;
use crate::error::user_code;
use crate::groupmap::GroupMap;
use crate::host::{allgather_any, Claim, Gathered, Team, TeamCall, NO_REGION};
use crate::{Error, Result};

/// What each member tells every other (as bytes: fixed fields, then the
/// color, the key and the reason for a refusal, read in place).
struct Record<'a> {
    head: Head,
    color: &'a [u8],
    /// The key: its integer image (ordered as bytes) or its encoding.
    key: &'a [u8],
    image: bool,
    /// Why this member's color or key could not be encoded, which fails
    /// the split on every process.
    refused: Option<&'a [u8]>,
}

/// A record's fields before its color and key.
#[derive(Clone, Copy)]
struct Head {
    types: u64,
    algorithm: u32,
    modes: u8,
    proposal: Proposal,
    /// The member's host.
    host: u64,
    /// The member's region for its new group's team.
    region: u64,
}

/// The bytes before a record's color: types, algorithm, modes, image and
/// refused flags, the proposal's leader and serial, the host, the region,
/// and the color's and key's lengths (whole words: a length never wraps,
/// however long the encoding).
const FIXED: usize = 8 + 4 + 1 + 1 + 1 + 4 + 8 + 8 + 8 + 8 + 8;

impl<'a> Record<'a> {
    /// This member's record: `head`, then its color and key encoded in
    /// place (the key as `image`, its integer image, where it has one). A
    /// color or key that does not encode is left empty and the reason
    /// travels instead.
    fn encode<C: Serialize, K: Serialize>(
        head: Head,
        color: &Color<C>,
        key: &Key<K>,
        image: Option<&[u8]>,
    ) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED + 64);
        out.resize(FIXED, 0);
        let mut refused: Option<String> = None;
        let mut taken = |what: &'static str, appended: Result<usize>| {
            appended.unwrap_or_else(|e| {
                refused.get_or_insert(format!("{what}: {e}"));
                0
            })
        };
        let color_len = match color {
            Color::Is(c) => taken("a color", encode_appended(c, "a color", &mut out)),
            _ => 0,
        };
        let key_len = match (key, image) {
            (Key::Is(_), Some(image)) => {
                out.extend_from_slice(image);
                image.len()
            }
            (Key::Is(k), None) => taken("a key", encode_appended(k, "a key", &mut out)),
            (Key::ParentOrder, _) => 0,
        };
        if let Some(why) = &refused {
            out.extend_from_slice(why.as_bytes());
        }
        let (leader, serial) = head.proposal.parts();
        let fixed = &mut out[..FIXED];
        fixed[..8].copy_from_slice(&head.types.to_le_bytes());
        fixed[8..12].copy_from_slice(&head.algorithm.to_le_bytes());
        fixed[12..15].copy_from_slice(&[
            head.modes,
            u8::from(image.is_some()),
            u8::from(refused.is_some()),
        ]);
        fixed[15..19].copy_from_slice(&leader.to_le_bytes());
        fixed[19..27].copy_from_slice(&serial.to_le_bytes());
        fixed[27..35].copy_from_slice(&head.host.to_le_bytes());
        fixed[35..43].copy_from_slice(&head.region.to_le_bytes());
        fixed[43..51].copy_from_slice(&(color_len as u64).to_le_bytes());
        fixed[51..59].copy_from_slice(&(key_len as u64).to_le_bytes());
        out
    }

    /// A record as a peer sent it, every length checked against the bytes.
    fn parse(bytes: &'a [u8]) -> Result<Record<'a>> {
        let bad = || Error::Codec {
            action: "decode",
            what: "a split record",
            message: format!("{} bytes that do not hold one", bytes.len()),
        };
        let fixed = bytes.get(..FIXED).ok_or_else(bad)?;
        let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().expect("4 bytes"));
        let long = |at: usize| u64::from_le_bytes(fixed[at..at + 8].try_into().expect("8 bytes"));
        let length = |at: usize| usize::try_from(long(at)).map_err(|_| bad());
        let (color_len, key_len) = (length(43)?, length(51)?);
        let rest = &bytes[FIXED..];
        let color = rest.get(..color_len).ok_or_else(bad)?;
        let key = rest
            .get(color_len..color_len.checked_add(key_len).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        let refused = &rest[color_len + key_len..];
        Ok(Record {
            head: Head {
                types: long(0),
                algorithm: word(8),
                modes: fixed[12],
                proposal: Proposal::from_parts(word(15), long(19)),
                host: long(27),
                region: long(35),
            },
            image: fixed[13] != 0,
            refused: (fixed[14] != 0).then_some(refused),
            color,
            key,
        })
    }
}

/// A member's new group, with its team and its world ranks in group order.
pub(crate) struct Dense<'t, T: HostMemory> {
    pub split: Split,
    pub team: Option<Team<'t, T>>,
    pub map: Option<GroupMap>,
}

/// Where a dense split's members swap their records, in member order: the
/// team of a communicator in host memory, or the two levels of one across
/// hosts.
pub(crate) trait Swap {
    /// How many members there are.
    fn size(&self) -> u32;
    /// This member's place among them.
    fn me(&self) -> u32;
    /// Member `m`'s world rank.
    fn world_rank(&self, m: u32) -> Result<Rank>;
    /// Every member's `bytes`, in member order: round 0 the records, round
    /// 1 the comparator's check (each at most once, in that order).
    async fn swap(&self, round: usize, bytes: &[u8]) -> Result<Gathered>;
}

/// The host team's swap: its two calls `call.seq`, counting in `ran` those
/// that ran.
struct TeamSwap<'c, 'a, 't, T: HostMemory> {
    call: &'c TeamCall<'a, 't, T, (u64, u64)>,
    ran: &'c Cell<usize>,
}

impl<T: HostMemory> Swap for TeamSwap<'_, '_, '_, T> {
    fn size(&self) -> u32 {
        self.call.team.size()
    }

    fn me(&self) -> u32 {
        self.call.team.me()
    }

    fn world_rank(&self, m: u32) -> Result<Rank> {
        Ok(self.call.team.rank_of(m))
    }

    async fn swap(&self, round: usize, bytes: &[u8]) -> Result<Gathered> {
        let TeamCall {
            team,
            seq,
            deadline,
        } = *self.call;
        let seq = [seq.0, seq.1][round];
        self.ran.set(round + 1);
        team.run(seq, deadline, allgather_any(team, seq, bytes, deadline))
            .await
    }
}

/// Splits the communicator of `call`'s team and `parent` as `request`
/// asks (in the team's two calls `call.seq`, taken when the split was
/// called, as `proposal` was). Both calls run whatever happens, so the
/// team's later calls go on.
pub(crate) async fn split<'t, T, C, K, O>(
    call: TeamCall<'_, 't, T, (u64, u64)>,
    parent: &Chain,
    proposal: Proposal,
    request: Request<C, K, O>,
) -> Result<Dense<'t, T>>
where
    T: Transport,
    C: Serialize,
    K: Wire,
    O: Fn(&K, &K) -> Ordering,
{
    let ran = Cell::new(0);
    let t = call.team.t();
    let claim = Claim::new(t, call.team.size());
    let region = claim.offer().unwrap_or(NO_REGION);
    let swap = TeamSwap {
        call: &call,
        ran: &ran,
    };
    let out = split_with(&swap, t, parent, (proposal, region), request).await;
    let TeamCall {
        team,
        seq: (first, second),
        deadline,
    } = call;
    for seq in [first, second].into_iter().skip(ran.get()) {
        team.run(seq, deadline, async { Ok(()) }).await?;
    }
    let split = out?;
    let Split::Member(group) = &split else {
        return Ok(Dense {
            split,
            team: None,
            map: None,
        });
    };
    let places = group.places.as_deref().unwrap_or_default();
    let ranks: Vec<Rank> = places.iter().map(|p| p.rank).collect();
    let regions = places.iter().map(|p| p.region);
    // A group with a team makes its map from the team's member list on
    // its first lookup; one without (a lone member, or an arena that had no
    // room) gets it now.
    let no_region = regions.clone().any(|r| r == NO_REGION);
    let map = (no_region || ranks.len() < 2)
        .then(|| crate::comm::listed_map(t.size(), &ranks))
        .flatten();
    let (at, context) = (group.chain.rank(), group.chain.context());
    let team = match no_region {
        true => None,
        false => claim.into_team(ranks, regions, at, context)?,
    };
    Ok(Dense { split, team, map })
}

/// The dense split of the members `swap` reaches, on their `parent`
/// chain, as `request` asks: this member offers `proposal` for the new
/// groups' context and `region` for its new group's team, and learns its
/// group's places (every member's world rank, host and region).
pub(crate) async fn split_with<T, C, K, O>(
    swap: &impl Swap,
    t: &T,
    parent: &Chain,
    (proposal, region): (Proposal, u64),
    request: Request<C, K, O>,
) -> Result<Split>
where
    T: Transport,
    C: Serialize,
    K: Wire,
    O: Fn(&K, &K) -> Ordering,
{
    let Request {
        color,
        key,
        order,
        image,
        algorithm,
    } = request;
    let head = Head {
        types: types::<C, K>(),
        algorithm: algorithm.id(),
        modes: modes(&color, &key, false, false),
        proposal,
        host: t.host(),
        region,
    };
    let bytes = Record::encode(head, &color, &key, image.as_deref());
    let all = swap.swap(0, &bytes).await?;
    let records: Vec<Record<'_>> = all.iter().map(Record::parse).collect::<Result<_>>()?;
    if let Some((m, why)) = records
        .iter()
        .enumerate()
        .find_map(|(m, r)| r.refused.map(|why| (m, String::from_utf8_lossy(why))))
    {
        return Err(Error::Codec {
            action: "encode",
            what: "a split's color or key",
            message: format!("member {m} could not encode {why}"),
        });
    }
    let span = |f: &dyn Fn(&Record) -> u64| {
        let values = records.iter().map(f);
        (values.clone().min().unwrap_or(0), values.max().unwrap_or(0))
    };
    let kinds = span(&|r| r.head.types);
    let algorithms = span(&|r| u64::from(r.head.algorithm));
    let modes = records.iter().fold(0, |m, r| m | r.head.modes);
    let algorithms = (algorithms.0 as u32, algorithms.1 as u32);
    if let Some(e) = disagreement::<C, K>(kinds, algorithms, modes, algorithm) {
        return Err(e);
    }
    let context = records[0].head.proposal.context(t.size())?;
    let members = || (0..records.len() as u32).filter(|&m| records[m as usize].head.modes != 0);
    // Groups by color, in the order of their lowest parent rank.
    let mut leaders: Vec<u32> = Vec::new();
    for m in members() {
        let color = records[m as usize].color;
        if !leaders.iter().any(|&l| records[l as usize].color == color) {
            leaders.push(m);
        }
    }
    let keyed = modes & KEYED != 0;
    let comparing = keyed && records.iter().any(|r| r.head.modes != 0 && !r.image);
    // Every member decodes every key, so a key that does not decode fails
    // every process alike.
    let keys: Vec<Option<K>> = match comparing {
        true => records
            .iter()
            .map(|r| match r.head.modes & KEYED != 0 {
                true => decode(r.key, "a key").map(Some),
                false => Ok(None),
            })
            .collect::<Result<_>>()?,
        false => Vec::new(),
    };
    if records.len() != swap.size() as usize {
        return Err(Error::Codec {
            action: "decode",
            what: "a split's records",
            message: format!("{} records for {} members", records.len(), swap.size()),
        });
    }
    let me = swap.me();
    let mine = records[me as usize].color;
    let mut group: Vec<u32> = match head.modes & (SPLIT | super::agreement::EVERYONE) {
        0 => Vec::new(),
        _ => members()
            .filter(|&m| records[m as usize].color == mine)
            .collect(),
    };
    let sorted = sort(&mut group, &records, &keys, keyed, comparing, &order);
    if comparing {
        // Every member shows what order its group came out in; any fault
        // or disagreement fails every process.
        let shown = match &sorted {
            Ok(()) => {
                digest(
                    &group
                        .iter()
                        .flat_map(|m| m.to_le_bytes())
                        .collect::<Vec<_>>(),
                ) | 1
            }
            Err(_) => 0,
        };
        let all = swap.swap(1, &shown.to_le_bytes()).await?;
        let shown: Vec<u64> = all
            .iter()
            .map(|b| b.try_into().map(u64::from_le_bytes).unwrap_or(0))
            .collect();
        let lies = members().any(|m| {
            let color = records[m as usize].color;
            let first = leaders
                .iter()
                .find(|&&l| records[l as usize].color == color)
                .expect("every color has a leader");
            shown[m as usize] == 0 || shown[m as usize] != shown[*first as usize]
        });
        if lies {
            sorted?;
            return Err(Error::UserCode {
                what: "the key comparator",
                message: "it ordered one group differently on different processes".into(),
            });
        }
    }
    sorted?;
    let count = leaders.len() as u32;
    let Some(at) = group.iter().position(|&m| m == me) else {
        return Ok(Split::NotMember { groups: count });
    };
    let id = leaders
        .iter()
        .position(|&l| records[l as usize].color == mine)
        .expect("a member's color leads a group") as u32;
    // Filled in place: collecting the fallible lookups into a boxed slice
    // reallocated, which the one-host split's latency showed.
    let mut places = Vec::with_capacity(group.len());
    for &m in &group {
        let head = records[m as usize].head;
        places.push(Place {
            rank: swap.world_rank(m)?,
            host: head.host,
            region: head.region,
        });
    }
    let places = places.into_boxed_slice();
    let chain = Chain::from_links(
        at as u32,
        places.len() as u32,
        parent.address(),
        at.checked_sub(1).map(|l| places[l].rank),
        places.get(at + 1).map(|p| p.rank),
        context,
    )?;
    Ok(Split::Member(Group {
        chain,
        id,
        count,
        places: Some(places),
    }))
}

/// Orders a group's members by key (integer images as bytes, else the
/// Orders a group's members by key (integer images as bytes, else the
/// user's order), then by parent rank.
fn sort<K>(
    group: &mut [u32],
    records: &[Record],
    keys: &[Option<K>],
    keyed: bool,
    comparing: bool,
    order: KeyOrder<'_, K>,
) -> Result<()> {
    if !keyed {
        return Ok(());
    }
    if !comparing {
        group.sort_by(|&a, &b| {
            records[a as usize]
                .key
                .cmp(records[b as usize].key)
                .then(a.cmp(&b))
        });
        return Ok(());
    }
    user_code("the key comparator", || {
        group.sort_by(|&a, &b| match (&keys[a as usize], &keys[b as usize]) {
            (Some(x), Some(y)) => order(x, y).then(a.cmp(&b)),
            _ => Ordering::Equal,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_refuse_what_does_not_hold_one() {
        let head = Head {
            types: 7,
            algorithm: 3,
            modes: 5,
            proposal: Proposal::from_parts(2, 9),
            host: 77,
            region: 4096,
        };
        let bytes = Record::encode(head, &Color::Is("blue"), &Key::Is(0u8), Some(&[1, 2, 3]));
        let back = Record::parse(&bytes).unwrap();
        let h = back.head;
        assert_eq!(
            (h.types, h.algorithm, h.modes, h.host, h.region, back.image),
            (7, 3, 5, 77, 4096, true)
        );
        assert_eq!(h.proposal.parts(), (2, 9));
        assert_eq!(
            (back.color, back.key, back.refused),
            (&b"\x04blue"[..], &[1u8, 2, 3][..], None)
        );
        for cut in 0..FIXED + 8 {
            assert!(Record::parse(&bytes[..cut]).is_err(), "{cut} bytes");
        }
        for (at, len) in [(43, u64::MAX), (51, u64::MAX), (43, u32::MAX as u64 + 4)] {
            let mut huge = bytes.clone();
            huge[at..at + 8].copy_from_slice(&len.to_le_bytes());
            assert!(Record::parse(&huge).is_err(), "length {len} at {at}");
        }
    }

    /// A key whose encoding fails.
    struct Unencodable;

    impl Serialize for Unencodable {
        fn serialize<S: serde::Serializer>(&self, _: S) -> std::result::Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("no"))
        }
    }

    #[test]
    fn a_key_that_does_not_encode_travels_as_a_refusal() {
        let head = Head {
            types: 1,
            algorithm: 0,
            modes: 1,
            proposal: Proposal::from_parts(0, 1),
            host: 0,
            region: NO_REGION,
        };
        let bytes = Record::encode(head, &Color::Is(3u8), &Key::Is(Unencodable), None);
        let back = Record::parse(&bytes).unwrap();
        assert_eq!((back.color, back.key), (&[3u8][..], &[][..]));
        let why = String::from_utf8_lossy(back.refused.unwrap()).into_owned();
        assert!(why.starts_with("a key: "), "{why}");
    }
}
