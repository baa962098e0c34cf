//! Reduce inside a host, in rank order (the operation need only be
//! associative). Values that fit a mailbox line go up a k-nomial tree to
//! member 0, whose subtrees are contiguous runs, and then to the root;
//! longer ones are reduced by slices: every member offers its value (see
//! `offer`), or exposes it cut into one slice per member, reduces its own
//! slice of everyone's, and the root copies the reduced slices out.

use catena_fabric::{HostMemory, Time};

use super::mailbox::{arrived, post, read, POISON};
use super::offer::{copy_offered, reply, Offer, Round, Where};
use super::stream::{chunk_for, chunks, expose, pull, pull_into, Readers};
use super::tree::{children, parent};
use super::{others_then_me, select, Combine, Op, Team, TeamCall};
use crate::{Error, Result};

/// Every member's `send` (whole elements of `elem` bytes, the same length
/// everywhere) combined in rank order into the root's `recv`.
pub(crate) async fn reduce<T: HostMemory>(
    call: TeamCall<'_, '_, T>,
    root: u32,
    send: &[u8],
    recv: Option<&mut [u8]>,
    elem: usize,
    combine: Combine<'_>,
) -> Result<()> {
    let TeamCall {
        team,
        seq,
        deadline,
    } = call;
    let me = team.me();
    if send.len() <= team.layout().inline() {
        let mut acc = team.take_buffer();
        let radix = select::tree_radix(team.size(), team.tuning());
        let reduced = up_the_tree(team, seq, send, &mut acc, radix, combine, deadline).await;
        let out = match (me, root, reduced, recv) {
            // The root waits for member 0's result: it gets the poison.
            (0, 1.., Err(e @ Error::Mismatch { .. }), _) => {
                post(team, root, seq, POISON, &[], deadline).await?;
                Err(e)
            }
            (_, _, Err(e), _) => Err(e),
            (0, 0, Ok(true), Some(recv)) => {
                team.all_entered(seq);
                copy(recv, &acc)
            }
            (0, _, Ok(true), _) => post(team, root, seq, acc.len() as u64, &acc, deadline).await,
            (_, _, _, Some(recv)) if me == root => {
                let len = arrived(team, 0, seq, deadline).await?;
                team.all_entered(seq);
                if len != recv.len() as u64 {
                    return Err(length_mismatch(len, recv.len()));
                }
                read(team, 0, seq, recv)
            }
            _ => Ok(()),
        };
        team.put_buffer(acc);
        return out;
    }
    let (slice, reduced) = reduce_slices(team, seq, send, elem, combine, deadline).await?;
    let chunk = chunk_for(elem).expect("checked by reduce_slices");
    if me != root {
        return expose(team, &[(&reduced, Readers::One(root))], chunk, deadline).await;
    }
    let recv = recv.expect("the root has a receive buffer");
    for m in others_then_me(me, team.size()) {
        let part = &mut recv[slice(m)];
        match m == me {
            true => part.copy_from_slice(&reduced),
            false => pull_into(team, m, 0, part, chunk, deadline).await?,
        }
    }
    team.all_entered(seq);
    Ok(())
}

fn copy(recv: &mut [u8], value: &[u8]) -> Result<()> {
    if recv.len() != value.len() {
        return Err(length_mismatch(value.len() as u64, recv.len()));
    }
    recv.copy_from_slice(value);
    Ok(())
}

/// A member posted `len` bytes (or the poison) where `expected` were due.
fn length_mismatch(len: u64, expected: usize) -> Error {
    let what = match len {
        POISON => "reduce lengths: a member's value has another length than the others'".into(),
        len => format!("reduce lengths: {len} bytes where {expected} were expected"),
    };
    Error::Mismatch { what }
}

