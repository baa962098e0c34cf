//! The transport contract. [`Rma`] is the data plane every provider offers:
//! identity, a clock, windows, one-sided puts with remote signals, atomics.
//! [`Transport`] adds tagged messages, which real providers get from
//! [`crate::eager`] (rings built on puts) by implementing
//! [`EagerMessaging`](crate::EagerMessaging);
//! [`HostMemory`] is the memory the ranks of one host share; [`Blocking`]
//! holds the hooks a blocking executor needs on real providers.

use std::future::Future;
use std::task::Poll;
use std::time::Duration;

use crate::{ContextId, Error, Rank, RemoteKey, Result, Tag, Time};

/// A peer's window resolved by [`Rma::resolve_window`]: whose it is and the key
/// it was resolved from.
pub trait PeerWindow {
    /// The window's owner.
    fn target(&self) -> Rank;
    /// The window's key.
    fn key(&self) -> &RemoteKey;
}

/// A peer's window named by its key alone: the [`Rma::PeerWindow`] of a
/// provider whose puts look the key up anyway.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyedWindow {
    target: Rank,
    key: RemoteKey,
}

impl KeyedWindow {
    /// `target`'s window `key`, for `rma`'s [`Rma::resolve_window`]: the
    /// rank is checked, the key is left to each put.
    pub fn of<R: Rma + ?Sized>(rma: &R, target: Rank, key: &RemoteKey) -> Result<KeyedWindow> {
        if target >= rma.size() {
            return Err(Error::InvalidRank {
                rank: target,
                size: rma.size(),
            });
        }
        Ok(KeyedWindow {
            target,
            key: key.clone(),
        })
    }
}

impl PeerWindow for KeyedWindow {
    fn target(&self) -> Rank {
        self.target
    }

    fn key(&self) -> &RemoteKey {
        &self.key
    }
}

/// The two pieces of a [`Rma::put_stamp`] up to this many bytes are put
/// together on the stack and put at once, by default; longer ones by a put
/// each.
const STAGED_STAMP_BYTES: usize = 256;

/// After a put's data has landed, add `add` to the u64 at `offset` of the same
/// target window (OpenSHMEM's `put_signal` with `SIGNAL_ADD`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal {
    /// Byte offset of the signal word in the target window; 8-byte aligned.
    pub offset: usize,
    /// The amount added to the signal word (wrapping).
    pub add: u64,
}

/// A received tagged message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The rank that sent it.
    pub source: Rank,
    /// The tag it was sent with.
    pub tag: Tag,
    /// The payload, exactly as sent.
    pub data: Vec<u8>,
}

/// What [`Transport::recv_into`] took into the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// The rank that sent it.
    pub source: Rank,
    /// The tag it was sent with.
    pub tag: Tag,
    /// The payload's length: the buffer's first `len` bytes hold it.
    pub len: usize,
}

impl Message {
    /// Copies the payload into `buf`, as [`Transport::recv_into`] delivers
    /// it; a payload longer than `buf` is [`Error::Truncated`] (nothing
    /// written).
    pub fn copy_into(self, buf: &mut [u8]) -> Result<Received> {
        let (len, room) = (self.data.len(), buf.len());
        let Some(out) = buf.get_mut(..len) else {
            return Err(Error::Truncated {
                from: self.source,
                len,
                room,
            });
        };
        out.copy_from_slice(&self.data);
        Ok(Received {
            source: self.source,
            tag: self.tag,
            len,
        })
    }
}

