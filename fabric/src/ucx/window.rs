//! Windows of the UCX provider: memory UCX allocates (`ucp_mem_map` with
//! `UCP_MEM_MAP_ALLOCATE`, so shared-memory transports can map it into peers)
//! and its packed rkey. Keys are `U | owner | id | len | base | packed rkey |
//! tag`, the tag sealing the rest with the owner's secret (see [`KeySecret`]).

use std::ffi::c_void;
use std::ptr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use catena_ucx_sys as sys;

use super::context::{check, Context};
use crate::bounds::{check_bounds, check_word};
use crate::key::{KeySecret, MAX_KEY_BYTES, SEAL_BYTES};
use crate::kit::{KeyHeader, RestLen, KEY_HEADER_LEN};
use crate::tombstone::size_class;
use crate::{Error, LocalWindow, Rank, RemoteKey, Result};

const KEY_TAG: u8 = b'U';
/// The base address, then a packed rkey of at least one byte.
const FIELDS: RestLen = RestLen::AtLeast(9);
/// The largest packed rkey a catena key can carry.
pub(crate) const MAX_RKEY_BYTES: usize = MAX_KEY_BYTES - KEY_HEADER_LEN - 8 - SEAL_BYTES;

/// A decoded UCX key: whose window, which one, its length and address in
/// the owner's process, and the rkey to unpack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UcxKey<'a> {
    pub owner: Rank,
    pub id: u32,
    pub len: usize,
    pub base: u64,
    pub rkey: &'a [u8],
}

impl UcxKey<'_> {
    pub(crate) fn encode(&self, secret: &KeySecret) -> Result<RemoteKey> {
        if self.rkey.len() > MAX_RKEY_BYTES {
            return Err(Error::Fabric(Box::new(crate::FabricFailure {
                library: "UCX",
                call: "ucp_rkey_pack",
                message: format!(
                    "a packed rkey of {} bytes does not fit a catena key ({MAX_RKEY_BYTES} at most)",
                    self.rkey.len()
                ),
            })));
        }
        let mut fields = Vec::with_capacity(8 + self.rkey.len());
        fields.extend_from_slice(&self.base.to_le_bytes());
        fields.extend_from_slice(self.rkey);
        let header = KeyHeader {
            owner: self.owner,
            id: self.id,
            len: self.len,
        };
        header.seal(KEY_TAG, &fields, secret)
    }

    /// Decodes a key meant for a window of `target`, whose published secret
    /// is `secret`. Another rank's key, and a key whose tag does not match
    /// (corrupted or forged), are refused before any field is trusted: in
    /// particular UCX never unpacks a forged rkey.
    pub(crate) fn decode<'k>(
        key: &'k RemoteKey,
        target: Rank,
        secret: &KeySecret,
    ) -> Result<UcxKey<'k>> {
        let (header, fields) =
            KeyHeader::open(key, KEY_TAG, FIELDS, target, secret, "a UCX window key")?;
        let base = u64::from_le_bytes(fields[..8].try_into().expect("8 bytes"));
        if base.checked_add(header.len as u64).is_none() {
            return Err(Error::InvalidKey(format!(
                "window of {} bytes at {base:#x} wraps around",
                header.len
            )));
        }
        Ok(UcxKey {
            owner: header.owner,
            id: header.id,
            len: header.len,
            base,
            rkey: &fields[8..],
        })
    }
}

/// A window this process exposes.
pub struct UcxWindow {
    id: u32,
    memh: sys::ucp_mem_h,
    base: *mut u8,
    len: usize,
    /// The size class mapped (see [`crate::tombstone::size_class`]).
    class: usize,
    key: RemoteKey,
    // Declared last: the context outlives the mapping.
    context: Rc<Context>,
}

impl UcxWindow {
    pub(crate) fn create(
        context: &Rc<Context>,
        owner: Rank,
        secret: &KeySecret,
        id: u32,
        len: usize,
    ) -> Result<UcxWindow> {
        let class = size_class(len).ok_or_else(|| {
            Error::Fabric(Box::new(crate::FabricFailure {
                library: "UCX",
                call: "ucp_mem_map",
                message: format!("no mapping holds {len} bytes"),
            }))
        })?;
        let (memh, base) = match context.reuse(class) {
            Some(grave) => (grave.memh, grave.base),
            None => map(context, class)?,
        };
        // From here on, `window`'s Drop buries the mapping on every error
        // path.
        let mut window = UcxWindow {
            id,
            memh,
            base,
            len,
            class,
            key: RemoteKey::from_bytes(&[KEY_TAG])?,
            context: context.clone(),
        };
        // The allocator UCX picks (shared memory, mmap, heap) is not known
        // here, and only some of them hand out zeroed pages; a reused
        // mapping's partial pages may hold what stale writes left.
        // SAFETY: UCX allocated at least `class` bytes at `base` for us.
        unsafe { ptr::write_bytes(window.base, 0, len) };
        let rkey = pack_rkey(context, memh)?;
        window.key = UcxKey {
            owner,
            id,
            len,
            base: window.base as u64,
            rkey: &rkey,
        }
        .encode(secret)?;
        context
            .signal_targets()
            .insert(id, window.base, len, &window.key);
        Ok(window)
    }

