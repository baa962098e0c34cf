//! The libfabric objects of one process: fabric, domain, completion queue,
//! address vector and the one RDM endpoint, opened from a selected [`Info`]
//! and closed in reverse order; plus memory registrations ([`Mr`]).

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;

use catena_ofi_sys as sys;

use super::errors::{check, fabric_error};
use super::info::Info;
use super::progress::{self, ProgressMode, ProgressThread};
use crate::{Error, Result};

/// `FI_ADDR_UNSPEC` (a macro bindgen cannot see).
pub(crate) const ADDR_UNSPEC: sys::fi_addr_t = u64::MAX;

/// What one `fi_cq_read` produced.
pub(crate) enum CqEvent {
    /// This many entries were written to the buffer.
    Entries(usize),
    Empty,
    /// An operation failed: its context and the provider's explanation.
    Failed {
        context: *mut c_void,
        message: String,
    },
}

/// The fabric objects; `ep` is null once [`Domain::close_endpoint`] ran.
pub(crate) struct Domain {
    info: Info,
    fabric: *mut sys::fid_fabric,
    domain: *mut sys::fid_domain,
    cq: *mut sys::fid_cq,
    av: *mut sys::fid_av,
    ep: Cell<*mut sys::fid_ep>,
    progress: Cell<Option<ProgressThread>>,
    /// Application-chosen keys (providers without FI_MR_PROV_KEY).
    next_key: Cell<u64>,
}

impl Domain {
    /// Opens everything `info` describes and enables the endpoint; with a
    /// progress `mode` other than `Off`, `info` must be FI_THREAD_SAFE.
    pub(crate) fn open(info: Info, mode: ProgressMode) -> Result<Domain> {
        let mut d = Domain {
            info,
            fabric: ptr::null_mut(),
            domain: ptr::null_mut(),
            cq: ptr::null_mut(),
            av: ptr::null_mut(),
            ep: Cell::new(ptr::null_mut()),
            progress: Cell::new(None),
            next_key: Cell::new(1),
        };
        let info = d.info.as_ptr();
        // SAFETY: `info` is a valid fi_info; every out-pointer is a field of
        // `d`, whose Drop closes what was opened if a later step fails.
        unsafe {
            check(
                "fi_fabric",
                sys::fi_fabric((*info).fabric_attr, &mut d.fabric, ptr::null_mut()),
            )?;
            check(
                "fi_domain",
                sys::fi_domain(d.fabric, info, &mut d.domain, ptr::null_mut()),
            )?;
            let mut cq_attr = sys::fi_cq_attr {
                format: sys::fi_cq_format_FI_CQ_FORMAT_DATA,
                wait_obj: sys::fi_wait_obj_FI_WAIT_NONE,
                ..Default::default()
            };
            check(
                "fi_cq_open",
                sys::fi_cq_open(d.domain, &mut cq_attr, &mut d.cq, ptr::null_mut()),
            )?;
            let mut av_attr = sys::fi_av_attr {
                type_: match (*(*info).domain_attr).av_type {
                    sys::fi_av_type_FI_AV_UNSPEC => sys::fi_av_type_FI_AV_TABLE,
                    t => t,
                },
                ..Default::default()
            };
            check(
                "fi_av_open",
                sys::fi_av_open(d.domain, &mut av_attr, &mut d.av, ptr::null_mut()),
            )?;
            let mut ep = ptr::null_mut();
            check(
                "fi_endpoint",
                sys::fi_endpoint(d.domain, info, &mut ep, ptr::null_mut()),
            )?;
            d.ep.set(ep);
            check("fi_ep_bind", sys::fi_ep_bind(ep, &mut (*d.av).fid, 0))?;
            check(
                "fi_ep_bind",
                sys::fi_ep_bind(
                    ep,
                    &mut (*d.cq).fid,
                    (sys::FI_TRANSMIT | sys::FI_RECV) as u64,
                ),
            )?;
            check("fi_enable", sys::fi_enable(ep))?;
        }
        d.progress.set(progress::start(d.cq, mode)?);
        Ok(d)
    }

