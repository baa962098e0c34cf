//! The sub-communicators `catena-bench tree` measures, drawn the same way on
//! every run from a seed: the whole torus, one missing node, half the planes
//! along one dimension, 256 random members, and four simultaneous random
//! groups.

use catena_fabric::Rank;
use catena_topo::trees::{auto, binomial, disjoint_chains};
use catena_topo::{Members, Node, Schedule, Topology, Torus};

/// One sub-communicator: its nodes in rank order (one rank a node), its
/// root, our schedule and the binomial baseline's.
pub struct Group {
    pub order: Vec<Node>,
    pub root: Node,
    pub ours: Schedule,
    pub binomial: Schedule,
}

impl Group {
    pub fn ranks(&self) -> &[Rank] {
        &self.order
    }
}

/// A measured case: one group, or several running at once.
pub struct Case {
    pub name: &'static str,
    pub groups: Vec<Group>,
}

/// A case with no schedule on this torus (say, no link-disjoint chains for
/// the simultaneous groups): reported, not measured.
pub struct NotFound {
    pub name: &'static str,
    pub why: String,
}

fn case(name: &'static str, groups: Result<Vec<Group>, String>) -> Result<Case, NotFound> {
    match groups {
        Ok(groups) => Ok(Case { name, groups }),
        Err(why) => Err(NotFound { name, why }),
    }
}

/// xorshift64: the same draws on every run.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

fn group(torus: &Torus, order: Vec<Node>, root: Node) -> Result<Group, String> {
    let ours = auto(torus, &order, root).map_err(|e| e.to_string())?;
    let binomial = binomial(torus, &order, root).map_err(|e| e.to_string())?;
    Ok(Group {
        order,
        root,
        ours,
        binomial,
    })
}

/// The cases on `torus`; `members` random members, `groups` of them at
/// once, the planes along `plane_dim`, drawn from `seed`. A case that has no
/// schedule here is `NotFound`, and the others still run.
pub fn cases(
    torus: &Torus,
    members: usize,
    groups: usize,
    plane_dim: usize,
    seed: u64,
) -> Vec<Result<Case, NotFound>> {
    let mut draw = Draw(seed | 1);
    let n = torus.nodes();
    let all: Vec<Node> = (0..n).collect();
    let mut out = Vec::new();
    let root = draw.below(n as usize) as Node;
    out.push(case(
        "full torus",
        group(torus, all.clone(), root).map(|g| vec![g]),
    ));
    let missing = draw.below(n as usize) as Node;
    let but: Vec<Node> = all.iter().copied().filter(|&x| x != missing).collect();
    let root = but[draw.below(but.len())];
    out.push(case(
        "missing node",
        group(torus, but, root).map(|g| vec![g]),
    ));
    let z = plane_dim;
    let mut planes: Vec<u32> = (0..torus.dims()[z]).collect();
    draw.shuffle(&mut planes);
    planes.truncate(planes.len().div_ceil(2));
    let half: Vec<Node> = all
        .iter()
        .copied()
        .filter(|&x| planes.contains(&torus.coordinates(x)[z]))
        .collect();
    let root = half[draw.below(half.len())];
    out.push(case(
        "half the planes",
        group(torus, half, root).map(|g| vec![g]),
    ));
    let mut random = all.clone();
    draw.shuffle(&mut random);
    random.truncate(members.min(n as usize));
    let root = random[draw.below(random.len())];
    out.push(case(
        "random members",
        group(torus, random, root).map(|g| vec![g]),
    ));
    out.push(case(
        "simultaneous groups",
        simultaneous(torus, &mut draw, members / groups.max(1), groups),
    ));
    out
}

/// `count` disjoint random groups of `size` with pairwise link-disjoint
/// chains; drawn again (up to 20 times) when the chains cannot be found.
fn simultaneous(
    torus: &Torus,
    draw: &mut Draw,
    size: usize,
    count: usize,
) -> Result<Vec<Group>, String> {
    let mut why = String::new();
    for _ in 0..20 {
        let mut nodes: Vec<Node> = (0..torus.nodes()).collect();
        draw.shuffle(&mut nodes);
        let sets: Vec<(Vec<Node>, Node)> = nodes
            .chunks(size.max(1))
            .take(count)
            .map(|c| (c.to_vec(), c[draw.below(c.len())]))
            .collect();
        let members = sets
            .iter()
            .map(|(o, r)| Ok((Members::new(torus, o.iter().copied())?, *r)))
            .collect::<Result<Vec<_>, catena_topo::MembersError>>()
            .map_err(|e| e.to_string())?;
        match disjoint_chains(torus, &members) {
            Ok(schedules) => {
                return sets
                    .into_iter()
                    .zip(schedules)
                    .map(|((order, root), ours)| {
                        let binomial = binomial(torus, &order, root).map_err(|e| e.to_string())?;
                        Ok(Group {
                            order,
                            root,
                            ours,
                            binomial,
                        })
                    })
                    .collect();
            }
            Err(e) => why = e.to_string(),
        }
    }
    Err(format!(
        "no link-disjoint chains for {count} groups of {size}: {why}"
    ))
}
