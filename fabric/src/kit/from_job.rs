//! The `Rma` methods a provider answers from its `Job` (identity, clocks,
//! wake-ups, serials and, where the provider knows no more, health), written
//! once: each provider's `impl Rma` names the groups it takes.

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
