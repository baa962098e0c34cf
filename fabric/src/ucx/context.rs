//! The UCP context and worker this rank drives, with their lifetimes: the
//! context lives as long as any window mapped in it, the worker (and the
//! optional progress thread that drives it) as long as the transport.

use std::cell::RefCell;
use std::ffi::{CStr, CString};
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use catena_ucx_sys as sys;
use sys::ucs_status_t;

use super::signal::{self, SignalTargets};
use crate::config::ENV_UCX_TLS;
pub(crate) use crate::progress_thread::{ProgressMode, ProgressThread};
use crate::tombstone::{Grave, Graveyard};
use crate::{Error, Result};

/// The user's transport selection; named in errors about reachability.
const UCX_TLS: &str = "UCX_TLS";

/// `ucs_status_string`, as an owned string.
pub(crate) fn status_text(status: ucs_status_t) -> String {
    // SAFETY: ucs_status_string returns a static NUL-terminated string for
    // any value (an "unknown" text for values it does not name).
    unsafe { CStr::from_ptr(sys::ucs_status_string(status)) }
        .to_string_lossy()
        .into_owned()
}

/// The error of a UCP call that failed with `status`.
pub(crate) fn fabric_error(call: &'static str, status: ucs_status_t) -> Error {
    Error::Fabric(Box::new(crate::FabricFailure {
        library: "UCX",
        call,
        message: status_text(status),
    }))
}

pub(crate) fn check(call: &'static str, status: ucs_status_t) -> Result<()> {
    if status == ucs_status_t::UCS_OK {
        Ok(())
    } else {
        Err(fabric_error(call, status))
    }
}

/// The transports UCX was configured with, for error messages.
pub(crate) fn configured_tls() -> String {
    if let Ok(tls) = std::env::var(ENV_UCX_TLS) {
        return format!("{ENV_UCX_TLS}={tls}");
    }
    match std::env::var(UCX_TLS) {
        Ok(tls) => format!("{UCX_TLS}={tls}"),
        Err(_) => format!("{UCX_TLS} unset (all)"),
    }
}

/// Reads the user's `UCX_*` configuration (so that `UCX_TLS` and friends
/// apply), optionally overriding the transport list.
struct Config(*mut sys::ucp_config_t);

impl Config {
    fn read(tls_override: Option<&str>) -> Result<Config> {
        let mut config = ptr::null_mut();
        // SAFETY: null prefix and file mean "UCX_ from the environment";
        // `config` is written on success.
        check("ucp_config_read", unsafe {
            sys::ucp_config_read(ptr::null(), ptr::null(), &mut config)
        })?;
        let config = Config(config);
        if let Some(tls) = tls_override {
            let value = CString::new(tls).expect("no NUL in a constant");
            // SAFETY: `config` is live; both strings are NUL-terminated.
            check("ucp_config_modify", unsafe {
                sys::ucp_config_modify(config.0, c"TLS".as_ptr(), value.as_ptr())
            })?;
        }
        Ok(config)
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        // SAFETY: read by ucp_config_read, released once.
        unsafe { sys::ucp_config_release(self.0) };
    }
}

/// A freed window's mapping: its size class at `base`.
pub(crate) struct Tombstone {
    pub(crate) memh: sys::ucp_mem_h,
    pub(crate) base: *mut u8,
    class: usize,
}

impl Grave for Tombstone {
    fn base(&self) -> *mut u8 {
        self.base
    }

    fn len(&self) -> usize {
        self.class
    }
}

/// A UCP context with RMA, 64-bit atomics and active messages (signals to
/// peers without hardware atomics, see [`signal`]).
pub(crate) struct Context {
    handle: sys::ucp_context_h,
    /// Windows mapped in this context that signal messages may land in.
    signal_targets: Arc<SignalTargets>,
    /// `tcp/lo, posix/memory, ...`: what UCX found usable.
    transports: Vec<String>,
    /// Freed windows' mappings (see [`Context::bury`]), unmapped with the
    /// context.
    graves: RefCell<Graveyard<Tombstone>>,
}

impl Context {
    /// `shared` makes the context safe to use while a progress thread
    /// drives a worker of it.
    pub(crate) fn new(shared: bool) -> Result<Rc<Context>> {
        let tls = std::env::var(ENV_UCX_TLS).ok();
        match Context::init(tls.as_deref(), shared) {
            Ok(context) => Ok(Rc::new(context)),
            Err(e) => {
                // Say what would have been usable without the user's choice.
                let available = Context::init(Some("all"), false)
                    .map(|c| c.transports.join(", "))
                    .unwrap_or_else(|_| "none".into());
                Err(Error::Unavailable(Box::new(crate::Unavailable {
                    requested: "ucx".into(),
                    why: format!("{e} with {}", configured_tls()),
                    available,
                })))
            }
        }
    }

