//! A rank's view of its peers' start-up entries (process, host, key secret,
//! host arena, provider address). Each is asked of the bootstrap when the
//! rank first contacts the peer and kept in a bounded cache, so a process
//! holds the addresses of the peers it talks to, not the whole job's.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use rustc_hash::FxHashMap;

use crate::host::ArenaAddress;
use crate::key::KeySecret;
use crate::{Error, Rank, Result};

/// Entries a rank keeps before it forgets the one it learned first.
pub(crate) const DEFAULT_CACHED_ENTRIES: usize = 4096;
/// The longest host name an entry carries (Linux allows 64 bytes).
const MAX_HOST_NAME: usize = 255;
/// Where the fields of an encoded entry start: pid, host id, key secret,
/// host arena, then the host name's length (a byte), the name and the
/// provider address.
const HOST_AT: usize = 4;
const SECRET_AT: usize = HOST_AT + 8;
const ARENA_AT: usize = SECRET_AT + KeySecret::BYTES;
const NAME_AT: usize = ARENA_AT + ArenaAddress::BYTES;

/// What one rank published at start-up.
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its process id, on its own host.
    pub pid: u32,
    /// Its host's id (a hash of the host name).
    pub host: u64,
    /// What seals its window keys.
    pub(crate) secret: KeySecret,
    /// Where its host arena is.
    pub arena: ArenaAddress,
    /// Its host's name.
    pub host_name: Box<str>,
    /// Its provider address.
    pub address: Box<[u8]>,
}

impl Entry {
    /// The entry as the bootstrap carries it.
    pub fn encode(&self) -> Vec<u8> {
        let name = &self.host_name.as_bytes()[..self.host_name.len().min(MAX_HOST_NAME)];
        let mut out = Vec::with_capacity(NAME_AT + 1 + name.len() + self.address.len());
        out.extend_from_slice(&self.pid.to_le_bytes());
        out.extend_from_slice(&self.host.to_le_bytes());
        out.extend_from_slice(&self.secret.to_bytes());
        out.extend_from_slice(&self.arena.to_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&self.address);
        out
    }

    /// The entry `rank` published as `bytes`; `Bootstrap` naming the rank
    /// if they are cut short.
    pub fn decode(rank: Rank, bytes: &[u8]) -> Result<Entry> {
        let truncated = || Error::Bootstrap(format!("rank {rank} published a truncated entry"));
        let name_len = *bytes.get(NAME_AT).ok_or_else(truncated)? as usize;
        let address_at = NAME_AT + 1 + name_len;
        if bytes.len() <= address_at {
            return Err(truncated());
        }
        let field = |at: usize, len: usize| &bytes[at..at + len];
        Ok(Entry {
            pid: u32::from_le_bytes(field(0, 4).try_into().expect("4 bytes")),
            host: u64::from_le_bytes(field(HOST_AT, 8).try_into().expect("8 bytes")),
            secret: KeySecret::from_bytes(
                field(SECRET_AT, KeySecret::BYTES)
                    .try_into()
                    .expect("the secret's length"),
            ),
            arena: ArenaAddress::from_bytes(
                field(ARENA_AT, ArenaAddress::BYTES)
                    .try_into()
                    .expect("the arena address's length"),
            ),
            host_name: String::from_utf8_lossy(field(NAME_AT + 1, name_len)).into(),
            address: bytes[address_at..].into(),
        })
    }

    /// The memory the entry holds in a directory.
    fn bytes(&self) -> usize {
        entry_bytes(self.address.len(), self.host_name.len())
    }
}

/// The bytes a directory spends on one peer whose provider address has
/// `address_len` bytes and whose host name has `host_name_len`.
pub fn entry_bytes(address_len: usize, host_name_len: usize) -> usize {
    std::mem::size_of::<Entry>() + host_name_len + address_len + PER_ENTRY
}

/// How much of the job a rank's directory holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectoryUse {
    /// Peers' entries held now (its own not counted).
    pub entries: usize,
    /// Bytes they hold, with the cache's own per-entry cost.
    pub bytes: usize,
    /// Entries asked of the bootstrap so far (more than `entries` once the
    /// cache forgot some).
    pub lookups: u64,
}

