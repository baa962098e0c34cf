//! The UCX provider (feature `ucx`): windows are UCP memory mappings, puts
//! are `ucp_put_nbx`, signals and atomics are `ucp_atomic_op_nbx`, and tagged
//! messages come from [`crate::eager`] on top. UCX's own `UCX_*` settings
//! (`UCX_TLS`, ...) apply; catena's are `CATENA_*`.

mod context;
mod endpoint;
mod request;
mod signal;
pub(crate) mod window;

use std::cell::Cell;
use std::time::Duration;

use catena_ucx_sys as sys;

use context::{check, Context, ProgressMode, Worker};
use endpoint::{Endpoints, ErrMode, Route};
use request::{peer_failed, posted, posted_to, reply_done, FetchOp, Request};
use signal::{SignalMessage, MAX_CARRIED_DATA, SIGNAL_AM_ID};
use window::UcxKey;
pub use window::UcxWindow;

use crate::bootstrap::Bootstrap;
use crate::bounds::{check_bounds, check_word};
use crate::config;
use crate::eager::{
    Messenger, CONTROL_WINDOW_BYTES, DEFAULT_BULK_BYTES, DEFAULT_INBOX_BYTES,
    DEFAULT_RENDEZVOUS_BYTES, DEFAULT_RING_BYTES,
};
use crate::job::{Job, Spin};
use crate::kit::WindowIds;
use crate::{
    finalize_barrier, wait_until, Blocking, ControlWindows, EagerMessaging, Error, KeyedWindow,
    LocalWindow, Provider, Rank, RemoteKey, Result, Rma, Signal, Time,
};

/// Re-polling budget of a waiting rank when it has a core to itself, on a
/// machine where other tasks want cores: then a spinning rank delays them.
const DEFAULT_SPIN: Duration = Duration::from_micros(50);
/// How long it re-polls in all while no runnable task waits for a core.
/// Longer than shm's: nothing wakes a parked rank early (see `PARK_SLICE`),
/// and two ranks whose spins are shorter than a nap fall into step, each
/// napping while the other waits (a 50 us budget gave 77 us ping-pongs,
/// 1 ms 0.3 us).
const IDLE_SPIN: Duration = Duration::from_millis(1);
/// Longest sleep of a parked rank. A put into shared memory (posix, cma)
/// raises no event at the target, so there is nothing to block on: a parked
/// rank naps briefly and looks again.
const PARK_SLICE: Duration = Duration::from_micros(20);
/// How long a put waits for UCX to be done with the caller's buffer.
const LOCAL_COMPLETION_TIMEOUT: Duration = Duration::from_secs(60);
/// How long closing the endpoints may take when the transport is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);
/// `ucp_worker_progress` calls per `progress()` while they find work.
const PROGRESS_ROUNDS: u32 = 16;

/// The UCX provider: windows are memory mapped in a UCP context, puts,
/// signals and atomics are UCP RMA operations over per-peer endpoints.
pub struct UcxTransport {
    messenger: Messenger<UcxWindow, KeyedWindow>,
    window_ids: WindowIds,
    endpoints: Endpoints,
    /// A rank the job lost, as seen by a `progress` after it drained
    /// every message that had landed (so none of them is lost to the news).
    lost: Cell<Option<Rank>>,
    spin: Spin,
    // Declared last: windows (in the messenger) and endpoints go first.
    worker: Worker,
    /// Dropped last: the bootstrap (MPI when started by mpiexec) outlives
    /// the fabric, so MPI_Finalize never runs beside a live provider.
    job: Job,
}

impl UcxTransport {
    /// Joins the job this process was started into (see [`Job::from_env`]).
    pub fn from_env() -> Result<UcxTransport> {
        UcxTransport::new(Job::from_env()?)
    }

    /// A transport for the job `bootstrap` describes, whose ranks on this
    /// machine share `cores` cores.
    pub fn with_bootstrap(bootstrap: Box<dyn Bootstrap>, cores: usize) -> Result<UcxTransport> {
        UcxTransport::new(Job::new(bootstrap, cores))
    }