/// A window this process exposes. Its memory belongs to the provider, so
/// local access goes through copies, and reads of remotely written bytes
/// are meaningful only after a signal covering them was observed.
pub trait LocalWindow {
    /// The key peers pass to `put`; ship it to them in a message. It names
    /// its owner: used with another target rank, a put fails with `InvalidKey`.
    fn key(&self) -> RemoteKey;
    /// The window's size in bytes, as requested at allocation.
    fn len(&self) -> usize;
    /// True for a zero-byte window.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `buf.len()` bytes at `offset` out of the window; fails with
    /// `OutOfBounds` past its end.
    fn read(&self, offset: usize, buf: &mut [u8]) -> Result<()>;
    /// Appends the `len` bytes at `offset` of the window to `buf` (as
    /// [`LocalWindow::read`] into `len` new bytes, which a provider need
    /// not zero first); fails with `OutOfBounds` past the window's end, and
    /// then leaves `buf` as it was.
    fn read_append(&self, offset: usize, len: usize, buf: &mut Vec<u8>) -> Result<()> {
        let old = buf.len();
        buf.resize(old + len, 0);
        self.read(offset, &mut buf[old..])
            .inspect_err(|_| buf.truncate(old))
    }
    /// Copies `data` into the window at `offset`, as a local store (no peer is
    /// notified); fails with `OutOfBounds` past its end.
    fn write(&self, offset: usize, data: &[u8]) -> Result<()>;
    /// The current value of the signal word at `offset` (acquire ordered: the
    /// data of every put whose signal is counted in it is visible).
    fn signal(&self, offset: usize) -> Result<u64>;
    /// Resets a signal word (release ordered), e.g. before reusing a window.
    fn set_signal(&self, offset: usize, value: u64) -> Result<()>;
}

/// One-sided communication, as every provider offers it.
///
/// Ordering: a `put_signal` from one origin to one target makes the data of
/// all earlier puts from that origin to that target visible no later than its
/// signal, and the signals of one origin reach one target in issue order.
/// Puts return once `data` may be reused; `flush` waits for remote completion.
/// Bounds are checked at the origin against the window the owner published.
pub trait Rma {
    /// The provider's windows, as returned by [`Rma::alloc_window`].
    type Window: LocalWindow;
    /// A peer's window as [`Rma::resolve_window`] makes it from its key, for a
    /// stream of [`Rma::put_stamp`]s into it (a message ring).
    type PeerWindow: PeerWindow;

    /// This process's rank, in `0..size()`.
    fn rank(&self) -> Rank;
    /// The number of ranks in the job.
    fn size(&self) -> u32;
    /// Unique per job; names shared resources and keeps jobs apart.
    fn job_id(&self) -> &str;
    /// An id of the host this rank runs on, equal on every rank that shares
    /// it (and, but for hash collisions, different across hosts): what a
    /// split by host, the first level of a two-level collective, colors by.
    fn host(&self) -> u64;
    /// The transport clock (virtual in the simulator); deadlines are on it.
    fn now(&self) -> Time;
    /// The deadline `timeout` from now, saturating at [`Time::MAX`].
    fn deadline_in(&self, timeout: Duration) -> Time {
        self.now().saturating_add(timeout)
    }
    /// The clock as of the last tick (a few milliseconds behind
    /// [`Rma::now`] at most, and far cheaper to read on a real provider):
    /// what waits compare with their deadlines, and what a call's deadline
    /// counts from, so both may be that much late. The simulator's is its
    /// virtual clock.
    fn coarse_now(&self) -> Time {
        self.now()
    }

    /// Exposes `len` fresh zeroed bytes to one-sided access by every rank.
    fn alloc_window(&self, len: usize) -> Result<Self::Window>;

    /// Copies `data` to `offset` of `target`'s window named by `window`;
    /// returns once `data` may be reused, not when it has landed.
    fn put(&self, target: Rank, window: &RemoteKey, offset: usize, data: &[u8]) -> Result<()>;
    /// A put followed by `signal` at the target, which becomes visible no
    /// earlier than this put's data and every earlier put's to that target.
    fn put_signal(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Signal,
    ) -> Result<()>;

    /// `target`'s window named by `window`, checked as a put checks it, for
    /// [`Rma::put_stamp`]s: on shared memory its mapping, so that each put
    /// skips the key's lookup; elsewhere the key itself ([`KeyedWindow`]).
    fn resolve_window(&self, target: Rank, window: &RemoteKey) -> Result<Self::PeerWindow>;

