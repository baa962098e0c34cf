//! Collectives on buffers of plain values (`bytemuck::Pod`), as MPI's are:
//! the caller's slices are read and written in place, with no
//! serialisation pass, and every member passes the same lengths. Through
//! the host's shared memory when the communicator has it (a buffer of the
//! wrong length still takes part, so the others finish; its owner gets
//! the error), else over the chain.

use std::future::Future;

use crate::blocking::block_on;
use bytemuck::Pod;
use catena_fabric::{Blocking, Transport};

use super::collectives::{Path, Route};
use super::levels::Fold;
use super::Comm;
use crate::chain::Chain;
use crate::host::{self, TeamCall};
use crate::{scan, tree, Error, Result};

/// `Mismatch` unless `got` elements are what the call needs.
fn check_len(what: &str, got: usize, want: usize) -> Result<()> {
    if got == want {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{what} holds {got} elements where the call needs {want}"
    )))
}

/// Copies received bytes into `out`, which must be exactly as long.
pub(super) fn fill<E: Pod>(out: &mut [E], bytes: &[u8], what: &'static str) -> Result<()> {
    let out: &mut [u8] = bytemuck::cast_slice_mut(out);
    if out.len() != bytes.len() {
        return Err(Error::Mismatch {
            what: format!(
                "{what}: {} bytes arrived for a buffer of {}",
                bytes.len(),
                out.len()
            ),
        });
    }
    out.copy_from_slice(bytes);
    Ok(())
}

/// A member's buffer as the chain's reductions carry it: its bytes and a
/// last byte, 0, that says every value folded in had the same length.
pub(super) fn tagged<E: Pod>(buf: &[E]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(std::mem::size_of_val(buf) + 1);
    bytes.extend_from_slice(bytemuck::cast_slice::<E, u8>(buf));
    bytes.push(FOLDED);
    bytes
}

const FOLDED: u8 = 0;
/// What values of different lengths fold into: every member whose result
/// depends on one of them learns it, none gets a partial fold.
pub(super) const POISONED: u8 = 1;

/// The bytes of `a ⊕ b`, elementwise, for [`tagged`] operands (the chain
/// fallback: its reductions carry byte vectors).
pub(super) fn combine_tagged<E: Pod>(a: &[u8], b: &[u8], op: &impl Fn(&E, &E) -> E) -> Vec<u8> {
    let (Some((&FOLDED, a)), Some((&FOLDED, b))) = (a.split_last(), b.split_last()) else {
        return vec![POISONED];
    };
    if a.len() != b.len() {
        return vec![POISONED];
    }
    let (mut acc, x) = (pod_vec::<E>(a), pod_vec::<E>(b));
    for (a, b) in acc.iter_mut().zip(&x) {
        *a = op(a, b);
    }
    tagged(&acc)
}

/// A chain reduction's result without its tag; `Mismatch` if a member's
/// buffer had another length than the others'.
pub(super) fn untagged(mut bytes: Vec<u8>, what: &str) -> Result<Vec<u8>> {
    match bytes.pop() {
        Some(FOLDED) => Ok(bytes),
        _ => Err(Error::Mismatch {
            what: format!("{what}: a member's buffer has another length than the others'"),
        }),
    }
}

/// A chain reduction's result into `recv`, for a call (`what`) whose
/// members sent `sent` elements each: `Mismatch` where a member's buffer
/// had another length than the others'.
pub(super) fn fill_folded<E: Pod>(
    bytes: Vec<u8>,
    recv: &mut [E],
    sent: usize,
    what: &'static str,
) -> Result<()> {
    let bytes = untagged(bytes, what)?;
    check_len("the receive buffer", recv.len(), sent)?;
    fill(recv, &bytes, what)
}

/// The elements `bytes` hold (a trailing partial element is dropped).
fn pod_vec<E: Pod>(bytes: &[u8]) -> Vec<E> {
    let mut v = vec![E::zeroed(); bytes.len() / std::mem::size_of::<E>().max(1)];
    let n = std::mem::size_of_val(&v[..]);
    bytemuck::cast_slice_mut::<E, u8>(&mut v).copy_from_slice(&bytes[..n]);
    v
}

fn bytes_of<E: Pod>(buf: &[E]) -> Vec<u8> {
    bytemuck::cast_slice::<E, u8>(buf).to_vec()
}

