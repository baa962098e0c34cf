//! State shared by the transport and its windows: the fabric objects, the
//! operations in flight (each named by a token passed as libfabric context),
//! and the table of exposed windows that incoming CQ-data signals land in.
//! Reading the CQ here is what completes operations and applies signals.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use catena_ofi_sys as sys;
use rustc_hash::FxHashMap;

use super::domain::{CqEvent, Domain, Mr};
use super::errors::{fabric_error, is_again};
use super::signal;
use super::window::Registered;
use crate::tombstone::Graveyard;
use crate::{Error, Result};

/// Completions taken per `fi_cq_read`.
const BATCH: usize = 16;

/// An operation in flight. Its buffer (operands and result of atomics and
/// reads) lives here, not in the future that waits for it, so that a dropped
/// future cannot free memory the provider still writes.
struct Op {
    state: OpState,
    /// The waiter is gone: forget the operation when it completes.
    abandoned: bool,
    buf: Box<[u64; 3]>,
    /// Registrations this operation needs until it completes (FI_MR_LOCAL).
    _mrs: Vec<Mr>,
}

enum OpState {
    Pending,
    Done,
    Failed(String),
}

/// Where an operation's buffer is, for posting it.
pub(crate) struct OpSlot {
    pub(crate) token: u64,
    /// Three u64: [operand, compare, result].
    pub(crate) buf: *mut u64,
    /// Descriptor of `buf` (null unless FI_MR_LOCAL).
    pub(crate) desc: *mut c_void,
}

impl OpSlot {
    /// The libfabric context naming this operation (never null).
    pub(crate) fn context(&self) -> *mut c_void {
        self.token as *mut c_void
    }
}

/// A window's memory as incoming signals see it.
#[derive(Clone, Copy)]
struct Exposed {
    base: *mut u8,
    len: usize,
}

pub(crate) struct Engine {
    ops: RefCell<FxHashMap<u64, Op>>,
    next_token: Cell<u64>,
    windows: RefCell<FxHashMap<u32, Exposed>>,
    /// A failure no waiting operation claimed (an injected write failed, or
    /// the CQ itself did); the next `flush` reports it.
    stray: RefCell<Option<String>>,
    /// Set while the messenger makes progress, so that window reads inside
    /// it do not read the CQ again.
    quiet: Cell<bool>,
    pub(crate) mr_local: bool,
    /// Freed windows' memory and registrations (see [`Registered`]): in
    /// quarantine, then reused by new windows.
    graves: RefCell<Graveyard<Registered>>,
    // Last: dropped after the operations' registrations (see Drop).
    pub(crate) domain: Domain,
}

impl Engine {
    pub(crate) fn new(domain: Domain) -> Engine {
        Engine {
            ops: RefCell::new(FxHashMap::default()),
            next_token: Cell::new(1),
            windows: RefCell::new(FxHashMap::default()),
            stray: RefCell::new(None),
            quiet: Cell::new(false),
            mr_local: domain.info().has_mr_mode(sys::FI_MR_LOCAL),
            graves: RefCell::new(Graveyard::new()),
            domain,
        }
    }

    /// Reads every available completion: finishes operations and applies
    /// the signals peers sent.
    pub(crate) fn poll(&self) {
        let mut entries = [sys::fi_cq_data_entry::default(); BATCH];
        loop {
            match self.domain.read_cq(&mut entries) {
                Ok(CqEvent::Entries(n)) => {
                    for e in &entries[..n] {
                        self.handle(e);
                    }
                    if n < BATCH {
                        return;
                    }
                }
                Ok(CqEvent::Empty) => return,
                Ok(CqEvent::Failed { context, message }) => self.fail(context as u64, message),
                Err(e) => {
                    self.stray.borrow_mut().get_or_insert(e.to_string());
                    return;
                }
            }
        }
    }

    /// [`Engine::poll`] unless the messenger is making progress right now.
    pub(crate) fn poll_unless_quiet(&self) {
        if !self.quiet.get() {
            self.poll();
        }
    }