    /// A put of `head` and then `data` right after it (one byte string in
    /// two pieces, so that a caller need not copy them together) followed
    /// by storing `signal.add` into the signal word at `signal.offset`,
    /// which must be 0 and written by no one else until its owner reads it
    /// (a frame's stamp): as [`Rma::put_signal`] of both pieces onto that
    /// zero word, which is what it does unless a provider has a cheaper
    /// store (on shared memory, a plain store after the data rather than a
    /// locked add, so a reader polling the line does not take it from the
    /// writer between the two, and each piece copied straight from where
    /// it is).
    fn put_stamp(
        &self,
        window: &Self::PeerWindow,
        offset: usize,
        (head, data): (&[u8], &[u8]),
        signal: Signal,
    ) -> Result<()> {
        let (target, window) = (window.target(), window.key());
        let len = head.len().saturating_add(data.len());
        if head.is_empty() || len > STAGED_STAMP_BYTES {
            // Two puts, the signal covering the first (a piece out of the
            // window's bounds fails its own put, after the first landed).
            if !head.is_empty() {
                crate::bounds::check_bounds(offset, len, usize::MAX)?;
                self.put(target, window, offset, head)?;
            }
            return self.put_signal(target, window, offset + head.len(), data, signal);
        }
        let mut staged = [0u8; STAGED_STAMP_BYTES];
        staged[..head.len()].copy_from_slice(head);
        staged[head.len()..len].copy_from_slice(data);
        self.put_signal(target, window, offset, &staged[..len], signal)
    }

    /// Atomically adds `value` to the u64 at `offset`; yields the old value.
    fn fetch_add(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        value: u64,
        deadline: Time,
    ) -> impl Future<Output = Result<u64>>;
    /// Atomically replaces the u64 at `offset` by `new` if it equals
    /// `expected`; yields the old value either way.
    fn compare_swap(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        expected: u64,
        new: u64,
        deadline: Time,
    ) -> impl Future<Output = Result<u64>>;
    /// Waits until every put issued so far to `target` has landed there.
    fn flush(&self, target: Rank, deadline: Time) -> impl Future<Output = Result<()>>;

    /// Waits until the signal word at `offset` of a local window reaches `at_least`.
    fn wait_signal<'a>(
        &'a self,
        window: &'a Self::Window,
        offset: usize,
        at_least: u64,
        deadline: Time,
    ) -> impl Future<Output = Result<u64>> + 'a {
        wait_until(self, deadline, "a window signal", move || {
            let value = window.signal(offset)?;
            Ok((value >= at_least).then_some(value))
        })
    }

    /// `Err(PeerGone)` once the job is known to have lost a rank.
    fn check_health(&self) -> Result<()>;
    /// `Err(PeerGone)` if `rank` itself is known to be gone.
    fn check_peer(&self, rank: Rank) -> Result<()>;
    /// A pending wait asks to be polled again no later than `at` (its
    /// deadline): a real provider bounds its park by it, the simulator
    /// schedules a wake-up event.
    fn wake_at(&self, at: Time);
    /// A number this rank's transport never returned before (0, 1, 2, ...):
    /// with the rank, it makes new communicators' context ids unique by
    /// construction, without a global counter.
    fn next_serial(&self) -> u64;
    /// Handles incoming work that no future polls for (connection requests,
    /// draining message rings, returning credits): what an executor does
    /// between polls. Nothing where nothing needs it (the simulator).
    fn progress(&self) {}
}

/// The hooks [`block_on`](crate::block_on) uses to wait well on a real
/// provider: spin a while (driving the fabric by [`Rma::progress`]), then
/// block in the provider's wait object. The simulator has its own executor
/// and does not offer them.
pub trait Blocking: Rma {
    /// How long a waiting executor re-polls before it blocks.
    fn spin_budget(&self) -> Duration;
    /// Whether a wait that has re-polled for `spun`, past its spin budget,
    /// may re-poll for another budget rather than block: where no other
    /// task wants the core, spinning costs no one and spares the wake-up.
    /// By default it may not.
    fn spin_on(&self, _spun: Duration) -> bool {
        false
    }
    /// Announces that the executor is about to block; returns a ticket. Any
    /// signal or message that lands after this call wakes `park(ticket)`.
    fn prepare_park(&self) -> u64;
    /// Blocks until something lands, the earliest `wake_at` passes, or a
    /// short slice ends (so that job failure is noticed).
    fn park(&self, ticket: u64);
    /// Withdraws a `prepare_park` after which the executor did not block.
    fn cancel_park(&self);
}

/// A region of a rank's host arena: `len` bytes at arena offset `at`. Its
/// first word counts the region's users: 1 when allocated; the owner adds
/// its group's other members once the group is made, and each member
/// subtracts 1 when it lets go. A released region is reused only once the
/// count is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostRegion {
    /// Offset in the owner's arena; what peers pass to the `host_*` calls.
    pub at: u64,
    /// Length in bytes.
    pub len: u64,
}