/// `acc[i] = acc[i] ⊕ x[i]` over the elements two byte slices hold, as
/// a host reduction combines them (a staging buffer may not be aligned for
/// `E`, so such slices are read element by element).
pub(super) fn combine_pod<E: Pod>(
    acc: &mut [u8],
    x: &[u8],
    op: &impl Fn(&E, &E) -> E,
) -> Result<()> {
    crate::error::user_code("a reduce operation", || {
        match (
            bytemuck::try_cast_slice_mut::<u8, E>(acc),
            bytemuck::try_cast_slice::<u8, E>(x),
        ) {
            (Ok(acc), Ok(x)) => {
                for (a, b) in acc.iter_mut().zip(x) {
                    *a = op(a, b);
                }
            }
            _ => {
                let size = std::mem::size_of::<E>();
                for (a, b) in acc.chunks_exact_mut(size).zip(x.chunks_exact(size)) {
                    let value = op(
                        &bytemuck::pod_read_unaligned(a),
                        &bytemuck::pod_read_unaligned(b),
                    );
                    a.copy_from_slice(bytemuck::bytes_of(&value));
                }
            }
        }
    })
}

/// Whether elements of `E` can travel through host memory (whole elements
/// in a cell; none of zero size).
fn host_fits<E>() -> bool {
    let size = std::mem::size_of::<E>();
    size > 0 && crate::host::stream_fits(size)
}

/// Gathered pieces (`Some` where this member gets them) into `recv`, which
/// must hold `len` elements.
fn gathered_into<E: Pod>(
    recv: Option<&mut [E]>,
    pieces: Option<Vec<Vec<u8>>>,
    len: usize,
    what: &'static str,
) -> Result<()> {
    match (recv, pieces) {
        (Some(recv), Some(pieces)) => {
            check_len("the receive buffer", recv.len(), len)?;
            fill(recv, &pieces.concat(), what)
        }
        _ => Ok(()),
    }
}

/// The root's `send` cut into a `piece`-byte piece for each of `size`
/// members; a buffer too short for them all deals what it has, and the
/// members whose pieces are short learn of it.
fn pieces_of<E: Pod>(send: &[E], piece: usize, size: usize) -> Vec<Vec<u8>> {
    let all = bytemuck::cast_slice::<E, u8>(send);
    let of = |m: usize| Some(m.checked_mul(piece)?..(m + 1).checked_mul(piece)?);
    (0..size)
        .map(|m| of(m).and_then(|at| all.get(at)).unwrap_or(&[]).to_vec())
        .collect()
}

fn bad_root(root: u32, size: u32) -> Error {
    Error::InvalidArgument(format!("root {root} in a group of {size}"))
}

/// `buf` if it holds `len` bytes; else a scratch buffer of `len` bytes to
/// take part in the call with, and the error to report after it.
pub(super) fn or_scratch<'b>(
    buf: &'b mut [u8],
    len: usize,
    scratch: &'b mut Vec<u8>,
    what: &str,
) -> (&'b mut [u8], Option<Error>) {
    if buf.len() == len {
        return (buf, None);
    }
    let error = Error::InvalidArgument(format!(
        "{what} holds {} bytes where the call needs {len}",
        buf.len()
    ));
    scratch.resize(len, 0);
    (&mut scratch[..], Some(error))
}

impl<'t, T: Transport> Comm<'t, T> {
    /// The root's `buf` into every member's `buf` (MPI_Bcast); every member
    /// passes a buffer of the same length.
    pub fn ibcast_into<'a, E: Pod>(
        &'a self,
        root: u32,
        buf: &'a mut [E],
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let route = self.route(host_fits::<E>(), tree::reserve, || {
            let value = (self.rank() == root).then(|| bytes_of(buf));
            tree::bcast_bytes(self.t, &self.chain, root, value, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    return Box::pin(call.bcast_into(self, root, buf, deadline)).await
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => {
                    let bytes = call.await?;
                    match self.rank() == root {
                        true => Ok(()),
                        false => fill(buf, &bytes, "a bcast buffer"),
                    }
                }
                Path::Host(team, seq) => {
                    let bytes = bytemuck::cast_slice_mut::<E, u8>(buf);
                    team.begin(seq, deadline).await?;
                    let out = match root < team.size() {
                        true => {
                            host::bcast(team, seq, root, host::Value::Fixed(bytes), deadline).await
                        }
                        false => Err(bad_root(root, team.size())),
                    };
                    team.end(seq, out)
                }
            }
        }
    }

