//! The ids of one rank's windows: counted from 1 and never reused, so a
//! signal meant for a freed window cannot land in a later one.

use std::cell::Cell;

use crate::{Error, Result};

/// The next window id of one rank.
pub(crate) struct WindowIds(Cell<u32>);

impl WindowIds {
    /// Ids from 1 (0 is no window's).
    pub(crate) fn new() -> WindowIds {
        WindowIds(Cell::new(1))
    }

    /// An id no window of this rank had before; `Protocol` once all are used.
    pub(crate) fn next(&self) -> Result<u32> {
        let id = self.0.get();
        let next = id
            .checked_add(1)
            .ok_or(Error::Protocol("window ids exhausted".into()))?;
        self.0.set(next);
        Ok(id)
    }
}
