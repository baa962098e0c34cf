//! Forwarding for a transport that wraps another and adds to it (the
//! simulator's eager ranks add messaging to a simulated rank): every
//! `Rma` and `HostMemory` method handed to the inner transport, written
//! next to the traits so that a new method cannot be forgotten there.

/// Expands, inside an `impl Rma for W` whose `type Window` and `type
/// PeerWindow` are the inner transport's, to every `Rma` method but `progress`, each calling the
/// same method of `self.$inner` (`progress` is the wrapper's own: it
/// drives whatever the wrapper adds).
#[doc(hidden)]
#[macro_export]
macro_rules! forward_rma {
    ($inner:ident) => {
        fn rank(&self) -> $crate::Rank {
            self.$inner.rank()
        }

        fn size(&self) -> u32 {
            self.$inner.size()
        }

        fn job_id(&self) -> &str {
            self.$inner.job_id()
        }

        fn host(&self) -> u64 {
            self.$inner.host()
        }

        fn now(&self) -> $crate::Time {
            self.$inner.now()
        }

        fn deadline_in(&self, timeout: ::std::time::Duration) -> $crate::Time {
            self.$inner.deadline_in(timeout)
        }

        fn coarse_now(&self) -> $crate::Time {
            self.$inner.coarse_now()
        }

        fn alloc_window(&self, len: usize) -> $crate::Result<Self::Window> {
            self.$inner.alloc_window(len)
        }

        fn put(
            &self,
            target: $crate::Rank,
            window: &$crate::RemoteKey,
            offset: usize,
            data: &[u8],
        ) -> $crate::Result<()> {
            self.$inner.put(target, window, offset, data)
        }

        fn put_signal(
            &self,
            target: $crate::Rank,
            window: &$crate::RemoteKey,
            offset: usize,
            data: &[u8],
            signal: $crate::Signal,
        ) -> $crate::Result<()> {
            self.$inner.put_signal(target, window, offset, data, signal)
        }

        fn resolve_window(
            &self,
            target: $crate::Rank,
            window: &$crate::RemoteKey,
        ) -> $crate::Result<Self::PeerWindow> {
            self.$inner.resolve_window(target, window)
        }

        fn put_stamp(
            &self,
            window: &Self::PeerWindow,
            offset: usize,
            pieces: (&[u8], &[u8]),
            stamp: $crate::Signal,
        ) -> $crate::Result<()> {
            self.$inner.put_stamp(window, offset, pieces, stamp)
        }

        fn fetch_add(
            &self,
            target: $crate::Rank,
            window: &$crate::RemoteKey,
            offset: usize,
            value: u64,
            deadline: $crate::Time,
        ) -> impl ::std::future::Future<Output = $crate::Result<u64>> {
            self.$inner
                .fetch_add(target, window, offset, value, deadline)
        }

        fn compare_swap(
            &self,
            target: $crate::Rank,
            window: &$crate::RemoteKey,
            offset: usize,
            expected: u64,
            new: u64,
            deadline: $crate::Time,
        ) -> impl ::std::future::Future<Output = $crate::Result<u64>> {
            self.$inner
                .compare_swap(target, window, offset, expected, new, deadline)
        }

        fn flush(
            &self,
            target: $crate::Rank,
            deadline: $crate::Time,
        ) -> impl ::std::future::Future<Output = $crate::Result<()>> {
            self.$inner.flush(target, deadline)
        }

        fn wait_signal<'a>(
            &'a self,
            window: &'a Self::Window,
            offset: usize,
            at_least: u64,
            deadline: $crate::Time,
        ) -> impl ::std::future::Future<Output = $crate::Result<u64>> + 'a {
            self.$inner.wait_signal(window, offset, at_least, deadline)
        }

        fn check_health(&self) -> $crate::Result<()> {
            self.$inner.check_health()
        }

        fn check_peer(&self, rank: $crate::Rank) -> $crate::Result<()> {
            self.$inner.check_peer(rank)
        }

        fn wake_at(&self, at: $crate::Time) {
            self.$inner.wake_at(at);
        }

        fn next_serial(&self) -> u64 {
            self.$inner.next_serial()
        }
    };
}

/// Expands, inside an `impl HostMemory for W` whose `type HostPeer` is the
/// inner transport's, to every `HostMemory` method, each calling the same
/// method of `self.$inner`.
#[doc(hidden)]
#[macro_export]
macro_rules! forward_host_memory {
    ($inner:ident) => {
        fn host_ranks(&self) -> &[$crate::Rank] {
            self.$inner.host_ranks()
        }

        fn host_tuning(&self) -> $crate::config::HostTuning {
            self.$inner.host_tuning()
        }

        fn host_alloc(&self, len: usize, reset: usize) -> $crate::Result<$crate::HostRegion> {
            self.$inner.host_alloc(len, reset)
        }

        fn host_world_region(&self, len: usize) -> Option<$crate::HostRegion> {
            self.$inner.host_world_region(len)
        }

        fn host_release(&self, region: $crate::HostRegion) {
            self.$inner.host_release(region);
        }

        fn host_peer(&self, rank: $crate::Rank) -> $crate::Result<Self::HostPeer> {
            self.$inner.host_peer(rank)
        }

        fn host_write(&self, peer: &Self::HostPeer, at: u64, data: &[u8]) -> $crate::Result<()> {
            self.$inner.host_write(peer, at, data)
        }

        fn host_read(&self, peer: &Self::HostPeer, at: u64, buf: &mut [u8]) -> $crate::Result<()> {
            self.$inner.host_read(peer, at, buf)
        }

        fn host_store(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<()> {
            self.$inner.host_store(peer, at, value)
        }

        fn host_set(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<()> {
            self.$inner.host_set(peer, at, value)
        }

        fn host_load(&self, peer: &Self::HostPeer, at: u64) -> $crate::Result<u64> {
            self.$inner.host_load(peer, at)
        }

        fn host_add(&self, peer: &Self::HostPeer, at: u64, value: u64) -> $crate::Result<u64> {
            self.$inner.host_add(peer, at, value)
        }

        fn host_prefetch(&self, peer: &Self::HostPeer, at: u64) {
            self.$inner.host_prefetch(peer, at)
        }

        fn host_offer(&self, data: &[u8]) -> Option<u64> {
            self.$inner.host_offer(data)
        }

        fn host_withdraw(&self, handle: u64) {
            self.$inner.host_withdraw(handle)
        }

        fn host_copy_from(
            &self,
            peer: &Self::HostPeer,
            handle: u64,
            at: u64,
            buf: &mut [u8],
        ) -> $crate::Result<bool> {
            self.$inner.host_copy_from(peer, handle, at, buf)
        }
    };
}
