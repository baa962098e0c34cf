//! A pipelined broadcast over contention-free torus trees: the ranks, one
//! per node of the smallest cube that holds them, get 1 MiB from rank 0
//! through k colour trees by one-sided puts.
use catena_algorithms::prelude::*;
use catena_algorithms::torus_plan;
use catena_topo::{trees, RankMap, Torus};

fn main() -> Result<()> {
    with_world(|world| {
        let (n, me) = (world.size(), world.rank());
        let torus = Torus::cube_for(n);
        let topology = |e: &dyn std::fmt::Display| Error::InvalidArgument(e.to_string());
        let map = RankMap::row_major(&torus, n, 1).map_err(|e| topology(&e))?;
        let nodes: Vec<_> = (0..n).map(|r| map.node(r).expect("mapped")).collect();
        let schedule = trees::auto(&torus, &nodes, nodes[0]).map_err(|e| topology(&e))?;
        let ranks: Vec<u32> = (0..n).collect();
        let plan = torus_plan(&schedule, &map, &ranks, 0, me)?;
        let mut tree = world.tree(plan, PipelineConfig::default())?;
        let mut data = vec![0u8; 1 << 20];
        if me == 0 {
            data.iter_mut()
                .enumerate()
                .for_each(|(i, b)| *b = (i % 251) as u8);
        }
        world.tree_bcast(&mut tree, &mut data)?;
        // A wrong byte fails the run (CI runs the examples).
        let wrong = data
            .iter()
            .enumerate()
            .position(|(i, &b)| b != (i % 251) as u8);
        assert_eq!(wrong, None, "rank {me}: the first wrong byte");
        let colours = schedule.colours.len();
        println!("rank {me}: 1 MiB over {colours} colours, every byte checked");
        Ok(())
    })
}
