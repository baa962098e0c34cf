//! Provider selection: the `fi_getinfo` hints catena needs (reliable datagram
//! endpoints with RMA, atomics and ordered writes) and the choice among what
//! libfabric offers, by `CATENA_OFI_PROVIDER` or a default that fits the job.

use std::ffi::{CStr, CString};
use std::ptr;

use catena_ofi_sys as sys;

use super::errors::strerror;
use crate::config::ENV_OFI_PROVIDER;
use crate::job::Job;
use crate::{owned_name, Error, Result};

/// The API version catena is written against.
pub(crate) const API_VERSION: u32 = sys::FI_VERSION(1, 17);

const CAPS: u64 = (sys::FI_RMA
    | sys::FI_ATOMIC
    | sys::FI_READ
    | sys::FI_WRITE
    | sys::FI_REMOTE_READ
    | sys::FI_REMOTE_WRITE) as u64;
/// Every memory-registration duty catena can fulfil (see `window.rs`); never
/// the legacy FI_MR_BASIC/FI_MR_SCALABLE modes.
const MR_MODES: u32 = sys::FI_MR_LOCAL
    | sys::FI_MR_VIRT_ADDR
    | sys::FI_MR_PROV_KEY
    | sys::FI_MR_ENDPOINT
    | sys::FI_MR_ALLOCATED;
/// Ordering the transport contract rests on: a write's remote CQ data comes
/// after the data of earlier writes (WAW), and a read after writes sees them
/// (RAW, which `flush` uses). Providers older than the RMA-specific bits
/// express the same with the generic ones, so those are tried second.
const ORDERS: [(u64, &str); 2] = [
    (
        sys::FI_ORDER_RMA_WAW | sys::FI_ORDER_RMA_RAW,
        "FI_ORDER_RMA_WAW|FI_ORDER_RMA_RAW",
    ),
    (
        (sys::FI_ORDER_WAW | sys::FI_ORDER_RAW) as u64,
        "FI_ORDER_WAW|FI_ORDER_RAW",
    ),
];

/// What to ask `fi_getinfo` for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    /// A provider name; `None` takes the first one that qualifies.
    pub(crate) provider: Option<String>,
    /// All ranks run on this machine: IP providers bind to loopback.
    pub(crate) single_node: bool,
    /// Another thread (a progress thread) will call into the endpoint.
    pub(crate) thread_safe: bool,
}

impl Request {
    /// The request for `job`: `CATENA_OFI_PROVIDER` if set, else `shm` for a
    /// job on one machine, else whatever libfabric lists first.
    pub(crate) fn for_job(job: &Job, thread_safe: bool) -> Request {
        let single_node = job.single_node();
        let provider = match std::env::var(ENV_OFI_PROVIDER) {
            Ok(p) if !p.trim().is_empty() => Some(p.trim().to_string()),
            _ if single_node => Some("shm".to_string()),
            _ => None,
        };
        Request {
            provider,
            single_node,
            thread_safe,
        }
    }
}

/// One `fi_info` chosen by [`select`], owned (freed on drop).
pub(crate) struct Info {
    raw: *mut sys::fi_info,
}

impl Info {
    pub(crate) fn as_ptr(&self) -> *mut sys::fi_info {
        self.raw
    }

    fn get(&self) -> &sys::fi_info {
        // SAFETY: `raw` is a valid fi_info from fi_dupinfo, owned by self.
        unsafe { &*self.raw }
    }

    fn domain_attr(&self) -> &sys::fi_domain_attr {
        // SAFETY: fi_getinfo always fills domain_attr.
        unsafe { &*self.get().domain_attr }
    }

    fn tx_attr(&self) -> &sys::fi_tx_attr {
        // SAFETY: fi_getinfo always fills tx_attr.
        unsafe { &*self.get().tx_attr }
    }

    /// The provider's name, e.g. `tcp;ofi_rxm`.
    pub(crate) fn provider(&self) -> String {
        // SAFETY: fabric_attr and its prov_name are filled by fi_getinfo.
        unsafe { cstr_or_empty((*self.get().fabric_attr).prov_name) }
    }