    fn new(mut job: Job) -> Result<UcxTransport> {
        let progress_thread = ProgressMode::from_env()?;
        let ring_bytes = config::ring_bytes(DEFAULT_RING_BYTES)?;
        let inbox_bytes = config::inbox_bytes(DEFAULT_INBOX_BYTES)?;
        let rendezvous = config::rendezvous(DEFAULT_RENDEZVOUS_BYTES, DEFAULT_BULK_BYTES)?;
        let spin = job.spin(DEFAULT_SPIN, IDLE_SPIN)?;
        let context = Context::new(progress_thread != ProgressMode::Off)?;
        let err_mode = ErrMode::from_env(context.has_shared_memory())?;
        let worker = Worker::new(context, progress_thread)?;
        let control = UcxWindow::create(
            worker.context(),
            job.rank(),
            &job.key_secret(),
            0,
            CONTROL_WINDOW_BYTES,
        )?;
        job.publish(&encode_address(&control.key(), &worker.address()?))?;
        Ok(UcxTransport {
            job,
            messenger: Messenger::new(control, ring_bytes)
                .with_inbox_bytes(inbox_bytes)
                .with_rendezvous(rendezvous.0, rendezvous.1),
            window_ids: WindowIds::new(),
            endpoints: Endpoints::new(err_mode),
            lost: Cell::new(None),
            spin,
            worker,
        })
    }

    /// Peers this rank holds a messaging connection with.
    pub fn connection_count(&self) -> usize {
        self.messenger.connection_count()
    }

    /// Peers this rank holds a UCX endpoint to.
    pub fn endpoint_count(&self) -> usize {
        self.endpoints.count()
    }

    /// Peers' windows whose rkeys this rank holds unpacked.
    pub fn rkey_count(&self) -> usize {
        self.endpoints.rkey_count()
    }

    /// The transports UCX selected (`tcp/lo`, `posix/memory`, ...).
    pub fn transports(&self) -> &[String] {
        self.worker.context().transports()
    }

    /// Checks `target` and `key` before anything is posted, and finds the
    /// endpoint and rkey to use.
    fn route<'k>(&self, target: Rank, key: &'k RemoteKey) -> Result<(UcxKey<'k>, Route)> {
        self.job.check_rank(target)?;
        let key = UcxKey::decode(key, target, &self.job.peer_key_secret(target)?)?;
        let route = self.endpoints.route(&self.worker, target, &key, || {
            Ok(decode_address(&self.job.peer(target)?.address)?.1.to_vec())
        })?;
        Ok((key, route))
    }

    /// Waits until UCX is done with a request whose buffers the caller is
    /// about to reuse. On failure the endpoint is closed by force, which
    /// completes the request, so no buffer is touched after this returns.
    fn wait_local(&self, target: Rank, request: Option<Request>, what: &'static str) -> Result<()> {
        let Some(request) = request else {
            return Ok(());
        };
        let deadline = self.deadline_in(LOCAL_COMPLETION_TIMEOUT);
        let mut polls = 0u32;
        let failed = loop {
            self.worker.progress_once();
            if let Some(status) = request.status() {
                break match self.endpoints.usable(target) {
                    Err(e) => e,
                    Ok(()) if peer_failed(status) => Error::PeerGone { rank: target },
                    Ok(()) => match check(what, status) {
                        Ok(()) => return Ok(()),
                        Err(e) => e,
                    },
                };
            }
            polls = polls.wrapping_add(1);
            if polls % 256 == 0 {
                let gone = self
                    .endpoints
                    .usable(target)
                    .and_then(|()| self.job.check_peer(target));
                if let Err(e) = gone {
                    break e;
                }
                if self.now() >= deadline {
                    break Error::Timeout { what };
                }
            }
        };
        self.endpoints.abort(&self.worker, target);
        drop(request);
        Err(failed)
    }

    /// A put + signal as one active message, for a target UCX has no
    /// hardware atomics to (see [`signal`]): unanswered, handled when the
    /// target progresses, as UCX's emulated put and atomic would be.
    fn signal_message(&self, target: Rank, route: Route, message: SignalMessage) -> Result<()> {
        let bytes = message.encode();
        let param = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS | sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE,
            flags: sys::UCP_AM_SEND_FLAG_EAGER,
            memory_type: sys::UCS_MEMORY_TYPE_HOST,
            ..Default::default()
        };
        // SAFETY: the endpoint is live; `bytes` outlives the operation
        // (waited for below).
        let request = posted_to(
            "ucp_am_send_nbx",
            unsafe {
                sys::ucp_am_send_nbx(
                    route.ep,
                    SIGNAL_AM_ID,
                    std::ptr::null(),
                    0,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    &param,
                )
            },
            target,
        )?;
        self.wait_local(target, request, "ucp_am_send_nbx")
    }

    /// Waits until everything issued to `target` has landed there.
    fn wait_landed(&self, target: Rank, route: Route) -> Result<()> {
        // SAFETY: the endpoint is live; the request is freed when dropped.
        let request = posted_to(
            "ucp_ep_flush_nbx",
            unsafe { sys::ucp_ep_flush_nbx(route.ep, &host_param()) },
            target,
        )?;
        self.wait_local(target, request, "ucp_ep_flush_nbx")
    }

    /// `ucp_put_nbx` of `data` to `addr`, waited for locally.
    fn put_raw(&self, target: Rank, route: Route, addr: u64, data: &[u8]) -> Result<()> {
        let param = host_param();
        // SAFETY: endpoint and rkey are live; `data` outlives the operation
        // (waited for below); the remote range was checked against the window.
        let request = posted_to(
            "ucp_put_nbx",
            unsafe {
                sys::ucp_put_nbx(
                    route.ep,
                    data.as_ptr().cast(),
                    data.len(),
                    addr,
                    route.rkey,
                    &param,
                )
            },
            target,
        )?;
        self.wait_local(target, request, "ucp_put_nbx")
    }

    /// A fetching atomic, waited for until `deadline`.
    async fn fetch_op(&self, target: Rank, route: Route, amo: Amo, deadline: Time) -> Result<u64> {
        let Amo {
            op,
            addr,
            operand,
            reply,
        } = amo;
        let operand = operand.to_ne_bytes();
        let fetch = FetchOp::post("ucp_atomic_op_nbx", reply, |buffer, user_data| {
            let param = sys::ucp_request_param_t {
                op_attr_mask: sys::UCP_OP_ATTR_FIELD_CALLBACK
                    | sys::UCP_OP_ATTR_FIELD_USER_DATA
                    | sys::UCP_OP_ATTR_FIELD_DATATYPE
                    | sys::UCP_OP_ATTR_FIELD_REPLY_BUFFER,
                cb: sys::ucp_request_param_t__bindgen_ty_1 {
                    send: Some(reply_done),
                },
                user_data,
                datatype: DT_U64,
                reply_buffer: buffer,
                ..Default::default()
            };
            // SAFETY: endpoint and rkey are live; UCP copies the operand
            // before returning; the reply buffer lives until UCP is done
            // (FetchOp leaks it if dropped in flight).
            unsafe {
                sys::ucp_atomic_op_nbx(
                    route.ep,
                    op,
                    operand.as_ptr().cast(),
                    1,
                    addr,
                    route.rkey,
                    &param,
                )
            }
        })?;
        wait_until(self, deadline, "a UCX atomic", || {
            if let Some(result) = fetch.poll() {
                return result.map(Some);
            }
            self.worker.progress_once();
            if let Some(result) = fetch.poll() {
                return result.map(Some);
            }
            self.endpoints.usable(target)?;
            self.job.check_peer(target)?;
            Ok(None)
        })
        .await
    }
}