/// A short value reduced up the radix-`radix` tree into `acc`: true on
/// member 0, which holds the result. Every member's value must be as long
/// as member 0's.
pub(crate) async fn up_the_tree<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    acc: &mut Vec<u8>,
    radix: u32,
    combine: Combine<'_>,
    deadline: Time,
) -> Result<bool> {
    let (me, n) = (team.me(), team.size());
    acc.clear();
    acc.extend_from_slice(send);
    let mut mismatch = None;
    for c in children(me, n, radix) {
        let len = arrived(team, c, seq, deadline).await?;
        if len != acc.len() as u64 {
            mismatch.get_or_insert(len);
            continue;
        }
        team.with_scratch(acc.len(), |value| {
            read(team, c, seq, value)?;
            combine(acc, value)
        })?;
    }
    // A member whose subtree disagrees on the length still posts, so that
    // no one waits, but the poison: none above folds a partial value in,
    // and member 0 learns that the call failed.
    if let Some(p) = parent(me, radix) {
        match mismatch {
            None => post(team, p, seq, acc.len() as u64, acc, deadline).await?,
            Some(_) => post(team, p, seq, POISON, &[], deadline).await?,
        }
    }
    match mismatch {
        Some(len) => Err(length_mismatch(len, acc.len())),
        None => Ok(me == 0),
    }
}

/// The slice of member `m` of a value of `len` bytes in elements of `elem`.
pub(crate) fn slices(len: usize, elem: usize, n: u32) -> impl Fn(u32) -> std::ops::Range<usize> {
    let elem = elem.max(1);
    let count = len / elem;
    move |m: u32| {
        let at = |m: u32| count * m as usize / n as usize * elem;
        at(m)..at(m + 1)
    }
}

/// The ranges of a value's slices, and this member's reduced slice.
type Sliced = (Box<dyn Fn(u32) -> std::ops::Range<usize>>, Vec<u8>);

/// Reduce by slices: every member posts its length to every other, offers
/// its value or exposes it cut into slices (slice m for member m; with an
/// offer, only to readers that could not copy theirs), and combines slice
/// `me` of every member's value in rank order. Yields the slices' ranges
/// and this member's reduced slice.
///
/// The schedule is diagonal: a member reads the members above it in turn
/// (me + 1, me + 2, ... round to me - 1) and a writer exposes its slices
/// for the members below it in turn (w - 1, w - 2, ...), so at step k
/// every reader reads from the writer k above it, which exposes that
/// reader's slice k-th: all writers stream at once, none waits for a
/// reader still busy elsewhere (in rank order, reader 15 of 16 waited for
/// 14 readers before it at every writer). The runs above and below are
/// combined apart and then in rank order, so an operation need only be
/// associative. No wait cycle exists: a reader at step k waits only for
/// readers at earlier steps.
pub(crate) fn reduce_slices<'a, T: HostMemory>(
    team: &'a Team<'_, T>,
    seq: u64,
    send: &'a [u8],
    elem: usize,
    combine: Combine<'a>,
    deadline: Time,
) -> super::stream::Step<'a, Sliced> {
    Box::pin(reduce_slices_in(team, seq, send, elem, combine, deadline))
}

