//! The split's first step, one allreduce on the parent chain: checks that
//! every process passed the same color and key types, algorithm and modes
//! (a disagreement fails the call on every process alike), counts members,
//! and agrees on the new groups' context id: parent rank 0's proposal.

use catena_fabric::{ContextId, Transport};
use serde::{Deserialize, Serialize};

use super::{Algorithm, Color, Key};
use crate::call::Call;
use crate::context::Proposal;
use crate::scan::allreduce_in;
use crate::{Error, Result};

/// What the processes agreed on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Agreed {
    pub members: u32,
    /// Whether groups are ordered by key (else by parent rank).
    pub reorder: bool,
    /// Whether members pass colors (else one group of all members).
    pub split: bool,
    /// The context of the new groups (they are disjoint, so they share it).
    pub context: ContextId,
    /// Some member asked for Radix with a key or color it cannot sort, so
    /// every process fails the split alike.
    pub radix_refused: bool,
    /// Some member offered a region of its host for a team: only then does
    /// the numbering step carry places (a bit here, not a byte per
    /// numbering message everywhere).
    pub offered: bool,
}

pub(super) const SPLIT: u8 = 1;
pub(super) const EVERYONE: u8 = 2;
pub(super) const KEYED: u8 = 4;
pub(super) const PARENT_ORDER: u8 = 8;
/// A member whose key or color Radix cannot sort.
const RADIX_REFUSED: u8 = 16;
/// A member that offers its new group a region of its host arena.
const OFFERED: u8 = 32;

#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
struct Votes {
    types: (u64, u64),
    algorithm: (u32, u32),
    modes: u8,
    context: Proposal,
    members: u32,
}

fn combine(a: &Votes, b: &Votes) -> Votes {
    Votes {
        types: (a.types.0.min(b.types.0), a.types.1.max(b.types.1)),
        algorithm: (
            a.algorithm.0.min(b.algorithm.0),
            a.algorithm.1.max(b.algorithm.1),
        ),
        modes: a.modes | b.modes,
        context: Proposal::leftmost(&a.context, &b.context),
        members: a.members + b.members,
    }
}

/// Jenkins' one-at-a-time hash, widened: stable across processes and runs.
fn fingerprint(texts: &[&str]) -> u64 {
    let mut h: u64 = 0;
    for &b in texts.iter().flat_map(|text| text.as_bytes()) {
        h = h.wrapping_add(u64::from(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// A fingerprint of the color and key types, equal on processes that pass
/// the same ones (of their names joined by " / ", hashed where they lie:
/// every split takes one, so it formats no string).
pub(super) fn types<C, K>() -> u64 {
    fingerprint(&[
        std::any::type_name::<C>(),
        " / ",
        std::any::type_name::<K>(),
    ])
}

/// What a process's color and key say about the split's modes.
pub(super) fn modes<C, K>(
    color: &Color<C>,
    key: &Key<K>,
    radix_refused: bool,
    offered: bool,
) -> u8 {
    (match color {
        Color::NotMember => 0,
        Color::Is(_) => SPLIT,
        Color::Everyone => EVERYONE,
    }) | match (color, key) {
        (Color::NotMember, _) => 0,
        (_, Key::Is(_)) => KEYED,
        (_, Key::ParentOrder) => PARENT_ORDER,
    } | if radix_refused { RADIX_REFUSED } else { 0 }
        | if offered { OFFERED } else { 0 }
}

/// The disagreement among every process's types, algorithm and modes
/// (the lowest and highest of each, and the union of the modes), if any:
/// the same error on every process.
pub(super) fn disagreement<C, K>(
    types: (u64, u64),
    algorithm: (u32, u32),
    modes: u8,
    asked: Algorithm,
) -> Option<Error> {
    if types.0 != types.1 {
        return Some(Error::Mismatch {
            what: format!(
                "the color and key types (this process passed {} and {})",
                std::any::type_name::<C>(),
                std::any::type_name::<K>()
            ),
        });
    }
    if algorithm.0 != algorithm.1 {
        return Some(Error::Mismatch {
            what: format!("the split algorithm (this process asked for {asked})"),
        });
    }
    if modes & (SPLIT | EVERYONE) == SPLIT | EVERYONE {
        return Some(Error::Mismatch {
            what: "whether to split (some members passed Color::Everyone, others a color)".into(),
        });
    }
    if modes & (KEYED | PARENT_ORDER) == KEYED | PARENT_ORDER {
        return Some(Error::Mismatch {
            what: "whether to reorder (some members passed Key::ParentOrder, others a key)".into(),
        });
    }
    None
}

/// `proposal` is this process's offer of the new groups' context id, taken
/// when the split was called.
pub(crate) async fn agree<T: Transport, C, K>(
    call: Call<'_, T>,
    proposal: Proposal,
    color: &Color<C>,
    key: &Key<K>,
    algorithm: Algorithm,
    radix_refused: bool,
    offered: bool,
) -> Result<Agreed> {
    let types = types::<C, K>();
    let modes = modes(color, key, radix_refused, offered);
    let algorithm_id = algorithm.id();
    let mine = Votes {
        types: (types, types),
        algorithm: (algorithm_id, algorithm_id),
        modes,
        context: proposal,
        members: u32::from(modes != 0),
    };
    let t = call.t;
    let all = allreduce_in(call, mine, combine).await?;
    if let Some(e) = disagreement::<C, K>(all.types, all.algorithm, all.modes, algorithm) {
        return Err(e);
    }
    let context = all.context.context(t.size())?;
    let radix_refused = all.modes & RADIX_REFUSED != 0;
    Ok(Agreed {
        members: all.members,
        reorder: all.modes & KEYED != 0,
        split: all.modes & SPLIT != 0,
        context,
        radix_refused,
        offered: all.modes & OFFERED != 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fingerprint of the types is that of their names joined by " / "
    /// (as it was when it formatted them), so every build agrees.
    #[test]
    fn types_hash_the_joined_names() {
        let joined = format!(
            "{} / {}",
            std::any::type_name::<Vec<u8>>(),
            std::any::type_name::<i64>()
        );
        assert_eq!(types::<Vec<u8>, i64>(), fingerprint(&[&joined]));
        assert_ne!(types::<Vec<u8>, i64>(), types::<i64, Vec<u8>>());
    }
}
