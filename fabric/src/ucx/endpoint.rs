//! Endpoints to peers, made on first use (state is O(partners), not O(N)),
//! with the rkeys unpacked on each, and their orderly or forced closing.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustc_hash::FxHashMap;

use catena_ucx_sys as sys;
use sys::ucs_status_t;

use super::context::{configured_tls, print_to_string, status_text, Worker};
use super::request::{posted, Request};
use super::window::UcxKey;
use crate::config::ENV_UCX_ERR_MODE;
use crate::{Error, Rank, Result};

/// Unpacked rkeys kept per process; beyond this the least recently used
/// one goes (an origin cannot tell that a peer freed a window).
const RKEY_CACHE_CAPACITY: usize = 256;
const NO_RANK: u32 = u32::MAX;

/// How a peer's failure is handled (`CATENA_UCX_ERR_MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrMode {
    /// UCX reports a failed peer through the endpoint's error callback.
    /// UCX 1.13's shared-memory transports cannot, so this mode moves all
    /// traffic to network transports (tcp, verbs).
    Peer,
    /// Failed peers are noticed by catena's own checks (process liveness on
    /// this host, the bootstrap across hosts).
    None,
}

impl ErrMode {
    /// The user's choice, else `Peer` unless UCX may use shared memory.
    pub(crate) fn from_env(has_shared_memory: bool) -> Result<ErrMode> {
        match std::env::var(ENV_UCX_ERR_MODE).as_deref().map(str::trim) {
            Err(_) | Ok("" | "auto") if has_shared_memory => Ok(ErrMode::None),
            Err(_) | Ok("" | "auto" | "peer") => Ok(ErrMode::Peer),
            Ok("none") => Ok(ErrMode::None),
            Ok(v) => Err(Error::Bootstrap(format!(
                "{ENV_UCX_ERR_MODE}={v:?}: want auto, peer or none"
            ))),
        }
    }

    fn raw(self) -> sys::ucp_err_handling_mode_t {
        match self {
            ErrMode::Peer => sys::UCP_ERR_HANDLING_MODE_PEER,
            ErrMode::None => sys::UCP_ERR_HANDLING_MODE_NONE,
        }
    }
}

/// What the error callback of one endpoint records. Shared (with the cached
/// rkeys) so that its address, given to UCX, stays put; written possibly by
/// the progress thread.
struct Failure {
    rank: Rank,
    /// `UCS_OK` until the endpoint failed (and was closed).
    status: AtomicI32,
    /// The first rank that failed in this process (a cheap "any?").
    first: Arc<AtomicU32>,
}

impl Failure {
    /// Whether the endpoint failed, and so was closed by `ep_failed`.
    fn closed(&self) -> bool {
        self.status.load(Ordering::Acquire) != 0
    }
}

struct Endpoint {
    handle: sys::ucp_ep_h,
    failure: Arc<Failure>,
    /// What the endpoint's lanes can do.
    lanes: Lanes,
    /// The failure was seen by a `progress` that drained every message the
    /// peer had sent, so waits may now report it.
    reported: Cell<bool>,
}

impl Endpoint {
    fn closed(&self) -> bool {
        self.failure.closed()
    }
}

/// An unpacked rkey with everything an operation through it needs, so that
/// the hot path makes one lookup.
struct CachedRkey {
    route: Route,
    failure: Arc<Failure>,
    /// The key it was unpacked from: a different key with the same window id
    /// is refused rather than served with a stale rkey.
    key: Box<[u8]>,
    last_use: Cell<u64>,
}

pub(crate) struct Endpoints {
    err_mode: ErrMode,
    eps: RefCell<FxHashMap<Rank, Endpoint>>,
    rkeys: RefCell<FxHashMap<(Rank, u32), CachedRkey>>,
    uses: Cell<u64>,
    first_failed: Arc<AtomicU32>,
}

/// The endpoint and rkey an operation on one target window needs.
#[derive(Clone, Copy)]
pub(crate) struct Route {
    pub ep: sys::ucp_ep_h,
    pub rkey: sys::ucp_rkey_h,
    pub lanes: Lanes,
}

/// What an endpoint's lanes can do, as far as catena's signals care.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Lanes {
    /// UCX emulates atomics to this peer in software (active messages the
    /// target answers, e.g. over tcp).
    pub software_atomics: bool,
    /// Active messages and puts share one lane, so they arrive in the order
    /// they were issued (UCX 1.13's fence does not order lanes over tcp).
    pub one_lane: bool,
}