    pub(crate) fn info(&self) -> &Info {
        &self.info
    }

    /// The endpoint, unless it was closed after a failure.
    pub(crate) fn ep(&self) -> Result<*mut sys::fid_ep> {
        let ep = self.ep.get();
        if ep.is_null() {
            return Err(Error::Fabric(Box::new(crate::FabricFailure {
                library: "libfabric",
                call: "fi_endpoint",
                message: "the endpoint was closed: an operation on caller memory could not \
                          complete (a peer died or stopped making progress)"
                    .into(),
            })));
        }
        Ok(ep)
    }

    /// This endpoint's address, as peers insert it into their AV.
    pub(crate) fn name(&self) -> Result<Vec<u8>> {
        let ep = self.ep()?;
        let mut buf = vec![0u8; 256];
        loop {
            let mut len = buf.len();
            // SAFETY: `buf` has `len` writable bytes; `ep` is open.
            let ret = unsafe { sys::fi_getname(&mut (*ep).fid, buf.as_mut_ptr().cast(), &mut len) };
            if ret == -(sys::FI_ETOOSMALL as i32) && len > buf.len() {
                buf.resize(len, 0);
                continue;
            }
            check("fi_getname", ret)?;
            buf.truncate(len);
            return Ok(buf);
        }
    }

    /// Inserts a peer's address (from [`Domain::name`]) into the AV.
    pub(crate) fn insert(&self, address: &[u8]) -> Result<sys::fi_addr_t> {
        let mut out = ADDR_UNSPEC;
        // SAFETY: `address` is one address of the provider's format; `out`
        // receives its handle.
        let ret = unsafe {
            sys::fi_av_insert(
                self.av,
                address.as_ptr().cast(),
                1,
                &mut out,
                0,
                ptr::null_mut(),
            )
        };
        if ret != 1 || out == ADDR_UNSPEC {
            return Err(if ret < 0 {
                fabric_error("fi_av_insert", ret as isize)
            } else {
                Error::Fabric(Box::new(crate::FabricFailure {
                    library: "libfabric",
                    call: "fi_av_insert",
                    message: "the peer's address was not accepted".into(),
                }))
            });
        }
        Ok(out)
    }

    /// Registers `len` bytes at `base` for `access` (`FI_READ`, `FI_WRITE`,
    /// `FI_REMOTE_*`), bound to the endpoint where FI_MR_ENDPOINT asks for it.
    ///
    /// # Safety
    /// The memory must stay valid until the returned [`Mr`] is dropped, and
    /// the [`Mr`] must be dropped before this domain.
    pub(crate) unsafe fn register(&self, base: *const u8, len: usize, access: u64) -> Result<Mr> {
        let key = if self.info.has_mr_mode(sys::FI_MR_PROV_KEY) {
            0
        } else {
            let key = self.next_key.get();
            let bits = 8 * self.info.mr_key_size().min(8);
            if bits < 64 && key >> bits != 0 {
                return Err(Error::Fabric(Box::new(crate::FabricFailure {
                    library: "libfabric",
                    call: "fi_mr_reg",
                    message: format!(
                        "application memory keys exhausted ({} bytes per key)",
                        self.info.mr_key_size()
                    ),
                })));
            }
            self.next_key.set(key + 1);
            key
        };
        let mut raw = ptr::null_mut();
        // SAFETY: per this function's contract; `raw` receives the MR.
        check("fi_mr_reg", unsafe {
            sys::fi_mr_reg(
                self.domain,
                base.cast(),
                len.max(1),
                access,
                0,
                key,
                0,
                &mut raw,
                ptr::null_mut(),
            )
        })?;
        let mr = Mr { raw };
        if self.info.has_mr_mode(sys::FI_MR_ENDPOINT) {
            let ep = self.ep()?;
            // SAFETY: `mr` and `ep` are open objects of this domain.
            unsafe {
                check("fi_mr_bind", sys::fi_mr_bind(raw, &mut (*ep).fid, 0))?;
                check("fi_mr_enable", sys::fi_mr_enable(raw))?;
            }
        }
        Ok(mr)
    }

