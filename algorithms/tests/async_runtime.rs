//! catena's async calls on a runtime that is not catena's, and its blocking
//! calls where they cannot work. On tokio's current-thread runtime, the
//! calls of a job (a ring of messages, an allreduce, a barrier) finish
//! beside a timer task that keeps ticking while they wait: a pending call
//! wakes its task and drives the transport itself. Inside an async call of
//! catena's own executor, a blocking call fails with `BlockingInAsync` at
//! once instead of stalling the calls beside it until its deadline.

use crate::common;

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use catena_algorithms::prelude::*;
use catena_fabric::{Blocking, Rank};

fn fail(what: &'static str, rank: Rank) -> impl Fn(Error) -> catena_fabric::Error {
    move |e| catena_fabric::Error::Bootstrap(format!("rank {rank}: {what}: {e}"))
}

/// How long rank 0 sleeps before it sends, while its neighbour waits.
const HOLD: Duration = Duration::from_millis(200);
/// The timer's period.
const TICK: Duration = Duration::from_millis(2);

fn on_tokio<T: Transport + Blocking>(t: &T) -> catena_fabric::Result<()> {
    let (rank, n) = (t.rank(), t.size());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| catena_fabric::Error::Bootstrap(format!("tokio: {e}")))?;
    let tasks = tokio::task::LocalSet::new();
    tasks.block_on(&runtime, async {
        let ticks = Rc::new(Cell::new(0u32));
        let ticker = tokio::task::spawn_local({
            let ticks = ticks.clone();
            async move {
                loop {
                    tokio::time::sleep(TICK).await;
                    ticks.set(ticks.get() + 1);
                }
            }
        });
        let world = Comm::world(t).with_timeout(common::TIMEOUT);
        let calls = async {
            // Rank 0 holds its message back, so rank 1 waits in irecv (and
            // the others behind it) while the timer must go on ticking.
            if rank == 0 {
                tokio::time::sleep(HOLD).await;
            }
            world.isend((rank + 1) % n, 5, &rank).await?;
            let got: Rank = world.irecv((rank + n - 1) % n, 5).await?;
            assert_eq!(got, (rank + n - 1) % n, "rank {rank}: the ring's message");
            let sum = world.iallreduce(u64::from(rank), |a, b| a + b).await?;
            world.ibarrier().await?;
            Ok(sum)
        };
        let waited = Instant::now();
        let sum = tokio::time::timeout(Duration::from_secs(20), calls)
            .await
            .map_err(|_| {
                catena_fabric::Error::Bootstrap(format!(
                    "rank {rank}: catena's calls did not finish on tokio in 20 s"
                ))
            })?
            .map_err(fail("the calls", rank))?;
        let n = u64::from(n);
        assert_eq!(sum, n * (n - 1) / 2, "rank {rank}: the sum");
        // The timer went on while the calls waited (rank 0 holds its
        // message for 100 ticks; a runtime polls its timers less often while
        // a task it re-polls at once keeps it busy, so fewer is fine, none
        // is not).
        assert!(
            ticks.get() >= 3,
            "rank {rank}: the timer ticked {} times in {:?}",
            ticks.get(),
            waited.elapsed()
        );
        ticker.abort();
        Ok(())
    })
}

fn blocking_inside_async<T: Transport + Blocking>(t: &T) -> catena_fabric::Result<()> {
    let rank = t.rank();
    let world = Comm::world(t).with_timeout(common::TIMEOUT);
    let start = Instant::now();
    let nested = catena_fabric::block_on(t, async { world.barrier() });
    assert!(
        matches!(
            nested,
            Err(Error::Transport(catena_fabric::Error::BlockingInAsync))
        ),
        "rank {rank}: a barrier inside block_on gave {nested:?}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "rank {rank}: not at once"
    );
    // Outside, the same call works, and so does the communicator.
    world.barrier().map_err(fail("barrier", rank))?;
    let sum = world
        .allreduce(u64::from(rank), |a, b| a + b)
        .map_err(fail("allreduce", rank))?;
    let n = u64::from(t.size());
    assert_eq!(sum, n * (n - 1) / 2);
    Ok(())
}

common::provider_cases! {
    shm_on_tokio_2: catena_fabric::shm::ShmTransport, 2, &[], on_tokio;
    shm_on_tokio_3: catena_fabric::shm::ShmTransport, 3, &[], on_tokio;
    shm_blocking_inside_async_2: catena_fabric::shm::ShmTransport, 2, &[], blocking_inside_async;
}

// Where data lands only when the transport progresses (tcp), nothing but
// the calls themselves drive it on tokio.
#[cfg(feature = "ofi")]
common::provider_cases! {
    ofi_tcp_on_tokio_3: catena_fabric::ofi::OfiTransport, 3, &[("CATENA_OFI_PROVIDER", "tcp;ofi_rxm")], on_tokio;
}

#[cfg(feature = "ucx")]
common::provider_cases! {
    ucx_tcp_on_tokio_3: catena_fabric::ucx::UcxTransport, 3, &[("UCX_TLS", "tcp,self")], on_tokio;
}
