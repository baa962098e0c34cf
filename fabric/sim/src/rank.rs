//! One virtual rank's view of the simulator: the transport contract, so
//! algorithm code runs on it unchanged. Sends and puts are charged to the
//! rank's clock and become events at their arrival; receives and signal
//! waits complete when the simulator polls the rank after such an event.

use std::future::{ready, Future};

use super::window::{check_bounds, check_word, SimKey, SimWindow};
use super::{Action, AtomicOp, Envelope, RankState, Sim};
use catena_fabric::{
    wait_until, ContextId, ControlWindows, Error, KeyedWindow, Message, Rank, RemoteKey, Result,
    Rma, Signal, Tag, Time, Transport,
};

/// The transport of one simulated rank; only [`Sim::run`] drives its futures.
pub struct SimRank<'s> {
    sim: &'s Sim,
    rank: Rank,
}

impl<'s> SimRank<'s> {
    pub(super) fn new(sim: &'s Sim, rank: Rank) -> SimRank<'s> {
        SimRank { sim, rank }
    }

    pub(super) fn sim(&self) -> &'s Sim {
        self.sim
    }

    pub(super) fn rank_id(&self) -> Rank {
        self.rank
    }

    fn state(&self) -> &RankState {
        self.sim.state(self.rank)
    }

    fn check_rank(&self, rank: Rank) -> Result<()> {
        if rank < self.sim.size {
            Ok(())
        } else {
            Err(Error::InvalidRank {
                rank,
                size: self.sim.size,
            })
        }
    }

    /// The live window `key` names at `target`: its id.
    fn target_window(&self, target: Rank, key: &RemoteKey) -> Result<SimKey> {
        self.check_rank(target)?;
        let key = SimKey::decode(key, target)?;
        let len = match self.sim.windows.borrow().get(&(target, key.id)) {
            None => return Err(Error::WindowFreed { rank: target }),
            Some(memory) => memory.borrow().len(),
        };
        // Bounds are checked against the key's length: a forged one must not
        // reach past the window.
        if len != key.len {
            return Err(Error::InvalidKey(format!(
                "window {} of rank {target} has {len} bytes, the key says {}",
                key.id, key.len
            )));
        }
        Ok(key)
    }

    fn put_inner(
        &self,
        target: Rank,
        key: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Option<Signal>,
    ) -> Result<()> {
        let _call = self.sim.call(self.rank);
        let key = self.target_window(target, key)?;
        check_bounds(offset, data.len(), key.len)?;
        if let Some(s) = signal {
            check_word(s.offset, key.len)?;
        }
        let at = self.sim.transmit(self.rank, target, data.len());
        let at = self.sim.put_lands(self.rank, target, at, signal.is_some());
        let landed = &self.state().puts_landed;
        landed.set(landed.get().max(at.0));
        let data = self.sim.as_transport(|| data.to_vec());
        let action = Action::Put {
            to: target,
            window: key.id,
            offset,
            data,
            signal,
        };
        self.sim.schedule(at, action);
        Ok(())
    }

    async fn atomic(
        &self,
        target: Rank,
        key: &RemoteKey,
        offset: usize,
        op: AtomicOp,
        deadline: Time,
    ) -> Result<u64> {
        let _call = self.sim.call(self.rank);
        let window = self.target_window(target, key)?;
        check_word(offset, window.len)?;
        let reply = self.sim.next_reply.get();
        self.sim.next_reply.set(reply + 1);
        let at = self.sim.transmit(self.rank, target, 8);
        let at = self.sim.atomic_arrives(self.rank, target, at);
        let action = Action::Atomic {
            origin: self.rank,
            to: target,
            window: window.id,
            offset,
            op,
            reply,
        };
        self.sim.schedule(at, action);
        wait_until(self, deadline, "an atomic's reply", || {
            match self.sim.replies.borrow_mut().remove(&reply) {
                None => Ok(None),
                Some(Some(old)) => Ok(Some(old)),
                Some(None) => Err(Error::WindowFreed { rank: target }),
            }
        })
        .await
    }
}

impl<'s> Rma for SimRank<'s> {
    type Window = SimWindow<'s>;
    type PeerWindow = KeyedWindow;

    fn resolve_window(&self, target: Rank, window: &RemoteKey) -> Result<KeyedWindow> {
        KeyedWindow::of(self, target, window)
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.sim.size
    }

    fn job_id(&self) -> &str {
        "sim"
    }

    fn host(&self) -> u64 {
        u64::from(self.sim.placement.host(self.rank))
    }

