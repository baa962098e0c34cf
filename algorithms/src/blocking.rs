//! The blocking forms' executor: catena's `block_on`, refused inside an
//! async call it already runs, where a nested one would stall the calls
//! beside it (which it may wait for) until its deadline.

use std::future::Future;

use catena_fabric::Blocking;

use crate::Result;

/// Makes the call by `call` and runs it to completion on this thread;
/// `BlockingInAsync` if a `block_on` already runs here (a blocking call
/// inside an async one). The call is made only once that is known: making
/// it takes its tags, which every member must then use.
pub(crate) fn block_on<T: Blocking + ?Sized, F, R>(t: &T, call: impl FnOnce() -> F) -> Result<R>
where
    F: Future<Output = Result<R>>,
{
    if catena_fabric::in_block_on() {
        return Err(catena_fabric::Error::BlockingInAsync.into());
    }
    catena_fabric::block_on(t, call())
}