    /// The memory-registration duties the provider imposes (`FI_MR_*` bits).
    pub(crate) fn mr_mode(&self) -> u32 {
        self.domain_attr().mr_mode as u32
    }

    pub(crate) fn has_mr_mode(&self, bit: u32) -> bool {
        self.mr_mode() & bit != 0
    }

    /// Bytes of an application-chosen memory key.
    pub(crate) fn mr_key_size(&self) -> usize {
        self.domain_attr().mr_key_size
    }

    /// Bytes of remote CQ data a write can carry.
    pub(crate) fn cq_data_size(&self) -> usize {
        self.domain_attr().cq_data_size
    }

    /// Largest write the provider buffers at once (`fi_inject_write`).
    pub(crate) fn inject_size(&self) -> usize {
        self.tx_attr().inject_size
    }

    /// Largest single transfer.
    pub(crate) fn max_msg_size(&self) -> usize {
        // SAFETY: fi_getinfo always fills ep_attr.
        unsafe { (*self.get().ep_attr).max_msg_size }
    }
}

impl Drop for Info {
    fn drop(&mut self) {
        // SAFETY: `raw` came from fi_dupinfo and is freed once, here.
        unsafe { sys::fi_freeinfo(self.raw) };
    }
}

/// # Safety
/// `p` is null or a NUL-terminated string.
unsafe fn cstr_or_empty(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: per the contract above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// A list returned by fi_getinfo, freed on drop.
struct InfoList(*mut sys::fi_info);

impl InfoList {
    fn iter(&self) -> impl Iterator<Item = &sys::fi_info> {
        // SAFETY: every `next` of a fi_getinfo list is null or a valid entry
        // that lives as long as the list.
        std::iter::successors(unsafe { self.0.as_ref() }, |i| unsafe { i.next.as_ref() })
    }
}

impl Drop for InfoList {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the list came from fi_getinfo and is freed once.
            unsafe { sys::fi_freeinfo(self.0) };
        }
    }
}

/// Hints owned by us (`fi_allocinfo`); `fi_freeinfo` frees the strings we
/// put in them, so those are `strdup`ed.
struct Hints(*mut sys::fi_info);

impl Hints {
    fn new(request: &Request, order: u64, provider: Option<&str>) -> Result<Hints> {
        // SAFETY: fi_allocinfo returns a zeroed fi_info with every attr
        // allocated, or null.
        let raw = unsafe { sys::fi_allocinfo() };
        if raw.is_null() {
            return Err(Error::Fabric(Box::new(crate::FabricFailure {
                library: "libfabric",
                call: "fi_allocinfo",
                message: "out of memory".into(),
            })));
        }
        let hints = Hints(raw);
        // SAFETY: all attrs are allocated by fi_allocinfo; strings handed to
        // the struct are malloc'ed (strdup) because fi_freeinfo frees them.
        unsafe {
            let h = &mut *raw;
            h.caps = CAPS;
            h.mode = 0;
            (*h.ep_attr).type_ = sys::fi_ep_type_FI_EP_RDM;
            (*h.domain_attr).mr_mode = MR_MODES as i32;
            (*h.domain_attr).threading = if request.thread_safe {
                sys::fi_threading_FI_THREAD_SAFE
            } else {
                sys::fi_threading_FI_THREAD_DOMAIN
            };
            (*h.tx_attr).msg_order = order;
            if let Some(name) = provider {
                let name = CString::new(name).map_err(|_| {
                    Error::Unavailable(Box::new(crate::Unavailable {
                        requested: name.escape_default().to_string(),
                        why: "the name contains a NUL byte".into(),
                        available: String::new(),
                    }))
                })?;
                (*h.fabric_attr).prov_name = libc::strdup(name.as_ptr());
            }
        }
        Ok(hints)
    }

