//! The collectives as methods of [`Comm`], each taking its deadline (the
//! communicator's timeout) and its tags or sequence number when called:
//! through the host's shared memory when the communicator has it, else the
//! chain collectives; and the pipelined tree collectives.

use std::future::Future;

use crate::blocking::block_on;
use bytemuck::Pod;
use catena_fabric::{Blocking, Transport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::levels::{Fold, LevelsCall};
use super::Comm;
use crate::chain::{CallTags, Chain, DoubleScan};
use crate::codec::encode;
use crate::host::{self, values, Team};
use crate::{scan, tree, PipelineConfig, Result, TreeCollective, TreePlan};

/// A value the collectives carry.
pub trait Value: Serialize + DeserializeOwned {}
impl<V: Serialize + DeserializeOwned> Value for V {}

/// How one call runs: through the host team (with the sequence number it
/// took) or on the chain (with its future, which took its tags). The
/// chain's future is boxed: it is kilobytes of state, which the host path
/// should not carry (a future is moved whole when it is pinned).
pub(super) enum Path<'a, 't, T: Transport, F> {
    Host(&'a Team<'t, T>, u64),
    Chain(std::pin::Pin<Box<F>>),
}

/// How a call that the host levels can take runs: on them (which may
/// still find the flat path theirs once built, with the flat path's tags
/// `Tags`), or as [`Path`] says.
pub(super) enum Route<'a, 't, T: Transport, F, Tags = CallTags> {
    Levels(LevelsCall<'a, 't, T, Tags>),
    Flat(Path<'a, 't, T, F>),
}

impl<'t, T: Transport> Comm<'t, T> {
    /// Chooses how a call being made now runs (every member decides
    /// alike): on the host levels where the communicator has them (`flat`
    /// reserves the flat path's tags now, for the levels to fall back on),
    /// else through the host team where it has one, else `chain()`, which
    /// takes the call's tags. Where host memory cannot carry the call
    /// (`host_fits`, the same on every member, e.g. from the element type)
    /// it takes the chain.
    pub(super) fn route<F, Tags>(
        &self,
        host_fits: bool,
        flat: fn(&Chain) -> Tags,
        chain: impl FnOnce() -> F,
    ) -> Route<'_, 't, T, F, Tags> {
        match (self.levels.as_deref(), &self.team) {
            (Some(levels), _) if host_fits => Route::Levels(levels.call(flat(&self.chain))),
            (_, Some(team)) if host_fits => Route::Flat(Path::Host(team, team.call())),
            _ => Route::Flat(Path::Chain(Box::pin(chain()))),
        }
    }

    /// Returns once every member has entered.
    pub fn ibarrier(&self) -> impl Future<Output = Result<()>> + '_ {
        let deadline = self.deadline();
        let route = self.route(true, Chain::next_call, || {
            scan::barrier(self.t, &self.chain, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => return Box::pin(call.barrier(self, deadline)).await,
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    team.begin(seq, deadline).await?;
                    let out = host::barrier(team, seq, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// The root's `value` on every member (the root passes `Some`).
    pub fn ibcast<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        value: Option<V>,
    ) -> impl Future<Output = Result<V>> + 'a {
        let deadline = self.deadline();
        let mut value = Some(value);
        let route = self.route(true, tree::reserve, || {
            tree::bcast(self.t, &self.chain, root, value.take().flatten(), deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let value = value.take().flatten();
                    return Box::pin(call.bcast_value(self, root, value, deadline)).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    let value = value.take().flatten();
                    team.begin(seq, deadline).await?;
                    let out = values::bcast_value(team, seq, root, value, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// x_0 ⊕ … ⊕ x_(n-1) at the root (`None` elsewhere); `op` associative.
    pub fn ireduce<'a, A: Value + 'a>(
        &'a self,
        root: u32,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<Option<A>>> + 'a {
        let deadline = self.deadline();
        let mut args = Some((x, op));
        let route = self.route(true, tree::reserve, || {
            let (x, op) = args.take().expect("taken once");
            tree::reduce(self.t, &self.chain, root, x, op, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let (x, op) = args.take().expect("taken once");
                    return Box::pin(call.reduce_value(self, root, x, op, deadline)).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    let (x, op) = args.take().expect("taken once");
                    team.begin(seq, deadline).await?;
                    let out = values::reduce_value(team, seq, root, x, op, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// x_0 ⊕ … ⊕ x_(n-1) on every member; `op` associative.
    pub fn iallreduce<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<A>> + 'a {
        self.allreduce_as(x, op, Fold::InRankOrder)
    }

    /// [`Comm::iallreduce`] of an `op` that is commutative as well as
    /// associative (MPI_Op_create's `commute`): its fold may take the
    /// members in any order, so across hosts that do not hold consecutive
    /// ranks (a launcher that deals ranks in turn) it still takes the host
    /// levels. Every member gets the same value.
    pub fn iallreduce_commutative<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<A>> + 'a {
        self.allreduce_as(x, op, Fold::AnyOrder)
    }

    fn allreduce_as<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
        fold: Fold,
    ) -> impl Future<Output = Result<A>> + 'a {
        let deadline = self.deadline();
        let mut args = Some((x, op));
        let route = self.route(true, Chain::next_call, || {
            let (x, op) = args.take().expect("taken once");
            scan::allreduce(self.t, &self.chain, x, op, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let (x, op) = args.take().expect("taken once");
                    return Box::pin(call.allreduce_value(self, x, op, fold, deadline)).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    let (x, op) = args.take().expect("taken once");
                    team.begin(seq, deadline).await?;
                    let out = values::allreduce_value(team, seq, x, op, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// x_0 ⊕ … ⊕ x_r.
    pub fn iscan<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<A>> + 'a {
        let s = self.idouble_scan(x, (), op, |_, _| ());
        async move { Ok(s.await?.inclusive_lr) }
    }

    /// x_0 ⊕ … ⊕ x_(r-1); `None` on rank 0.
    pub fn iexscan<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<Option<A>>> + 'a {
        let s = self.idouble_scan(x, (), op, |_, _| ());
        async move { Ok(s.await?.exclusive_lr) }
    }

    /// Scans left to right over `x` and right to left over `y` at once.
    pub fn idouble_scan<'a, A: Value + Clone + 'a, B: Value + Clone + 'a>(
        &'a self,
        x: A,
        y: B,
        op_lr: impl Fn(&A, &A) -> A + 'a,
        op_rl: impl Fn(&B, &B) -> B + 'a,
    ) -> impl Future<Output = Result<DoubleScan<A, B>>> + 'a {
        let deadline = self.deadline();
        let mut args = Some((x, y, op_lr, op_rl));
        let route = self.route(true, Chain::next_call, || {
            let (x, y, op_lr, op_rl) = args.take().expect("taken once");
            scan::double_scan(self.t, &self.chain, x, y, op_lr, op_rl, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let (x, y, op_lr, op_rl) = args.take().expect("taken once");
                    let scan = call.double_scan(self, (x, y), op_lr, op_rl, deadline);
                    return Box::pin(scan).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    let (x, y, op_lr, op_rl) = args.take().expect("taken once");
                    team.begin(seq, deadline).await?;
                    let out =
                        values::double_scan_value(team, seq, x, y, op_lr, op_rl, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// Every member's `x` in rank order at the root (`None` elsewhere).
    pub fn igather<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        x: &V,
    ) -> impl Future<Output = Result<Option<Vec<V>>>> + 'a {
        let deadline = self.deadline();
        let mut x = Some(x);
        let route = self.route(true, tree::reserve, || {
            tree::gather(self.t, &self.chain, root, x.take().expect("once"), deadline)
        });
        let bytes = x.map(|x| encode(x, "a gather value"));
        async move {
            let path = match (route, bytes) {
                (Route::Levels(call), Some(bytes)) => {
                    return Box::pin(call.gather_value(self, root, bytes, deadline)).await;
                }
                (Route::Flat(path), bytes) => (path, bytes),
                (Route::Levels(_), None) => unreachable!("the value is kept for the levels"),
            };
            match path {
                (Path::Host(team, seq), Some(bytes)) => {
                    let body =
                        async { values::gather_value(team, seq, root, bytes?, deadline).await };
                    team.run(seq, deadline, body).await
                }
                (Path::Chain(call), _) => call.await,
                (Path::Host(..), None) => unreachable!("the value is kept for the host path"),
            }
        }
    }

    /// Member r gets the r-th of the root's `values` (`Some` at the root).
    pub fn iscatter<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        values: Option<Vec<V>>,
    ) -> impl Future<Output = Result<V>> + 'a {
        let deadline = self.deadline();
        let mut values = Some(values);
        let route = self.route(true, tree::reserve, || {
            tree::scatter(self.t, &self.chain, root, values.take().flatten(), deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let values = values.take().flatten();
                    return Box::pin(call.scatter_value(self, root, values, deadline)).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => call.await,
                Path::Host(team, seq) => {
                    let mine = values.take().flatten();
                    team.begin(seq, deadline).await?;
                    let out = values::scatter_value(team, seq, root, mine, deadline).await;
                    team.end(seq, out)
                }
            }
        }
    }

    /// Every member's `x` in rank order on every member.
    pub fn iallgather<'a, V: Value + 'a>(
        &'a self,
        x: &V,
    ) -> impl Future<Output = Result<Vec<V>>> + 'a {
        let deadline = self.deadline();
        let mut x = Some(x);
        let route = self.route(true, tree::reserve_allgather, || {
            tree::allgather(self.t, &self.chain, x.take().expect("once"), deadline)
        });
        let bytes = x.map(|x| encode(x, "an allgather value"));
        async move {
            let path = match (route, bytes) {
                (Route::Levels(call), Some(bytes)) => {
                    return Box::pin(call.allgather_value(self, bytes, deadline)).await;
                }
                (Route::Flat(path), bytes) => (path, bytes),
                (Route::Levels(_), None) => unreachable!("the value is kept for the levels"),
            };
            match path {
                (Path::Host(team, seq), Some(bytes)) => {
                    team.begin(seq, deadline).await?;
                    let out =
                        async { values::allgather_value(team, seq, bytes?, deadline).await }.await;
                    team.end(seq, out)
                }
                (Path::Chain(call), _) => call.await,
                (Path::Host(..), None) => unreachable!("the value is kept for the host path"),
            }
        }
    }

    /// Sets up a pipelined multi-colour tree schedule over this group's
    /// members (every member passes its place in it, e.g. from
    /// [`crate::torus_plan`]); it then serves any number of broadcasts and
    /// allreduces by one-sided puts.
    pub fn itree<'a>(
        &'a self,
        plan: TreePlan,
        config: PipelineConfig,
    ) -> impl Future<Output = Result<TreeCollective<'t, T>>> + 'a {
        TreeCollective::new(self.t, &self.chain, plan, config, self.deadline())
    }
}

/// The blocking forms.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::ibarrier`].
    pub fn barrier(&self) -> Result<()> {
        block_on(self.t, || self.ibarrier())
    }

    /// See [`Comm::ibcast`].
    pub fn bcast<V: Value>(&self, root: u32, value: Option<V>) -> Result<V> {
        block_on(self.t, || self.ibcast(root, value))
    }

    /// See [`Comm::ireduce`].
    pub fn reduce<A: Value>(&self, root: u32, x: A, op: impl Fn(&A, &A) -> A) -> Result<Option<A>> {
        block_on(self.t, || self.ireduce(root, x, op))
    }

    /// See [`Comm::iallreduce`].
    pub fn allreduce<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        block_on(self.t, || self.iallreduce(x, op))
    }

    /// See [`Comm::iallreduce_commutative`].
    pub fn allreduce_commutative<A: Value + Clone>(
        &self,
        x: A,
        op: impl Fn(&A, &A) -> A,
    ) -> Result<A> {
        block_on(self.t, || self.iallreduce_commutative(x, op))
    }

    /// See [`Comm::iscan`].
    pub fn scan<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        block_on(self.t, || self.iscan(x, op))
    }

    /// See [`Comm::iexscan`].
    pub fn exscan<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<Option<A>> {
        block_on(self.t, || self.iexscan(x, op))
    }

    /// See [`Comm::idouble_scan`].
    pub fn double_scan<A: Value + Clone, B: Value + Clone>(
        &self,
        x: A,
        y: B,
        op_lr: impl Fn(&A, &A) -> A,
        op_rl: impl Fn(&B, &B) -> B,
    ) -> Result<DoubleScan<A, B>> {
        block_on(self.t, || self.idouble_scan(x, y, op_lr, op_rl))
    }

    /// See [`Comm::igather`].
    pub fn gather<V: Value>(&self, root: u32, x: &V) -> Result<Option<Vec<V>>> {
        block_on(self.t, || self.igather(root, x))
    }

    /// See [`Comm::iscatter`].
    pub fn scatter<V: Value>(&self, root: u32, values: Option<Vec<V>>) -> Result<V> {
        block_on(self.t, || self.iscatter(root, values))
    }

    /// See [`Comm::iallgather`].
    pub fn allgather<V: Value>(&self, x: &V) -> Result<Vec<V>> {
        block_on(self.t, || self.iallgather(x))
    }

    /// See [`Comm::itree`].
    pub fn tree(&self, plan: TreePlan, config: PipelineConfig) -> Result<TreeCollective<'t, T>> {
        block_on(self.t, || self.itree(plan, config))
    }

    /// The root's `data` into every member's `data` over a tree schedule
    /// (see [`TreeCollective::bcast`]), within this communicator's timeout.
    pub fn tree_bcast(&self, tree: &mut TreeCollective<'t, T>, data: &mut [u8]) -> Result<()> {
        block_on(self.t, || tree.bcast(data, self.deadline()))
    }

    /// Elementwise allreduce of `data` over a tree schedule (see
    /// [`TreeCollective::allreduce`]), within this communicator's timeout.
    pub fn tree_allreduce<E: Pod>(
        &self,
        tree: &mut TreeCollective<'t, T>,
        data: &mut [E],
        op: impl Fn(&mut [E], &[E]),
    ) -> Result<()> {
        block_on(self.t, || tree.allreduce(data, op, self.deadline()))
    }
}