    /// Runs `f` with window reads not polling the CQ.
    pub(crate) fn quietly<R>(&self, f: impl FnOnce() -> R) -> R {
        let was = self.quiet.replace(true);
        let out = f();
        self.quiet.set(was);
        out
    }

    fn handle(&self, e: &sys::fi_cq_data_entry) {
        if e.flags & u64::from(sys::FI_REMOTE_CQ_DATA) != 0 {
            self.apply_signal(e.data);
        } else if !e.op_context.is_null() {
            let token = e.op_context as u64;
            let mut ops = self.ops.borrow_mut();
            if ops.get(&token).is_some_and(|op| op.abandoned) {
                ops.remove(&token);
            } else if let Some(op) = ops.get_mut(&token) {
                op.state = OpState::Done;
            }
        }
    }

    fn fail(&self, token: u64, message: String) {
        let mut ops = self.ops.borrow_mut();
        match ops.get_mut(&token) {
            Some(op) if op.abandoned => {
                ops.remove(&token);
            }
            Some(op) => op.state = OpState::Failed(message),
            None => {
                self.stray.borrow_mut().get_or_insert(message);
            }
        }
    }

    /// Adds a signal's addend to its word. The origin checked the word
    /// against the window it was told about; this checks again against the
    /// window that exists, so a stale or bogus immediate writes nothing.
    fn apply_signal(&self, data: u64) {
        let (id, offset, add) = signal::decode(data);
        let Some(w) = self.windows.borrow().get(&id).copied() else {
            return; // The window was freed meanwhile.
        };
        if offset.checked_add(8).is_some_and(|end| end <= w.len) {
            // SAFETY: the word lies inside the window's live mapping and is
            // 8-aligned (page-aligned base, offset a multiple of 8).
            let word = unsafe { AtomicU64::from_ptr(w.base.add(offset).cast()) };
            word.fetch_add(add, Ordering::SeqCst);
        }
    }

    /// Makes window `id`'s memory a target for signals.
    pub(crate) fn expose(&self, id: u32, base: *mut u8, len: usize) {
        self.windows.borrow_mut().insert(id, Exposed { base, len });
    }

    pub(crate) fn withdraw(&self, id: u32) {
        self.windows.borrow_mut().remove(&id);
    }

    /// Keeps a freed window's memory and registration: a stale key lands
    /// there, and a later window of its size class reuses it.
    ///
    /// # Safety
    /// Nothing uses `memory` as a window any more.
    pub(crate) unsafe fn bury(&self, memory: Registered) {
        // SAFETY: per this function's contract.
        unsafe { self.graves.borrow_mut().bury(memory) };
    }

    /// A freed window's memory and registration of size class `class`, out
    /// of quarantine and zeroed, if one waits.
    pub(crate) fn reuse(&self, class: usize) -> Option<Registered> {
        self.graves.borrow_mut().reuse(class)
    }

    /// Starts tracking an operation with buffer `init` (registered where
    /// FI_MR_LOCAL asks for it).
    pub(crate) fn start(&self, init: [u64; 3]) -> Result<OpSlot> {
        let mut mrs = Vec::new();
        let mut buf = Box::new(init);
        let ptr = buf.as_mut_ptr();
        let desc = if self.mr_local {
            // SAFETY: the box lives in the op table until the op is removed,
            // and the op table is emptied before the domain closes.
            let mr = unsafe {
                self.domain.register(
                    ptr.cast(),
                    std::mem::size_of::<[u64; 3]>(),
                    u64::from(sys::FI_READ | sys::FI_WRITE),
                )?
            };
            let desc = mr.desc();
            mrs.push(mr);
            desc
        } else {
            std::ptr::null_mut()
        };
        let token = self.track();
        let mut ops = self.ops.borrow_mut();
        let op = ops.get_mut(&token).expect("just tracked");
        op.buf = buf;
        op._mrs = mrs;
        Ok(OpSlot {
            token,
            buf: ptr,
            desc,
        })
    }

    /// Starts tracking an operation that needs no buffer (a write).
    pub(crate) fn track(&self) -> u64 {
        let token = self.next_token.get();
        self.next_token.set(token + 1);
        self.ops.borrow_mut().insert(
            token,
            Op {
                state: OpState::Pending,
                abandoned: false,
                buf: Box::new([0; 3]),
                _mrs: Vec::new(),
            },
        );
        token
    }