    /// `fi_getinfo` for an endpoint bound to `source` (FI_SOURCE) if given.
    fn getinfo(&self, source: Option<&CStr>) -> std::result::Result<InfoList, i32> {
        let (node, flags) = match source {
            Some(node) => (node.as_ptr(), sys::FI_SOURCE),
            None => (ptr::null(), 0),
        };
        let mut list = ptr::null_mut();
        // SAFETY: hints is a valid fi_info; `list` receives an owned list.
        let ret =
            unsafe { sys::fi_getinfo(API_VERSION, node, ptr::null(), flags, self.0, &mut list) };
        if ret == 0 && !list.is_null() {
            Ok(InfoList(list))
        } else {
            Err(if ret == 0 {
                sys::FI_ENODATA as i32
            } else {
                -ret
            })
        }
    }
}

impl Drop for Hints {
    fn drop(&mut self) {
        // SAFETY: allocated by fi_allocinfo, freed once.
        unsafe { sys::fi_freeinfo(self.0) };
    }
}

/// The node the endpoint binds to. On one machine an IP provider binds to
/// loopback: the default interface may not exist in containers and is
/// slower (FI_TCP_IFACE set by the user wins).
///
/// The shm provider takes the node as its region's name in /dev/shm. By
/// default that is the pid, which anyone can predict: a file planted under
/// it (libfabric opens an existing region, and maps it) crashes the rank
/// with SIGBUS, and a region a killed rank left makes `fi_enable` fail in a
/// later process with its pid. So the node is an [`owned_name`]: 128 random
/// bits, and its owner's stamp, by which any later rank on ofi/shm first
/// removes the regions of dead processes.
fn source_node(request: &Request) -> Result<Option<CString>> {
    let Some(provider) = request.provider.as_deref() else {
        return Ok(None);
    };
    if provider == "shm" {
        owned_name::remove_dead();
        let name = owned_name::fresh()?;
        return Ok(Some(CString::new(name).expect("an owned name has no NUL")));
    }
    let loopback =
        request.single_node && is_ip(provider) && std::env::var_os("FI_TCP_IFACE").is_none();
    Ok(loopback.then(|| c"127.0.0.1".to_owned()))
}

/// Whether a provider name names an IP-based provider.
fn is_ip(provider: &str) -> bool {
    ["tcp", "udp", "sockets", "net"]
        .iter()
        .any(|p| provider.split(';').any(|part| part == *p))
}

/// Asks libfabric for an endpoint that fits `request`. A named provider that
/// cannot give one is `Error::Unavailable`, listing the providers that can.
pub(crate) fn select(request: &Request) -> Result<Info> {
    let source = source_node(request)?;
    let mut last = sys::FI_ENODATA as i32;
    for (order, _) in ORDERS {
        let hints = Hints::new(request, order, request.provider.as_deref())?;
        match hints.getinfo(source.as_deref()) {
            Ok(list) => {
                let first = list.0;
                // SAFETY: `first` is the valid head of `list`; the copy is ours.
                let raw = unsafe { sys::fi_dupinfo(first) };
                if raw.is_null() {
                    return Err(Error::Fabric(Box::new(crate::FabricFailure {
                        library: "libfabric",
                        call: "fi_dupinfo",
                        message: "out of memory".into(),
                    })));
                }
                return Ok(Info { raw });
            }
            Err(code) => last = code,
        }
    }
    let requested = request
        .provider
        .clone()
        .unwrap_or_else(|| "any libfabric provider".into());
    let wanted = ORDERS.map(|(_, name)| name).join(" or ");
    Err(Error::Unavailable(Box::new(crate::Unavailable {
        requested,
        why: format!(
            "fi_getinfo found no FI_EP_RDM endpoint with FI_RMA|FI_ATOMIC and {wanted}: {}",
            strerror(last)
        ),
        available: available(request).unwrap_or_else(|e| format!("(listing failed: {e})")),
    })))
}

/// The providers that qualify on this machine, by name, in libfabric's order.
pub(crate) fn available(request: &Request) -> Result<String> {
    let mut names: Vec<String> = Vec::new();
    for (order, _) in ORDERS {
        let hints = Hints::new(request, order, None)?;
        let Ok(list) = hints.getinfo(None) else {
            continue;
        };
        for info in list.iter() {
            // SAFETY: entries of a fi_getinfo list have fabric_attr filled.
            let name = unsafe { cstr_or_empty((*info.fabric_attr).prov_name) };
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    Ok(if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    })
}