    fn init(tls: Option<&str>, shared: bool) -> Result<Context> {
        let config = Config::read(tls)?;
        let params = sys::ucp_params_t {
            field_mask: u64::from(
                sys::UCP_PARAM_FIELD_FEATURES | sys::UCP_PARAM_FIELD_MT_WORKERS_SHARED,
            ),
            features: u64::from(
                sys::UCP_FEATURE_RMA | sys::UCP_FEATURE_AMO64 | sys::UCP_FEATURE_AM,
            ),
            mt_workers_shared: i32::from(shared),
            ..Default::default()
        };
        let mut handle = ptr::null_mut();
        // SAFETY: params and config are initialised; `handle` is written on success.
        check("ucp_init", unsafe {
            sys::ucp_init(&params, config.0, &mut handle)
        })?;
        let mut context = Context {
            handle,
            signal_targets: Arc::default(),
            transports: Vec::new(),
            graves: RefCell::new(Graveyard::new()),
        };
        context.transports = context.read_transports();
        Ok(context)
    }

    pub(crate) fn handle(&self) -> sys::ucp_context_h {
        self.handle
    }

    pub(crate) fn signal_targets(&self) -> &SignalTargets {
        &self.signal_targets
    }

    /// Makes a freed window (its mapping `memh` of size class `class` at
    /// `base`) a tombstone, kept mapped, pages given back: UCX over tcp and
    /// cma writes a peer's put at its raw address without looking for a
    /// registration, and UCX's posix segments are attached by the owner's
    /// pid and descriptor number, which a new mapping would reuse. Out of
    /// quarantine, a later window of its size class reuses the mapping.
    ///
    /// # Safety
    /// `memh` must be a mapping of this context of at least `class` bytes
    /// at `base` that nothing uses any more.
    pub(crate) unsafe fn bury(&self, memh: sys::ucp_mem_h, base: *mut u8, class: usize) {
        let grave = Tombstone { memh, base, class };
        // SAFETY: per this function's contract.
        unsafe { self.graves.borrow_mut().bury(grave) };
    }

    /// A freed window's mapping of size class `class`, out of quarantine,
    /// if one waits.
    pub(crate) fn reuse(&self, class: usize) -> Option<Tombstone> {
        self.graves.borrow_mut().reuse(class)
    }

    pub(crate) fn transports(&self) -> &[String] {
        &self.transports
    }

    /// Whether UCX may use a shared-memory transport (they cannot report a
    /// peer's failure in UCX 1.13).
    pub(crate) fn has_shared_memory(&self) -> bool {
        const SHM: [&str; 5] = ["posix/", "sysv/", "cma/", "knem/", "xpmem/"];
        self.transports
            .iter()
            .any(|t| SHM.iter().any(|s| t.starts_with(s)))
    }

    /// The `resource` lines of `ucp_context_print_info`: UCP has no query
    /// for the transports it selected.
    fn read_transports(&self) -> Vec<String> {
        let text = print_to_string(|file| {
            // SAFETY: the context is live; `file` is an open stream.
            unsafe { sys::ucp_context_print_info(self.handle, file.cast()) }
        });
        text.lines()
            .filter(|l| l.contains("resource"))
            .filter_map(|l| l.split("-- ").nth(1))
            .map(|t| t.trim().to_string())
            .collect()
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: every worker and window holds an Rc of this context, so
        // none is left; each buried mapping is unmapped once, then the
        // context is cleaned up once.
        unsafe {
            for buried in self.graves.borrow_mut().drain() {
                sys::ucp_mem_unmap(self.handle, buried.memh);
            }
            sys::ucp_cleanup(self.handle);
        }
    }
}

/// What a UCX print function writes, captured through an in-memory stream.
pub(crate) fn print_to_string(print: impl FnOnce(*mut libc::FILE)) -> String {
    let mut buf: *mut libc::c_char = ptr::null_mut();
    let mut len: libc::size_t = 0;
    // SAFETY: open_memstream stores into `buf`/`len` on fclose; the buffer
    // is malloc'ed and freed here once read.
    unsafe {
        let file = libc::open_memstream(&mut buf, &mut len);
        if file.is_null() {
            return String::new();
        }
        print(file);
        libc::fclose(file);
        if buf.is_null() {
            return String::new();
        }
        let text =
            String::from_utf8_lossy(std::slice::from_raw_parts(buf.cast::<u8>(), len)).into_owned();
        libc::free(buf.cast());
        text
    }
}

