//! A sorted set of world ranks as zstd-compressed blocks of gaps, after Taheri,
//! "Scalability of Communicators in MPI" §4.3.2 (bzip2 on the whole array
//! there): the smallest general representation, at a block decode a lookup.

use std::cell::RefCell;
use std::sync::{Mutex, TryLockError};

use zstd::zstd_safe::{self, CCtx, CParameter, DCtx};

use super::SortedSet;
use crate::stats::Stats;

/// Members per block: what one lookup decodes. 4096 compresses better, but
/// for 250,000 of 2^20 ranks 1024 is smaller once the cache is counted
/// (118.6 kB against 124.4 kB) and a random lookup is 3x faster (2.2 µs).
const BLOCK: usize = 1024;
/// zstd level: blocks are small, so even this builds 1M members in ~0.2 s;
/// 22 gave the same bytes, 9 a tenth more.
const LEVEL: i32 = 19;
/// Longest LEB128 encoding of a `u32`.
const MAX_VARINT: usize = 5;
/// Most varint bytes one block can need (its first member is kept apart).
const MAX_BLOCK_BYTES: usize = (BLOCK - 1) * MAX_VARINT;
/// `Cache::block` when nothing is cached.
const NO_BLOCK: usize = usize::MAX;
/// How every frame we write starts: zstd's magic number, then a frame header
/// descriptor of 0 (no content size, checksum or dictionary id, so not single
/// segment either). Blocks are stored without it, 5 bytes saved a block.
const FRAME_PREFIX: [u8; 5] = [0x28, 0xb5, 0x2f, 0xfd, 0x00];

pub(crate) struct Compressed {
    len: u32,
    /// First member of each block, for `rank` to binary search.
    firsts: Vec<u32>,
    /// Where each block's bytes start in `data`; the next block's start (or
    /// the end of `data`) ends it.
    offsets: Vec<u32>,
    /// The blocks' zstd frames, or plain varint gaps where zstd did not
    /// shrink them.
    data: Vec<u8>,
    /// Bit `b` set: block `b` is stored plain. Empty when no block is.
    plain: Vec<u64>,
    /// The last decoded block, so sequential lookups decode each block once.
    cache: Mutex<Cache>,
}

struct Cache {
    block: usize,
    members: Vec<u32>,
}

/// Per-thread decompression state. A zstd decompression context is ~100 KiB
/// and costly to set up, too much to create per lookup or to keep per set, so
/// each thread keeps one for all sets.
struct Scratch {
    dctx: Option<DCtx<'static>>,
    /// The stored block with `FRAME_PREFIX` put back.
    frame: Vec<u8>,
    /// The decompressed varint gaps.
    bytes: Vec<u8>,
}

impl Scratch {
    const fn new() -> Scratch {
        Scratch {
            dctx: None,
            frame: Vec::new(),
            bytes: Vec::new(),
        }
    }

    /// Decompresses a stored block and appends the members it encodes after
    /// `first` to `out`, checking that there are `count - 1` of them.
    fn inflate(&mut self, stored: &[u8], first: u32, count: usize, out: &mut Vec<u32>) -> bool {
        let dctx = match &mut self.dctx {
            Some(dctx) => dctx,
            None => match DCtx::try_create() {
                Some(dctx) => self.dctx.insert(dctx),
                None => return false,
            },
        };
        self.frame.clear();
        self.frame.extend_from_slice(&FRAME_PREFIX);
        self.frame.extend_from_slice(stored);
        // zstd writes at most the capacity; a block of ours never needs more.
        self.bytes.clear();
        self.bytes.reserve(MAX_BLOCK_BYTES);
        dctx.decompress(&mut self.bytes, &self.frame).is_ok()
            && push_gaps(&self.bytes, first, count, out)
    }
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = const { RefCell::new(Scratch::new()) };
}

