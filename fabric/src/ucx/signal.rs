//! Signals as UCP active messages, for peers UCX reaches without hardware
//! atomics (tcp). UCX emulates such an atomic with a message the target
//! answers, and UCX 1.13 aborts a target whose answer finds the origin dead;
//! a catena signal message needs no answer, so a killed rank costs its peers
//! a `PeerGone`, not their lives, and a signal costs one message, not a trip.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use catena_ucx_sys as sys;
use rustc_hash::FxHashMap;
use sys::ucs_status_t;

use super::context::check;
use crate::bounds::{check_bounds, check_word};
use crate::key::SEAL_BYTES;
use crate::{RemoteKey, Result, Signal};

/// The UCP active message id of a signal.
pub(crate) const SIGNAL_AM_ID: u32 = 0x5c;

/// Largest data a signal message carries along; larger data is put (and
/// waited for) first. UCX's tcp sends up to 8 KiB in one eager fragment.
pub(crate) const MAX_CARRIED_DATA: usize = 8 * 1024 - HEADER_BYTES;

/// The header of a signal message: window id, data offset, signal word
/// offset, addend, then the tag of the window's key, which the sender can
/// only have from the key itself. The data to write follows it.
const HEADER_BYTES: usize = 4 + 8 + 8 + 8 + SEAL_BYTES;

/// A put + signal to window `window` of the target: `data` (if any) written
/// at `data_offset`, then `add` added to the word at `signal_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SignalMessage<'d> {
    pub window: u32,
    pub data_offset: u64,
    pub data: &'d [u8],
    pub signal_offset: u64,
    pub add: u64,
    pub tag: [u8; SEAL_BYTES],
}

impl<'d> SignalMessage<'d> {
    /// A put + signal through `key` (already checked by the caller).
    pub(crate) fn new(
        window: u32,
        key: &RemoteKey,
        data_offset: usize,
        data: &'d [u8],
        signal: Signal,
    ) -> SignalMessage<'d> {
        SignalMessage {
            window,
            data_offset: data_offset as u64,
            data,
            signal_offset: signal.offset as u64,
            add: signal.add,
            tag: key_tag(key),
        }
    }

    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(HEADER_BYTES + self.data.len());
        bytes.extend_from_slice(&self.window.to_le_bytes());
        bytes.extend_from_slice(&self.data_offset.to_le_bytes());
        bytes.extend_from_slice(&self.signal_offset.to_le_bytes());
        bytes.extend_from_slice(&self.add.to_le_bytes());
        bytes.extend_from_slice(&self.tag);
        bytes.extend_from_slice(self.data);
        bytes
    }

    fn decode(bytes: &'d [u8]) -> Option<SignalMessage<'d>> {
        let (window, rest) = bytes.split_first_chunk::<4>()?;
        let (data_offset, rest) = rest.split_first_chunk::<8>()?;
        let (signal_offset, rest) = rest.split_first_chunk::<8>()?;
        let (add, rest) = rest.split_first_chunk::<8>()?;
        let (tag, data) = rest.split_first_chunk::<SEAL_BYTES>()?;
        Some(SignalMessage {
            window: u32::from_le_bytes(*window),
            data_offset: u64::from_le_bytes(*data_offset),
            data,
            signal_offset: u64::from_le_bytes(*signal_offset),
            add: u64::from_le_bytes(*add),
            tag: *tag,
        })
    }
}

/// The last bytes of a sealed key: its tag.
fn key_tag(key: &RemoteKey) -> [u8; SEAL_BYTES] {
    let bytes = key.as_bytes();
    let mut tag = [0u8; SEAL_BYTES];
    let start = bytes.len().saturating_sub(SEAL_BYTES);
    tag[..bytes.len() - start].copy_from_slice(&bytes[start..]);
    tag
}

/// A live window a signal may land in.
struct Target {
    base: usize,
    len: usize,
    tag: [u8; SEAL_BYTES],
}

/// This process's live windows by id, for the signal handler, which may run
/// on the progress thread. A signal for a window that is gone, a word out of
/// its bounds, or a tag that is not its key's is dropped (counted): it
/// writes nothing.
#[derive(Default)]
pub(crate) struct SignalTargets {
    windows: Mutex<FxHashMap<u32, Target>>,
    refused: AtomicU64,
}

impl SignalTargets {
    /// Makes window `id` (`len` bytes at `base`, key `key`) a signal target.
    pub(crate) fn insert(&self, id: u32, base: *mut u8, len: usize, key: &RemoteKey) {
        let target = Target {
            base: base as usize,
            len,
            tag: key_tag(key),
        };
        self.lock().insert(id, target);
    }

    /// Window `id` takes no more signals (it is about to be freed).
    pub(crate) fn remove(&self, id: u32) {
        self.lock().remove(&id);
    }

