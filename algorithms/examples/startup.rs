//! Join the job under whatever started it (catena-run, srun, mpirun,
//! mpiexec), pass a barrier, and say how long joining took and how much of
//! the job each rank holds: the entries of the peers it met, not a table.
use std::time::Instant;

use catena_algorithms::prelude::*;
use catena_fabric::Provider;

fn main() -> Result<()> {
    let started = Instant::now();
    with_world(|world| {
        world.barrier()?;
        let joined_us = started.elapsed().as_micros() as u64;
        let slowest_us = world.allreduce(joined_us, |a, b| *a.max(b))?;
        let job = world.transport().job();
        let held = job.directory_use();
        let most_held = world.allreduce(held.bytes as u64, |a, b| *a.max(b))?;
        let own = job.peer(world.rank())?;
        let entry = catena_fabric::entry_bytes(own.address.len(), own.host_name.len());
        if world.rank() == 0 {
            println!(
                "{} ranks on {} host(s) joined in {:.1} ms (the slowest rank, from main to \
                 the first barrier)",
                world.size(),
                job.host_count(),
                slowest_us as f64 / 1e3
            );
            println!(
                "rank 0 holds {} peers' entries in {} B (at most {} B on any rank); \
                 a table of every rank's would hold {} B",
                held.entries,
                held.bytes,
                most_held,
                entry * (world.size() as usize - 1)
            );
        }
        Ok(())
    })
}
