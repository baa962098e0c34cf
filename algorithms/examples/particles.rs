//! Particles that move between processes each step (seed 002): every
//! process owns a slab of [0, 1), particles drift, and one alltoall_specific
//! per step sends each to the owner of its new position, on one plan; the
//! particles that arrive are read where they landed, straight into the next
//! step's list (no receive buffer to copy out of).
use bytemuck::{Pod, Zeroable};
use catena_algorithms::prelude::*;

#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(C)]
struct Particle {
    x: f64,
    v: f64,
}

fn main() -> Result<()> {
    with_world(|world| {
        let (me, n) = (world.rank(), world.size());
        let owner = |p: &Particle| ((p.x * f64::from(n)) as u32).min(n - 1);
        let mut mine: Vec<Particle> = (0..1000)
            .map(|i| Particle {
                x: (f64::from(me) + f64::from(i) / 1000.0) / f64::from(n),
                v: if i % 2 == 0 { 0.01 } else { -0.01 },
            })
            .collect();
        let plan = world.alltoall_plan::<Particle>(4000, AlltoallOptions::default())?;
        let mut next = Vec::new();
        for _step in 0..10 {
            for p in &mut mine {
                p.x = (p.x + p.v).rem_euclid(1.0);
            }
            next.clear();
            let arrived = |landed: &[Particle]| next.extend_from_slice(landed);
            plan.exchange_visit(&mine, |p, to| to.to(owner(p)), arrived)?;
            std::mem::swap(&mut mine, &mut next);
            assert!(
                mine.iter().all(|p| owner(p) == me),
                "a particle I do not own"
            );
        }
        let total = world.allreduce(mine.len(), |a, b| a + b)?;
        assert_eq!(total, 1000 * n as usize, "particles lost or made");
        println!("rank {me}: {} particles after 10 steps", mine.len());
        Ok(())
    })
}
