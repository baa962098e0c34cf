//! Memory layouts of eager messaging: the control window where first contact
//! is made, the per-peer connection window, the bulk window of rendezvous
//! messages, and the frame header in a ring.

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
// area and our ring, returns credits for the ring we write into it, and
// (once it has received a rendezvous message from us) tells us the key of
// its bulk window and returns credits for it. Every word here has one
// writer, the peer, and one reader, us.
/// Counts replies to our connection request (the peer's key has landed).
pub const REPLY_SIGNAL: usize = 0;
/// Bytes of our outgoing stream the peer has consumed.
pub const CREDIT_SIGNAL: usize = 8;
/// Bytes of our outgoing bulk stream the peer has consumed.
pub const BULK_CREDIT_SIGNAL: usize = 24;
/// Counts the peer's bulk window replies (its bulk window key has landed).
pub const BULK_REPLY_SIGNAL: usize = 32;
/// Offset of the length of the peer's connection window key (u64).
pub const REPLY_KEY_LEN_AT: usize = 64;
/// Offset of the peer's connection window key bytes.
pub const REPLY_KEY_AT: usize = 72;
/// Offset of the length of the peer's bulk window key (u64).
pub const BULK_KEY_LEN_AT: usize = REPLY_KEY_AT + MAX_KEY_BYTES;
/// Offset of the size of the peer's bulk ring (u64).
pub const BULK_RING_BYTES_AT: usize = BULK_KEY_LEN_AT + 8;
/// Offset of the peer's bulk window key bytes.
pub const BULK_KEY_AT: usize = BULK_RING_BYTES_AT + 8;
/// Offset of the ring the peer writes its stream into.
pub const RING_AT: usize = 1024;
const _: () = assert!(BULK_KEY_AT + MAX_KEY_BYTES <= RING_AT);

/// Size of a connection window whose ring holds `ring_bytes`.
pub fn connection_window_bytes(ring_bytes: usize) -> usize {
    RING_AT + ring_bytes
}

// A bulk window, made by a receiver for one peer when that peer first sends
// it a rendezvous message: a second ring, for the payloads of messages too
// big for the connection's ring, which the peer writes straight into
// (pipelined with our copying out) under credit of its own.
/// Bytes of the peer's bulk stream that have landed in our bulk ring.
pub const BULK_SIGNAL: usize = 0;
/// Offset of the bulk ring in a bulk window.
pub const BULK_RING_AT: usize = 64;

/// Size of a bulk window whose ring holds `bulk_bytes`.
pub fn bulk_window_bytes(bulk_bytes: usize) -> usize {
    BULK_RING_AT + bulk_bytes
}

/// A message in the stream: this header, then `len` payload bytes (an
/// inline frame), or `len` bytes in the bulk stream instead (a rendezvous
/// frame). The header's first word is the frame's stamp, which its sender
/// sets last, by the signal of its last put: a receiver polls the frame
/// itself, and takes a small one in the same cache line that told it the
/// frame is there.
pub const FRAME_HEADER_BYTES: usize = 32;
/// Every frame starts at a multiple of this in the stream (its span is
/// padded to it), so its stamp and header share a cache line and never
/// wrap around the ring's end.
pub const FRAME_ALIGN: usize = 64;
/// Bytes of a frame's stamp, its first word: 0 until the frame has landed
/// whole, then [`stamp`] of its stream position.
pub const STAMP_BYTES: usize = 8;
/// Offset in a frame header of its length word (u64).
const LEN_AT: usize = STAMP_BYTES;
/// Offset in a frame header of its context word (u64).
const CONTEXT_AT: usize = 16;
/// Offset in a frame header of its tag word (u32).
const TAG_AT: usize = 24;
/// Offset in a frame header of its kind word (u32).
const KIND_AT: usize = 28;
/// Kind word of a frame whose payload follows it in the ring.
const INLINE: u32 = 0;
/// Kind word of a frame whose payload is the next `len` bytes of the
/// bulk stream.
const RENDEZVOUS: u32 = 1;

