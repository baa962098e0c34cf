//! The rows of `catena-bench collectives`, each a catena side through the
//! public `Comm` API and, with MPI, an MPICH side on the same processes:
//! barrier; the Pod-buffer collectives at each size (u64 elements, sum,
//! root 0); split on the paper's workloads; create_group on the groups of
//! `catena-bench create-group`; alltoall_specific on data sets A, B, C.
//! Every side's first call is checked against what it must leave.

use std::time::Duration;

use bytemuck::Pod;
use catena_algorithms::prelude::*;
use catena_fabric::Blocking;

use super::reference::{Mpi, MpiGroup, Reference};
use super::sample::{measure, Budget, FnSide, Harness, Result, Side};
use super::Figure;
use crate::alltoall::data::{self, Set};
use crate::alltoall::{capacity, target_at, MpichExchange};
use crate::create_group::Shape;
use crate::split::Workload;

/// How long one catena call may take before it fails with `Timeout`.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(120);

/// The root of the rooted collectives.
const ROOT: u32 = 0;

/// What every row needs: the communicator, the harness, the budget and
/// MPICH's communicator of the same processes (`None`: catena alone).
pub(crate) struct Ctx<'a, 't, T: Transport> {
    pub world: &'a Comm<'t, T>,
    pub h: &'a dyn Harness,
    pub budget: Budget,
    pub mpi: Option<&'a Mpi>,
}

impl<T: Transport> Ctx<'_, '_, T> {
    /// Measures `catena` against `mpich` and makes the row's figure.
    fn row(
        &self,
        op: &str,
        case: &str,
        catena: &mut dyn Side,
        mpich: Option<&mut dyn Side>,
    ) -> Result<Figure> {
        let measured = measure(self.h, self.budget, catena, mpich)?;
        Figure::new(op, case, measured, self.h)
    }
}

/// Barrier.
pub(crate) fn barrier<T: Transport + Blocking>(ctx: &Ctx<'_, '_, T>) -> Result<Figure> {
    let world = ctx.world;
    let mut catena = FnSide {
        state: (),
        call: |_: &mut ()| Ok(world.barrier()?),
        check: |_: &mut (), _: &dyn Harness| Ok(()),
    };
    let mut mpich = ctx.mpi.map(|mpi| FnSide {
        state: (),
        call: |_: &mut ()| {
            mpi.barrier();
            Ok(())
        },
        check: |_: &mut (), _: &dyn Harness| Ok(()),
    });
    ctx.row(
        "barrier",
        "-",
        &mut catena,
        mpich.as_mut().map(|s| s as &mut dyn Side),
    )
}

/// The Pod-buffer collectives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Collective {
    Bcast,
    Reduce,
    Allreduce,
    Allgather,
    Gather,
    Scatter,
}

impl Collective {
    pub(crate) const ALL: [Collective; 6] = [
        Collective::Bcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Allgather,
        Collective::Gather,
        Collective::Scatter,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
        }
    }
}

/// Element `i` of rank `rank`'s contribution: every (rank, element)
/// differs, and sums over up to 65,536 ranks never wrap.
fn value(rank: u32, i: usize) -> u64 {
    ((u64::from(rank) + 1) << 32) + i as u64
}

/// One side's buffers for a collective of `count` elements per process,
/// as the call needs them on this rank (receive buffers zeroed, so the
/// first call's check sees what it wrote).
pub(crate) struct Buffers {
    pub op: Collective,
    me: u32,
    n: u32,
    count: usize,
    pub send: Vec<u64>,
    pub recv: Vec<u64>,
}

impl Buffers {
    fn new(op: Collective, me: u32, n: u32, count: usize) -> Buffers {
        let mine = || (0..count).map(|i| value(me, i)).collect::<Vec<_>>();
        let all = n as usize * count;
        let at_root = me == ROOT;
        let (send, recv) = match op {
            Collective::Bcast => {
                let buf = match at_root {
                    true => mine(),
                    false => vec![0; count],
                };
                (Vec::new(), buf)
            }
            Collective::Reduce => (mine(), vec![0; if at_root { count } else { 0 }]),
            Collective::Allreduce => (mine(), vec![0; count]),
            Collective::Allgather => (mine(), vec![0; all]),
            Collective::Gather => (mine(), vec![0; if at_root { all } else { 0 }]),
            Collective::Scatter => {
                let send = match at_root {
                    true => (0..all)
                        .map(|j| value((j / count) as u32, j % count))
                        .collect(),
                    false => Vec::new(),
                };
                (send, vec![0; count])
            }
        };
        Buffers {
            op,
            me,
            n,
            count,
            send,
            recv,
        }
    }