impl Lanes {
    /// Reads the lane table of `ucp_ep_print_info` (UCP has no query for
    /// it): `lane[0]: 0:tcp/lo.0 md[0] -> md[0]/tcp/sysdev[255] rma_bw#0 am`.
    fn parse(text: &str) -> Lanes {
        let mut atomics = false;
        let mut carriers = Vec::new();
        for line in text.lines() {
            let Some((_, rest)) = line.split_once("lane[") else {
                continue;
            };
            let Some((index, rest)) = rest.split_once(']') else {
                continue;
            };
            let uses: Vec<&str> = rest
                .split_once("->")
                .map_or("", |(_, uses)| uses)
                .split_whitespace()
                .collect();
            atomics |= uses.iter().any(|u| u.starts_with("amo#"));
            let carries = uses
                .iter()
                .any(|u| *u == "am" || u.starts_with("rma#") || u.starts_with("rma_bw#"));
            if carries && !carriers.contains(&index) {
                carriers.push(index);
            }
        }
        Lanes {
            software_atomics: !atomics,
            // A table this parser cannot read claims no order: the data is
            // then waited for, slower but never overtaken.
            one_lane: carriers.len() == 1,
        }
    }

    fn of(ep: sys::ucp_ep_h) -> Lanes {
        // SAFETY: `ep` is live; `file` is an open stream.
        Lanes::parse(&print_to_string(|file| unsafe {
            sys::ucp_ep_print_info(ep, file.cast())
        }))
    }
}

unsafe extern "C" fn ep_failed(arg: *mut c_void, ep: sys::ucp_ep_h, status: ucs_status_t) {
    // SAFETY: `arg` is the endpoint's boxed Failure, which lives until the
    // endpoint is closed (and UCX calls no error callback after that).
    let failure = unsafe { &*arg.cast::<Failure>() };
    // UCX 1.13 aborts the process when it answers a software atomic (tcp)
    // over a failed endpoint, so close it at once: requests that arrive from
    // the dead peer later find no endpoint and are dropped. Its own
    // requests complete with an error; nobody waits for the close.
    drop(start_close(ep, true));
    failure.status.store(i32::from(status.0), Ordering::Release);
    let _ =
        failure
            .first
            .compare_exchange(NO_RANK, failure.rank, Ordering::AcqRel, Ordering::Acquire);
}