    fn check(&self, offset: usize, len: usize) -> Result<*mut u8> {
        check_bounds(offset, len, self.len)?;
        // SAFETY: in bounds of the mapping, checked above.
        Ok(unsafe { self.base.add(offset) })
    }

    fn word(&self, offset: usize) -> Result<&AtomicU64> {
        check_word(offset, self.len)?;
        // SAFETY: aligned (the base is page-aligned, offset checked) and in
        // bounds; peers change it only with atomics.
        Ok(unsafe { AtomicU64::from_ptr(self.base.add(offset).cast()) })
    }
}

/// A new mapping of `class` bytes that UCX allocates: its handle and base.
fn map(context: &Context, class: usize) -> Result<(sys::ucp_mem_h, *mut u8)> {
    let params = sys::ucp_mem_map_params_t {
        field_mask: u64::from(
            sys::UCP_MEM_MAP_PARAM_FIELD_ADDRESS
                | sys::UCP_MEM_MAP_PARAM_FIELD_LENGTH
                | sys::UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        ),
        address: ptr::null_mut(),
        length: class,
        flags: sys::UCP_MEM_MAP_ALLOCATE,
        ..Default::default()
    };
    let mut memh = ptr::null_mut();
    // SAFETY: the context is live; `memh` is written on success.
    check("ucp_mem_map", unsafe {
        sys::ucp_mem_map(context.handle(), &params, &mut memh)
    })?;
    let mut attr = sys::ucp_mem_attr_t {
        field_mask: u64::from(sys::UCP_MEM_ATTR_FIELD_ADDRESS | sys::UCP_MEM_ATTR_FIELD_LENGTH),
        ..Default::default()
    };
    // SAFETY: `memh` was just mapped.
    let queried = check("ucp_mem_query", unsafe {
        sys::ucp_mem_query(memh, &mut attr)
    });
    let refused = match queried {
        Err(e) => Some(e),
        Ok(()) if attr.address.is_null() || attr.length < class => {
            Some(Error::Fabric(Box::new(crate::FabricFailure {
                library: "UCX",
                call: "ucp_mem_map",
                message: format!(
                    "asked for {class} bytes, got {} at {:?}",
                    attr.length, attr.address
                ),
            })))
        }
        Ok(()) => None,
    };
    if let Some(e) = refused {
        // SAFETY: mapped above, unmapped once; nothing else has it.
        unsafe { sys::ucp_mem_unmap(context.handle(), memh) };
        return Err(e);
    }
    Ok((memh, attr.address.cast()))
}

/// The packed rkey of `memh`, as bytes.
fn pack_rkey(context: &Context, memh: sys::ucp_mem_h) -> Result<Vec<u8>> {
    let mut buffer: *mut c_void = ptr::null_mut();
    let mut size = 0usize;
    // SAFETY: `memh` is mapped in this context; UCP allocates `buffer`.
    check("ucp_rkey_pack", unsafe {
        sys::ucp_rkey_pack(context.handle(), memh, &mut buffer, &mut size)
    })?;
    // SAFETY: UCP packed `size` bytes at `buffer`, released right after.
    let bytes = unsafe { std::slice::from_raw_parts(buffer.cast::<u8>(), size) }.to_vec();
    // SAFETY: the buffer came from ucp_rkey_pack.
    unsafe { sys::ucp_rkey_buffer_release(buffer) };
    Ok(bytes)
}

impl LocalWindow for UcxWindow {
    fn key(&self) -> RemoteKey {
        self.key.clone()
    }

    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()> {
        let src = self.check(offset, buf.len())?;
        // SAFETY: `src..src+len` is inside the mapping; `buf` is private memory.
        unsafe { ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn read_append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        let src = self.check(offset, len)?;
        buf.reserve(len);
        let spare = &mut buf.spare_capacity_mut()[..len];
        // SAFETY: `src..src+len` is inside the mapping, `spare` is `len`
        // bytes of `buf`'s capacity, set as its length once written.
        unsafe {
            ptr::copy_nonoverlapping(src, spare.as_mut_ptr().cast::<u8>(), len);
            buf.set_len(buf.len() + len);
        }
        Ok(())
    }

    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        let dst = self.check(offset, data.len())?;
        // SAFETY: as in `read`.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn signal(&self, offset: usize) -> Result<u64> {
        Ok(self.word(offset)?.load(Ordering::Acquire))
    }

    fn set_signal(&self, offset: usize, value: u64) -> Result<()> {
        self.word(offset)?.store(value, Ordering::Release);
        Ok(())
    }
}

impl Drop for UcxWindow {
    fn drop(&mut self) {
        self.context.signal_targets().remove(self.id);
        // SAFETY: UCX allocated at least `class` bytes at `base` for this
        // window in `memh`, which nobody uses any more.
        unsafe { self.context.bury(self.memh, self.base, self.class) };
    }
}
