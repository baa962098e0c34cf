//! Drives one algorithm future on a real provider: poll, re-poll while the
//! spin budget lasts (and longer while the provider says no one else wants
//! the core), then block in the provider's wait object. The simulator
//! has its own executor; algorithms never see the difference.

use std::cell::Cell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll};
use std::time::Instant;

use crate::{catena_waker, Blocking};

thread_local! {
    /// How many `block_on`s run on this thread (more than one: nested).
    static RUNNING: Cell<u32> = const { Cell::new(0) };
}

/// Whether a [`block_on`] runs on this thread: a blocking call made now is
/// inside an async call it drives, and blocking there would stall the calls
/// beside it (which the blocking one may wait for).
pub fn in_block_on() -> bool {
    RUNNING.with(|running| running.get() > 0)
}

/// Counts a running `block_on` for as long as it lives.
struct Running;

impl Running {
    fn enter() -> Running {
        RUNNING.with(|running| running.set(running.get() + 1));
        Running
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|running| running.set(running.get() - 1));
    }
}

/// Runs `future` to completion on `transport`'s calling thread.
///
/// Every wait inside carries a deadline, so this returns in bounded time.
/// Blocking library calls check [`in_block_on`] first and fail with
/// `BlockingInAsync` rather than nest.
#[inline(always)]
pub fn block_on<T: Blocking + ?Sized, F: Future>(transport: &T, future: F) -> F::Output {
    // Pinned where the caller made it: moving a future of a few hundred
    // bytes into the loop's frame took 50 of the 730 instructions of a
    // small message's send and receive to itself.
    drive(transport, pin!(future))
}

/// [`block_on`]'s loop, on the future where it lies.
fn drive<T: Blocking + ?Sized, F: Future>(transport: &T, mut future: Pin<&mut F>) -> F::Output {
    let _running = Running::enter();
    let mut cx = Context::from_waker(catena_waker());
    let spin = transport.spin_budget();
    let mut spin_began: Option<Instant> = None;
    let mut spin_until: Option<Instant> = None;
    let mut spins = 0u32;
    loop {
        // Poll first: a signal that has landed needs no progress to be seen.
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
        // Draining rings is not needed by a put-and-signal wait; while spinning,
        // do it every 4th round so such a wait notices its signal sooner.
        if spins % 4 == 0 {
            transport.progress();
        }
        if !spin.is_zero() {
            // Reading the clock costs more than a poll: look every 64th spin (not
            // the first, which would delay a wait that is about to end).
            spins = spins.wrapping_add(1);
            if spins % 64 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            let began = *spin_began.get_or_insert(now);
            let until = *spin_until.get_or_insert(now + spin);
            if now < until {
                std::hint::spin_loop();
                continue;
            }
            // Asked once a budget, not every look: the answer costs a read.
            if transport.spin_on(now - began) {
                spin_until = Some(now + spin);
                continue;
            }
        }
        // Re-poll after announcing the park, so a signal that lands between
        // the poll above and the block below is not slept through.
        let ticket = transport.prepare_park();
        transport.progress();
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            transport.cancel_park();
            return out;
        }
        transport.park(ticket);
        spin_began = None;
        spin_until = None;
        spins = 0;
    }
}