/// A fetching atomic on the remote word at `addr`; `operand` and `reply`
/// (the initial reply buffer) as in `ucp_atomic_op_nbx`.
struct Amo {
    op: sys::ucp_atomic_op_t,
    addr: u64,
    operand: u64,
    reply: u64,
}

/// One u64 as a contiguous UCP datatype (`ucp_dt_make_contig(8)`).
const DT_U64: sys::ucp_datatype_t = (8 << sys::UCP_DATATYPE_SHIFT) as sys::ucp_datatype_t
    | sys::UCP_DATATYPE_CONTIG as sys::ucp_datatype_t;

/// Parameters of an operation on host memory without a callback (UCP skips
/// the memory type lookup; completion is polled).
fn host_param() -> sys::ucp_request_param_t {
    sys::ucp_request_param_t {
        op_attr_mask: sys::UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        memory_type: sys::UCS_MEMORY_TYPE_HOST,
        ..Default::default()
    }
}

/// A directory entry: the control window key (length-prefixed), then the
/// worker address.
fn encode_address(control: &RemoteKey, worker: &[u8]) -> Vec<u8> {
    let key = control.as_bytes();
    let mut entry = Vec::with_capacity(2 + key.len() + worker.len());
    entry.extend_from_slice(&(key.len() as u16).to_le_bytes());
    entry.extend_from_slice(key);
    entry.extend_from_slice(worker);
    entry
}

fn decode_address(entry: &[u8]) -> Result<(&[u8], &[u8])> {
    let corrupt = || Error::Bootstrap("a UCX directory entry is truncated".into());
    let (len, rest) = entry.split_first_chunk::<2>().ok_or_else(corrupt)?;
    let len = usize::from(u16::from_le_bytes(*len));
    if rest.len() <= len {
        return Err(corrupt());
    }
    Ok(rest.split_at(len))
}

