//! A collective step taken once, the first time a call needs it (a chain's
//! neighbour search, a communicator's host levels): what it needs is
//! reserved in call order, the first call to need it (in poll order) runs
//! it, and later ones wait for its result.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;

use catena_fabric::{wait_until, Time, Transport};

use crate::{Error, Result};

/// Where a step taken once stands.
#[derive(Debug)]
pub(crate) enum Once<R, V> {
    /// No call has reserved it yet.
    Unreserved,
    /// Reserved (what it will run with), not started.
    Reserved(R),
    Running,
    Done(Rc<V>),
    /// It failed or was dropped half-way: its messages are spent.
    Failed,
}

impl<R, V> Once<R, V> {
    /// Reserves the step with `reserve()` if no call did.
    pub(crate) fn reserve(cell: &RefCell<Once<R, V>>, reserve: impl FnOnce() -> R) {
        let mut once = cell.borrow_mut();
        if matches!(*once, Once::Unreserved) {
            *once = Once::Reserved(reserve());
        }
    }

    /// Its result, if it is done.
    pub(crate) fn done(&self) -> Option<&Rc<V>> {
        match self {
            Once::Done(done) => Some(done),
            _ => None,
        }
    }
}

/// Sets the step's state when its run ends or is dropped.
struct Run<'a, R, V> {
    cell: &'a RefCell<Once<R, V>>,
    done: Option<Rc<V>>,
}

impl<R, V> Drop for Run<'_, R, V> {
    fn drop(&mut self) {
        *self.cell.borrow_mut() = match self.done.take() {
            Some(done) => Once::Done(done),
            None => Once::Failed,
        };
    }
}

/// The step's result: `run` with what was reserved if no call has started
/// it, else the result of the call that did (`failed()` where that call
/// failed; `what` names the wait for a timeout).
pub(crate) async fn taken_once<T: Transport, R, V, F: Future<Output = Result<V>>>(
    cell: &RefCell<Once<R, V>>,
    t: &T,
    deadline: Time,
    (what, failed): (&'static str, fn() -> Error),
    run: impl FnOnce(R) -> F,
) -> Result<Rc<V>> {
    let state = std::mem::replace(&mut *cell.borrow_mut(), Once::Running);
    match state {
        Once::Reserved(reserved) => {
            let mut guard = Run { cell, done: None };
            let done = Rc::new(run(reserved).await?);
            guard.done = Some(done.clone());
            // Calls waiting for this one (joined futures) are polled again
            // now, not at their deadline.
            t.wake_at(t.now());
            Ok(done)
        }
        Once::Running => {
            let done = wait_until(t, deadline, what, || {
                Ok(match &*cell.borrow() {
                    Once::Running => None,
                    Once::Done(done) => Some(Some(done.clone())),
                    _ => Some(None),
                })
            })
            .await?;
            done.ok_or_else(failed)
        }
        Once::Done(done) => {
            *cell.borrow_mut() = Once::Done(done.clone());
            Ok(done)
        }
        Once::Failed => {
            *cell.borrow_mut() = Once::Failed;
            Err(failed())
        }
        Once::Unreserved => unreachable!("calls reserve the step when called"),
    }
}
