//! Hands out the regions of this process's arena: power-of-two size classes
//! from 256 bytes, a bump pointer and a free list per class. A released
//! region is reused only once its users count (its first word, which every
//! member of its group decrements when it lets go) has reached zero, so a
//! late peer never writes into a region that serves another group; only
//! the part its next group asks for is zeroed then (a group of a host's
//! cores takes hundreds of KiB, mostly data cells).

use super::ArenaMap;
use crate::{Error, HostRegion, Result};

const MIN_CLASS: u32 = 8;

pub(crate) struct Allocator {
    next: u64,
    end: u64,
    /// Free regions per size class (index: log2 of the size).
    free: Vec<Vec<u64>>,
    /// Released regions whose users may still reach them: (class, offset).
    retired: Vec<(u32, u64)>,
}

fn class_of(len: u64) -> u32 {
    len.max(1 << MIN_CLASS).next_power_of_two().trailing_zeros()
}

impl Allocator {
    /// Regions of `start..end` of the arena.
    pub(crate) fn new(start: u64, end: u64) -> Allocator {
        Allocator {
            next: start,
            end,
            free: vec![Vec::new(); 64],
            retired: Vec::new(),
        }
    }

    /// A region of at least `len` bytes of `arena`: zeroed when new, its
    /// first `reset` bytes zeroed when reused.
    pub(crate) fn alloc(
        &mut self,
        len: usize,
        reset: usize,
        arena: &ArenaMap,
    ) -> Result<HostRegion> {
        let len = len as u64;
        if len > self.end {
            return Err(Error::ArenaFull {
                requested: len,
                arena: self.end,
            });
        }
        let class = class_of(len);
        self.reclaim(arena);
        let at = match self.free[class as usize].pop() {
            Some(at) => {
                // Its last group is gone; the next resets what it relies on.
                arena.zero(at, reset.min(len as usize))?;
                at
            }
            None => {
                let align = (1u64 << class).min(4096);
                let at = self.next.next_multiple_of(align);
                let end = at + (1 << class);
                if end > self.end {
                    return Err(Error::ArenaFull {
                        requested: len,
                        arena: self.end,
                    });
                }
                self.next = end;
                at
            }
        };
        Ok(HostRegion { at, len })
    }

    /// Takes back `region` once its users count reaches zero.
    pub(crate) fn release(&mut self, region: HostRegion) {
        self.retired.push((class_of(region.len), region.at));
    }

    /// Moves the retired regions nobody uses any more to the free lists.
    fn reclaim(&mut self, arena: &ArenaMap) {
        let free = &mut self.free;
        self.retired.retain(|&(class, at)| match arena.load(at) {
            Ok(0) => {
                free[class as usize].push(at);
                false
            }
            _ => true,
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::host::Host;

    /// A released region comes back only once its users count reaches
    /// zero, and then zeroed; sizes share a class by their power of two.
    #[test]
    fn regions_are_reused_only_when_nobody_uses_them() {
        let host = Host::create(0, "test", 1 << 21, Default::default()).unwrap();
        let own = host.own().clone();
        let a = host.alloc(3000, 0).unwrap();
        own.write(a.at + 8, &[7; 120]).unwrap();
        host.release(a);
        let b = host.alloc(4000, 0).unwrap();
        assert_ne!(a.at, b.at, "a region still counted as used is not reused");
        let mut bytes = [1; 128];
        own.read(b.at, &mut bytes).unwrap();
        assert!(bytes[8..].iter().all(|&b| b == 0), "a new region is zeroed");
        own.add(a.at, u64::MAX).unwrap();
        let c = host.alloc(2049, 64).unwrap();
        assert_eq!(c.at, a.at, "a region nobody uses is reused");
        own.read(c.at, &mut bytes).unwrap();
        assert_eq!(own.load(c.at).unwrap(), 1, "a new users count");
        assert!(bytes[8..64].iter().all(|&b| b == 0), "reset: {bytes:?}");
        assert!(bytes[64..].iter().all(|&b| b == 7), "kept: {bytes:?}");
        assert!(matches!(
            host.alloc(1 << 22, 0),
            Err(crate::Error::ArenaFull { .. })
        ));
        assert!(host.alloc(usize::MAX, 0).is_err());
    }

    /// The world's region is handed out once, and only as large as reserved.
    #[test]
    fn the_world_region_is_handed_out_once() {
        let host = Host::create(0, "test", 0, Default::default()).unwrap();
        assert!(host
            .world_region(super::super::WORLD_REGION_BYTES + 1)
            .is_none());
        assert!(host.world_region(4096).is_some());
        assert!(host.world_region(4096).is_none());
    }
}