    fn now(&self) -> Time {
        let _call = self.sim.call(self.rank);
        Time(self.state().clock.get())
    }

    fn alloc_window(&self, len: usize) -> Result<SimWindow<'s>> {
        let _call = self.sim.call(self.rank);
        catena_fabric::bounds::check_window_len(len)?;
        self.sim
            .as_transport(|| SimWindow::new(self.sim, self.rank, len))
    }

    fn put(&self, target: Rank, window: &RemoteKey, offset: usize, data: &[u8]) -> Result<()> {
        self.put_inner(target, window, offset, data, None)
    }

    fn put_signal(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        data: &[u8],
        signal: Signal,
    ) -> Result<()> {
        self.put_inner(target, window, offset, data, Some(signal))
    }

    fn fetch_add(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        value: u64,
        deadline: Time,
    ) -> impl Future<Output = Result<u64>> {
        self.atomic(target, window, offset, AtomicOp::FetchAdd(value), deadline)
    }

    fn compare_swap(
        &self,
        target: Rank,
        window: &RemoteKey,
        offset: usize,
        expected: u64,
        new: u64,
        deadline: Time,
    ) -> impl Future<Output = Result<u64>> {
        let op = AtomicOp::CompareSwap { expected, new };
        self.atomic(target, window, offset, op, deadline)
    }

    /// Returns at the virtual time the last put issued so far has landed.
    fn flush(&self, target: Rank, _deadline: Time) -> impl Future<Output = Result<()>> {
        let _call = self.sim.call(self.rank);
        let flushed = self.check_rank(target).map(|()| {
            let s = self.state();
            s.clock.set(s.clock.get().max(s.puts_landed.get()));
        });
        ready(flushed)
    }

    fn check_health(&self) -> Result<()> {
        Ok(())
    }

    fn check_peer(&self, rank: Rank) -> Result<()> {
        self.check_rank(rank)
    }

    fn wake_at(&self, at: Time) {
        let _call = self.sim.call(self.rank);
        let wake = &self.state().wake;
        if at.0 < wake.get() {
            wake.set(at.0);
            self.sim.schedule(at, Action::Wake { rank: self.rank });
        }
    }

    fn next_serial(&self) -> u64 {
        let serials = &self.state().serials;
        let serial = serials.get();
        serials.set(serial + 1);
        serial
    }
}

impl ControlWindows for SimRank<'_> {
    fn control_key(&self, rank: Rank) -> Result<RemoteKey> {
        self.check_rank(rank)?;
        Err(Error::InvalidKey(
            "the simulator has no control windows: its messages are native".into(),
        ))
    }
}

impl Transport for SimRank<'_> {
    fn send<'a>(
        &'a self,
        target: Rank,
        context: ContextId,
        tag: Tag,
        data: &'a [u8],
        _deadline: Time,
    ) -> impl Future<Output = Result<()>> + 'a {
        let _call = self.sim.call(self.rank);
        let sent = self.check_rank(target).map(|()| {
            let at = self.sim.transmit(self.rank, target, data.len());
            let message = self.sim.as_transport(|| Message {
                source: self.rank,
                tag,
                data: data.to_vec(),
            });
            let to = target;
            let envelope = Envelope { context, message };
            self.sim.schedule(at, Action::Deliver { to, envelope });
        });
        ready(sent)
    }

    async fn recv(
        &self,
        source: Option<Rank>,
        context: ContextId,
        tag: Tag,
        deadline: Time,
    ) -> Result<Message> {
        let _call = self.sim.call(self.rank);
        if let Some(source) = source {
            self.check_rank(source)?;
        }
        wait_until(self, deadline, "a message", || {
            let s = self.state();
            let mut inbox = s.inbox.borrow_mut();
            let Some(i) = inbox.iter().position(|e| {
                e.context == context
                    && e.message.tag == tag
                    && source.is_none_or(|r| r == e.message.source)
            }) else {
                return Ok(None);
            };
            let envelope = inbox.remove(i);
            drop(inbox);
            let data = &envelope.message.data;
            self.sim.release(self.rank, data.len() as u64);
            s.clock
                .set(s.clock.get() + self.sim.model.borrow().overhead_ns());
            // The algorithm gets its own copy: the transport's is freed as
            // the simulator's, so memory is attributed to whoever holds it.
            let message = Message {
                source: envelope.message.source,
                tag,
                data: data.clone(),
            };
            self.sim.as_transport(|| drop(envelope));
            Ok(Some(message))
        })
        .await
    }
}