    /// Whether the receive buffer holds what the collective must leave.
    fn check(&self) -> Result<()> {
        let (n, count) = (self.n, self.count.max(1));
        let sum = |i: usize| -> u64 { (0..n).map(|r| value(r, i)).sum() };
        let expected = |j: usize| -> u64 {
            match self.op {
                Collective::Bcast => value(ROOT, j),
                Collective::Reduce | Collective::Allreduce => sum(j),
                Collective::Allgather | Collective::Gather => value((j / count) as u32, j % count),
                Collective::Scatter => value(self.me, j),
            }
        };
        match self
            .recv
            .iter()
            .enumerate()
            .find(|&(j, &v)| v != expected(j))
        {
            None => Ok(()),
            Some((j, &v)) => Err(format!(
                "{} element {j} is {v:#x}, not {:#x}",
                self.op.name(),
                expected(j)
            )
            .into()),
        }
    }

    /// catena's call.
    fn catena<T: Transport + Blocking>(&mut self, world: &Comm<'_, T>) -> Result<()> {
        let sum = |a: &u64, b: &u64| a.wrapping_add(*b);
        let at_root = self.at_root();
        let (send, recv) = (&self.send, &mut self.recv);
        match self.op {
            Collective::Bcast => world.bcast_into(ROOT, recv)?,
            Collective::Reduce => world.reduce_into(ROOT, send, at_root.then_some(recv), sum)?,
            Collective::Allreduce => world.allreduce_into(send, recv, sum)?,
            Collective::Allgather => world.allgather_into(send, recv)?,
            Collective::Gather => world.gather_into(ROOT, send, at_root.then_some(recv))?,
            Collective::Scatter => world.scatter_into(ROOT, at_root.then_some(send), recv)?,
        }
        Ok(())
    }

    /// Whether this rank is the root.
    pub(crate) fn at_root(&self) -> bool {
        self.me == ROOT
    }
}

/// `op` with `bytes` bytes per process (u64 elements).
pub(crate) fn collective<T: Transport + Blocking>(
    ctx: &Ctx<'_, '_, T>,
    op: Collective,
    bytes: usize,
) -> Result<Figure> {
    let world = ctx.world;
    let (me, n, count) = (world.rank(), world.size(), bytes / 8);
    let mut catena = FnSide {
        state: Buffers::new(op, me, n, count),
        call: |b: &mut Buffers| b.catena(world),
        check: |b: &mut Buffers, _: &dyn Harness| b.check(),
    };
    let mut mpich = ctx.mpi.map(|mpi| FnSide {
        state: Buffers::new(op, me, n, count),
        call: |b: &mut Buffers| {
            mpi.collective(b);
            Ok(())
        },
        check: |b: &mut Buffers, _: &dyn Harness| b.check(),
    });
    let case = crate::report::human_bytes(bytes);
    ctx.row(
        op.name(),
        &case,
        &mut catena,
        mpich.as_mut().map(|s| s as &mut dyn Side),
    )
}

/// This rank's (rank, size) in its group of `workload`: by key, then by
/// parent rank, as both MPI_Comm_split and catena order.
fn expected_place(workload: Workload, me: u32, n: u32) -> (u32, u32) {
    let group = workload.group(me, n);
    let key = |r: u32| match workload.key(r) {
        Key::Is(k) => k,
        Key::ParentOrder => 0,
    };
    let mut members: Vec<u32> = (0..n).filter(|&r| workload.group(r, n) == group).collect();
    members.sort_by_key(|&r| (key(r), r));
    let rank = members.iter().position(|&r| r == me).expect("a member");
    (rank as u32, members.len() as u32)
}