    /// Whether `token` was posted and has not completed.
    pub(crate) fn is_pending(&self, token: u64) -> bool {
        self.ops
            .borrow()
            .get(&token)
            .is_some_and(|op| matches!(op.state, OpState::Pending))
    }

    /// The result word of a finished operation (removing it), `None` while
    /// it is in flight.
    pub(crate) fn finish(&self, token: u64) -> Option<Result<u64>> {
        let mut ops = self.ops.borrow_mut();
        let op = ops.get(&token)?;
        let result = match &op.state {
            OpState::Pending => return None,
            OpState::Done => Ok(op.buf[2]),
            OpState::Failed(message) => Err(Error::Fabric(Box::new(crate::FabricFailure {
                library: "libfabric",
                call: "fi_cq_read",
                message: message.clone(),
            }))),
        };
        ops.remove(&token);
        Some(result)
    }

    /// The waiter of `token` gives up: forget it now if it never reached the
    /// provider or is finished, else when its completion arrives.
    pub(crate) fn abandon(&self, token: u64, posted: bool) {
        let mut ops = self.ops.borrow_mut();
        match ops.get_mut(&token) {
            Some(op) if posted && matches!(op.state, OpState::Pending) => op.abandoned = true,
            _ => {
                ops.remove(&token);
            }
        }
    }

    /// The failure no operation claimed, if any (taken).
    pub(crate) fn take_stray(&self) -> Option<Error> {
        self.stray.borrow_mut().take().map(|message| {
            Error::Fabric(Box::new(crate::FabricFailure {
                library: "libfabric",
                call: "fi_cq_read",
                message,
            }))
        })
    }

    /// Calls `post` until the provider takes the operation, reading the CQ
    /// while its queues are full (-FI_EAGAIN), until `deadline`; `alive`
    /// reports a lost peer.
    pub(crate) fn post(
        &self,
        call: &'static str,
        deadline: Instant,
        alive: &dyn Fn() -> Result<()>,
        mut post: impl FnMut(*mut sys::fid_ep) -> isize,
    ) -> Result<()> {
        loop {
            let ret = post(self.domain.ep()?);
            if ret >= 0 {
                return Ok(());
            }
            if !is_again(ret) {
                return Err(fabric_error(call, ret));
            }
            self.poll();
            alive()?;
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "room in the libfabric transmit queue",
                });
            }
        }
    }

    /// Waits (reading the CQ) until every op in `tokens` finished; the first
    /// failure wins. On timeout or a lost peer the ops are abandoned.
    pub(crate) fn wait(
        &self,
        tokens: &[u64],
        deadline: Instant,
        what: &'static str,
        alive: &dyn Fn() -> Result<()>,
    ) -> Result<Vec<u64>> {
        let mut results = vec![None; tokens.len()];
        let mut first_error = None;
        let mut spins = 0u32;
        loop {
            self.poll();
            for (token, slot) in tokens.iter().zip(results.iter_mut()) {
                if slot.is_none() {
                    match self.finish(*token) {
                        Some(Ok(v)) => *slot = Some(v),
                        Some(Err(e)) => {
                            *slot = Some(0);
                            first_error.get_or_insert(e);
                        }
                        None => {}
                    }
                }
            }
            if results.iter().all(Option::is_some) {
                return match first_error {
                    Some(e) => Err(e),
                    None => Ok(results.into_iter().flatten().collect()),
                };
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                let gone = alive().err();
                if gone.is_some() || Instant::now() >= deadline {
                    for (token, slot) in tokens.iter().zip(&results) {
                        if slot.is_none() {
                            self.abandon(*token, true);
                        }
                    }
                    return Err(gone.unwrap_or(Error::Timeout { what }));
                }
                std::thread::yield_now();
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Cancel everything in flight first, so that freeing the operations'
        // buffers and registrations below is safe; the domain closes last.
        self.domain.close_endpoint();
        self.ops.borrow_mut().clear();
    }
}