/// The entries of the peers a rank contacted: at most `capacity`, the
/// one learned first forgotten to make room (asked again if needed).
pub struct Directory {
    size: u32,
    own_rank: Rank,
    own: Rc<Entry>,
    capacity: usize,
    cache: RefCell<Cache>,
    /// Key secrets of peers asked for lately, by rank modulo the slots: a
    /// provider asks for one on every put (ucx, ofi), and these answer
    /// without hashing or counting references. A rank's secret never
    /// changes, so a slot outliving its entry in the cache is still right.
    secrets: [Cell<(Rank, KeySecret)>; SECRET_SLOTS],
}

#[derive(Default)]
struct Cache {
    /// FxHash: a provider asks for a peer's key secret on every put to it.
    entries: FxHashMap<Rank, Rc<Entry>>,
    learned: VecDeque<Rank>,
    bytes: usize,
    lookups: u64,
}

/// Peers whose key secrets are kept beside the cache, direct-mapped by rank.
const SECRET_SLOTS: usize = 64;

/// What the cache pays per entry beyond the entry: its map slot, its place
/// in the order and the `Rc` header.
const PER_ENTRY: usize = 48;

impl Directory {
    /// The directory of rank `own_rank` of a job of `size`, which
    /// published `own`, keeping at most `capacity` peers' entries.
    pub fn new(size: u32, own_rank: Rank, own: Entry, capacity: usize) -> Directory {
        Directory {
            size,
            own_rank,
            own: Rc::new(own),
            capacity: capacity.max(1),
            cache: RefCell::default(),
            secrets: std::array::from_fn(|_| {
                Cell::new((Rank::MAX, KeySecret::from_bytes([0; KeySecret::BYTES])))
            }),
        }
    }