    /// Elementwise `op` over every member's `send`, in rank order, into the
    /// root's `recv` (`Some` on the root only; MPI_Reduce); `op` associative.
    pub fn ireduce_into<'a, E: Pod>(
        &'a self,
        root: u32,
        send: &'a [E],
        recv: Option<&'a mut [E]>,
        op: impl Fn(&E, &E) -> E + 'a,
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let mut op = Some(op);
        let route = self.route(host_fits::<E>(), tree::reserve, || {
            let op = op.take().expect("taken once");
            tree::reduce(
                self.t,
                &self.chain,
                root,
                tagged(send),
                move |a: &Vec<u8>, b: &Vec<u8>| combine_tagged(a, b, &op),
                deadline,
            )
        });
        let at_root = self.rank() == root;
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let op = op.take().expect("taken once");
                    let buffers = (send, recv);
                    return Box::pin(call.reduce_into(self, root, buffers, op, deadline)).await;
                }
                Route::Flat(path) => path,
            };
            if at_root != recv.is_some() {
                return Err(Error::InvalidArgument(
                    "reduce takes a receive buffer on the root and none elsewhere".into(),
                ));
            }
            match path {
                Path::Chain(call) => match (recv, call.await?) {
                    (Some(recv), Some(bytes)) => fill_folded(bytes, recv, send.len(), "a reduce"),
                    _ => Ok(()),
                },
                Path::Host(team, seq) => {
                    let op = op.take().expect("taken once");
                    let combine = |acc: &mut [u8], x: &[u8]| combine_pod(acc, x, &op);
                    let send = bytemuck::cast_slice::<E, u8>(send);
                    let mut scratch = Vec::new();
                    let (recv, wrong) = match recv {
                        Some(recv) => {
                            let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
                            let (recv, wrong) =
                                or_scratch(recv, send.len(), &mut scratch, "the receive buffer");
                            (Some(recv), wrong)
                        }
                        None => (None, None),
                    };
                    let elem = std::mem::size_of::<E>();
                    team.begin(seq, deadline).await?;
                    let call = TeamCall {
                        team,
                        seq,
                        deadline,
                    };
                    let out = host::reduce(call, root, send, recv, elem, &combine).await;
                    team.end(seq, out)?;
                    wrong.map_or(Ok(()), Err)
                }
            }
        }
    }

    /// Elementwise `op` over every member's `send`, in rank order, into
    /// every member's `recv` (MPI_Allreduce); `op` associative.
    pub fn iallreduce_into<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        op: impl Fn(&E, &E) -> E + 'a,
    ) -> impl Future<Output = Result<()>> + 'a {
        self.allreduce_into_as(send, recv, op, Fold::InRankOrder)
    }

    /// [`Comm::iallreduce_into`] of an `op` that is commutative as well
    /// (see [`Comm::iallreduce_commutative`]).
    pub fn iallreduce_into_commutative<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        op: impl Fn(&E, &E) -> E + 'a,
    ) -> impl Future<Output = Result<()>> + 'a {
        self.allreduce_into_as(send, recv, op, Fold::AnyOrder)
    }

    fn allreduce_into_as<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
        op: impl Fn(&E, &E) -> E + 'a,
        fold: Fold,
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let mut op = Some(op);
        let route = self.route(host_fits::<E>(), Chain::next_call, || {
            let op = op.take().expect("taken once");
            scan::allreduce(
                self.t,
                &self.chain,
                tagged(send),
                move |a: &Vec<u8>, b: &Vec<u8>| combine_tagged(a, b, &op),
                deadline,
            )
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let op = op.take().expect("taken once");
                    let allreduce = call.allreduce_into(self, send, recv, (op, fold), deadline);
                    return Box::pin(allreduce).await;
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => {
                    // Taken part in first, whatever this member's buffer,
                    // so that a wrong one is its owner's error alone.
                    fill_folded(call.await?, recv, send.len(), "an allreduce")
                }
                Path::Host(team, seq) => {
                    let op = op.take().expect("taken once");
                    let combine = |acc: &mut [u8], x: &[u8]| combine_pod(acc, x, &op);
                    let send = bytemuck::cast_slice::<E, u8>(send);
                    let mut scratch = Vec::new();
                    let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
                    let (recv, wrong) =
                        or_scratch(recv, send.len(), &mut scratch, "the receive buffer");
                    let elem = std::mem::size_of::<E>();
                    team.begin(seq, deadline).await?;
                    let call = TeamCall {
                        team,
                        seq,
                        deadline,
                    };
                    let out = host::allreduce(call, send, recv, elem, &combine).await;
                    team.end(seq, out)?;
                    wrong.map_or(Ok(()), Err)
                }
            }
        }
    }

    /// Every member's `send`, in rank order, into the root's `recv` (`Some`
    /// on the root only, `size` times as long as `send`; MPI_Gather).
    pub fn igather_into<'a, E: Pod>(
        &'a self,
        root: u32,
        send: &'a [E],
        recv: Option<&'a mut [E]>,
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let route = self.route(host_fits::<E>(), tree::reserve, || {
            tree::gather_bytes(self.t, &self.chain, root, bytes_of(send), deadline)
        });
        let (size, at_root) = (self.size() as usize, self.rank() == root);
        let len = send.len().saturating_mul(size);
        async move {
            let holds = match at_root == recv.is_some() {
                true => Ok(()),
                false => Err(Error::InvalidArgument(
                    "gather takes a receive buffer on the root and none elsewhere".into(),
                )),
            };
            let path = match route {
                Route::Levels(call) => {
                    let mine = holds.map(|()| bytes_of(send));
                    let all = Box::pin(call.gather_bytes(self, root, mine, deadline)).await?;
                    return gathered_into(recv, all, len, "a gather buffer");
                }
                Route::Flat(path) => path,
            };
            holds?;
            match path {
                Path::Chain(call) => gathered_into(recv, call.await?, len, "a gather buffer"),
                Path::Host(team, seq) => {
                    let send = bytemuck::cast_slice::<E, u8>(send);
                    let mut scratch = Vec::new();
                    let (recv, wrong) = match recv {
                        Some(recv) => {
                            let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
                            let len = send.len().saturating_mul(size);
                            let (recv, wrong) =
                                or_scratch(recv, len, &mut scratch, "the receive buffer");
                            (Some(recv), wrong)
                        }
                        None => (None, None),
                    };
                    team.begin(seq, deadline).await?;
                    let out = host::gather(team, seq, root, send, recv, deadline).await;
                    team.end(seq, out)?;
                    wrong.map_or(Ok(()), Err)
                }
            }
        }
    }

    /// The root's `send` (`Some` on the root only, `size` times as long as
    /// `recv`) dealt out in rank order, one `recv`-long piece to each
    /// member (MPI_Scatter).
    pub fn iscatter_into<'a, E: Pod>(
        &'a self,
        root: u32,
        send: Option<&'a [E]>,
        recv: &'a mut [E],
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let piece = std::mem::size_of_val(recv);
        let size = self.size() as usize;
        let route = self.route(host_fits::<E>(), tree::reserve, || {
            let pieces = send.map(|all| pieces_of(all, piece, size));
            tree::scatter_bytes(self.t, &self.chain, root, pieces, deadline)
        });
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let pieces = send.map(|all| pieces_of(all, piece, size));
                    let mine = Box::pin(call.scatter_bytes(self, root, Ok(pieces), deadline));
                    return fill(recv, &mine.await?, "a scatter buffer");
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => fill(recv, &call.await?, "a scatter buffer"),
                Path::Host(team, seq) => {
                    let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
                    let send = send.map(bytemuck::cast_slice::<E, u8>);
                    // A root whose buffer does not hold a piece per member
                    // deals empty pieces, so every member learns of it.
                    let wrong = send.filter(|s| s.len() != piece * size).map(|s| {
                        Error::InvalidArgument(format!(
                            "the send buffer holds {} bytes where the call needs {}",
                            s.len(),
                            piece * size
                        ))
                    });
                    // Of the call's piece size still, which decides the
                    // path every member takes.
                    let pieces = send.map(|s| match wrong {
                        Some(_) => host::Pieces::Even(&[], piece),
                        None => host::Pieces::Even(s, piece),
                    });
                    let mut scratch = Vec::new();
                    // Its own piece is empty then too.
                    let recv = match &wrong {
                        Some(_) => &mut scratch[..],
                        None => recv,
                    };
                    team.begin(seq, deadline).await?;
                    let out = match root < team.size() {
                        true => host::scatter(team, seq, root, pieces, recv, deadline).await,
                        false => Err(bad_root(root, team.size())),
                    };
                    team.end(seq, out)?;
                    wrong.map_or(Ok(()), Err)
                }
            }
        }
    }

    /// Every member's `send`, in rank order, into every member's `recv`
    /// (`size` times as long as `send`; MPI_Allgather).
    pub fn iallgather_into<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
    ) -> impl Future<Output = Result<()>> + 'a {
        let deadline = self.deadline();
        let route = self.route(host_fits::<E>(), tree::reserve_allgather, || {
            self.iallgather(&bytes_of(send))
        });
        let size = self.size() as usize;
        let len = send.len().saturating_mul(size);
        async move {
            let path = match route {
                Route::Levels(call) => {
                    let all = Box::pin(call.allgather_bytes(self, Ok(bytes_of(send)), deadline));
                    let all = Some(all.await?);
                    return gathered_into(Some(recv), all, len, "an allgather buffer");
                }
                Route::Flat(path) => path,
            };
            match path {
                Path::Chain(call) => {
                    let all = Some(call.await?);
                    gathered_into(Some(recv), all, len, "an allgather buffer")
                }
                Path::Host(team, seq) => {
                    let send = bytemuck::cast_slice::<E, u8>(send);
                    let mut scratch = Vec::new();
                    let recv = bytemuck::cast_slice_mut::<E, u8>(recv);
                    let (recv, wrong) = or_scratch(
                        recv,
                        send.len().saturating_mul(size),
                        &mut scratch,
                        "the receive buffer",
                    );
                    team.begin(seq, deadline).await?;
                    let out = host::allgather(team, seq, send, recv, deadline).await;
                    team.end(seq, out)?;
                    wrong.map_or(Ok(()), Err)
                }
            }
        }
    }
}

