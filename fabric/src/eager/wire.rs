//! Memory layouts of eager messaging: the control window where first contact
//! is made, the per-peer connection window, and the frame header in a ring.

use crate::key::MAX_KEY_BYTES;
use crate::{ContextId, Tag};

/// Signal word bumped after a request slot was filled.
pub const REQUEST_BELL: usize = 0;
/// Offset of the first request slot in the control window.
pub const SLOTS_AT: usize = 64;
/// Request slots per control window: how many peers can be mid-contact at once.
pub const SLOT_COUNT: usize = 32;
/// Size of one request slot: state word, requester rank, key length and key.
pub const SLOT_BYTES: usize = 256;
/// Size every provider's control window must have.
pub const CONTROL_WINDOW_BYTES: usize = SLOTS_AT + SLOT_COUNT * SLOT_BYTES;

// Within a slot: the state word (0 free, 1 claimed, 2 filled), then the
// requester's rank and its connection window key.
/// Slot state: open to be claimed by compare-and-swap.
pub const SLOT_FREE: u64 = 0;
/// Slot state: claimed by a requester that is still writing its request.
pub const SLOT_CLAIMED: u64 = 1;
/// Slot state: the request is complete and waits for the owner to serve it.
pub const SLOT_FILLED: u64 = 2;
/// Offset in a slot of the requester's rank (u64).
pub const SLOT_FROM_AT: usize = 8;
/// Offset in a slot of the length of the requester's key (u64).
pub const SLOT_KEY_LEN_AT: usize = 16;
/// Offset in a slot of the requester's connection window key bytes.
pub const SLOT_KEY_AT: usize = 24;
const _: () = assert!(SLOT_KEY_AT + MAX_KEY_BYTES <= SLOT_BYTES);

/// Offset of request slot `slot` in the control window.
pub fn slot_at(slot: usize) -> usize {
    SLOTS_AT + slot * SLOT_BYTES
}

// A connection window, one per peer on each side. The peer writes our reply
// area and our ring and returns credits for the ring we write into it.
/// Counts replies to our connection request (the peer's key has landed).
pub const REPLY_SIGNAL: usize = 0;
/// Bytes of our outgoing stream the peer has consumed.
pub const CREDIT_SIGNAL: usize = 8;
/// Bytes of the peer's stream that have landed in our ring.
pub const RING_SIGNAL: usize = 16;
/// Offset of the length of the peer's connection window key (u64).
pub const REPLY_KEY_LEN_AT: usize = 64;
/// Offset of the peer's connection window key bytes.
pub const REPLY_KEY_AT: usize = 72;
/// Offset of the ring the peer writes its stream into.
pub const RING_AT: usize = 512;
const _: () = assert!(REPLY_KEY_AT + MAX_KEY_BYTES <= RING_AT);

/// Size of a connection window whose ring holds `ring_bytes`.
pub fn connection_window_bytes(ring_bytes: usize) -> usize {
    RING_AT + ring_bytes
}

/// A message in the stream: this header, then `len` payload bytes.
pub const FRAME_HEADER_BYTES: usize = 24;

/// The frame header of a `len`-byte payload (little-endian length, context,
/// tag, and four zero bytes that keep frames 8-byte aligned); the inverse
/// of [`decode_header`].
pub fn encode_header(len: usize, context: ContextId, tag: Tag) -> [u8; FRAME_HEADER_BYTES] {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    h[0..8].copy_from_slice(&(len as u64).to_le_bytes());
    h[8..16].copy_from_slice(&context.to_le_bytes());
    h[16..20].copy_from_slice(&tag.to_le_bytes());
    h
}

/// (payload length, context, tag). The length is the peer's word, kept as
/// sent: it may not fit in memory, or even in a `usize`.
pub fn decode_header(h: &[u8; FRAME_HEADER_BYTES]) -> (u64, ContextId, Tag) {
    let len = u64::from_le_bytes(h[0..8].try_into().unwrap());
    let context = ContextId::from_le_bytes(h[8..16].try_into().unwrap());
    let tag = Tag::from_le_bytes(h[16..20].try_into().unwrap());
    (len, context, tag)
}

/// Splits `len` bytes at stream position `pos` of a ring into at most two
/// (ring offset, length) pieces, wrapping at the end; `None` if they do not
/// fit in the ring.
pub fn ring_pieces(pos: u64, len: usize, ring_bytes: usize) -> Option<[(usize, usize); 2]> {
    if len > ring_bytes || ring_bytes == 0 {
        return None;
    }
    let start = (pos % ring_bytes as u64) as usize;
    let first = len.min(ring_bytes - start);
    Some([(start, first), (0, len - first)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = encode_header(123_456_789, u64::MAX - 7, u32::MAX);
        assert_eq!(decode_header(&h), (123_456_789, u64::MAX - 7, u32::MAX));
    }

    #[test]
    fn ring_pieces_wrap_at_the_end() {
        assert_eq!(ring_pieces(10, 5, 16), Some([(10, 5), (0, 0)]));
        assert_eq!(ring_pieces(14, 5, 16), Some([(14, 2), (0, 3)]));
        assert_eq!(ring_pieces(32, 16, 16), Some([(0, 16), (0, 0)]));
        assert_eq!(ring_pieces(u64::MAX, 16, 16), Some([(15, 1), (0, 15)]));
    }

    #[test]
    fn pieces_that_do_not_fit_the_ring_are_refused() {
        assert_eq!(ring_pieces(0, 0, 0), None);
        assert_eq!(ring_pieces(7, 1, 0), None);
        assert_eq!(ring_pieces(3, 17, 16), None);
        assert_eq!(ring_pieces(3, usize::MAX, 16), None);
    }
}