/// Memory the ranks of one host share, which every provider offers (the
/// processes of one host can always map each other's memory) and the
/// simulator models: host collectives are written once against it.
///
/// Each rank owns an arena. It allocates regions of it for its groups and
/// tells its peers where they are; a peer on the same host then writes,
/// reads and stores into them directly, with no key and no fabric. A store
/// publishes every write the storing rank made before it (release) and
/// wakes the arena's owner if it sleeps; a load sees every write published
/// by the store it reads (acquire). So a rank waits on words of its own
/// arena that its peers store into, and reads data from theirs. Every
/// access is checked against the arena's bounds: a garbage offset read
/// from shared memory fails with `OutOfBounds`, never touches other memory.
pub trait HostMemory: Rma {
    /// A host peer's arena (or this rank's own) as this rank reaches it.
    type HostPeer: Clone;

    /// The job's ranks on this rank's host, ascending (this rank included).
    fn host_ranks(&self) -> &[Rank];
    /// Where the host's collectives change algorithm with a team's size
    /// (read from the environment when the transport is made).
    fn host_tuning(&self) -> crate::config::HostTuning;
    /// A region of `len` bytes of this rank's arena, its users count 1;
    /// `ArenaFull` when the arena has no room. A new region is zeroed; a
    /// reused one has its first `reset` bytes zeroed and the rest as its
    /// last group left it (a group resets what it relies on, not its
    /// data cells), but for its users count.
    fn host_alloc(&self, len: usize, reset: usize) -> Result<HostRegion>;
    /// The region every rank reserves at the same offset for the world's
    /// group (so the world needs no exchange to find it), `len` bytes of
    /// it: `Some` on the first call only, and only if the reserve holds
    /// `len`. It is never given back.
    fn host_world_region(&self, len: usize) -> Option<HostRegion>;
    /// Gives `region` back to the allocator, which reuses it once its users
    /// count is zero.
    fn host_release(&self, region: HostRegion);
    /// `rank`'s arena (mapped on first use); `NotOnHost` unless `rank`
    /// shares this host.
    fn host_peer(&self, rank: Rank) -> Result<Self::HostPeer>;
    /// Copies `data` to offset `at` of `peer`'s arena.
    fn host_write(&self, peer: &Self::HostPeer, at: u64, data: &[u8]) -> Result<()>;
    /// Copies `buf.len()` bytes at offset `at` of `peer`'s arena out.
    fn host_read(&self, peer: &Self::HostPeer, at: u64, buf: &mut [u8]) -> Result<()>;
    /// Stores `value` into the 8-aligned word at `at` of `peer`'s arena,
    /// publishing this rank's earlier writes, and wakes `peer` if it sleeps.
    fn host_store(&self, peer: &Self::HostPeer, at: u64, value: u64) -> Result<()>;
    /// Stores `value` into the 8-aligned word at `at` of `peer`'s arena,
    /// publishing this rank's earlier writes, without waking anyone: for a
    /// word its readers poll rather than sleep on (a count of finished
    /// calls), where the store must cost no more than a plain one.
    fn host_set(&self, peer: &Self::HostPeer, at: u64, value: u64) -> Result<()>;
    /// The word at `at` of `peer`'s arena.
    fn host_load(&self, peer: &Self::HostPeer, at: u64) -> Result<u64>;
    /// Adds `value` (wrapping) to the word at `at` of `peer`'s arena; yields
    /// the old value.
    fn host_add(&self, peer: &Self::HostPeer, at: u64, value: u64) -> Result<u64>;
    /// Offers `data`, memory of this rank's own outside its arena, to its
    /// host peers to copy out of in one copy
    /// ([`HostMemory::host_copy_from`]) until [`HostMemory::host_withdraw`]:
    /// the handle peers name it by, or `None` where this provider makes no
    /// such offers, or holds as many as it can (data then moves through the
    /// arena, in two copies). The caller keeps `data` as it is, and alive,
    /// until it withdraws the offer, which it does before the call that
    /// offered it ends.
    fn host_offer(&self, _data: &[u8]) -> Option<u64> {
        None
    }
    /// Ends an offer of [`HostMemory::host_offer`]: no copy from it begins,
    /// and one under way fails.
    fn host_withdraw(&self, _handle: u64) {}
    /// A hint that this rank will soon read the word at `at` of `peer`'s
    /// region (a call's mailbox slot it waits on next): the provider may
    /// start bringing it in. No effect on what any call sees.
    fn host_prefetch(&self, _peer: &Self::HostPeer, _at: u64) {}
    /// Copies `buf.len()` bytes from `at` bytes into `peer`'s offer `handle`
    /// into `buf`, in one copy: `Ok(false)` where this rank cannot (the
    /// provider, the system's rules, a peer that exited), and then `buf`
    /// holds nothing meant. An offer the peer does not hold, a range past
    /// its end, and an offer withdrawn before the copy ended are errors.
    fn host_copy_from(
        &self,
        _peer: &Self::HostPeer,
        _handle: u64,
        _at: u64,
        _buf: &mut [u8],
    ) -> Result<bool> {
        Ok(false)
    }
}