/// The blocking forms.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::ibcast_into`].
    pub fn bcast_into<E: Pod>(&self, root: u32, buf: &mut [E]) -> Result<()> {
        block_on(self.t, || self.ibcast_into(root, buf))
    }

    /// See [`Comm::ireduce_into`].
    pub fn reduce_into<E: Pod>(
        &self,
        root: u32,
        send: &[E],
        recv: Option<&mut [E]>,
        op: impl Fn(&E, &E) -> E,
    ) -> Result<()> {
        block_on(self.t, || self.ireduce_into(root, send, recv, op))
    }

    /// See [`Comm::iallreduce_into`].
    pub fn allreduce_into<E: Pod>(
        &self,
        send: &[E],
        recv: &mut [E],
        op: impl Fn(&E, &E) -> E,
    ) -> Result<()> {
        block_on(self.t, || self.iallreduce_into(send, recv, op))
    }

    /// See [`Comm::iallreduce_into_commutative`].
    pub fn allreduce_into_commutative<E: Pod>(
        &self,
        send: &[E],
        recv: &mut [E],
        op: impl Fn(&E, &E) -> E,
    ) -> Result<()> {
        block_on(self.t, || self.iallreduce_into_commutative(send, recv, op))
    }

    /// See [`Comm::igather_into`].
    pub fn gather_into<E: Pod>(&self, root: u32, send: &[E], recv: Option<&mut [E]>) -> Result<()> {
        block_on(self.t, || self.igather_into(root, send, recv))
    }

    /// See [`Comm::iscatter_into`].
    pub fn scatter_into<E: Pod>(
        &self,
        root: u32,
        send: Option<&[E]>,
        recv: &mut [E],
    ) -> Result<()> {
        block_on(self.t, || self.iscatter_into(root, send, recv))
    }

    /// See [`Comm::iallgather_into`].
    pub fn allgather_into<E: Pod>(&self, send: &[E], recv: &mut [E]) -> Result<()> {
        block_on(self.t, || self.iallgather_into(send, recv))
    }
}