/// What a creation left: this rank's (rank, size) in its new group.
pub(crate) type Place = Option<(u32, u32)>;

/// Fails unless the creation's result is `expected`.
fn check_place(got: Place, expected: Place) -> Result<()> {
    match got == expected {
        true => Ok(()),
        false => Err(format!("(rank, size) {got:?} where {expected:?} was due").into()),
    }
}

/// catena's split (the communicator's default algorithm, Auto) against
/// `MPI_Comm_split` with integer colors; each result freed at once.
pub(crate) fn split<T: Transport + Blocking>(
    ctx: &Ctx<'_, '_, T>,
    workload: Workload,
) -> Result<Figure> {
    let world = ctx.world;
    let (me, n) = (world.rank(), world.size());
    let expected = Some(expected_place(workload, me, n));
    let color = workload.color(me, n);
    let color: Color<&str> = match &color {
        Color::Is(c) => Color::Is(c.as_str()),
        Color::NotMember => Color::NotMember,
        Color::Everyone => Color::Everyone,
    };
    let key = workload.key(me);
    let mut catena = FnSide {
        state: None,
        call: |got: &mut Place| {
            let made = match key {
                Key::Is(k) => world.split(color.clone(), k)?,
                Key::ParentOrder => world.split_by_color(color.clone())?,
            };
            let made = made.ok_or("no communicator")?;
            *got = Some((made.rank(), made.size()));
            Ok(())
        },
        check: |got: &mut Place, _: &dyn Harness| check_place(*got, expected),
    };
    // MPI's colors are integers: the group's number.
    let mpi_color = workload.group(me, n) as i32;
    let mpi_key = match key {
        Key::Is(k) => k as i32,
        Key::ParentOrder => 0,
    };
    let mut mpich = ctx.mpi.map(|mpi| FnSide {
        state: None,
        call: move |got: &mut Place| {
            *got = mpi.split(mpi_color, mpi_key)?;
            Ok(())
        },
        check: |got: &mut Place, _: &dyn Harness| check_place(*got, expected),
    });
    ctx.row(
        "split",
        &workload.name(),
        &mut catena,
        mpich.as_mut().map(|s| s as &mut dyn Side),
    )
}

/// catena's create_group (direct) against `MPI_Comm_create_group`,
/// called by the group's members alone; each result freed at once.
pub(crate) fn create_group<T: Transport + Blocking>(
    ctx: &Ctx<'_, '_, T>,
    shape: Shape,
) -> Result<Figure> {
    let world = ctx.world;
    let (me, n) = (world.rank(), world.size());
    let map = shape.map(n)?;
    let expected = map.rank(me)?.map(|r| (r, map.len()));
    let mut catena = FnSide {
        state: (0u32, None),
        call: |(tag, got): &mut (u32, Place)| {
            if expected.is_some() {
                *tag = (*tag + 1) % (1 << 20);
                let made = world.create_group(map.clone(), *tag)?;
                let made = made.ok_or("a member got no communicator")?;
                *got = Some((made.rank(), made.size()));
            }
            Ok(())
        },
        check: |(_, got): &mut (u32, Place), _: &dyn Harness| check_place(*got, expected),
    };
    let members: Vec<u32> = map.iter().collect();
    let mut mpich = ctx.mpi.map(|mpi| FnSide {
        state: (0i32, None, mpi.group(&members)),
        call: |(tag, got, group): &mut (i32, Place, MpiGroup)| {
            if expected.is_some() {
                *tag = (*tag + 1) % (1 << 15);
                *got = Some(mpi.create_group(group, *tag)?);
            }
            Ok(())
        },
        check: |(_, got, _): &mut (i32, Place, MpiGroup), _: &dyn Harness| {
            check_place(*got, expected)
        },
    });
    let case = format!("{} ({} members)", shape.name(), map.len());
    ctx.row(
        "create_group",
        &case,
        &mut catena,
        mpich.as_mut().map(|s| s as &mut dyn Side),
    )
}