    /// Signals dropped so far.
    #[cfg(test)]
    fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, FxHashMap<u32, Target>> {
        // A panic elsewhere cannot leave the map half-changed.
        self.windows.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a received message (data, then signal), or drops it whole.
    fn deliver(&self, bytes: &[u8]) {
        let windows = self.lock();
        let checked = SignalMessage::decode(bytes).and_then(|message| {
            let target = windows.get(&message.window)?;
            let data_offset = usize::try_from(message.data_offset).ok()?;
            let signal_offset = usize::try_from(message.signal_offset).ok()?;
            check_bounds(data_offset, message.data.len(), target.len).ok()?;
            check_word(signal_offset, target.len).ok()?;
            (target.tag == message.tag).then_some((target, data_offset, signal_offset, message))
        });
        let Some((target, data_offset, signal_offset, message)) = checked else {
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let base = target.base as *mut u8;
        // SAFETY: both ranges are in bounds (the word aligned) of a live
        // window: its entry is removed, under this lock, before the window
        // is freed. Peers change the word only atomically; the release of
        // the add publishes the data to a reader that acquires the word.
        unsafe {
            std::ptr::copy_nonoverlapping(
                message.data.as_ptr(),
                base.add(data_offset),
                message.data.len(),
            );
            AtomicU64::from_ptr(base.add(signal_offset).cast())
                .fetch_add(message.add, Ordering::AcqRel);
        }
    }
}

unsafe extern "C" fn signal_arrived(
    arg: *mut c_void,
    _header: *const c_void,
    _header_length: usize,
    data: *mut c_void,
    length: usize,
    _param: *const sys::ucp_am_recv_param_t,
) -> ucs_status_t {
    // SAFETY: `arg` is the worker's context's SignalTargets (which outlive
    // the worker); UCP hands over `length` bytes at `data` for this call.
    let (targets, bytes) = unsafe {
        (
            &*arg.cast::<SignalTargets>(),
            std::slice::from_raw_parts(data.cast::<u8>(), length),
        )
    };
    targets.deliver(bytes);
    ucs_status_t::UCS_OK
}

/// Registers the signal handler on `worker`, delivering into `targets`.
///
/// # Safety
/// `worker` must be live, and `targets` must outlive it.
pub(crate) unsafe fn register(
    worker: sys::ucp_worker_h,
    targets: &Arc<SignalTargets>,
) -> Result<()> {
    let param = sys::ucp_am_handler_param_t {
        field_mask: u64::from(
            sys::UCP_AM_HANDLER_PARAM_FIELD_ID
                | sys::UCP_AM_HANDLER_PARAM_FIELD_FLAGS
                | sys::UCP_AM_HANDLER_PARAM_FIELD_CB
                | sys::UCP_AM_HANDLER_PARAM_FIELD_ARG,
        ),
        id: SIGNAL_AM_ID,
        flags: sys::UCP_AM_FLAG_WHOLE_MSG,
        cb: Some(signal_arrived),
        arg: Arc::as_ptr(targets).cast_mut().cast(),
    };
    // SAFETY: per this function's contract.
    check("ucp_worker_set_am_recv_handler", unsafe {
        sys::ucp_worker_set_am_recv_handler(worker, &param)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key_with_tag(tag: u8) -> RemoteKey {
        let mut bytes = vec![b'U'; 30];
        bytes.extend_from_slice(&[tag; SEAL_BYTES]);
        RemoteKey::from_bytes(&bytes).unwrap()
    }

    fn signal(offset: usize, add: u64) -> Signal {
        Signal { offset, add }
    }

    #[test]
    fn messages_round_trip_and_truncation_is_refused() {
        let message = SignalMessage::new(7, &key_with_tag(3), 2, b"abc", signal(16, 5));
        let bytes = message.encode();
        assert_eq!(SignalMessage::decode(&bytes), Some(message));
        assert_eq!(SignalMessage::decode(&bytes[..HEADER_BYTES - 1]), None);
        let empty = SignalMessage::decode(&bytes[..HEADER_BYTES]).unwrap();
        assert_eq!(empty.data, b"");
    }

    #[test]
    fn only_a_live_window_with_its_own_tag_takes_a_message() {
        let mut words = [0u64; 4];
        let targets = SignalTargets::default();
        let key = key_with_tag(3);
        targets.insert(1, words.as_mut_ptr().cast(), 32, &key);
        let deliver = |window, offset, data: &[u8], signal, key: &RemoteKey| {
            targets.deliver(&SignalMessage::new(window, key, offset, data, signal).encode())
        };
        deliver(1, 0, &[9; 8], signal(8, 5), &key);
        deliver(1, 0, &[], signal(8, 2), &key);
        // Forged tag, unknown window, word out of bounds or misaligned,
        // data out of bounds or wrapping, truncated: nothing is written.
        deliver(1, 16, &[1; 8], signal(8, 100), &key_with_tag(4));
        deliver(2, 16, &[1; 8], signal(8, 100), &key);
        deliver(1, 16, &[1; 8], signal(32, 100), &key);
        deliver(1, 16, &[1; 8], signal(usize::MAX - 7, 100), &key);
        deliver(1, 16, &[1; 8], signal(4, 100), &key);
        deliver(1, 16, &[1; 17], signal(8, 100), &key);
        deliver(1, usize::MAX - 3, &[1; 8], signal(8, 100), &key);
        targets.deliver(&[1, 0, 0, 0]);
        targets.remove(1);
        deliver(1, 16, &[1; 8], signal(0, 100), &key);
        assert_eq!(words, [u64::from_ne_bytes([9; 8]), 7, 0, 0]);
        assert_eq!(targets.refused(), 9);
    }
}
