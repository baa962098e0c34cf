//! Seeded, deterministic disorder for puts and atomics: each one lands
//! some extra nanoseconds late, so puts of different origins (and plain
//! puts of one origin) reorder, while the transport contract still holds:
//! a put with a signal lands after every earlier put of its origin to its
//! target, and one origin's signals reach one target in issue order.

use catena_fabric::Rank;
use rustc_hash::FxHashMap;

/// Chooses how late each delayed operation lands, in issue order.
pub trait Delays {
    /// Extra nanoseconds for the next put or atomic from `from` to `to`.
    fn delay(&mut self, from: Rank, to: Rank) -> u64;
}

/// Uniform delays in `0..=max_ns` from a SplitMix64 stream: the same seed
/// gives the same delays, so the same run.
#[derive(Clone, Debug)]
pub struct Seeded {
    state: u64,
    max_ns: u64,
}

impl Seeded {
    /// Delays drawn from `seed`, each at most `max_ns`.
    pub fn new(seed: u64, max_ns: u64) -> Seeded {
        Seeded {
            state: seed,
            max_ns,
        }
    }
}

impl Delays for Seeded {
    fn delay(&mut self, _from: Rank, _to: Rank) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        z % self.max_ns.saturating_add(1)
    }
}

/// The `i`-th operation is `delay_ns` late if bit `i` of `mask` is set (the
/// 65th and later are never late): running every mask below `1 << k`
/// explores every such disorder of a run's first `k` operations.
#[derive(Clone, Debug)]
pub struct Enumerated {
    mask: u64,
    delay_ns: u64,
    next: u32,
}

impl Enumerated {
    /// The disorder `mask` names.
    pub fn new(mask: u64, delay_ns: u64) -> Enumerated {
        Enumerated {
            mask,
            delay_ns,
            next: 0,
        }
    }
}

impl Delays for Enumerated {
    fn delay(&mut self, _from: Rank, _to: Rank) -> u64 {
        let late = self.next < 64 && self.mask >> self.next & 1 == 1;
        self.next = self.next.saturating_add(1);
        if late {
            self.delay_ns
        } else {
            0
        }
    }
}

/// What must stay ordered between one origin and one target.
#[derive(Clone, Copy, Default)]
struct PairOrder {
    /// The latest arrival of any put so far.
    latest_put: u64,
    /// The arrival of the last signalling put.
    last_signal: u64,
}

/// Delays applied under the ordering rules (one per `Sim` that has them).
pub(crate) struct Jitter {
    delays: Box<dyn Delays>,
    pairs: FxHashMap<(Rank, Rank), PairOrder>,
    /// Operations delayed so far.
    pub(crate) operations: u64,
}

impl Jitter {
    pub(crate) fn new(delays: impl Delays + 'static) -> Jitter {
        Jitter {
            delays: Box::new(delays),
            pairs: FxHashMap::default(),
            operations: 0,
        }
    }

    /// When a put from `from` to `to` that would land at `at` lands.
    pub(crate) fn put(&mut self, from: Rank, to: Rank, at: u64, signals: bool) -> u64 {
        let mut landed = at.saturating_add(self.delays.delay(from, to));
        self.operations += 1;
        let pair = self.pairs.entry((from, to)).or_default();
        if signals {
            landed = landed.max(pair.latest_put).max(pair.last_signal);
            pair.last_signal = landed;
        }
        pair.latest_put = pair.latest_put.max(landed);
        landed
    }

    /// When an atomic from `from` to `to` that would arrive at `at` arrives
    /// (atomics are not ordered with puts).
    pub(crate) fn atomic(&mut self, from: Rank, to: Rank, at: u64) -> u64 {
        self.operations += 1;
        at.saturating_add(self.delays.delay(from, to))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_never_overtake_earlier_puts_of_their_pair() {
        let mut jitter = Jitter::new(Seeded::new(7, 1_000));
        for round in 0..1_000u64 {
            let at = round * 10;
            let puts: Vec<u64> = (0..3).map(|_| jitter.put(0, 1, at, false)).collect();
            let signal = jitter.put(0, 1, at, true);
            assert!(puts.iter().all(|&p| p <= signal), "{puts:?} then {signal}");
            let next = jitter.put(0, 1, at, true);
            assert!(next >= signal);
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_delays() {
        let draw = |seed| {
            let mut d = Seeded::new(seed, 100);
            (0..50).map(|_| d.delay(0, 1)).collect::<Vec<_>>()
        };
        assert_eq!(draw(3), draw(3));
        assert_ne!(draw(3), draw(4));
        assert!(draw(3).iter().all(|&d| d <= 100));
    }

    #[test]
    fn a_mask_delays_exactly_its_operations() {
        let mut d = Enumerated::new(0b101, 9);
        let got: Vec<u64> = (0..4).map(|_| d.delay(0, 1)).collect();
        assert_eq!(got, [9, 0, 9, 0]);
    }
}
