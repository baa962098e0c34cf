//! The waker catena's executors poll with, and how a wait tells it from
//! another runtime's: under catena's executors a wait leaves progress to
//! them; under any other it drives progress itself.

use std::task::{Context, RawWaker, RawWakerVTable, Waker};

/// A `static`, not a `const` like [`Waker::noop`]'s: its one address is what
/// tells [`polled_by_catena`] this waker from any other (each crate and
/// codegen unit may get a copy of a constant, so two `Waker::noop()`s
/// need not compare equal).
static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, ignore, ignore, ignore);

fn clone(_: *const ()) -> RawWaker {
    RawWaker::new(std::ptr::null(), &VTABLE)
}

fn ignore(_: *const ()) {}

/// The waker catena's executors ([`block_on`](crate::block_on), the
/// simulator's, the C API's request loop) poll with. It wakes nothing:
/// they poll again and make progress on their own.
pub fn catena_waker() -> &'static Waker {
    // SAFETY: every function of the vtable ignores the (null) data pointer.
    static WAKER: Waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    &WAKER
}

/// Whether `cx` comes from one of catena's executors ([`catena_waker`]),
/// which make progress themselves; a wait polled by another runtime must
/// drive progress itself.
#[inline]
pub fn polled_by_catena(cx: &Context<'_>) -> bool {
    cx.waker().will_wake(catena_waker())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catena_s_waker_and_its_clones_are_told_from_any_other() {
        assert!(polled_by_catena(&Context::from_waker(catena_waker())));
        let cloned = catena_waker().clone();
        assert!(polled_by_catena(&Context::from_waker(&cloned)));
        assert!(!polled_by_catena(&Context::from_waker(Waker::noop())));
    }
}
