//! The ofi side of the progress thread (see [`crate::progress_thread`]):
//! `fi_cq_read(cq, NULL, 0)` drives the provider without taking entries, so
//! completions stay for the rank itself.

use catena_ofi_sys as sys;

pub(crate) use crate::progress_thread::{ProgressMode, ProgressThread};
use crate::Result;

/// A CQ pointer the progress thread may use: the domain was opened with
/// FI_THREAD_SAFE, and the thread is joined before the CQ is closed.
struct SharedCq(*mut sys::fid_cq);
// SAFETY: see the type's doc; libfabric serialises calls on a FI_THREAD_SAFE domain.
unsafe impl Send for SharedCq {}

/// Starts a thread driving `cq`, which must belong to a domain opened with
/// FI_THREAD_SAFE and stay open until the thread is dropped.
pub(crate) fn start(cq: *mut sys::fid_cq, mode: ProgressMode) -> Result<Option<ProgressThread>> {
    let cq = SharedCq(cq);
    ProgressThread::start("catena-ofi-progress", mode, move || {
        let cq = &cq;
        // SAFETY: the CQ stays open until this thread is joined; a zero
        // count reads no entry, it only drives progress. The call cannot
        // tell whether it did work, so the thread naps between idle runs.
        unsafe { sys::fi_cq_read(cq.0, std::ptr::null_mut(), 0) };
        false
    })
}
