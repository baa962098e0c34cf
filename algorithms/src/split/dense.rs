//! The split of a communicator in host memory (issue 32's dense path): one
//! allgather through shared memory of every member's color, key, context
//! proposal and the region its new group's team would use, then a local
//! sort of its own group. Members check the same agreement as the chain
//! split's (every process sees every record, so a disagreement fails all
//! alike); a user comparator's answers are checked across the group in a
//! second call, so one that lies fails every process instead of making
//! groups that disagree. Integer keys sort by their images, no comparator.

use std::cmp::Ordering;

use catena_fabric::{HostMemory, Rank, Time, Transport};
use serde::Serialize;

use super::agreement::{disagreement, modes, types, KEYED, SPLIT};
use super::item::KeyOrder;
use super::mix::digest;
use super::{Algorithm, Color, Group, Key, Split};
use crate::chain::Chain;
use crate::codec::{decode, encode, Wire};
use crate::context::Proposal;
use crate::error::user_code;
use crate::groupmap::GroupMap;
use crate::host::{allgather_any, Claim, Team};
use crate::{Error, Result};

/// No region: its owner's arena had no room, so its group gets no team.
const NO_REGION: u64 = u64::MAX;

/// What each member tells every other (as bytes: fixed fields, then the
/// color, the key and the reason for a refusal, read in place).
struct Record<'a> {
    types: u64,
    algorithm: u32,
    modes: u8,
    proposal: Proposal,
    /// The member's region for its new group's team.
    region: u64,
    color: &'a [u8],
    /// The key: its integer image (ordered as bytes) or its encoding.
    key: &'a [u8],
    image: bool,
    /// Why this member's color or key could not be encoded, which fails
    /// the split on every process.
    refused: Option<&'a [u8]>,
}

/// The bytes before a record's color: types, algorithm, modes, image and
/// refused flags, the proposal's leader and serial, the region, and the
/// color's and key's lengths.
const FIXED: usize = 8 + 4 + 1 + 1 + 1 + 4 + 8 + 8 + 4 + 4;

