//! catena's async calls on tokio, beside another task: each rank sums the
//! world ranks and meets the others at a barrier while a timer task ticks
//! (catena's waits wake their task and drive the transport themselves).
use std::time::Duration;

use catena_algorithms::prelude::*;

fn main() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a tokio runtime");
    with_world(|world| {
        runtime.block_on(async {
            let ticker = tokio::spawn(async {
                let mut every = tokio::time::interval(Duration::from_millis(1));
                for _ in 0..5 {
                    every.tick().await;
                }
            });
            let rank = world.rank();
            let sum = world.iallreduce(u64::from(rank), |a, b| a + b).await?;
            world.ibarrier().await?;
            ticker.await.expect("the timer task");
            println!("rank {rank}: sum of world ranks {sum}, beside a timer task");
            Ok(())
        })
    })
}
