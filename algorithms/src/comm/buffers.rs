//! Collectives on buffers of plain values (`bytemuck::Pod`), as MPI's are:
//! the caller's slices are read and written in place, with no
//! serialisation pass, and every member passes the same lengths.

use std::future::Future;

use bytemuck::Pod;
use catena_fabric::{block_on, Blocking, Transport};

use super::Comm;
use crate::{tree, Error, Result};

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
fn fill<E: Pod>(out: &mut [E], bytes: &[u8], what: &'static str) -> Result<()> {
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

/// The bytes of `a ⊕ b`, elementwise, for operands that arrive as bytes
/// (the chain fallback: its reductions carry byte vectors).
fn combine_bytes<E: Pod>(a: &[u8], b: &[u8], op: &impl Fn(&E, &E) -> E) -> Vec<u8> {
    let (mut acc, x) = (pod_vec::<E>(a), pod_vec::<E>(b));
    for (a, b) in acc.iter_mut().zip(&x) {
        *a = op(a, b);
    }
    bytemuck::cast_slice::<E, u8>(&acc).to_vec()
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

impl<'t, T: Transport> Comm<'t, T> {
    /// The root's `buf` into every member's `buf` (MPI_Bcast); every member
    /// passes a buffer of the same length.
    pub fn ibcast_into<'a, E: Pod>(
        &'a self,
        root: u32,
        buf: &'a mut [E],
    ) -> impl Future<Output = Result<()>> + 'a {
        let value = (self.rank() == root).then(|| bytes_of(buf));
        let got = tree::bcast::<_, Vec<u8>>(self.t, &self.chain, root, value, self.deadline());
        async move { fill(buf, &got.await?, "a bcast buffer") }
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
        let reduce = tree::reduce(
            self.t,
            &self.chain,
            root,
            bytes_of(send),
            move |a: &Vec<u8>, b: &Vec<u8>| combine_bytes(a, b, &op),
            self.deadline(),
        );
        let at_root = self.rank() == root;
        async move {
            if at_root != recv.is_some() {
                return Err(Error::InvalidArgument(
                    "reduce takes a receive buffer on the root and none elsewhere".into(),
                ));
            }
            let reduced = reduce.await?;
            match (recv, reduced) {
                (Some(recv), Some(bytes)) => {
                    check_len("the receive buffer", recv.len(), send.len())?;
                    fill(recv, &bytes, "a reduce buffer")
                }
                _ => Ok(()),
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
        let reduced = self.iallreduce(bytes_of(send), move |a: &Vec<u8>, b: &Vec<u8>| {
            combine_bytes(a, b, &op)
        });
        async move {
            check_len("the receive buffer", recv.len(), send.len())?;
            fill(recv, &reduced.await?, "an allreduce buffer")
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
        let gathered =
            tree::gather_bytes(self.t, &self.chain, root, bytes_of(send), self.deadline());
        let size = self.size() as usize;
        async move {
            let all = gathered.await?;
            match (recv, all) {
                (Some(recv), Some(all)) => {
                    check_len("the receive buffer", recv.len(), send.len() * size)?;
                    fill(recv, &all.concat(), "a gather buffer")
                }
                (None, None) => Ok(()),
                _ => Err(Error::InvalidArgument(
                    "gather takes a receive buffer on the root and none elsewhere".into(),
                )),
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
        let pieces = send.map(|all| {
            bytemuck::cast_slice::<E, u8>(all)
                .chunks(std::mem::size_of_val(recv).max(1))
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        });
        let got = tree::scatter_bytes(self.t, &self.chain, root, pieces, self.deadline());
        async move { fill(recv, &got.await?, "a scatter buffer") }
    }

    /// Every member's `send`, in rank order, into every member's `recv`
    /// (`size` times as long as `send`; MPI_Allgather).
    pub fn iallgather_into<'a, E: Pod>(
        &'a self,
        send: &'a [E],
        recv: &'a mut [E],
    ) -> impl Future<Output = Result<()>> + 'a {
        let gathered = self.iallgather(&bytes_of(send));
        let size = self.size() as usize;
        async move {
            check_len("the receive buffer", recv.len(), send.len() * size)?;
            let all: Vec<Vec<u8>> = gathered.await?;
            fill(recv, &all.concat(), "an allgather buffer")
        }
    }
}

/// The blocking forms.
impl<'t, T: Transport + Blocking> Comm<'t, T> {
    /// See [`Comm::ibcast_into`].
    pub fn bcast_into<E: Pod>(&self, root: u32, buf: &mut [E]) -> Result<()> {
        block_on(self.t, self.ibcast_into(root, buf))
    }

    /// See [`Comm::ireduce_into`].
    pub fn reduce_into<E: Pod>(
        &self,
        root: u32,
        send: &[E],
        recv: Option<&mut [E]>,
        op: impl Fn(&E, &E) -> E,
    ) -> Result<()> {
        block_on(self.t, self.ireduce_into(root, send, recv, op))
    }

    /// See [`Comm::iallreduce_into`].
    pub fn allreduce_into<E: Pod>(
        &self,
        send: &[E],
        recv: &mut [E],
        op: impl Fn(&E, &E) -> E,
    ) -> Result<()> {
        block_on(self.t, self.iallreduce_into(send, recv, op))
    }

    /// See [`Comm::igather_into`].
    pub fn gather_into<E: Pod>(&self, root: u32, send: &[E], recv: Option<&mut [E]>) -> Result<()> {
        block_on(self.t, self.igather_into(root, send, recv))
    }

    /// See [`Comm::iscatter_into`].
    pub fn scatter_into<E: Pod>(
        &self,
        root: u32,
        send: Option<&[E]>,
        recv: &mut [E],
    ) -> Result<()> {
        block_on(self.t, self.iscatter_into(root, send, recv))
    }

    /// See [`Comm::iallgather_into`].
    pub fn allgather_into<E: Pod>(&self, send: &[E], recv: &mut [E]) -> Result<()> {
        block_on(self.t, self.iallgather_into(send, recv))
    }
}
