//! Split the world by rank parity, then sum world ranks in each half.
use catena_algorithms::prelude::*;

fn main() -> Result<()> {
    with_world(|world| {
        let color = world.rank() % 2;
        let half = world.split(Some(color), world.rank())?.unwrap();
        let sum = half.allreduce(world.rank(), |a, b| a + b)?;
        let (rank, size) = (half.rank(), half.size());
        println!("half {color}: {rank} of {size}, sum of world ranks {sum}");
        Ok(())
    })
}