impl Rma for UcxTransport {
    type Window = UcxWindow;
    type PeerWindow = KeyedWindow;

    crate::kit::rma_from_job!(identity);

    fn resolve_window(&self, target: Rank, window: &RemoteKey) -> Result<KeyedWindow> {
        KeyedWindow::of(self, target, window)
    }

    fn progress(&self) {
        self.worker.progress(PROGRESS_ROUNDS);
        // Data put by a peer lands only when this worker progresses (tcp
        // emulates RMA with active messages): look at failures after
        // draining, so that a message sent before a peer died is delivered.
        let lost = self.job.check_health();
        self.messenger.progress(self);
        self.endpoints.confirm_failures();
        if let Err(Error::PeerGone { rank }) = lost {
            self.lost.set(Some(rank));
        }
    }

    fn alloc_window(&self, len: usize) -> Result<UcxWindow> {
        crate::bounds::check_window_len(len)?;
        let id = self.window_ids.next()?;
        UcxWindow::create(
            self.worker.context(),
            self.job.rank(),
            &self.job.key_secret(),
            id,
            len,
        )
    }

    fn put(&self, target: Rank, window: &RemoteKey, offset: usize, data: &[u8]) -> Result<()> {
        let (key, route) = self.route(target, window)?;
        check_bounds(offset, data.len(), key.len)?;
        if data.is_empty() {
            return Ok(());
        }
        self.put_raw(target, route, key.base + offset as u64, data)
    }

    fn put_signal(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Signal,
    ) -> Result<()> {
        let (key, route) = self.route(target, window)?;
        check_bounds(offset, data.len(), key.len)?;
        check_word(signal.offset, key.len)?;
        if route.lanes.software_atomics {
            // Small data travels in the signal's message. Otherwise the put
            // goes first: on one lane it arrives first; over several (tcp
            // on several interfaces; UCX's fence does not order them) it,
            // and every earlier put, must have landed before the message
            // leaves.
            let mut carried = data;
            if data.len() > MAX_CARRIED_DATA || !route.lanes.one_lane {
                if !data.is_empty() {
                    self.put_raw(target, route, key.base + offset as u64, data)?;
                }
                if !route.lanes.one_lane {
                    self.wait_landed(target, route)?;
                }
                carried = &[];
            }
            let message = SignalMessage::new(key.id, window, offset, carried, signal);
            return self.signal_message(target, route, message);
        }
        if !data.is_empty() {
            self.put_raw(target, route, key.base + offset as u64, data)?;
            // The signal must not overtake the data (they may travel on
            // different transports, e.g. cma and posix).
            self.worker.fence()?;
        }
        let add = signal.add.to_ne_bytes();
        let param = sys::ucp_request_param_t {
            op_attr_mask: sys::UCP_OP_ATTR_FIELD_DATATYPE,
            datatype: DT_U64,
            ..Default::default()
        };
        // SAFETY: endpoint and rkey are live; `add` outlives the operation
        // (waited for below); the word was checked against the window.
        let request = posted_to(
            "ucp_atomic_op_nbx",
            unsafe {
                sys::ucp_atomic_op_nbx(
                    route.ep,
                    sys::UCP_ATOMIC_OP_ADD,
                    add.as_ptr().cast(),
                    1,
                    key.base + signal.offset as u64,
                    route.rkey,
                    &param,
                )
            },
            target,
        )?;
        self.wait_local(target, request, "ucp_atomic_op_nbx")
    }

    async fn fetch_add(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        value: u64,
        deadline: Time,
    ) -> Result<u64> {
        let (key, route) = self.route(target, window)?;
        check_word(offset, key.len)?;
        let addr = key.base + offset as u64;
        self.fetch_op(
            target,
            route,
            Amo {
                op: sys::UCP_ATOMIC_OP_ADD,
                addr,
                operand: value,
                reply: 0,
            },
            deadline,
        )
        .await
    }

    async fn compare_swap(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        expected: u64,
        new: u64,
        deadline: Time,
    ) -> Result<u64> {
        let (key, route) = self.route(target, window)?;
        check_word(offset, key.len)?;
        let addr = key.base + offset as u64;
        // CSWAP compares with the operand and swaps in the reply buffer's value.
        self.fetch_op(
            target,
            route,
            Amo {
                op: sys::UCP_ATOMIC_OP_CSWAP,
                addr,
                operand: expected,
                reply: new,
            },
            deadline,
        )
        .await
    }

