//! What the multi-process algorithm tests share: deadlines, a deterministic
//! generator every rank runs identically, and error conversion.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use catena_fabric::{Rma, Time};

/// Generous: 33 ranks on 2 cores park and wake a lot.
pub const TIMEOUT: Duration = Duration::from_secs(120);

pub fn deadline<T: Rma>(t: &T) -> Time {
    t.deadline_in(TIMEOUT)
}

/// splitmix64 over (seed, stream): the same numbers on every process.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, stream: u32) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(stream) << 32 | 0x5bd1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random subset of `0..n` (about two thirds) in random order, never
/// empty: a group to create or look up in.
pub fn random_group(rng: &mut Rng, n: u32) -> Vec<catena_fabric::Rank> {
    let mut ranks: Vec<catena_fabric::Rank> = (0..n).filter(|_| rng.below(3) != 0).collect();
    if ranks.is_empty() {
        ranks.push(rng.below(u64::from(n)) as catena_fabric::Rank);
    }
    for i in (1..ranks.len()).rev() {
        ranks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    ranks
}

/// The test harness takes the transport's error type.
pub fn to_fabric(e: catena_algorithms::Error) -> catena_fabric::Error {
    match e {
        catena_algorithms::Error::Transport(e) => e,
        other => catena_fabric::Error::Protocol(other.to_string()),
    }
}

/// Runs both futures to completion, polling `a` first where `a_first`.
pub async fn join<A: Future, B: Future>(a: A, b: B, a_first: bool) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut got_a, mut got_b) = (None, None);
    std::future::poll_fn(|cx| {
        for turn in [a_first, !a_first] {
            if turn && got_a.is_none() {
                if let Poll::Ready(v) = a.as_mut().poll(cx) {
                    got_a = Some(v);
                }
            }
            if !turn && got_b.is_none() {
                if let Poll::Ready(v) = b.as_mut().poll(cx) {
                    got_b = Some(v);
                }
            }
        }
        if got_a.is_some() && got_b.is_some() {
            Poll::Ready((got_a.take().unwrap(), got_b.take().unwrap()))
        } else {
            Poll::Pending
        }
    })
    .await
}

/// One `#[test]` per line `name: Provider, ranks, env, body;`: runs
/// `body::<Provider>` as a job of `ranks` processes under the launcher.
macro_rules! provider_cases {
    ($($name:ident: $provider:ty, $ranks:expr, $env:expr, $body:ident;)*) => {$(
        #[test]
        fn $name() {
            catena_testkit::run_case_on::<$provider>(
                &catena_testkit::test_name(module_path!(), stringify!($name)),
                $ranks,
                catena_testkit::Starter::Launcher,
                $env,
                $body::<$provider>,
            );
        }
    )*};
}
pub(crate) use provider_cases;
