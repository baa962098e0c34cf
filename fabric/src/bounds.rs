//! The checks of the transport contract that every provider runs before it
//! touches memory: a window's length when it is made, a byte range inside
//! the window the owner published, a signal or atomic word 8-byte aligned.

use crate::{Error, Result};

/// The largest window (1 TiB): lengths near `usize::MAX` would overflow a
/// provider's header and key arithmetic, so they are refused up front.
pub const MAX_WINDOW_BYTES: usize = 1 << 40;

/// `WindowTooLarge` unless a window of `len` bytes is allowed.
pub fn check_window_len(len: usize) -> Result<()> {
    if len > MAX_WINDOW_BYTES {
        return Err(Error::WindowTooLarge {
            len,
            max: MAX_WINDOW_BYTES,
        });
    }
    Ok(())
}

/// `OutOfBounds` unless `len` bytes at `offset` fit in `window_len` bytes
/// (an `offset + len` that overflows does not fit).
#[inline(always)]
pub fn check_bounds(offset: usize, len: usize, window_len: usize) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= window_len => Ok(()),
        _ => Err(Error::OutOfBounds {
            offset,
            len,
            window_len,
        }),
    }
}

/// `Misaligned` unless `offset` is 8-byte aligned, then as [`check_bounds`]
/// for the 8-byte word there.
#[inline(always)]
pub fn check_word(offset: usize, window_len: usize) -> Result<()> {
    if offset % 8 != 0 {
        return Err(Error::Misaligned { offset });
    }
    check_bounds(offset, 8, window_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_near_the_end_of_memory_are_refused() {
        assert!(check_bounds(0, 64, 64).is_ok());
        assert!(check_bounds(64, 0, 64).is_ok());
        assert!(matches!(
            check_bounds(1, 64, 64),
            Err(Error::OutOfBounds { .. })
        ));
        assert!(check_bounds(usize::MAX, 2, 64).is_err());
        assert!(check_bounds(2, usize::MAX, usize::MAX).is_err());
        assert!(matches!(
            check_word(4, 64),
            Err(Error::Misaligned { offset: 4 })
        ));
        assert!(check_word(56, 64).is_ok());
        assert!(check_word(64, 64).is_err());
        assert!(check_word(usize::MAX - 7, usize::MAX).is_err());
    }

    #[test]
    fn windows_past_the_limit_are_refused() {
        assert!(check_window_len(0).is_ok());
        assert!(check_window_len(MAX_WINDOW_BYTES).is_ok());
        for len in [MAX_WINDOW_BYTES + 1, usize::MAX] {
            assert!(matches!(
                check_window_len(len),
                Err(Error::WindowTooLarge { .. })
            ));
        }
    }
}