async fn reduce_slices_in<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    send: &[u8],
    elem: usize,
    combine: Combine<'_>,
    deadline: Time,
) -> Result<Sliced> {
    let (me, n) = (team.me(), team.size());
    let chunk = chunk_for(elem).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "elements of {elem} bytes are too large for host memory"
        ))
    })?;
    let len = send.len() as u64;
    let others = || (0..n).filter(move |&m| m != me);
    // Every member copies in this call, as in an allgather: offered at any
    // length. The post says so (each reader copies its own slice of it).
    let began = team.t().now();
    let copied = send.len() / n as usize;
    let offer = Offer::of_any_length(team, Op::Slices, send, copied)?;
    let place = Where::from_start(offer.as_ref().map(Offer::handle));
    for m in others() {
        post(team, m, seq, len, &place.encode(), deadline).await?;
    }
    let mut mismatch = None;
    for m in others() {
        let got = arrived(team, m, seq, deadline).await?;
        if got != len {
            mismatch.get_or_insert((m, got));
        }
    }
    if let Some((m, got)) = mismatch {
        return Err(Error::Mismatch {
            what: format!(
                "reduce lengths: member {m} passes {got} bytes where this one passes {len}"
            ),
        });
    }
    let slice = slices(send.len(), elem, n);
    // Member `k` below `w`, and above it.
    let below = move |w: u32, k: u32| (w + n - k) % n;
    let above = move |w: u32, k: u32| (w + k) % n;
    let pieces: Vec<(&[u8], Readers<'_>)> = (1..n)
        .map(|k| below(me, k))
        .map(|m| match offer {
            Some(_) => (
                &send[slice(m)],
                Readers::Refusing {
                    reader: m,
                    round: Round::first(seq),
                },
            ),
            None => (&send[slice(m)], Readers::One(m)),
        })
        .collect();
    // Where piece `m` of a writer `w` starts in `w`'s exposure: after the
    // pieces of the members between them, from `w` down.
    let first = |w: u32, m: u32| -> u64 {
        (1..(w + n - m) % n)
            .map(|k| chunks(slice(below(w, k)).len(), chunk))
            .sum()
    };
    let exposing = expose(team, &pieces, chunk, deadline);
    let reducing = async {
        let mine = slice(me);
        // Members me..n, then 0..me into a second accumulator, which
        // takes the first's sum at the end. The last member has no run
        // above and adds its own slice last (no copy of it: at N = 2
        // neither member holds a second accumulator).
        let mut upper = (me + 1 < n).then(|| send[mine.clone()].to_vec());
        let mut lower = Vec::new();
        for m in (1..n).map(|k| above(me, k)) {
            let first = first(m, me);
            // Member 0's slice starts the run below: copied, not combined.
            let fresh = m == 0;
            if fresh {
                lower.resize(mine.len(), 0);
            }
            let acc = match (m > me, upper.as_mut()) {
                (true, Some(upper)) => upper,
                _ => &mut lower,
            };
            if let Where::Offered { handle, .. } = Where::read(team, m, seq)? {
                let offered = (m, handle, mine.clone());
                let copied = combine_offered(team, seq, offered, acc, fresh, chunk, combine);
                // The writer waits for every reply, whatever became of the copy.
                reply(team, m, Round::first(seq), !matches!(copied, Ok(false)))?;
                if copied? {
                    continue;
                }
            }
            match fresh {
                true => pull_into(team, 0, first, acc, chunk, deadline).await?,
                false => {
                    let take =
                        |at: usize, part: &[u8]| combine(&mut acc[at..at + part.len()], part);
                    pull(team, m, first, mine.len(), chunk, take, deadline).await?
                }
            }
        }
        match (me, upper) {
            (0, Some(upper)) => Ok::<_, Error>(upper),
            (0, None) => Ok(send[mine].to_vec()),
            (_, Some(upper)) => {
                combine(&mut lower, &upper)?;
                Ok(lower)
            }
            (_, None) => {
                combine(&mut lower, &send[mine])?;
                Ok(lower)
            }
        }
    };
    let ((), reduced) = crate::join::join(exposing, reducing).await?;
    team.timed(seq, Op::Slices, copied, offer.is_some(), began);
    Ok((Box::new(slice), reduced))
}

/// Chunks a reducing member copies out of an offer at a time: it combines
/// each while it is in cache, with a copy's system call per few of them.
const CHUNKS_PER_COPY: usize = 8;

/// Copies `range` of member `from`'s value, which it offered as `handle`,
/// and combines it into `acc` (a copy into `acc` if `fresh`), a few
/// chunks of `chunk` bytes (whole elements) at a time: `Ok(false)` if
/// this member cannot copy it. An offer that stops being copyable after
/// its first bytes (its writer gone) fails the call: what was combined
/// cannot be taken back.
fn combine_offered<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    (from, handle, range): (u32, u64, std::ops::Range<usize>),
    acc: &mut [u8],
    fresh: bool,
    chunk: usize,
    combine: Combine<'_>,
) -> Result<bool> {
    if fresh {
        return copy_offered(team, from, seq, (handle, range.start as u64), acc);
    }
    let step = chunk * CHUNKS_PER_COPY;
    let mut piece = vec![0; step.min(range.len())];
    for at in (0..range.len()).step_by(step) {
        let part = &mut piece[..step.min(range.len() - at)];
        if !copy_offered(team, from, seq, (handle, (range.start + at) as u64), part)? {
            return match at {
                0 => Ok(false),
                _ => Err(catena_fabric::Error::Protocol(format!(
                    "member {from}'s offer of call {seq} could no longer be copied after \
                     {at} bytes"
                ))
                .into()),
            };
        }
        combine(&mut acc[at..at + part.len()], part)?;
    }
    Ok(true)
}
