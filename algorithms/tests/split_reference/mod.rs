//! The sequential split every split test compares against: groups by color
//! equality, numbered by their lowest parent rank, ordered by key then
//! parent rank.

use std::cmp::Ordering;

use catena_algorithms::chain::Split;

/// What one process should get, as the sequential reference computes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    Member {
        rank: u32,
        size: u32,
        left: Option<u32>,
        right: Option<u32>,
        id: u32,
        count: u32,
    },
    NotMember {
        count: u32,
    },
}

/// Members grouped by color, groups in order of their lowest parent rank,
/// each group in parent order.
pub fn groups_by_color<C: PartialEq>(colors: &[Option<C>]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for (p, color) in colors.iter().enumerate() {
        let Some(c) = color else { continue };
        match groups.iter_mut().find(|g| colors[g[0]].as_ref() == Some(c)) {
            Some(g) => g.push(p),
            None => groups.push(vec![p]),
        }
    }
    groups
}

/// The reference split over parent ranks 0..n; `world[p]` is the address of
/// parent rank p. Colors compare by equality; keys by `cmp`, then parent rank.
pub fn reference<C: PartialEq, K>(
    colors: &[Option<C>],
    keys: Option<&[K]>,
    cmp: impl Fn(&K, &K) -> Ordering,
    world: &[u32],
) -> Vec<Expected> {
    let n = colors.len();
    let mut groups = groups_by_color(colors);
    for g in &mut groups {
        if let Some(keys) = keys {
            g.sort_by(|&a, &b| cmp(&keys[a], &keys[b]).then(a.cmp(&b)));
        }
    }
    let count = groups.len() as u32;
    let mut out: Vec<Expected> = (0..n).map(|_| Expected::NotMember { count }).collect();
    for (id, g) in groups.iter().enumerate() {
        for (rank, &p) in g.iter().enumerate() {
            out[p] = Expected::Member {
                rank: rank as u32,
                size: g.len() as u32,
                left: rank.checked_sub(1).map(|l| world[g[l]]),
                right: g.get(rank + 1).map(|&r| world[r]),
                id: id as u32,
                count,
            };
        }
    }
    out
}

/// What a process got, in the reference's terms.
pub fn observed(split: &Split) -> Expected {
    match split {
        Split::Member(g) => Expected::Member {
            rank: g.chain.rank(),
            size: g.chain.size(),
            left: g.chain.left(),
            right: g.chain.right(),
            id: g.id,
            count: g.count,
        },
        Split::NotMember { groups } => Expected::NotMember { count: *groups },
    }
}

/// Whether what every process got (parent rank p at address `world[p]`) is
/// a valid split of `colors` in some order within each group: the groups
/// are the color classes, numbered by lowest parent rank, and each is a
/// chain whose ranks, sizes and links agree. Says what is wrong if not.
pub fn check_partition<C: PartialEq>(
    colors: &[Option<C>],
    got: &[Expected],
    world: &[u32],
) -> Result<(), String> {
    let groups = groups_by_color(colors);
    let count = groups.len() as u32;
    for (p, g) in got.iter().enumerate() {
        if colors[p].is_none() && *g != (Expected::NotMember { count }) {
            return Err(format!("non-member {p} got {g:?}, {count} groups"));
        }
    }
    for (id, group) in groups.iter().enumerate() {
        // by_rank[r]: the parent rank that got rank r.
        let mut by_rank = vec![None; group.len()];
        for &p in group {
            let Expected::Member {
                rank,
                size,
                id: got_id,
                count: got_count,
                ..
            } = got[p]
            else {
                return Err(format!("member {p} got {:?}", got[p]));
            };
            if size as usize != group.len() || got_id != id as u32 || got_count != count {
                return Err(format!(
                    "member {p} got {:?}, its group {id} of {count} has {} members",
                    got[p],
                    group.len()
                ));
            }
            match by_rank.get_mut(rank as usize) {
                Some(slot @ None) => *slot = Some(p),
                _ => return Err(format!("rank {rank} twice or out of range in group {id}")),
            }
        }
        for (r, p) in by_rank.iter().enumerate() {
            let p = p.expect("every rank taken: as many ranks as members");
            let Expected::Member { left, right, .. } = got[p] else {
                unreachable!("checked above")
            };
            let want_left = r.checked_sub(1).map(|l| world[by_rank[l].unwrap()]);
            let want_right = by_rank.get(r + 1).map(|q| world[q.unwrap()]);
            if left != want_left || right != want_right {
                return Err(format!(
                    "member {p} at rank {r} of group {id} has links {left:?}, {right:?}; \
                     want {want_left:?}, {want_right:?}"
                ));
            }
        }
    }
    Ok(())
}