/// What eager messaging ([`crate::eager`]) needs besides puts, signals and
/// compare-and-swap: the control window of each rank, where first contact
/// is made (published through the directory at start-up).
pub trait ControlWindows: Rma {
    /// The key of `rank`'s control window.
    fn control_key(&self, rank: Rank) -> Result<RemoteKey>;
}

/// Tagged messages: matched by (source, context, tag), in order per sender;
/// with host memory, what every algorithm is written against.
pub trait Transport: HostMemory {
    /// Sends `data` to `target` under (context, tag); completes once it is
    /// handed to the target (the buffer may be reused), or fails with
    /// `Timeout` if flow control holds it past `deadline`.
    fn send<'a>(
        &'a self,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &'a [u8],
        deadline: Time,
    ) -> impl Future<Output = Result<()>> + 'a;
    /// Receives the first message from `source` (any rank if `None`) with this
    /// context and tag.
    fn recv(
        &self,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        deadline: Time,
    ) -> impl Future<Output = Result<Message>>;
    /// Receives as [`Transport::recv`] does, into `buf` (as `MPI_Recv`):
    /// no allocation, and where the provider can, a large payload lands
    /// straight in `buf` from the sender's stream. A message longer than
    /// `buf` is taken all the same and fails with [`Error::Truncated`].
    /// Dropped before it completes, it may have taken a message whose
    /// bytes had begun to land in `buf`: that message is lost.
    fn recv_into<'a>(
        &'a self,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        buf: &'a mut [u8],
        deadline: Time,
    ) -> impl Future<Output = Result<Received>> + 'a {
        async move {
            let message = self.recv(source, context, tag, deadline).await?;
            message.copy_into(buf)
        }
    }
}

/// The one waiting primitive: resolves when `ready` yields a value, fails with
/// `Timeout` at `deadline` and with `PeerGone` when the job loses a rank.
///
/// Under catena's executors (polled with
/// [`catena_waker`](crate::catena_waker)) a pending wait leaves progress
/// and re-polling to them. Polled by another runtime (tokio or any
/// executor with real wakers), it drives the transport's progress itself
/// and wakes its task at once: nothing else would, for nothing catena
/// waits on raises an event a runtime sees. The task so yields to the
/// runtime's other tasks and timers between looks.
pub fn wait_until<'a, T, R>(
    transport: &'a T,
    deadline: Time,
    what: &'static str,
    mut ready: impl FnMut() -> Result<Option<R>> + 'a,
) -> impl Future<Output = Result<R>> + 'a
where
    T: Rma + ?Sized,
{
    let mut pending_polls = 0u32;
    std::future::poll_fn(move |cx| match ready() {
        Err(e) => Poll::Ready(Err(e)),
        Ok(Some(value)) => Poll::Ready(Ok(value)),
        Ok(None) => {
            if let Err(e) = transport.check_health() {
                return Poll::Ready(Err(e));
            }
            // A clock read costs more than a poll, so a wait reads it on its
            // first pending poll (a wait begun past its deadline fails at
            // once, however few times it is polled) and then every 16th;
            // past the deadline the executor no longer sleeps, so the
            // timeout is at most 16 quick polls late. A wait that is ready
            // at once reads no clock: loops of such waits check their
            // deadline once per round themselves.
            let look = pending_polls % 16 == 0;
            pending_polls = pending_polls.wrapping_add(1);
            if look && transport.coarse_now() >= deadline {
                return Poll::Ready(Err(Error::Timeout { what }));
            }
            transport.wake_at(deadline);
            if !crate::polled_by_catena(cx) {
                transport.progress();
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        }
    })
}