impl Endpoints {
    pub(crate) fn new(err_mode: ErrMode) -> Endpoints {
        Endpoints {
            err_mode,
            eps: RefCell::new(FxHashMap::default()),
            rkeys: RefCell::new(FxHashMap::default()),
            uses: Cell::new(0),
            first_failed: Arc::new(AtomicU32::new(NO_RANK)),
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.eps.borrow().len()
    }

    pub(crate) fn rkey_count(&self) -> usize {
        self.rkeys.borrow().len()
    }

    /// `PeerGone` if UCX reported `rank`'s endpoint failed: it is closed,
    /// so nothing may be posted on it.
    pub(crate) fn usable(&self, rank: Rank) -> Result<()> {
        match self.eps.borrow().get(&rank) {
            Some(ep) if ep.closed() => Err(Error::PeerGone { rank }),
            _ => Ok(()),
        }
    }

    /// `PeerGone` if `rank`'s endpoint failed and a later `confirm_failures`
    /// saw it: a message the peer sent before it went is not lost to a wait
    /// that looks at the failure before the message was drained.
    pub(crate) fn check_reported(&self, rank: Rank) -> Result<()> {
        match self.eps.borrow().get(&rank) {
            Some(ep) if ep.reported.get() => Err(Error::PeerGone { rank }),
            _ => Ok(()),
        }
    }

    /// Marks failed endpoints reportable; called after draining messages.
    pub(crate) fn confirm_failures(&self) {
        if self.first_failed.load(Ordering::Acquire) == NO_RANK {
            return;
        }
        for ep in self.eps.borrow().values() {
            if ep.closed() {
                ep.reported.set(true);
            }
        }
    }

    /// The endpoint to `target`, created on first use from its published
    /// worker `address`.
    pub(crate) fn endpoint(
        &self,
        worker: &Worker,
        target: Rank,
        address: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<sys::ucp_ep_h> {
        if let Some(ep) = self.eps.borrow().get(&target) {
            return Ok(ep.handle);
        }
        let address = address()?;
        let failure = Arc::new(Failure {
            rank: target,
            status: AtomicI32::new(0),
            first: self.first_failed.clone(),
        });
        let params = sys::ucp_ep_params_t {
            field_mask: u64::from(
                sys::UCP_EP_PARAM_FIELD_REMOTE_ADDRESS
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE
                    | sys::UCP_EP_PARAM_FIELD_ERR_HANDLER,
            ),
            address: address.as_ptr().cast(),
            err_mode: self.err_mode.raw(),
            err_handler: sys::ucp_err_handler_t {
                cb: Some(ep_failed),
                arg: Arc::as_ptr(&failure).cast_mut().cast(),
            },
            ..Default::default()
        };
        let mut handle = ptr::null_mut();
        // SAFETY: the worker is live, `address` is a peer's worker address and
        // outlives the call; `failure` outlives the endpoint (dropped after
        // its close).
        let status = unsafe { sys::ucp_ep_create(worker.handle(), &params, &mut handle) };
        if status != ucs_status_t::UCS_OK {
            return Err(Error::Unavailable(Box::new(crate::Unavailable {
                requested: "ucx".into(),
                why: format!(
                    "ucp_ep_create to rank {target} failed: {} ({}, error handling {:?}; \
                     RMA and 64-bit atomics need a transport that reaches the peer)",
                    status_text(status),
                    configured_tls(),
                    self.err_mode,
                ),
                available: worker.context().transports().join(", "),
            })));
        }
        let endpoint = Endpoint {
            handle,
            failure,
            lanes: Lanes::of(handle),
            reported: Cell::new(false),
        };
        self.eps.borrow_mut().insert(target, endpoint);
        Ok(handle)
    }

    /// The endpoint and unpacked rkey for `key`'s window of `target`;
    /// `PeerGone` once that endpoint failed.
    pub(crate) fn route(
        &self,
        worker: &Worker,
        target: Rank,
        key: &UcxKey<'_>,
        address: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Route> {
        let use_no = self.uses.get() + 1;
        self.uses.set(use_no);
        if let Some(cached) = self.rkeys.borrow().get(&(target, key.id)) {
            if cached.failure.closed() {
                return Err(Error::PeerGone { rank: target });
            }
            if *cached.key != *key.rkey {
                return Err(Error::InvalidKey(format!(
                    "rank {target}'s window {} has another rkey than this key",
                    key.id
                )));
            }
            cached.last_use.set(use_no);
            return Ok(cached.route);
        }
        self.usable(target)?;
        let ep = self.endpoint(worker, target, address)?;
        let (lanes, failure) = {
            let eps = self.eps.borrow();
            (eps[&target].lanes, eps[&target].failure.clone())
        };
        let mut handle = ptr::null_mut();
        // SAFETY: `ep` is live; the rkey bytes came from the peer's
        // ucp_rkey_pack (a forged buffer is refused by UCX's parser).
        let status = unsafe { sys::ucp_ep_rkey_unpack(ep, key.rkey.as_ptr().cast(), &mut handle) };
        if status != ucs_status_t::UCS_OK {
            return Err(Error::InvalidKey(format!(
                "ucp_ep_rkey_unpack of rank {target}'s window {}: {}",
                key.id,
                status_text(status)
            )));
        }
        let mut rkeys = self.rkeys.borrow_mut();
        if rkeys.len() >= RKEY_CACHE_CAPACITY {
            let oldest = rkeys
                .iter()
                .min_by_key(|(_, r)| r.last_use.get())
                .map(|(&k, _)| k);
            if let Some(r) = oldest.and_then(|k| rkeys.remove(&k)) {
                // SAFETY: unpacked by us; every operation that used it has
                // completed locally (puts wait, fetching atomics hold none).
                unsafe { sys::ucp_rkey_destroy(r.route.rkey) };
            }
        }
        let route = Route {
            ep,
            rkey: handle,
            lanes,
        };
        rkeys.insert(
            (target, key.id),
            CachedRkey {
                route,
                failure,
                key: key.rkey.into(),
                last_use: Cell::new(use_no),
            },
        );
        Ok(route)
    }

    /// The endpoint to `target`, if one was made.
    pub(crate) fn existing(&self, target: Rank) -> Option<sys::ucp_ep_h> {
        self.eps.borrow().get(&target).map(|ep| ep.handle)
    }

    /// Closes `target`'s endpoint at once (its operations are cancelled)
    /// after an operation on it failed or hung; the peer counts as gone.
    pub(crate) fn abort(&self, worker: &Worker, target: Rank) {
        let mut rkeys = self.rkeys.borrow_mut();
        rkeys.retain(|&(rank, _), r| {
            if rank == target {
                // SAFETY: unpacked on this endpoint, destroyed once.
                unsafe { sys::ucp_rkey_destroy(r.route.rkey) };
            }
            rank != target
        });
        drop(rkeys);
        let Some(ep) = self.eps.borrow_mut().remove(&target) else {
            return;
        };
        if !ep.closed() {
            close(
                worker,
                vec![(ep, true)],
                Instant::now() + FORCE_CLOSE_TIMEOUT,
            );
        }
        // What is left is a marker: `target` is unreachable from now on.
        let failure = Arc::new(Failure {
            rank: target,
            status: AtomicI32::new(i32::from(ucs_status_t::UCS_ERR_CANCELED.0)),
            first: self.first_failed.clone(),
        });
        let _ = self.first_failed.compare_exchange(
            NO_RANK,
            target,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        let marker = Endpoint {
            handle: ptr::null_mut(),
            failure,
            lanes: Lanes::default(),
            reported: Cell::new(true),
        };
        self.eps.borrow_mut().insert(target, marker);
    }

    /// Closes every endpoint: flushing those whose peer is `alive`, forcing
    /// the rest, and all of them once `timeout` passed.
    pub(crate) fn close_all(
        &self,
        worker: &Worker,
        alive: impl Fn(Rank) -> bool,
        timeout: Duration,
    ) {
        for (_, r) in self.rkeys.borrow_mut().drain() {
            // SAFETY: unpacked by us, destroyed once, before its endpoint.
            unsafe { sys::ucp_rkey_destroy(r.route.rkey) };
        }
        let eps: Vec<(Endpoint, bool)> = self
            .eps
            .borrow_mut()
            .drain()
            .filter(|(_, ep)| !ep.closed())
            .map(|(rank, ep)| (ep, !alive(rank)))
            .collect();
        let deadline = Instant::now() + timeout;
        close(worker, eps, deadline);
        settle(worker, deadline);
    }
}

/// How long a forced close may take (it cancels; it waits for nobody).
const FORCE_CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Progresses until no endpoint closed by force (here or in `ep_failed`)
/// still has transport endpoints being discarded, or `deadline` passed:
/// UCX 1.13's `ucp_worker_destroy` aborts (`ep->refcounts.create == 1` in
/// `ucp_ep_delete`) on such an endpoint, because it deletes it a second
/// time. A worker flush completes only once every discard has.
fn settle(worker: &Worker, deadline: Instant) {
    let param = sys::ucp_request_param_t::default();
    // SAFETY: the worker is live; the request is freed when dropped.
    let flush = posted("ucp_worker_flush_nbx", unsafe {
        sys::ucp_worker_flush_nbx(worker.handle(), &param)
    });
    if let Ok(Some(request)) = flush {
        while request.status().is_none() && Instant::now() < deadline {
            worker.progress_once();
        }
    }
}

/// Closes `eps` (`force` for those whose peer is gone) and progresses until
/// all closed or `deadline` passed. Endpoints still closing then (a flushing
/// close waits on a peer that may never answer) are left to
/// `ucp_worker_destroy`, which releases them.
fn close(worker: &Worker, eps: Vec<(Endpoint, bool)>, deadline: Instant) {
    let mut pending = Vec::new();
    for (ep, force) in eps {
        if let Some(request) = start_close(ep.handle, force) {
            pending.push((ep, request));
        }
    }
    while !pending.is_empty() {
        worker.progress_once();
        pending.retain(|(_, request)| request.status().is_none());
        if Instant::now() >= deadline {
            for (ep, request) in pending.drain(..) {
                drop(request);
                // UCX may still call back into it until the worker goes.
                std::mem::forget(ep.failure);
            }
        }
    }
}

/// Starts closing `ep`; returns the request to wait for, if any.
fn start_close(ep: sys::ucp_ep_h, force: bool) -> Option<Request> {
    let param = sys::ucp_request_param_t {
        op_attr_mask: sys::UCP_OP_ATTR_FIELD_FLAGS,
        flags: if force {
            sys::UCP_EP_CLOSE_FLAG_FORCE
        } else {
            0
        },
        ..Default::default()
    };
    // SAFETY: `ep` is live and closed once (the caller forgets it).
    posted("ucp_ep_close_nbx", unsafe {
        sys::ucp_ep_close_nbx(ep, &param)
    })
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lane tables as `ucp_ep_print_info` of UCX 1.13 prints them.
    #[test]
    fn lanes_are_read_from_the_endpoint_table() {
        let tcp_two_rails = "\
#                 lane[0]:  0:tcp/lo.0 md[0]   -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0
#                 lane[1]:  1:tcp/eth0.0 md[0] -> md[0]/tcp/sysdev[255] rma_bw#1 wireup
#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..8192..<rndv>..(inf)";
        let tcp_one_rail = "\
#                 lane[0]:  0:tcp/lo.0 md[0]   -> md[0]/tcp/sysdev[255] rma_bw#0 am am_bw#0 wireup";
        let shm = "\
#                 lane[0]:  1:posix/memory.0 md[1] -> md[1]/posix/sysdev[255] rma#0 amo#0 am am_bw#0
#                 lane[1]:  2:cma/memory.0 md[2]   -> md[2]/cma/sysdev[255] rma_bw#0 wireup";
        let parse = Lanes::parse;
        assert_eq!(
            parse(tcp_two_rails),
            Lanes {
                software_atomics: true,
                one_lane: false
            }
        );
        assert_eq!(
            parse(tcp_one_rail),
            Lanes {
                software_atomics: true,
                one_lane: true
            }
        );
        assert!(!parse("an unknown format").one_lane);
        assert_eq!(
            parse(shm),
            Lanes {
                software_atomics: false,
                one_lane: false
            }
        );
    }
}