/// Decompresses a stored block as `Scratch::inflate`, with this thread's context
/// where it can be had (a fresh one while the thread is being torn down).
fn inflate(stored: &[u8], first: u32, count: usize, out: &mut Vec<u32>) -> bool {
    let done = SCRATCH
        .try_with(|cell| {
            cell.try_borrow_mut()
                .ok()
                .map(|mut s| s.inflate(stored, first, count, out))
        })
        .ok()
        .flatten();
    match done {
        Some(ok) => ok,
        None => Scratch::new().inflate(stored, first, count, out),
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends the members whose gaps `bytes` holds, starting after `first`;
/// true when that makes `out` hold exactly `count` members and no varint is
/// left open. Wrapping arithmetic: garbage in must not panic.
fn push_gaps(bytes: &[u8], first: u32, count: usize, out: &mut Vec<u32>) -> bool {
    let mut prev = first;
    let (mut gap, mut shift) = (0u32, 0u32);
    for &byte in bytes {
        gap |= u32::from(byte & 0x7f).wrapping_shl(shift);
        if byte & 0x80 != 0 {
            shift += 7;
            continue;
        }
        prev = prev.wrapping_add(gap).wrapping_add(1);
        out.push(prev);
        (gap, shift) = (0, 0);
    }
    shift == 0 && out.len() == count
}

/// The block `gaps` compresses to, without `FRAME_PREFIX`, if that is
/// shorter than `gaps`.
fn squeeze<'f>(cctx: &mut CCtx<'_>, gaps: &[u8], frame: &'f mut Vec<u8>) -> Option<&'f [u8]> {
    frame.clear();
    cctx.compress2(frame, gaps).ok()?;
    frame
        .strip_prefix(&FRAME_PREFIX[..])
        .filter(|stored| stored.len() < gaps.len())
}

/// A context set up for our frames, or `None` if zstd cannot give one (then
/// every block is stored plain).
fn compressor() -> Option<CCtx<'static>> {
    let mut cctx = CCtx::try_create()?;
    // We know each block's length and trust our own bytes: no content size,
    // checksum or dictionary id in the frame headers.
    for param in [
        CParameter::CompressionLevel(LEVEL),
        CParameter::ContentSizeFlag(false),
        CParameter::ChecksumFlag(false),
        CParameter::DictIdFlag(false),
    ] {
        cctx.set_parameter(param).ok()?;
    }
    Some(cctx)
}

impl Compressed {
    fn blocks(&self) -> usize {
        self.firsts.len()
    }

    fn block_len(&self, b: usize) -> usize {
        (self.len as usize - b * BLOCK).min(BLOCK)
    }

    fn is_plain(&self, b: usize) -> bool {
        self.plain
            .get(b / 64)
            .is_some_and(|word| word >> (b % 64) & 1 == 1)
    }

    /// Replaces `out` with the members of block `b`.
    fn decode(&self, b: usize, out: &mut Vec<u32>) {
        let start = self.offsets[b] as usize;
        let end = self
            .offsets
            .get(b + 1)
            .map_or(self.data.len(), |&o| o as usize);
        let (bytes, first, count) = (&self.data[start..end], self.firsts[b], self.block_len(b));
        out.clear();
        out.push(first);
        let ok = if self.is_plain(b) {
            push_gaps(bytes, first, count, out)
        } else {
            inflate(bytes, first, count, out)
        };
        // `build` decoded every stored frame once and compared it with what it
        // encoded, and decoding is deterministic, so this fails only when zstd
        // cannot allocate its context or memory has been corrupted. Answering
        // with a wrong member would be worse than stopping.
        if !ok {
            corrupt(b);
        }
    }

    /// Runs `f` on the members of block `b`, decoded into the cache, or into
    /// a buffer of our own while another thread holds the cache.
    fn with_block<R>(&self, b: usize, f: impl FnOnce(&[u32]) -> R) -> R {
        let mut cache = match self.cache.try_lock() {
            Ok(cache) => cache,
            // A panic elsewhere while the lock was held cannot have left a
            // half-decoded block behind as valid: `block` is only set after
            // a decode completes.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                let mut local = Vec::with_capacity(self.block_len(b));
                self.decode(b, &mut local);
                return f(&local);
            }
        };
        if cache.block != b {
            cache.block = NO_BLOCK;
            self.decode(b, &mut cache.members);
            cache.block = b;
        }
        f(&cache.members)
    }
}

