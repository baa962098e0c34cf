//! The optional progress thread of the network providers
//! (`CATENA_PROGRESS_THREAD`): libfabric's shm/tcp and UCX over tcp move data
//! only inside library calls, so a rank that computes for long stretches
//! stalls its peers; this thread keeps calling the provider's progress.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::ENV_PROGRESS_THREAD;
use crate::{Error, Result};

/// Idle polls before the thread naps.
const IDLE_POLLS: u32 = 256;
/// The nap: short for latency, long enough not to contend for the
/// provider's locks with the rank itself.
const NAP: Duration = Duration::from_micros(20);

/// Whether and where the progress thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// No thread: the rank drives the provider itself whenever it waits.
    Off,
    /// A thread the OS schedules freely.
    On,
    /// A thread pinned to this core.
    Pinned(usize),
}

impl ProgressMode {
    /// `CATENA_PROGRESS_THREAD`: unset or `off`, `on`, or a core number this
    /// process may run on.
    pub fn from_env() -> Result<ProgressMode> {
        let Ok(raw) = std::env::var(ENV_PROGRESS_THREAD) else {
            return Ok(ProgressMode::Off);
        };
        let core: usize = match raw.trim() {
            "" | "off" => return Ok(ProgressMode::Off),
            "on" => return Ok(ProgressMode::On),
            n => n.parse().map_err(|_| {
                Error::Bootstrap(format!(
                    "{ENV_PROGRESS_THREAD}={raw:?}: expected off, on or a core number"
                ))
            })?,
        };
        let cores = core_affinity::get_core_ids().unwrap_or_default();
        if !cores.iter().any(|c| c.id == core) {
            let ids: Vec<String> = cores.iter().map(|c| c.id.to_string()).collect();
            return Err(Error::Bootstrap(format!(
                "{ENV_PROGRESS_THREAD}={core}: this process may run on cores [{}] only",
                ids.join(", ")
            )));
        }
        Ok(ProgressMode::Pinned(core))
    }
}

/// Runs until dropped; dropping stops and joins it, so whatever `poll`
/// drives must outlive this value.
pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl ProgressThread {
    /// Starts a thread named `name` that calls `poll` (true: it did work)
    /// until dropped, napping after a run of idle polls. `None` when `mode`
    /// is `Off`.
    pub fn start(
        name: &str,
        mode: ProgressMode,
        mut poll: impl FnMut() -> bool + Send + 'static,
    ) -> Result<Option<ProgressThread>> {
        let core = match mode {
            ProgressMode::Off => return Ok(None),
            ProgressMode::On => None,
            ProgressMode::Pinned(core) => Some(core),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                if let Some(id) = core {
                    core_affinity::set_for_current(core_affinity::CoreId { id });
                }
                let mut idle = 0u32;
                while !stopped.load(Ordering::Acquire) {
                    if poll() {
                        idle = 0;
                    } else {
                        idle += 1;
                        if idle >= IDLE_POLLS {
                            std::thread::sleep(NAP);
                            idle = 0;
                        }
                    }
                }
            })
            .map_err(|e| Error::io(format!("starting the progress thread {name}"), e))?;
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