/// FNV-1a of one element, to compare what arrived with what was sent.
fn fingerprint(element: &[u8]) -> u64 {
    let hash = element.iter().fold(0x811c_9dc5_u32, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    u64::from(hash)
}

/// Collective: fails unless every element in `recv` is aimed at this
/// rank, and as many elements arrived over all ranks as were sent, with
/// the same fingerprints.
pub(crate) fn check_exchange(
    h: &dyn Harness,
    send: &[u8],
    recv: &[u8],
    (element, at): (usize, usize),
) -> Result<()> {
    let me = h.rank();
    let stray = recv.chunks(element).position(|e| target_at(e, at) != me);
    let prints = |b: &[u8]| b.chunks(element).map(fingerprint).sum::<u64>();
    let sent = h.sum((send.len() / element) as u64)?;
    let arrived = h.sum((recv.len() / element) as u64)?;
    let (sent_prints, arrived_prints) = (h.sum(prints(send))?, h.sum(prints(recv))?);
    if let Some(i) = stray {
        let to = target_at(&recv[i * element..], at);
        return Err(format!("rank {me} got element {i}, aimed at rank {to}").into());
    }
    if sent != arrived {
        return Err(format!("{sent} elements sent, {arrived} arrived").into());
    }
    if sent_prints != arrived_prints {
        return Err("the elements that arrived differ from those sent".into());
    }
    Ok(())
}

/// alltoall_specific through Rust (a plan of the default variant) against
/// MPICH's alltoallv-based exchange (`catena-bench alltoall`'s).
pub(crate) fn alltoall<T: Transport + Blocking>(
    ctx: &Ctx<'_, '_, T>,
    set: Set,
    elements: usize,
) -> Result<Figure> {
    let (me, n) = (ctx.world.rank(), ctx.world.size());
    match set {
        Set::A => alltoall_of(ctx, set, &data::integers(elements, me, n), |e| *e),
        Set::B => alltoall_of(ctx, set, &data::particles(elements, me, n), |p| p.tproc),
        Set::C => alltoall_of(ctx, set, &data::moved(elements, me, n), |p| p.tproc),
    }
}

fn alltoall_of<T: Transport + Blocking, E: Pod>(
    ctx: &Ctx<'_, '_, T>,
    set: Set,
    send: &[E],
    // A closure, as a Rust caller writes it, inlined into the route pass
    // (through a `fn` pointer each element cost an indirect call).
    target: impl Fn(&E) -> u32,
) -> Result<Figure> {
    let bytes: &[u8] = bytemuck::cast_slice(send);
    let layout = set.layout();
    let plan = ctx
        .world
        .alltoall_plan::<E>(capacity(send.len()), AlltoallOptions::default())?;
    let mut catena = FnSide {
        state: (vec![E::zeroed(); plan.capacity()], 0usize),
        call: |(recv, got): &mut (Vec<E>, usize)| {
            *got = plan.exchange(send, recv, |e, to| to.to(target(e)))?;
            Ok(())
        },
        check: |(recv, got): &mut (Vec<E>, usize), h: &dyn Harness| {
            check_exchange(h, bytes, bytemuck::cast_slice(&recv[..*got]), layout)
        },
    };
    let room = capacity(send.len());
    let mut mpich = ctx
        .mpi
        .map(|mpi| mpich_exchange_side(mpi, bytes, layout, room));
    ctx.row(
        "alltoall (Rust)",
        set.name(),
        &mut catena,
        mpich.as_mut().map(|s| s as &mut dyn Side),
    )
}

/// MPICH's side of an alltoall row: `catena-bench alltoall`'s exchange of
/// `send` (elements of `layout`), room for `room` elements, checked as
/// catena's is.
pub(crate) fn mpich_exchange_side<'a>(
    mpi: &'a Mpi,
    send: &'a [u8],
    layout: (usize, usize),
    room: usize,
) -> impl Side + 'a {
    FnSide {
        state: (MpichExchange::new(send.len(), layout, room), 0),
        call: move |(x, got): &mut (MpichExchange, usize)| {
            *got = mpi.exchange(x, send)?;
            Ok(())
        },
        check: move |(x, got): &mut (MpichExchange, usize), h: &dyn Harness| {
            check_exchange(h, send, &x.recv[..*got], layout)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collectives::sample::tests::Alone;

    /// What each rank's receive buffer holds after `op` over `ranks`,
    /// computed from their send buffers as MPI defines the collective.
    fn reference(op: Collective, ranks: &mut [Buffers]) {
        let sends: Vec<Vec<u64>> = ranks.iter().map(|b| b.send.clone()).collect();
        let root = ranks[ROOT as usize].send.clone();
        let root_buf = ranks[ROOT as usize].recv.clone();
        let count = ranks[0].count;
        for (r, b) in ranks.iter_mut().enumerate() {
            match op {
                Collective::Bcast => b.recv.copy_from_slice(&root_buf),
                Collective::Reduce | Collective::Allreduce if b.recv.is_empty() => {}
                Collective::Reduce | Collective::Allreduce => {
                    for (i, x) in b.recv.iter_mut().enumerate() {
                        *x = sends.iter().map(|s| s[i]).sum();
                    }
                }
                Collective::Allgather | Collective::Gather if b.recv.is_empty() => {}
                Collective::Allgather | Collective::Gather => b.recv = sends.concat(),
                Collective::Scatter => {
                    b.recv.copy_from_slice(&root[r * count..(r + 1) * count]);
                }
            }
        }
    }

    #[test]
    fn buffers_check_what_each_collective_leaves() {
        for op in Collective::ALL {
            let n = 3;
            let mut ranks: Vec<Buffers> = (0..n).map(|r| Buffers::new(op, r, n, 5)).collect();
            let before = ranks
                .iter()
                .map(Buffers::check)
                .filter(Result::is_ok)
                .count();
            assert!(before < n as usize, "{op:?}: zeroed buffers pass");
            reference(op, &mut ranks);
            for b in &ranks {
                b.check()
                    .unwrap_or_else(|e| panic!("{op:?} rank {}: {e}", b.me));
            }
            let b = ranks.iter_mut().find(|b| !b.recv.is_empty()).unwrap();
            b.recv[4] ^= 1;
            assert!(b.check().is_err(), "{op:?}: a flipped bit passes");
        }
    }

    #[test]
    fn split_places_follow_keys_then_ranks() {
        let n = 9;
        for workload in crate::split::WORKLOADS {
            let mut seen = std::collections::BTreeMap::<u32, Vec<(u32, u32)>>::new();
            for r in 0..n {
                let (rank, size) = expected_place(workload, r, n);
                seen.entry(workload.group(r, n))
                    .or_default()
                    .push((rank, size));
            }
            for places in seen.values() {
                let mut ranks: Vec<u32> = places.iter().map(|p| p.0).collect();
                ranks.sort_unstable();
                assert_eq!(ranks, (0..places.len() as u32).collect::<Vec<_>>());
                assert!(places.iter().all(|p| p.1 == places.len() as u32));
            }
        }
    }

    #[test]
    fn an_exchange_check_catches_strays_and_changed_elements() {
        let layout = Set::A.layout();
        let send: Vec<u8> = bytemuck::cast_slice(&[0u32, 0, 0]).to_vec();
        check_exchange(&Alone, &send, &send, layout).unwrap();
        let stray: Vec<u8> = bytemuck::cast_slice(&[0u32, 1, 0]).to_vec();
        let e = check_exchange(&Alone, &send, &stray, layout).unwrap_err();
        assert!(e.to_string().contains("aimed at rank 1"), "{e}");
        let lost = check_exchange(&Alone, &send, &send[..8], layout).unwrap_err();
        assert!(
            lost.to_string().contains("3 elements sent, 2 arrived"),
            "{lost}"
        );
        let layout = Set::B.layout();
        let mut p = [<data::Particle as bytemuck::Zeroable>::zeroed(); 2];
        let send: Vec<u8> = bytemuck::cast_slice(&p).to_vec();
        p[1].q = 1.0;
        let changed: Vec<u8> = bytemuck::cast_slice(&p).to_vec();
        let e = check_exchange(&Alone, &send, &changed, layout).unwrap_err();
        assert!(e.to_string().contains("differ"), "{e}");
    }
}
