//! The optional progress thread (`CATENA_PROGRESS_THREAD`): the providers
//! catena meets progress data only inside libfabric calls (FI_PROGRESS_MANUAL),
//! so a rank busy computing stalls its peers' puts; this thread keeps calling
//! `fi_cq_read(cq, NULL, 0)`, which drives the provider without taking entries.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use catena_ofi_sys as sys;

use crate::{Error, Result};

pub const ENV_PROGRESS_THREAD: &str = "CATENA_PROGRESS_THREAD";
/// Pause between two progress calls: short enough for latency, long enough
/// not to contend for the provider's locks with the rank itself.
const INTERVAL: Duration = Duration::from_micros(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    Off,
    /// A thread the OS schedules freely.
    On,
    /// A thread pinned to this core.
    Pinned(usize),
}

impl ProgressMode {
    /// `CATENA_PROGRESS_THREAD`: unset or `off`, `on`, or a core number.
    pub fn from_env() -> Result<ProgressMode> {
        let Ok(raw) = std::env::var(ENV_PROGRESS_THREAD) else {
            return Ok(ProgressMode::Off);
        };
        match raw.trim() {
            "" | "off" | "no" => Ok(ProgressMode::Off),
            "on" | "yes" => Ok(ProgressMode::On),
            n => n.parse().map(ProgressMode::Pinned).map_err(|_| {
                Error::Bootstrap(format!(
                    "{ENV_PROGRESS_THREAD}={raw:?}: expected off, on or a core number"
                ))
            }),
        }
    }
}

/// A CQ pointer the progress thread may use: the domain was opened with
/// FI_THREAD_SAFE, and the thread is joined before the CQ is closed.
struct SharedCq(*mut sys::fid_cq);
// SAFETY: see the type's doc; libfabric serialises calls on a FI_THREAD_SAFE domain.
unsafe impl Send for SharedCq {}

/// Runs until dropped; dropping stops and joins it.
pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ProgressThread {
    /// Starts a thread driving `cq`, which must belong to a domain opened
    /// with FI_THREAD_SAFE and stay open until the thread is dropped.
    pub fn start(cq: *mut sys::fid_cq, mode: ProgressMode) -> Result<Option<ProgressThread>> {
        let core = match mode {
            ProgressMode::Off => return Ok(None),
            ProgressMode::On => None,
            ProgressMode::Pinned(core) => Some(core),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let cq = SharedCq(cq);
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("catena-ofi-progress".into())
            .spawn(move || {
                let cq = cq;
                if let Some(id) = core {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                while !flag.load(Ordering::Acquire) {
                    // SAFETY: the CQ stays open until this thread is joined;
                    // a zero count reads no entry, it only drives progress.
                    unsafe { sys::fi_cq_read(cq.0, std::ptr::null_mut(), 0) };
                    std::thread::sleep(INTERVAL);
                }
            })
            .map_err(|e| Error::io("starting the libfabric progress thread", e))?;
        Ok(Some(ProgressThread {
            stop,
            handle: Some(handle),
        }))
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}