/// A decoded frame header. The length is the peer's word, kept as sent: it
/// may not fit in memory, or even in a `usize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Payload bytes.
    pub len: u64,
    /// The message's context.
    pub context: ContextId,
    /// The message's tag.
    pub tag: Tag,
    /// Whether the payload travels in the bulk stream (rendezvous) rather
    /// than after the header.
    pub rendezvous: bool,
}

/// The header of an inline frame of a `len`-byte payload (little-endian
/// length, context, tag, and a zero kind word); see [`decode_header`].
pub fn encode_header(len: usize, context: ContextId, tag: Tag) -> [u8; FRAME_HEADER_BYTES] {
    encode(len, context, tag, INLINE)
}

/// The header of a rendezvous frame: its `len` payload bytes follow in the
/// bulk stream.
pub fn encode_rendezvous_header(
    len: usize,
    context: ContextId,
    tag: Tag,
) -> [u8; FRAME_HEADER_BYTES] {
    encode(len, context, tag, RENDEZVOUS)
}

/// The header of an inline frame after its stamp word, which its sender
/// sets last: [`encode_header`]'s bytes from [`STAMP_BYTES`] on.
#[inline(always)]
pub fn header_after_stamp(
    len: usize,
    context: ContextId,
    tag: Tag,
) -> [u8; FRAME_HEADER_BYTES - STAMP_BYTES] {
    after_stamp(len, context, tag, INLINE)
}

fn encode(len: usize, context: ContextId, tag: Tag, kind: u32) -> [u8; FRAME_HEADER_BYTES] {
    let mut h = [0u8; FRAME_HEADER_BYTES];
    h[STAMP_BYTES..].copy_from_slice(&after_stamp(len, context, tag, kind));
    h
}

#[inline(always)]
fn after_stamp(
    len: usize,
    context: ContextId,
    tag: Tag,
    kind: u32,
) -> [u8; FRAME_HEADER_BYTES - STAMP_BYTES] {
    // The header's offsets, less the stamp word this leaves out.
    let at = |offset: usize| offset - STAMP_BYTES;
    let mut h = [0u8; FRAME_HEADER_BYTES - STAMP_BYTES];
    h[at(LEN_AT)..at(CONTEXT_AT)].copy_from_slice(&(len as u64).to_le_bytes());
    h[at(CONTEXT_AT)..at(TAG_AT)].copy_from_slice(&context.to_le_bytes());
    h[at(TAG_AT)..at(KIND_AT)].copy_from_slice(&tag.to_le_bytes());
    h[at(KIND_AT)..].copy_from_slice(&kind.to_le_bytes());
    h
}

/// The header's fields (its stamp aside); `None` if its kind word names no
/// kind of frame.
pub fn decode_header(h: &[u8; FRAME_HEADER_BYTES]) -> Option<Header> {
    let rendezvous = match u32::from_le_bytes(h[KIND_AT..].try_into().unwrap()) {
        INLINE => false,
        RENDEZVOUS => true,
        _ => return None,
    };
    Some(Header {
        len: u64::from_le_bytes(h[LEN_AT..CONTEXT_AT].try_into().unwrap()),
        context: ContextId::from_le_bytes(h[CONTEXT_AT..TAG_AT].try_into().unwrap()),
        tag: Tag::from_le_bytes(h[TAG_AT..KIND_AT].try_into().unwrap()),
        rendezvous,
    })
}

/// The stamp of the frame at stream position `pos`: never 0 (a word the
/// receiver zeroed), and different on every lap of the ring, so a stamp
/// left from an earlier lap never passes for a new frame's.
pub fn stamp(pos: u64) -> u64 {
    pos.wrapping_add(1)
}

/// The ring bytes an inline frame of `len` payload bytes takes (a
/// rendezvous frame takes `frame_span(0)`): header and payload, padded to
/// [`FRAME_ALIGN`]; `None` past `u64`.
pub fn frame_span(len: u64) -> Option<u64> {
    let align = FRAME_ALIGN as u64;
    len.checked_add(FRAME_HEADER_BYTES as u64 + align - 1)
        .map(|end| end / align * align)
}