/// A clone starts with an empty cache of the same capacity, so it holds the
/// same heap bytes.
impl Clone for Compressed {
    fn clone(&self) -> Self {
        let cache = Cache {
            block: NO_BLOCK,
            members: Vec::with_capacity((self.len as usize).min(BLOCK)),
        };
        Compressed {
            len: self.len,
            firsts: self.firsts.clone(),
            offsets: self.offsets.clone(),
            data: self.data.clone(),
            plain: self.plain.clone(),
            cache: Mutex::new(cache),
        }
    }
}

/// The shape, not the bytes, and no lock taken.
impl std::fmt::Debug for Compressed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressed")
            .field("len", &self.len)
            .field("blocks", &self.blocks())
            .field("bytes", &self.data.len())
            .field(
                "plain_blocks",
                &(0..self.blocks()).filter(|&b| self.is_plain(b)).count(),
            )
            .finish_non_exhaustive()
    }
}

#[cold]
#[inline(never)]
fn corrupt(b: usize) -> ! {
    panic!("compressed set: block {b} no longer decodes (out of memory or corrupted)")
}

impl SortedSet for Compressed {
    fn build(members: &[u32], _stats: &Stats) -> Option<Self> {
        let len = u32::try_from(members.len()).ok()?;
        let blocks = members.len().div_ceil(BLOCK);
        let mut firsts = Vec::with_capacity(blocks);
        let mut offsets = Vec::with_capacity(blocks);
        let mut data = Vec::new();
        let mut plain = vec![0u64; blocks.div_ceil(64)];
        let mut cctx = compressor();
        let mut gaps = Vec::with_capacity(MAX_BLOCK_BYTES);
        let mut frame = Vec::with_capacity(zstd_safe::compress_bound(MAX_BLOCK_BYTES));
        let mut check = Vec::with_capacity(BLOCK);
        for (b, block) in members.chunks(BLOCK).enumerate() {
            firsts.push(block[0]);
            // Offsets are `u32`: past 4 GiB of blocks (a world near 2^32 ranks
            // with no structure zstd finds) this representation declines.
            offsets.push(u32::try_from(data.len()).ok()?);
            gaps.clear();
            for pair in block.windows(2) {
                put_varint(&mut gaps, pair[1].wrapping_sub(pair[0]).wrapping_sub(1));
            }
            // Keep a compressed block only once it has decoded back to the
            // members, through the very path lookups take.
            let stored = cctx
                .as_mut()
                .and_then(|cctx| squeeze(cctx, &gaps, &mut frame))
                .filter(|stored| {
                    check.clear();
                    check.push(block[0]);
                    inflate(stored, block[0], block.len(), &mut check) && check == block
                });
            if let Some(stored) = stored {
                data.extend_from_slice(stored);
            } else {
                data.extend_from_slice(&gaps);
                plain[b / 64] |= 1 << (b % 64);
            }
        }
        data.shrink_to_fit();
        if plain.iter().all(|&word| word == 0) {
            plain = Vec::new();
        }
        let cache = Cache {
            block: NO_BLOCK,
            members: Vec::with_capacity(members.len().min(BLOCK)),
        };
        Some(Compressed {
            len,
            firsts,
            offsets,
            data,
            plain,
            cache: Mutex::new(cache),
        })
    }

    fn estimate_heap_bytes(_stats: &Stats) -> Option<usize> {
        None
    }

    fn len(&self) -> u32 {
        self.len
    }

    fn select(&self, i: u32) -> u32 {
        let (b, k) = (i as usize / BLOCK, i as usize % BLOCK);
        if k == 0 {
            return self.firsts[b];
        }
        self.with_block(b, |members| members[k])
    }

