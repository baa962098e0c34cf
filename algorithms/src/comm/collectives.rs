//! The chain collectives and the pipelined tree collectives as methods of
//! [`Comm`], each taking its deadline (the communicator's timeout) and its
//! tags when called.

use std::future::Future;

use bytemuck::Pod;
use catena_fabric::{block_on, Blocking, Transport};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::Comm;
use crate::{scan, tree, DoubleScan, PipelineConfig, Result, TreeCollective, TreePlan};

/// A value the collectives carry.
pub trait Value: Serialize + DeserializeOwned {}
impl<V: Serialize + DeserializeOwned> Value for V {}

impl<'t, T: Transport> Comm<'t, T> {
    /// Returns once every member has entered.
    pub fn ibarrier(&self) -> impl Future<Output = Result<()>> + '_ {
        scan::barrier(self.t, &self.chain, self.deadline())
    }

    /// The root's `value` on every member (the root passes `Some`).
    pub fn ibcast<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        value: Option<V>,
    ) -> impl Future<Output = Result<V>> + 'a {
        tree::bcast(self.t, &self.chain, root, value, self.deadline())
    }

    /// x_0 ⊕ … ⊕ x_(n-1) at the root (`None` elsewhere); `op` associative.
    pub fn ireduce<'a, A: Value + 'a>(
        &'a self,
        root: u32,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<Option<A>>> + 'a {
        tree::reduce(self.t, &self.chain, root, x, op, self.deadline())
    }

    /// x_0 ⊕ … ⊕ x_(n-1) on every member; `op` associative.
    pub fn iallreduce<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<A>> + 'a {
        scan::allreduce(self.t, &self.chain, x, op, self.deadline())
    }

    /// x_0 ⊕ … ⊕ x_r.
    pub fn iscan<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<A>> + 'a {
        scan::scan(self.t, &self.chain, x, op, self.deadline())
    }

    /// x_0 ⊕ … ⊕ x_(r-1); `None` on rank 0.
    pub fn iexscan<'a, A: Value + Clone + 'a>(
        &'a self,
        x: A,
        op: impl Fn(&A, &A) -> A + 'a,
    ) -> impl Future<Output = Result<Option<A>>> + 'a {
        scan::exscan(self.t, &self.chain, x, op, self.deadline())
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
        scan::double_scan(self.t, &self.chain, x, y, op_lr, op_rl, deadline)
    }

    /// Every member's `x` in rank order at the root (`None` elsewhere).
    pub fn igather<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        x: &V,
    ) -> impl Future<Output = Result<Option<Vec<V>>>> + 'a {
        tree::gather(self.t, &self.chain, root, x, self.deadline())
    }

    /// Member r gets the r-th of the root's `values` (`Some` at the root).
    pub fn iscatter<'a, V: Value + 'a>(
        &'a self,
        root: u32,
        values: Option<Vec<V>>,
    ) -> impl Future<Output = Result<V>> + 'a {
        tree::scatter(self.t, &self.chain, root, values, self.deadline())
    }

    /// Every member's `x` in rank order on every member.
    pub fn iallgather<'a, V: Value + 'a>(
        &'a self,
        x: &V,
    ) -> impl Future<Output = Result<Vec<V>>> + 'a {
        tree::allgather(self.t, &self.chain, x, self.deadline())
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
        block_on(self.t, self.ibarrier())
    }

    /// See [`Comm::ibcast`].
    pub fn bcast<V: Value>(&self, root: u32, value: Option<V>) -> Result<V> {
        block_on(self.t, self.ibcast(root, value))
    }

    /// See [`Comm::ireduce`].
    pub fn reduce<A: Value>(&self, root: u32, x: A, op: impl Fn(&A, &A) -> A) -> Result<Option<A>> {
        block_on(self.t, self.ireduce(root, x, op))
    }

    /// See [`Comm::iallreduce`].
    pub fn allreduce<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        block_on(self.t, self.iallreduce(x, op))
    }

    /// See [`Comm::iscan`].
    pub fn scan<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<A> {
        block_on(self.t, self.iscan(x, op))
    }

    /// See [`Comm::iexscan`].
    pub fn exscan<A: Value + Clone>(&self, x: A, op: impl Fn(&A, &A) -> A) -> Result<Option<A>> {
        block_on(self.t, self.iexscan(x, op))
    }

    /// See [`Comm::idouble_scan`].
    pub fn double_scan<A: Value + Clone, B: Value + Clone>(
        &self,
        x: A,
        y: B,
        op_lr: impl Fn(&A, &A) -> A,
        op_rl: impl Fn(&B, &B) -> B,
    ) -> Result<DoubleScan<A, B>> {
        block_on(self.t, self.idouble_scan(x, y, op_lr, op_rl))
    }

    /// See [`Comm::igather`].
    pub fn gather<V: Value>(&self, root: u32, x: &V) -> Result<Option<Vec<V>>> {
        block_on(self.t, self.igather(root, x))
    }

    /// See [`Comm::iscatter`].
    pub fn scatter<V: Value>(&self, root: u32, values: Option<Vec<V>>) -> Result<V> {
        block_on(self.t, self.iscatter(root, values))
    }

    /// See [`Comm::iallgather`].
    pub fn allgather<V: Value>(&self, x: &V) -> Result<Vec<V>> {
        block_on(self.t, self.iallgather(x))
    }

    /// See [`Comm::itree`].
    pub fn tree(&self, plan: TreePlan, config: PipelineConfig) -> Result<TreeCollective<'t, T>> {
        block_on(self.t, self.itree(plan, config))
    }

    /// The root's `data` into every member's `data` over a tree schedule
    /// (see [`TreeCollective::bcast`]), within this communicator's timeout.
    pub fn tree_bcast(&self, tree: &mut TreeCollective<'t, T>, data: &mut [u8]) -> Result<()> {
        block_on(self.t, tree.bcast(data, self.deadline()))
    }

    /// Elementwise allreduce of `data` over a tree schedule (see
    /// [`TreeCollective::allreduce`]), within this communicator's timeout.
    pub fn tree_allreduce<E: Pod>(
        &self,
        tree: &mut TreeCollective<'t, T>,
        data: &mut [E],
        op: impl Fn(&mut [E], &[E]),
    ) -> Result<()> {
        block_on(self.t, tree.allreduce(data, op, self.deadline()))
    }
}