    /// `rank`'s key secret, from its slot, else as [`Directory::entry`].
    pub(crate) fn secret(
        &self,
        rank: Rank,
        fetch: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<KeySecret> {
        let slot = &self.secrets[rank as usize % SECRET_SLOTS];
        let (held, secret) = slot.get();
        // An empty slot holds Rank::MAX, which a caller may pass: only a
        // rank of the job is answered from a slot.
        if held == rank && rank < self.size {
            return Ok(secret);
        }
        let secret = self.entry(rank, fetch)?.secret;
        slot.set((rank, secret));
        Ok(secret)
    }

    /// `rank`'s entry, from the cache or else by `fetch` (the bootstrap's
    /// lookup), which is then kept.
    pub fn entry(&self, rank: Rank, fetch: impl FnOnce() -> Result<Vec<u8>>) -> Result<Rc<Entry>> {
        if rank >= self.size {
            return Err(Error::InvalidRank {
                rank,
                size: self.size,
            });
        }
        if rank == self.own_rank {
            return Ok(self.own.clone());
        }
        if let Some(entry) = self.cache.borrow().entries.get(&rank) {
            return Ok(entry.clone());
        }
        let entry = Rc::new(Entry::decode(rank, &fetch()?)?);
        let mut cache = self.cache.borrow_mut();
        cache.lookups += 1;
        while cache.entries.len() >= self.capacity {
            let Some(oldest) = cache.learned.pop_front() else {
                break;
            };
            if let Some(gone) = cache.entries.remove(&oldest) {
                cache.bytes -= gone.bytes();
            }
        }
        cache.bytes += entry.bytes();
        cache.entries.insert(rank, entry.clone());
        cache.learned.push_back(rank);
        Ok(entry)
    }

    /// This rank's own entry.
    pub fn own(&self) -> &Entry {
        &self.own
    }

    /// What the directory holds now.
    pub fn usage(&self) -> DirectoryUse {
        let cache = self.cache.borrow();
        DirectoryUse {
            entries: cache.entries.len(),
            bytes: cache.bytes,
            lookups: cache.lookups,
        }
    }

    /// The peers whose entries it holds, ascending.
    pub fn held_ranks(&self) -> Vec<Rank> {
        let mut ranks: Vec<Rank> = self.cache.borrow().entries.keys().copied().collect();
        ranks.sort_unstable();
        ranks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: u32, address: &[u8]) -> Entry {
        Entry {
            pid,
            host: 7,
            secret: KeySecret::draw(),
            arena: ArenaAddress::from_bytes([3; ArenaAddress::BYTES]),
            host_name: "node-1".into(),
            address: address.into(),
        }
    }

    #[test]
    fn entries_round_trip_and_short_ones_are_errors() {
        let e = entry(42, &[9; 300]);
        let bytes = e.encode();
        assert_eq!(Entry::decode(5, &bytes).unwrap(), e);
        for cut in [0, 4, NAME_AT, NAME_AT + 1 + 6] {
            let err = Entry::decode(5, &bytes[..cut]).unwrap_err();
            assert!(err.to_string().contains("rank 5"), "{err}");
        }
    }

    /// Only peers asked for are fetched and held; past the capacity the
    /// first learned is forgotten and fetched again when asked.
    #[test]
    fn the_cache_holds_what_was_asked_up_to_its_capacity() {
        let dir = Directory::new(100, 0, entry(1, b"own"), 2);
        let fetches = std::cell::Cell::new(0);
        let fetch = |r: Rank| {
            fetches.set(fetches.get() + 1);
            Ok(entry(r, &[r as u8; 10]).encode())
        };
        assert_eq!(dir.entry(0, || unreachable!()).unwrap().pid, 1);
        assert_eq!(dir.entry(7, || fetch(7)).unwrap().pid, 7);
        assert_eq!(dir.entry(7, || fetch(7)).unwrap().pid, 7);
        assert_eq!(dir.entry(9, || fetch(9)).unwrap().address[..], [9; 10]);
        assert_eq!(fetches.get(), 2);
        assert_eq!(dir.held_ranks(), [7, 9]);
        dir.entry(11, || fetch(11)).unwrap();
        assert_eq!(dir.held_ranks(), [9, 11]);
        dir.entry(7, || fetch(7)).unwrap();
        assert_eq!(fetches.get(), 4);
        let usage = dir.usage();
        assert_eq!((usage.entries, usage.lookups), (2, 4));
        assert_eq!(
            usage.bytes,
            2 * (std::mem::size_of::<Entry>() + 6 + 10 + PER_ENTRY)
        );
        assert!(matches!(
            dir.entry(100, || fetch(100)),
            Err(Error::InvalidRank { rank: 100, .. })
        ));
        let err = dir.entry(50, || Ok(vec![1, 2])).unwrap_err();
        assert!(err.to_string().contains("rank 50"), "{err}");
    }

    /// A secret comes from its slot after the first ask, even once the
    /// cache forgot the entry; ranks sharing a slot each get their own.
    #[test]
    fn secrets_are_answered_from_their_slots() {
        let dir = Directory::new(1000, 0, entry(1, b"own"), 1);
        let published: Vec<Entry> = (0..1000).map(|r| entry(r, b"x")).collect();
        let fetches = std::cell::Cell::new(0);
        let fetch = |r: Rank| {
            fetches.set(fetches.get() + 1);
            Ok(published[r as usize].encode())
        };
        let first = dir.secret(5, || fetch(5)).unwrap();
        assert!(first == published[5].secret);
        dir.entry(6, || fetch(6)).unwrap();
        assert!(dir.secret(5, || fetch(5)).unwrap() == first);
        assert_eq!(fetches.get(), 2);
        let same_slot = 5 + SECRET_SLOTS as Rank;
        assert!(
            dir.secret(same_slot, || fetch(same_slot)).unwrap()
                == published[same_slot as usize].secret
        );
        assert!(dir.secret(5, || fetch(5)).unwrap() == first);
        assert_eq!(fetches.get(), 4);
        assert!(dir.secret(0, || unreachable!()).unwrap() == dir.own().secret);
        assert!(matches!(
            dir.secret(Rank::MAX, || fetch(0)),
            Err(Error::InvalidRank { .. })
        ));
    }
}
