//! What a provider answers from its `Job`, written once: the `Rma` methods
//! of identity, clocks, wake-ups, serials and (where the provider knows no
//! more) health, and all of `HostMemory`.

/// Expands, inside an `impl Rma for P` whose `P` has a field `job: Job`,
/// to the methods of the named groups: `identity` (`rank`, `size`,
/// `job_id`, `host`, `now`, `coarse_now`, `wake_at`, `next_serial`) and
/// `health` (`check_health`, `check_peer`).
macro_rules! rma_from_job {
    ($($group:ident),+) => {
        $($crate::kit::rma_from_job!(@ $group);)+
    };
    (@ identity) => {
        fn rank(&self) -> $crate::Rank {
            self.job.rank()
        }

        fn size(&self) -> u32 {
            self.job.size()
        }

        fn job_id(&self) -> &str {
            self.job.id()
        }

        fn host(&self) -> u64 {
            self.job.host_id()
        }

        fn now(&self) -> $crate::Time {
            self.job.now()
        }

        #[inline]
        fn coarse_now(&self) -> $crate::Time {
            self.job.coarse_now()
        }

        #[inline]
        fn wake_at(&self, at: $crate::Time) {
            self.job.wake_at(at);
        }

        fn next_serial(&self) -> u64 {
            self.job.next_serial()
        }
    };
    (@ health) => {
        fn check_health(&self) -> $crate::Result<()> {
            self.job.check_health()
        }

        fn check_peer(&self, rank: $crate::Rank) -> $crate::Result<()> {
            self.job.check_peer(rank)
        }
    };
}

pub(crate) use rma_from_job;

/// Implements [`crate::HostMemory`] for a real provider through its `job`
/// field: the arena the job mapped at start-up serves every call.
macro_rules! host_memory_from_job {
    ($provider:ty) => {
        impl $crate::HostMemory for $provider {
            type HostPeer = std::rc::Rc<$crate::host::ArenaMap>;

            fn host_ranks(&self) -> &[$crate::Rank] {
                self.job.host_memory().map_or(&[], |host| host.ranks())
            }

            fn host_tuning(&self) -> $crate::config::HostTuning {
                self.job
                    .host_memory()
                    .map_or_else(|_| Default::default(), |host| host.tuning())
            }

            fn host_alloc(&self, len: usize, reset: usize) -> $crate::Result<$crate::HostRegion> {
                self.job.host_memory()?.alloc(len, reset)
            }

            fn host_world_region(&self, len: usize) -> Option<$crate::HostRegion> {
                self.job.host_memory().ok()?.world_region(len)
            }

            fn host_release(&self, region: $crate::HostRegion) {
                if let Ok(host) = self.job.host_memory() {
                    host.release(region);
                }
            }

            #[inline]
            fn host_peer(&self, rank: $crate::Rank) -> $crate::Result<Self::HostPeer> {
                self.job.host_peer(rank)
            }

            #[inline]
            fn host_write(
                &self,
                peer: &Self::HostPeer,
                at: u64,
                data: &[u8],
            ) -> $crate::Result<()> {
                peer.write(at, data)
            }

            #[inline]
            fn host_read(
                &self,
                peer: &Self::HostPeer,
                at: u64,
                buf: &mut [u8],
            ) -> $crate::Result<()> {
                peer.read(at, buf)
            }

            #[inline]
            fn host_store(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<()> {
                peer.store(at, value)
            }

            #[inline]
            fn host_set(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<()> {
                peer.set(at, value)
            }

            #[inline]
            fn host_load(&self, peer: &Self::HostPeer, at: u64) -> $crate::Result<u64> {
                peer.load(at)
            }

            #[inline]
            fn host_add(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<u64> {
                peer.add(at, value)
            }

            #[inline]
            fn host_prefetch(&self, peer: &Self::HostPeer, at: u64) {
                peer.prefetch(at)
            }

            // A peer copies out of this process's memory by its pid, what
            // the offer table in the arena's header says is offered.
            fn host_offer(&self, data: &[u8]) -> Option<u64> {
                self.job.host_memory().ok()?.offer(data)
            }

            fn host_withdraw(&self, handle: u64) {
                if let Ok(host) = self.job.host_memory() {
                    host.withdraw(handle);
                }
            }

            fn host_copy_from(
                &self,
                peer: &Self::HostPeer,
                handle: u64,
                at: u64,
                buf: &mut [u8],
            ) -> $crate::Result<bool> {
                peer.copy_offered(handle, at, buf)
            }
        }
    };
}
pub(crate) use host_memory_from_job;