impl<'a> Record<'a> {
    fn encode(&self) -> Vec<u8> {
        let refused = self.refused.unwrap_or_default();
        let mut out = Vec::with_capacity(FIXED + self.color.len() + self.key.len() + refused.len());
        let (leader, serial) = self.proposal.parts();
        out.extend_from_slice(&self.types.to_le_bytes());
        out.extend_from_slice(&self.algorithm.to_le_bytes());
        out.extend_from_slice(&[
            self.modes,
            u8::from(self.image),
            u8::from(self.refused.is_some()),
        ]);
        out.extend_from_slice(&leader.to_le_bytes());
        out.extend_from_slice(&serial.to_le_bytes());
        out.extend_from_slice(&self.region.to_le_bytes());
        out.extend_from_slice(&(self.color.len() as u32).to_le_bytes());
        out.extend_from_slice(&(self.key.len() as u32).to_le_bytes());
        out.extend_from_slice(self.color);
        out.extend_from_slice(self.key);
        out.extend_from_slice(refused);
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
        let (color_len, key_len) = (word(35) as usize, word(39) as usize);
        let rest = &bytes[FIXED..];
        let color = rest.get(..color_len).ok_or_else(bad)?;
        let key = rest
            .get(color_len..color_len.checked_add(key_len).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        let refused = &rest[color_len + key_len..];
        Ok(Record {
            types: long(0),
            algorithm: word(8),
            modes: fixed[12],
            image: fixed[13] != 0,
            refused: (fixed[14] != 0).then_some(refused),
            proposal: Proposal::from_parts(word(15), long(19)),
            region: long(27),
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

/// Splits the communicator of `team` and `parent` (calls `seqs` of the
/// team, taken when the split was called, as `proposal` was); `image` is
/// the key's integer image where it has one. Both calls run whatever
/// happens, so the team's later calls go on.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn split<'t, T, C, K>(
    team: &Team<'t, T>,
    seqs: (u64, u64),
    parent: &Chain,
    proposal: Proposal,
    color: Color<C>,
    key: Key<K>,
    order: KeyOrder<'_, K>,
    image: Option<Vec<u8>>,
    algorithm: Algorithm,
    deadline: Time,
) -> Result<Dense<'t, T>>
where
    T: Transport,
    C: Serialize,
    K: Wire,
{
    let ran = std::cell::Cell::new(0);
    let out = split_in(
        team, seqs, &ran, parent, proposal, color, key, order, image, algorithm, deadline,
    )
    .await;
    for seq in [seqs.0, seqs.1].into_iter().skip(ran.get()) {
        team.run(seq, deadline, async { Ok(()) }).await?;
    }
    out
}

/// [`split`], counting in `ran` the calls it ran.
#[allow(clippy::too_many_arguments)]
async fn split_in<'t, T, C, K>(
    team: &Team<'t, T>,
    seqs: (u64, u64),
    ran: &std::cell::Cell<usize>,
    parent: &Chain,
    proposal: Proposal,
    color: Color<C>,
    key: Key<K>,
    order: KeyOrder<'_, K>,
    image: Option<Vec<u8>>,
    algorithm: Algorithm,
    deadline: Time,
) -> Result<Dense<'t, T>>
where
    T: Transport,
    C: Serialize,
    K: Wire,
{
    let t = team.t();
    let claim = Claim::new(t, team.size());
    let region = claim.offer().unwrap_or(NO_REGION);
    let mut refused: Option<String> = None;
    let mut encoded = |what: &'static str, bytes: Result<Vec<u8>>| {
        bytes.unwrap_or_else(|e| {
            refused.get_or_insert(format!("{what}: {e}"));
            Vec::new()
        })
    };
    let color_bytes = match &color {
        Color::Is(c) => encoded("a color", encode(c, "a color")),
        _ => Vec::new(),
    };
    let key_bytes = match (&key, &image) {
        (Key::Is(_), Some(image)) => image.clone(),
        (Key::Is(k), None) => encoded("a key", encode(k, "a key")),
        (Key::ParentOrder, _) => Vec::new(),
    };
    let mine = Record {
        types: types::<C, K>(),
        algorithm: algorithm.id(),
        modes: modes(&color, &key, false, false),
        proposal,
        region,
        color: &color_bytes,
        image: image.is_some(),
        key: &key_bytes,
        refused: refused.as_deref().map(str::as_bytes),
    };
    let bytes = mine.encode();
    ran.set(1);
    let all = team
        .run(
            seqs.0,
            deadline,
            allgather_any(team, seqs.0, &bytes, deadline),
        )
        .await?;
    let records: Vec<Record<'_>> = all
        .iter()
        .map(|b| Record::parse(b))
        .collect::<Result<_>>()?;
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
    let kinds = span(&|r| r.types);
    let algorithms = span(&|r| u64::from(r.algorithm));
    let modes = records.iter().fold(0, |m, r| m | r.modes);
    let algorithms = (algorithms.0 as u32, algorithms.1 as u32);
    if let Some(e) = disagreement::<C, K>(kinds, algorithms, modes, algorithm) {
        return Err(e);
    }
    let context = records[0].proposal.context(t.size())?;
    let members: Vec<u32> = (0..records.len() as u32)
        .filter(|&m| records[m as usize].modes != 0)
        .collect();
    // Groups by color, in the order of their lowest parent rank.
    let mut leaders: Vec<u32> = Vec::new();
    for &m in &members {
        let color = records[m as usize].color;
        if !leaders.iter().any(|&l| records[l as usize].color == color) {
            leaders.push(m);
        }
    }
    let keyed = modes & KEYED != 0;
    let comparing = keyed && records.iter().any(|r| r.modes != 0 && !r.image);
    // Every member decodes every key, so a key that does not decode fails
    // every process alike.
    let keys: Vec<Option<K>> = match comparing {
        true => records
            .iter()
            .map(|r| match r.modes & KEYED != 0 {
                true => decode(r.key, "a key").map(Some),
                false => Ok(None),
            })
            .collect::<Result<_>>()?,
        false => Vec::new(),
    };
    let me = team.me();
    let mut group: Vec<u32> = match mine.modes & (SPLIT | super::agreement::EVERYONE) {
        0 => Vec::new(),
        _ => members
            .iter()
            .copied()
            .filter(|&m| records[m as usize].color == mine.color)
            .collect(),
    };
    let sorted = sort(&mut group, &records, &keys, keyed, comparing, order);
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
        ran.set(2);
        let all = team
            .run(
                seqs.1,
                deadline,
                allgather_any(team, seqs.1, &shown.to_le_bytes(), deadline),
            )
            .await?;
        let shown: Vec<u64> = all
            .iter()
            .map(|b| b.as_slice().try_into().map(u64::from_le_bytes).unwrap_or(0))
            .collect();
        let lies = members.iter().any(|&m| {
            let color = records[m as usize].color;
            let first = members
                .iter()
                .find(|&&l| records[l as usize].color == color)
                .expect("m itself");
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
        return Ok(Dense {
            split: Split::NotMember { groups: count },
            team: None,
            map: None,
        });
    };
    let id = leaders
        .iter()
        .position(|&l| records[l as usize].color == mine.color)
        .expect("a member's color leads a group") as u32;
    let ranks: Vec<Rank> = group.iter().map(|&m| team.rank_of(m)).collect();
    let size = ranks.len() as u32;
    let chain = Chain::from_links(
        at as u32,
        size,
        parent.address(),
        at.checked_sub(1).map(|l| ranks[l]),
        ranks.get(at + 1).copied(),
        context,
    )?;
    let regions: Vec<u64> = group.iter().map(|&m| records[m as usize].region).collect();
    // A group with a team makes its map from the team's member list on
    // its first lookup; one without (a lone member, or an arena that had no
    // room) gets it now.
    let no_region = regions.contains(&NO_REGION);
    let map = (no_region || ranks.len() < 2)
        .then(|| crate::comm::listed_map(t.size(), &ranks))
        .flatten();
    let team = match no_region {
        true => None,
        false => claim.into_team(ranks, regions, at as u32, context)?,
    };
    let split = Split::Member(Group {
        chain,
        id,
        count,
        places: None,
    });
    Ok(Dense { split, team, map })
}

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
        let record = Record {
            types: 7,
            algorithm: 3,
            modes: 5,
            proposal: Proposal::from_parts(2, 9),
            region: 4096,
            color: b"blue",
            key: &[1, 2, 3],
            image: true,
            refused: Some(b"why"),
        };
        let bytes = record.encode();
        let back = Record::parse(&bytes).unwrap();
        assert_eq!(
            (
                back.types,
                back.algorithm,
                back.modes,
                back.region,
                back.image
            ),
            (7, 3, 5, 4096, true)
        );
        assert_eq!(back.proposal.parts(), (2, 9));
        assert_eq!(
            (back.color, back.key, back.refused),
            (&b"blue"[..], &[1u8, 2, 3][..], Some(&b"why"[..]))
        );
        for cut in 0..FIXED + 7 {
            assert!(Record::parse(&bytes[..cut]).is_err(), "{cut} bytes");
        }
        let mut huge = bytes.clone();
        huge[35..39].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(Record::parse(&huge).is_err());
    }
}
