//! Point-to-point by group rank: the even world ranks form a group, and
//! each passes a token to the next group rank round a ring.
use catena_algorithms::prelude::*;

fn main() -> Result<()> {
    with_world(|world| {
        let me = world.rank();
        let Some(evens) = world.split((me % 2 == 0).then_some(0), me)? else {
            return Ok(());
        };
        let (rank, size) = (evens.rank(), evens.size());
        // Lookups by group rank are local: the map of a split made across
        // hosts is loaded once, by every member together.
        evens.group_map()?;
        let next = evens.world_rank_of((rank + 1) % size)?;
        evens.send((rank + 1) % size, 7, &format!("token from world rank {me}"))?;
        let token: String = evens.recv((rank + size - 1) % size, 7)?;
        println!("group rank {rank} (world {me}) sends to world {next}, got \"{token}\"");
        Ok(())
    })
}
