//! Group-collective creation: only the members of the new group (here the
//! ranks divisible by 3, in descending order) take part; the others go on
//! without it and send nothing.
use catena_algorithms::groupmap::RankRange;
use catena_algorithms::prelude::*;

fn main() -> Result<()> {
    with_world(|world| {
        let n = world.size();
        let last = (n - 1) / 3 * 3;
        let members = [RankRange::new(last, 0, -3)];
        let map = GroupMap::from_ranges(n, &members, Strategy::Auto)?;
        if map.rank(world.rank())?.is_none() {
            println!("world rank {}: not a member", world.rank());
            return Ok(());
        }
        let group = world.create_group(map, 0)?.expect("a member");
        let order = group.allgather(&world.rank())?;
        assert!(
            order.iter().copied().eq((0..=last).rev().step_by(3)),
            "{order:?}"
        );
        println!(
            "world rank {}: rank {} of {}, the group in order {order:?}",
            world.rank(),
            group.rank(),
            group.size()
        );
        Ok(())
    })
}
