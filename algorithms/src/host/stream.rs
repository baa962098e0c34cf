//! Data larger than a mailbox line: the writer copies it chunk by chunk
//! into its own cells and tells each reader how many chunks it has made
//! ready for it (a count in the reader's region); each reader copies its
//! chunks out of the writer's cells and counts what it consumed in the
//! writer's region. A cell is written again only once every reader of its
//! last chunk has consumed it; an exposure begins once everything exposed
//! before was consumed. So readers pull in parallel, and a message of any
//! size flows through `CELLS` cells.

use std::future::Future;
use std::pin::Pin;

use catena_fabric::{wait_until, HostMemory, Time};

use super::layout::{CELL, CELLS};
use super::offer::{refused, Round};
use super::Team;
use crate::{Error, Result};

/// Who reads a piece of an exposure.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Readers<'a> {
    /// Every member but the writer.
    All,
    /// One member.
    One(u32),
    /// These members (not the writer).
    Some(&'a [u32]),
    /// Member `reader` if it replies that it could not copy this member's
    /// offer of `round` (see `offer`), else nobody. The reply is awaited
    /// when the piece's turn comes, not before: readers that take writers
    /// in turn and reply at their turn never wait in a cycle.
    Refusing { reader: u32, round: Round },
}

/// The chunk size for elements of `elem` bytes: the most whole elements a
/// cell holds, so that a reduction can combine each chunk as it lands;
/// `None` for elements larger than a cell.
pub(crate) fn chunk_for(elem: usize) -> Option<usize> {
    let elem = elem.max(1);
    (elem <= CELL).then(|| CELL / elem * elem)
}

/// Chunks of `chunk` bytes a piece of `len` bytes takes.
pub(crate) fn chunks(len: usize, chunk: usize) -> u64 {
    len.div_ceil(chunk) as u64
}

/// The boxed future of a long message's step: it carries waits and loops
/// worth hundreds of bytes, which the calls whose values fit a mailbox
/// slot (and their futures, moved whole when they are pinned) should not.
pub(crate) type Step<'a, R> = Pin<Box<dyn Future<Output = Result<R>> + 'a>>;

/// Exposes `pieces` in order, each to its readers, in chunks of `chunk`
/// bytes (at most a cell).
pub(crate) fn expose<'a, T: HostMemory>(
    team: &'a Team<'_, T>,
    pieces: &'a [(&'a [u8], Readers<'a>)],
    chunk: usize,
    deadline: Time,
) -> Step<'a, ()> {
    Box::pin(expose_in(team, pieces, chunk, &mut [], deadline))
}

/// [`expose`] of one piece that also copies it into `mirror` (its length),
/// chunk by chunk while each is in cache: what a member that gathers its
/// own value too would otherwise read from memory a second time.
pub(crate) fn expose_mirrored<'a, T: HostMemory>(
    team: &'a Team<'_, T>,
    piece: &'a [(&'a [u8], Readers<'a>); 1],
    chunk: usize,
    mirror: &'a mut [u8],
    deadline: Time,
) -> Step<'a, ()> {
    if piece[0].0.len() != mirror.len() {
        // The callers size both alike; a slip is an error, not a panic in
        // the middle of a copy.
        let why = format!(
            "a {}-byte exposure mirrored into {} bytes",
            piece[0].0.len(),
            mirror.len()
        );
        return Box::pin(async move { Err(Error::InvalidArgument(why)) });
    }
    Box::pin(expose_in(team, piece, chunk, mirror, deadline))
}