    /// Reads up to `buf.len()` completions (zero drives progress only).
    pub(crate) fn read_cq(&self, buf: &mut [sys::fi_cq_data_entry]) -> Result<CqEvent> {
        // SAFETY: `buf` holds `len` entries of the CQ's format (FI_CQ_FORMAT_DATA).
        let ret = unsafe { sys::fi_cq_read(self.cq, buf.as_mut_ptr().cast(), buf.len()) };
        if ret >= 0 {
            return Ok(CqEvent::Entries(ret as usize));
        }
        if ret == -(sys::FI_EAGAIN as isize) {
            return Ok(CqEvent::Empty);
        }
        if ret != -(sys::FI_EAVAIL as isize) {
            return Err(fabric_error("fi_cq_read", ret));
        }
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: `err` is a zeroed entry; with err_data_size 0 the provider
        // keeps ownership of err_data.
        let ret = unsafe { sys::fi_cq_readerr(self.cq, &mut err, 0) };
        if ret == -(sys::FI_EAGAIN as isize) {
            return Ok(CqEvent::Empty);
        }
        if ret < 0 {
            return Err(fabric_error("fi_cq_readerr", ret));
        }
        let mut text = [0 as std::os::raw::c_char; 256];
        // SAFETY: `text` has the given length; err_data belongs to this entry.
        let detail = unsafe {
            let p = sys::fi_cq_strerror(
                self.cq,
                err.prov_errno,
                err.err_data,
                text.as_mut_ptr(),
                text.len(),
            );
            if p.is_null() {
                String::new()
            } else {
                std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Ok(CqEvent::Failed {
            context: err.op_context,
            message: format!(
                "{} ({}); provider: {detail} ({})",
                super::errors::strerror(err.err),
                err.err,
                err.prov_errno
            ),
        })
    }

    /// Closes the endpoint, which cancels every operation in flight, so that
    /// the provider no longer touches memory an abandoned operation named.
    /// Every later operation fails.
    pub(crate) fn close_endpoint(&self) {
        drop(self.progress.take());
        let ep = self.ep.replace(ptr::null_mut());
        if !ep.is_null() {
            // SAFETY: `ep` is open and closed once (the cell now holds null).
            unsafe { sys::fi_close(&mut (*ep).fid) };
        }
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        self.close_endpoint();
        // SAFETY: each object is closed once, after everything bound to it
        // (owners drop their MRs before the domain, see `register`).
        unsafe {
            if !self.av.is_null() {
                sys::fi_close(&mut (*self.av).fid);
            }
            if !self.cq.is_null() {
                sys::fi_close(&mut (*self.cq).fid);
            }
            if !self.domain.is_null() {
                sys::fi_close(&mut (*self.domain).fid);
            }
            if !self.fabric.is_null() {
                sys::fi_close(&mut (*self.fabric).fid);
            }
        }
    }
}

/// A memory registration, closed on drop (before its domain).
pub(crate) struct Mr {
    raw: *mut sys::fid_mr,
}

impl Mr {
    /// The key peers name this region by.
    pub(crate) fn key(&self) -> u64 {
        // SAFETY: `raw` is an open MR.
        unsafe { sys::fi_mr_key(self.raw) }
    }

    /// The local descriptor FI_MR_LOCAL providers want with a buffer.
    pub(crate) fn desc(&self) -> *mut c_void {
        // SAFETY: `raw` is an open MR.
        unsafe { sys::fi_mr_desc(self.raw) }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: opened by fi_mr_reg, closed once.
        unsafe { sys::fi_close(&mut (*self.raw).fid) };
    }
}