/// The worker handle, moved into the progress thread.
struct WorkerHandle(sys::ucp_worker_h);
// SAFETY: the worker is created UCS_THREAD_MODE_MULTI whenever a progress
// thread exists, so UCP serialises calls on it from both threads.
unsafe impl Send for WorkerHandle {}

/// A UCP worker: this rank's communication engine.
pub(crate) struct Worker {
    handle: sys::ucp_worker_h,
    driver: Option<ProgressThread>,
    // Declared last: the context outlives the worker.
    context: Rc<Context>,
}

impl Worker {
    pub(crate) fn new(context: Rc<Context>, progress_thread: ProgressMode) -> Result<Worker> {
        let thread_mode = match progress_thread {
            ProgressMode::Off => sys::UCS_THREAD_MODE_SINGLE,
            _ => sys::UCS_THREAD_MODE_MULTI,
        };
        let params = sys::ucp_worker_params_t {
            field_mask: u64::from(sys::UCP_WORKER_PARAM_FIELD_THREAD_MODE),
            thread_mode,
            ..Default::default()
        };
        let mut handle = ptr::null_mut();
        // SAFETY: the context is live; `handle` is written on success.
        check("ucp_worker_create", unsafe {
            sys::ucp_worker_create(context.handle(), &params, &mut handle)
        })?;
        let mut worker = Worker {
            handle,
            driver: None,
            context,
        };
        // SAFETY: the worker is live; the context (holding the targets)
        // outlives it.
        unsafe { signal::register(worker.handle, &worker.context.signal_targets)? };
        let shared = WorkerHandle(worker.handle);
        worker.driver = ProgressThread::start("catena-ucx-progress", progress_thread, move || {
            let shared = &shared;
            // SAFETY: the worker outlives this thread (joined in Drop) and is
            // thread-safe (UCS_THREAD_MODE_MULTI whenever the thread runs).
            unsafe { sys::ucp_worker_progress(shared.0) != 0 }
        })?;
        Ok(worker)
    }

    pub(crate) fn handle(&self) -> sys::ucp_worker_h {
        self.handle
    }

    pub(crate) fn context(&self) -> &Rc<Context> {
        &self.context
    }

    /// One `ucp_worker_progress`; true if it did something.
    pub(crate) fn progress_once(&self) -> bool {
        // SAFETY: the worker is live for `self`'s lifetime.
        unsafe { sys::ucp_worker_progress(self.handle) != 0 }
    }

    /// Progresses while there is work, at most `rounds` times.
    pub(crate) fn progress(&self, rounds: u32) {
        for _ in 0..rounds {
            if !self.progress_once() {
                break;
            }
        }
    }

    /// This worker's address, to publish to peers.
    pub(crate) fn address(&self) -> Result<Vec<u8>> {
        let mut attr = sys::ucp_worker_attr_t {
            field_mask: u64::from(sys::UCP_WORKER_ATTR_FIELD_ADDRESS),
            ..Default::default()
        };
        // SAFETY: the worker is live; UCP fills `address`, released below.
        check("ucp_worker_query", unsafe {
            sys::ucp_worker_query(self.handle, &mut attr)
        })?;
        // SAFETY: UCP returned `address_length` bytes at `address`.
        let bytes = unsafe {
            std::slice::from_raw_parts(attr.address.cast::<u8>(), attr.address_length).to_vec()
        };
        // SAFETY: the address came from ucp_worker_query on this worker.
        unsafe { sys::ucp_worker_release_address(self.handle, attr.address) };
        Ok(bytes)
    }

    /// Orders every operation issued after this call after those before it.
    pub(crate) fn fence(&self) -> Result<()> {
        // SAFETY: the worker is live.
        check("ucp_worker_fence", unsafe {
            sys::ucp_worker_fence(self.handle)
        })
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Stops and joins the thread (within one progress call and one nap).
        drop(self.driver.take());
        // SAFETY: endpoints were closed by the transport, the progress thread
        // has ended, and the worker is destroyed once.
        unsafe { sys::ucp_worker_destroy(self.handle) };
    }
}