async fn expose_in<T: HostMemory>(
    team: &Team<'_, T>,
    pieces: &[(&[u8], Readers<'_>)],
    chunk: usize,
    mirror: &mut [u8],
    deadline: Time,
) -> Result<()> {
    debug_assert!(chunk > 0 && chunk <= CELL);
    let t = team.t();
    let (me, size) = (team.me(), team.size());
    let own = team.peer(me)?;
    let consumed = |by: u32| team.at(me, team.layout().consumed(by));
    let wait_consumed = |by: u32, count: u64| {
        wait_until(t, deadline, "a host peer to consume a chunk", move || {
            Ok((t.host_load(own, consumed(by))? >= count).then_some(()))
        })
    };
    // Everything exposed before has been read: the cells are free.
    for m in (0..size).filter(|&m| m != me) {
        wait_consumed(m, team.sent_to(m).get()).await?;
    }
    // For each cell, the readers of its current chunk and the count each
    // reaches once it consumed it.
    let mut users: Vec<Vec<(u32, u64)>> = vec![Vec::new(); CELLS as usize];
    let mut index = 0u64;
    let mut mirror = mirror.chunks_mut(chunk);
    for &(data, readers) in pieces {
        let unread = match readers {
            Readers::Some([]) => true,
            Readers::Refusing { reader, round } => {
                refused(team, round, std::iter::once(reader), deadline)
                    .await?
                    .is_empty()
            }
            _ => false,
        };
        if unread {
            // Read by nobody: its chunks keep their places, unwritten.
            index += chunks(data.len(), chunk);
            continue;
        }
        for chunk in data.chunks(chunk) {
            let cell = (index % CELLS) as usize;
            for (by, count) in std::mem::take(&mut users[cell]) {
                wait_consumed(by, count).await?;
            }
            t.host_write(own, team.at(me, team.layout().cell(index)), chunk)?;
            if let Some(copy) = mirror.next() {
                copy.copy_from_slice(chunk);
            }
            let mut tell = |m: u32| -> Result<()> {
                let sent = team.sent_to(m);
                sent.set(sent.get() + 1);
                users[cell].push((m, sent.get()));
                let ready = team.at(m, team.layout().ready(me));
                t.host_store(team.peer(m)?, ready, sent.get())
                    .map_err(Error::from)
            };
            match readers {
                Readers::All => (0..size).filter(|&m| m != me).try_for_each(&mut tell)?,
                Readers::One(m) | Readers::Refusing { reader: m, .. } => tell(m)?,
                Readers::Some(members) => members.iter().try_for_each(|&m| tell(m))?,
            }
            index += 1;
        }
    }
    Ok(())
}

/// Copies the `len` bytes that member `from` exposes in chunks of `chunk`
/// bytes from its chunk `first` on, handing each chunk to `take` (its
/// offset in the piece and its bytes) once it is copied.
pub(crate) fn pull<'a, T: HostMemory>(
    team: &'a Team<'_, T>,
    from: u32,
    first: u64,
    len: usize,
    chunk: usize,
    take: impl FnMut(usize, &[u8]) -> Result<()> + 'a,
    deadline: Time,
) -> Step<'a, ()> {
    Box::pin(pull_in(team, from, first, len, chunk, take, deadline))
}

async fn pull_in<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    first: u64,
    len: usize,
    chunk: usize,
    mut take: impl FnMut(usize, &[u8]) -> Result<()>,
    deadline: Time,
) -> Result<()> {
    let cell_bytes = chunk;
    let t = team.t();
    let me = team.me();
    let (own, writer) = (team.peer(me)?, team.peer(from)?);
    let ready = team.at(me, team.layout().ready(from));
    let consumed = team.at(from, team.layout().consumed(me));
    let got = team.got_from(from);
    let mut chunk = vec![0u8; cell_bytes.min(len)];
    for (i, offset) in (0..len).step_by(cell_bytes).enumerate() {
        let n = cell_bytes.min(len - offset);
        let want = got.get() + 1;
        wait_until(t, deadline, "a host peer's chunk", || {
            Ok((t.host_load(own, ready)? >= want).then_some(()))
        })
        .await?;
        let cell = team.at(from, team.layout().cell(first + i as u64));
        t.host_read(writer, cell, &mut chunk[..n])?;
        got.set(want);
        t.host_store(writer, consumed, want)?;
        take(offset, &chunk[..n])?;
    }
    Ok(())
}

/// [`pull`] straight into `out` (no staging copy).
pub(crate) fn pull_into<'a, T: HostMemory>(
    team: &'a Team<'_, T>,
    from: u32,
    first: u64,
    out: &'a mut [u8],
    chunk: usize,
    deadline: Time,
) -> Step<'a, ()> {
    Box::pin(pull_into_in(team, from, first, out, chunk, deadline))
}

async fn pull_into_in<T: HostMemory>(
    team: &Team<'_, T>,
    from: u32,
    first: u64,
    out: &mut [u8],
    chunk: usize,
    deadline: Time,
) -> Result<()> {
    let t = team.t();
    let me = team.me();
    let (own, writer) = (team.peer(me)?, team.peer(from)?);
    let ready = team.at(me, team.layout().ready(from));
    let consumed = team.at(from, team.layout().consumed(me));
    let got = team.got_from(from);
    for (i, part) in out.chunks_mut(chunk).enumerate() {
        let want = got.get() + 1;
        wait_until(t, deadline, "a host peer's chunk", || {
            Ok((t.host_load(own, ready)? >= want).then_some(()))
        })
        .await?;
        let cell = team.at(from, team.layout().cell(first + i as u64));
        t.host_read(writer, cell, part)?;
        got.set(want);
        t.host_store(writer, consumed, want)?;
    }
    Ok(())
}
