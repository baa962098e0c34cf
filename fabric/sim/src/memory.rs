//! The bytes of a simulated window or host region, in pages made on their
//! first write (a page never written reads as zeros): the simulator holds
//! what the algorithms wrote, not the sizes they asked for, as a real
//! process's untouched window or arena pages cost it nothing. So a million
//! ranks' team regions, each tens of KiB of which a call touches a few,
//! fit in one machine.

/// Bytes a page holds.
const PAGE: usize = 4096;

/// `len` bytes, zero until written, in pages of [`PAGE`] bytes. Callers
/// check their offsets against [`Memory::len`] first.
#[derive(Default)]
pub(crate) struct Memory {
    len: usize,
    pages: Vec<Option<Box<[u8; PAGE]>>>,
}

impl Memory {
    /// `len` zero bytes; `None` where this process cannot hold even the
    /// page table (8 bytes a page).
    pub(crate) fn zeroed(len: usize) -> Option<Memory> {
        let count = len.div_ceil(PAGE);
        let mut pages = Vec::new();
        pages.try_reserve_exact(count).ok()?;
        pages.resize_with(count, || None);
        Some(Memory { len, pages })
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The pieces of `offset..offset + len`: (page, offset in it, length).
    fn pieces(offset: usize, len: usize) -> impl Iterator<Item = (usize, usize, usize)> {
        let end = offset + len;
        let mut at = offset;
        std::iter::from_fn(move || {
            (at < end).then(|| {
                let (page, within) = (at / PAGE, at % PAGE);
                let take = (PAGE - within).min(end - at);
                at += take;
                (page, within, take)
            })
        })
    }

    /// Copies the bytes at `offset` into `buf`.
    pub(crate) fn read(&self, offset: usize, buf: &mut [u8]) {
        let mut done = 0;
        for (page, within, take) in Self::pieces(offset, buf.len()) {
            let out = &mut buf[done..done + take];
            match &self.pages[page] {
                Some(bytes) => out.copy_from_slice(&bytes[within..within + take]),
                None => out.fill(0),
            }
            done += take;
        }
    }

    /// Appends the `len` bytes at `offset` to `buf`.
    pub(crate) fn append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) {
        let old = buf.len();
        buf.resize(old + len, 0);
        self.read(offset, &mut buf[old..]);
    }

    /// Writes `data` at `offset`, making the pages it lands in.
    pub(crate) fn write(&mut self, offset: usize, data: &[u8]) {
        let mut done = 0;
        for (page, within, take) in Self::pieces(offset, data.len()) {
            let bytes = self.pages[page].get_or_insert_with(|| Box::new([0; PAGE]));
            bytes[within..within + take].copy_from_slice(&data[done..done + take]);
            done += take;
        }
    }

    /// The little-endian word at `offset`.
    pub(crate) fn word(&self, offset: usize) -> u64 {
        let mut bytes = [0u8; 8];
        self.read(offset, &mut bytes);
        u64::from_le_bytes(bytes)
    }

    /// Sets the little-endian word at `offset`.
    pub(crate) fn set_word(&mut self, offset: usize, value: u64) {
        self.write(offset, &value.to_le_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a plain array: writes and reads across page bounds, and
    /// pages never written read as zeros.
    #[test]
    fn reads_what_was_written_and_zeros_elsewhere() {
        let len = 5 * PAGE + 123;
        let mut memory = Memory::zeroed(len).unwrap();
        let mut plain = vec![0u8; len];
        let writes = [
            (0, 10),
            (PAGE - 3, 7),
            (2 * PAGE + 5, PAGE + 100),
            (len - 9, 9),
        ];
        for (i, &(at, n)) in writes.iter().enumerate() {
            let data: Vec<u8> = (0..n).map(|b| (b * 7 + i) as u8 | 1).collect();
            memory.write(at, &data);
            plain[at..at + n].copy_from_slice(&data);
        }
        memory.set_word(PAGE - 4, 0x0102_0304_0506_0708);
        plain[PAGE - 4..PAGE + 4].copy_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        let mut all = vec![0xAAu8; len];
        memory.read(0, &mut all);
        assert_eq!(all, plain);
        assert_eq!(memory.word(PAGE - 4), 0x0102_0304_0506_0708);
        assert!(
            memory.pages[4].is_none(),
            "a page never written is not made"
        );
        let mut tail = vec![7u8];
        memory.append(3 * PAGE, PAGE + 50, &mut tail);
        assert_eq!(tail[1..], plain[3 * PAGE..4 * PAGE + 50]);
    }
}