/// The offset in a ring of `ring_bytes` (not 0) of stream position `pos`.
/// A mask where the ring is a power of two, as the default is: a 64-bit
/// division costs more than the rest of a small message's bookkeeping.
#[inline(always)]
pub fn ring_offset(pos: u64, ring_bytes: usize) -> usize {
    let ring = ring_bytes as u64;
    match ring.is_power_of_two() {
        true => (pos & (ring - 1)) as usize,
        false => (pos % ring) as usize,
    }
}

/// Splits `len` bytes at stream position `pos` of a ring into at most two
/// (ring offset, length) pieces, wrapping at the end; `None` if they do not
/// fit in the ring.
pub fn ring_pieces(pos: u64, len: usize, ring_bytes: usize) -> Option<[(usize, usize); 2]> {
    if len > ring_bytes || ring_bytes == 0 {
        return None;
    }
    let start = ring_offset(pos, ring_bytes);
    let first = len.min(ring_bytes - start);
    Some([(start, first), (0, len - first)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = encode_header(123_456_789, u64::MAX - 7, u32::MAX);
        let inline = Header {
            len: 123_456_789,
            context: u64::MAX - 7,
            tag: u32::MAX,
            rendezvous: false,
        };
        assert_eq!(decode_header(&h), Some(inline));
        let h = encode_rendezvous_header(123_456_789, u64::MAX - 7, u32::MAX);
        let rendezvous = Header {
            rendezvous: true,
            ..inline
        };
        assert_eq!(decode_header(&h), Some(rendezvous));
    }

    #[test]
    fn unknown_frame_kinds_are_refused() {
        for kind in [2u32, 0x100, u32::MAX] {
            let mut h = encode_header(1, 2, 3);
            h[KIND_AT..].copy_from_slice(&kind.to_le_bytes());
            assert_eq!(decode_header(&h), None);
        }
    }

    #[test]
    fn frames_span_whole_lines() {
        assert_eq!(frame_span(0), Some(64));
        assert_eq!(frame_span(32), Some(64));
        assert_eq!(frame_span(33), Some(128));
        assert_eq!(frame_span(u64::MAX - 95), Some(u64::MAX - 63));
        assert_eq!(frame_span(u64::MAX - 94), None);
        assert_ne!(stamp(0), stamp(64));
        assert_ne!(stamp(0), 0);
        assert_ne!(stamp(u64::MAX - 63), 0);
    }

    #[test]
    fn ring_pieces_wrap_at_the_end() {
        assert_eq!(ring_pieces(10, 5, 16), Some([(10, 5), (0, 0)]));
        assert_eq!(ring_pieces(14, 5, 16), Some([(14, 2), (0, 3)]));
        assert_eq!(ring_pieces(32, 16, 16), Some([(0, 16), (0, 0)]));
        assert_eq!(ring_pieces(u64::MAX, 16, 16), Some([(15, 1), (0, 15)]));
    }

    #[test]
    fn ring_offsets_are_the_position_modulo_the_ring() {
        let positions = [
            0,
            1,
            63,
            64,
            65_535,
            65_536,
            1 << 40,
            u64::MAX - 1,
            u64::MAX,
        ];
        for ring in [16, 64, 100, 4096, 65_536, 1 << 30, (1 << 30) - 1] {
            for pos in positions {
                assert_eq!(
                    ring_offset(pos, ring),
                    (pos % ring as u64) as usize,
                    "{pos} in {ring}"
                );
            }
        }
    }

    #[test]
    fn pieces_that_do_not_fit_the_ring_are_refused() {
        assert_eq!(ring_pieces(0, 0, 0), None);
        assert_eq!(ring_pieces(7, 1, 0), None);
        assert_eq!(ring_pieces(3, 17, 16), None);
        assert_eq!(ring_pieces(3, usize::MAX, 16), None);
    }
}