    fn rank(&self, w: u32) -> Option<u32> {
        let b = self
            .firsts
            .partition_point(|&first| first <= w)
            .checked_sub(1)?;
        let base = (b * BLOCK) as u32;
        if self.firsts[b] == w {
            return Some(base);
        }
        let k = self.with_block(b, |members| members.binary_search(&w).ok())?;
        Some(base + k as u32)
    }

    /// The per-thread decompression state is shared by all sets and not
    /// counted here.
    fn heap_bytes(&self) -> usize {
        let cached = match self.cache.lock() {
            Ok(cache) => cache.members.capacity(),
            Err(poisoned) => poisoned.into_inner().members.capacity(),
        };
        (self.firsts.capacity() + self.offsets.capacity() + cached) * size_of::<u32>()
            + self.data.capacity()
            + self.plain.capacity() * size_of::<u64>()
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u32> + '_> {
        Box::new(Iter {
            set: self,
            next_block: 0,
            members: Vec::new(),
            pos: 0,
        })
    }
}

/// Decodes each block once, into a buffer of its own, leaving the cache to
/// point lookups.
struct Iter<'a> {
    set: &'a Compressed,
    next_block: usize,
    members: Vec<u32>,
    pos: usize,
}

impl Iterator for Iter<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if self.pos == self.members.len() {
            if self.next_block == self.set.blocks() {
                return None;
            }
            self.set.decode(self.next_block, &mut self.members);
            self.next_block += 1;
            self.pos = 0;
        }
        let member = self.members[self.pos];
        self.pos += 1;
        Some(member)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let done = (self.next_block * BLOCK).min(self.set.len as usize);
        let left = self.set.len as usize - done + (self.members.len() - self.pos);
        (left, Some(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn build(members: &[u32], world: u32) -> Compressed {
        Compressed::build(members, &Stats::of(members, world)).expect("every valid set builds")
    }

    /// splitmix64: a seeded source for random sets and probes.
    fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// `n` distinct ranks below `world`, sorted.
    fn random_set(n: usize, world: u32, seed: u64) -> Vec<u32> {
        let mut state = seed;
        let mut taken = vec![false; world as usize];
        let mut left = n;
        while left > 0 {
            let w = (next(&mut state) % u64::from(world)) as usize;
            if !taken[w] {
                taken[w] = true;
                left -= 1;
            }
        }
        (0..world).filter(|&w| taken[w as usize]).collect()
    }

    /// Every query of `set` agrees with the sorted array `members`.
    fn check(members: &[u32], world: u32) -> Compressed {
        let set = build(members, world);
        assert_eq!(set.len() as usize, members.len());
        for (i, &m) in members.iter().enumerate() {
            assert_eq!(set.select(i as u32), m, "select({i})");
            assert_eq!(set.rank(m), Some(i as u32), "rank({m})");
        }
        // Backwards, every block boundary misses the cache.
        for (i, &m) in members.iter().enumerate().rev().step_by(61) {
            assert_eq!(set.select(i as u32), m, "select({i}) backwards");
        }
        // Non-members: the world's ends, and both ends of every gap.
        let mut probes = vec![0, world - 1];
        for pair in members.windows(2) {
            if pair[1] - pair[0] > 1 {
                probes.extend([pair[0] + 1, pair[1] - 1]);
            }
        }
        if let (Some(&first), Some(&last)) = (members.first(), members.last()) {
            probes.extend([first.saturating_sub(1), (last + 1).min(world - 1)]);
        }
        for w in probes {
            let expected = members.binary_search(&w).ok().map(|i| i as u32);
            assert_eq!(set.rank(w), expected, "rank({w})");
        }
        assert!(set.iter().eq(members.iter().copied()));
        assert_eq!(set.iter().size_hint(), (members.len(), Some(members.len())));
        set
    }

    #[test]
    fn empty() {
        let set = check(&[], 1);
        assert_eq!(set.rank(0), None);
        assert_eq!(set.heap_bytes(), 0);
        assert_eq!(Compressed::estimate_heap_bytes(&Stats::of(&[], 1)), None);
    }

    #[test]
    fn one_member() {
        check(&[0], 1);
        check(&[5], 10);
        check(&[u32::MAX - 1], u32::MAX);
    }

    #[test]
    fn block_edges() {
        for n in [BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK, 2 * BLOCK + 1] {
            check(
                &(0..n as u32).map(|i| 3 * i + i % 2).collect::<Vec<_>>(),
                3 * n as u32 + 1,
            );
            check(&random_set(n, 8 * n as u32, n as u64), 8 * n as u32);
        }
    }

    #[test]
    fn full_range() {
        let members: Vec<u32> = (0..300_000).collect();
        let set = check(&members, 300_000);
        // 293 blocks of zeros: a few dozen bytes each, not a kilobyte.
        assert!(set.heap_bytes() < 32 * 1024, "{} bytes", set.heap_bytes());
    }

    #[test]
    fn stride() {
        let members: Vec<u32> = (0..100_000).map(|i| 7 * i + 3).collect();
        check(&members, 700_003);
    }

    #[test]
    fn large_gaps() {
        // Gaps needing 2 to 5 varint bytes, which zstd may not shrink.
        let members = [0, 1, 200, 70_000, 10_000_000, 4_000_000_000, u32::MAX - 1];
        let set = check(&members, u32::MAX);
        assert!(set.is_plain(0));
    }

    #[test]
    fn random_quarter_of_a_million() {
        let members = random_set(250_000, 1 << 20, 1);
        let set = check(&members, 1 << 20);
        // Every block compressed, so zstd still writes the frame prefix we strip.
        assert!(set.plain.is_empty());
        // Plain varint gaps take a byte a member; the entropy is ~3.3 bits.
        assert!(set.heap_bytes() < 125_000, "{} bytes", set.heap_bytes());
    }

    #[test]
    fn clones_answer_alike() {
        let members = random_set(3_000, 10_000, 4);
        let set = build(&members, 10_000);
        assert_eq!(set.select(2_500), members[2_500]);
        let copy = set.clone();
        assert!(copy.iter().eq(members.iter().copied()));
        assert_eq!(copy.select(2_500), members[2_500]);
        assert_eq!(copy.heap_bytes(), set.heap_bytes());
        assert_eq!(build(&[], 1).clone().heap_bytes(), 0);
        let shown = format!("{set:?}");
        assert!(
            shown.contains("len: 3000") && shown.contains("blocks: 3"),
            "{shown}"
        );
    }

    #[test]
    fn lookups_from_several_threads_agree() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Compressed>();
        let world = 1 << 20;
        let members = random_set(250_000, world, 2);
        let set = build(&members, world);
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (set, members) = (&set, &members);
                scope.spawn(move || {
                    let mut state = t;
                    for _ in 0..20_000 {
                        let i = (next(&mut state) % members.len() as u64) as usize;
                        assert_eq!(set.select(i as u32), members[i]);
                        let w = (next(&mut state) % u64::from(world)) as u32;
                        assert_eq!(
                            set.rank(w),
                            members.binary_search(&w).ok().map(|k| k as u32)
                        );
                    }
                });
            }
        });
    }

    #[test]
    fn a_poisoned_cache_still_answers() {
        let members = random_set(5_000, 20_000, 3);
        let set = build(&members, 20_000);
        let _ = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let _guard = set.cache.lock();
                    panic!("poison the cache");
                })
                .join()
        });
        assert!(set.cache.is_poisoned());
        for (i, &m) in members.iter().enumerate() {
            assert_eq!(set.select(i as u32), m);
            assert_eq!(set.rank(m), Some(i as u32));
        }
        assert!(set.heap_bytes() > 0);
    }

    fn sets() -> impl Strategy<Value = (Vec<u32>, u32)> {
        let density = prop_oneof![0.0..0.01f64, 0.0..=1.0f64];
        (1..=200_000u32, density, any::<u64>()).prop_map(|(world, density, seed)| {
            let n = (f64::from(world) * density) as usize;
            (random_set(n.min(world as usize), world, seed), world)
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn agrees_with_the_array((members, world) in sets()) {
            check(&members, world);
        }
    }
}
