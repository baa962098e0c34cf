//! Handles as C sees them: opaque pointers that are never dereferenced. A
//! handle's value is a slot index and that slot's generation, so a freed,
//! forged or stale handle is found out by a table lookup, never by touching
//! memory it points to.

use std::sync::atomic::{AtomicU32, Ordering};

/// Generations are unique in the process, so a handle from before a
/// `catena_finalize` does not match a slot of the next `catena_init`.
static NEXT_GENERATION: AtomicU32 = AtomicU32::new(1);

/// A handle's value: generation in the high 32 bits, slot + 1 in the low.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Handle(u64);

impl Handle {
    pub(crate) fn from_ptr<T>(ptr: *const T) -> Option<Handle> {
        (!ptr.is_null()).then_some(Handle(ptr as usize as u64))
    }

    pub(crate) fn to_ptr<T>(self) -> *mut T {
        self.0 as usize as *mut T
    }

    fn slot(self) -> Option<usize> {
        usize::try_from(self.0 & 0xffff_ffff).ok()?.checked_sub(1)
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

struct Slot<V> {
    generation: u32,
    value: Option<V>,
}

/// Live values by handle; freed slots are reused under a new generation.
pub(crate) struct Handles<V> {
    slots: Vec<Slot<V>>,
    free: Vec<usize>,
}

impl<V> Default for Handles<V> {
    fn default() -> Self {
        Handles {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<V> Handles<V> {
    pub(crate) fn insert(&mut self, value: V) -> Handle {
        let generation = NEXT_GENERATION.fetch_add(1, Ordering::Relaxed).max(1);
        let index = match self.free.pop() {
            Some(index) => {
                self.slots[index] = Slot {
                    generation,
                    value: Some(value),
                };
                index
            }
            None => {
                self.slots.push(Slot {
                    generation,
                    value: Some(value),
                });
                self.slots.len() - 1
            }
        };
        Handle((u64::from(generation) << 32) | (index as u64 + 1))
    }

    pub(crate) fn get(&self, handle: Handle) -> Option<&V> {
        let slot = self.slots.get(handle.slot()?)?;
        (slot.generation == handle.generation())
            .then_some(slot.value.as_ref())
            .flatten()
    }

    pub(crate) fn get_mut(&mut self, handle: Handle) -> Option<&mut V> {
        let slot = self.slots.get_mut(handle.slot()?)?;
        (slot.generation == handle.generation())
            .then_some(slot.value.as_mut())
            .flatten()
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Replaces the value behind `handle` by `change(value)`, same handle.
    pub(crate) fn update(&mut self, handle: Handle, change: impl FnOnce(V) -> V) -> Option<()> {
        let slot = self.slots.get_mut(handle.slot()?)?;
        if slot.generation != handle.generation() {
            return None;
        }
        let value = slot.value.take()?;
        slot.value = Some(change(value));
        Some(())
    }

    pub(crate) fn remove(&mut self, handle: Handle) -> Option<V> {
        let index = handle.slot()?;
        let slot = self.slots.get_mut(index)?;
        if slot.generation != handle.generation() {
            return None;
        }
        let value = slot.value.take()?;
        self.free.push(index);
        Some(value)
    }

    /// Every live value, in place.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.slots.iter_mut().filter_map(|slot| slot.value.as_mut())
    }

    /// Every live value, emptying the table.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = V> + '_ {
        self.free.clear();
        self.slots.drain(..).filter_map(|slot| slot.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freed_forged_and_reused_handles_are_refused() {
        let mut table = Handles::default();
        let a = table.insert("a");
        assert_eq!(table.get(a), Some(&"a"));
        assert_eq!(table.remove(a), Some("a"));
        assert_eq!(table.remove(a), None, "double free");
        let b = table.insert("b");
        assert_eq!(table.get(a), None, "a's slot now holds b");
        assert_eq!(table.get(b), Some(&"b"));
        for forged in [0u64, 1, u64::MAX, b.0 + 1, b.0 ^ (1 << 40)] {
            assert_eq!(table.get(Handle(forged)), None, "{forged:#x}");
        }
        assert_eq!(table.drain().collect::<Vec<_>>(), ["b"]);
        assert_eq!(table.get(b), None);
    }
}
