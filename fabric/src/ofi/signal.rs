//! Signals carried as remote CQ data: a `put_signal` is one `fi_writedata`
//! whose 64-bit immediate names (window id, signal word, addend); the target
//! applies the add when it reads its CQ. Signals that do not fit take the
//! slower path in `mod.rs` (flush, then a fabric atomic).

const ID_BITS: u32 = 16;
const WORD_BITS: u32 = 24;
const ADD_BITS: u32 = 24;
const _: () = assert!(ID_BITS + WORD_BITS + ADD_BITS == 64);

/// The immediate for adding `add` to the u64 at byte `offset` (8-aligned,
/// checked by the caller) of window `id`, if the three fit.
pub(crate) fn encode(id: u32, offset: usize, add: u64) -> Option<u64> {
    let word = (offset / 8) as u64;
    let id = u64::from(id);
    (id >> ID_BITS == 0 && word >> WORD_BITS == 0 && add >> ADD_BITS == 0)
        .then_some(id << (WORD_BITS + ADD_BITS) | word << ADD_BITS | add)
}

/// (window id, byte offset of the word, addend).
pub(crate) fn decode(data: u64) -> (u32, usize, u64) {
    let id = (data >> (WORD_BITS + ADD_BITS)) as u32;
    let word = (data >> ADD_BITS) & ((1 << WORD_BITS) - 1);
    (id, word as usize * 8, data & ((1 << ADD_BITS) - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_what_does_not_fit() {
        let d = encode(65_535, 8 * ((1 << 24) - 1), (1 << 24) - 1).unwrap();
        assert_eq!(decode(d), (65_535, 8 * ((1 << 24) - 1), (1 << 24) - 1));
        assert_eq!(decode(encode(3, 16, 1).unwrap()), (3, 16, 1));
        assert_eq!(encode(1 << 16, 0, 1), None);
        assert_eq!(encode(0, 8 << 24, 1), None);
        assert_eq!(encode(0, 0, 1 << 24), None);
    }
}