    /// An endpoint flush covers signal messages too: UCX's tcp endpoint
    /// that sent an active message flushes with an empty put, which the
    /// target acknowledges after handling all that came before it (test
    /// `tcp_flush_waits_for_signal_messages`).
    async fn flush(&self, target: Rank, deadline: Time) -> Result<()> {
        self.job.check_rank(target)?;
        let Some(ep) = self.endpoints.existing(target) else {
            // Nothing was ever issued to `target`.
            return Ok(());
        };
        self.endpoints.usable(target)?;
        let param = sys::ucp_request_param_t::default();
        // SAFETY: the endpoint is live; the request is freed when dropped.
        let Some(request) = posted("ucp_ep_flush_nbx", unsafe {
            sys::ucp_ep_flush_nbx(ep, &param)
        })?
        else {
            return Ok(());
        };
        wait_until(self, deadline, "a UCX flush", || {
            self.worker.progress_once();
            match request.status() {
                Some(status) => {
                    self.endpoints.usable(target)?;
                    check("ucp_ep_flush_nbx", status).map(Some)
                }
                None => {
                    self.endpoints.usable(target)?;
                    self.job.check_peer(target)?;
                    Ok(None)
                }
            }
        })
        .await
    }

    #[inline]
    fn check_health(&self) -> Result<()> {
        // A failed endpoint says one peer is gone (`check_peer`), not that
        // the job lost it: as with shm, the bootstrap decides that.
        match self.lost.get() {
            Some(rank) => Err(Error::PeerGone { rank }),
            None => Ok(()),
        }
    }

    fn check_peer(&self, rank: Rank) -> Result<()> {
        self.endpoints.check_reported(rank)?;
        self.job.check_peer(rank)
    }
}

impl Blocking for UcxTransport {
    fn spin_budget(&self) -> Duration {
        self.spin.budget()
    }

    fn spin_on(&self, spun: Duration) -> bool {
        self.spin.on(spun)
    }

    fn prepare_park(&self) -> u64 {
        0
    }

    fn park(&self, _: u64) {
        self.job.nap(PARK_SLICE);
    }

    fn cancel_park(&self) {}
}

impl ControlWindows for UcxTransport {
    fn control_key(&self, rank: Rank) -> Result<RemoteKey> {
        RemoteKey::from_bytes(decode_address(&self.job.peer(rank)?.address)?.0)
    }
}

crate::kit::host_memory_from_job!(UcxTransport);

impl EagerMessaging for UcxTransport {
    fn messenger(&self) -> &Messenger<UcxWindow, KeyedWindow> {
        &self.messenger
    }
}

impl Provider for UcxTransport {
    const NAME: &'static str = "ucx";

    fn job(&self) -> &Job {
        &self.job
    }

    fn from_job(job: Job) -> Result<UcxTransport> {
        UcxTransport::new(job)
    }

    fn finalize(self, timeout: Duration) -> Result<()> {
        // Every put of this rank must have landed before its peers, past the
        // barrier, unmap their windows.
        let deadline = self.deadline_in(timeout);
        let param = sys::ucp_request_param_t::default();
        // SAFETY: the worker is live; the request is freed when dropped.
        let flush = posted("ucp_worker_flush_nbx", unsafe {
            sys::ucp_worker_flush_nbx(self.worker.handle(), &param)
        })?;
        if let Some(request) = flush {
            crate::block_on(
                &self,
                wait_until(&self, deadline, "a UCX flush before finalize", || {
                    request
                        .status()
                        .map(|s| check("ucp_worker_flush_nbx", s))
                        .transpose()
                }),
            )?;
        }
        finalize_barrier(&self, &self.job, deadline.saturating_sub(self.now()))
    }
}

impl Drop for UcxTransport {
    fn drop(&mut self) {
        let job = &self.job;
        self.endpoints.close_all(
            &self.worker,
            |rank| job.check_health().is_ok() && job.check_peer(rank).is_ok(),
            CLOSE_TIMEOUT,
        );
    }
}

impl std::fmt::Debug for UcxTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UcxTransport")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .field("transports", &self.transports())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_entries_round_trip() {
        let key = RemoteKey::from_bytes(b"Ukey").unwrap();
        let entry = encode_address(&key, b"worker");
        assert_eq!(
            decode_address(&entry).unwrap(),
            (&b"Ukey"[..], &b"worker"[..])
        );
        assert!(decode_address(&entry[..5]).is_err());
    }
}
