//! The frames a job that spans hosts exchanges over TCP: between the
//! launcher, its proxy on each host, and the ranks. A frame is a 4-byte
//! length, a tag byte and the fields; whatever does not parse is a typed
//! `Bootstrap` error, so a stranger on the port cannot crash the launcher.

use std::io::{Read, Write};

use crate::{Error, Rank, Result};

/// Longest frame accepted: room for a large start order.
const MAX_FRAME: usize = 256 << 20;
/// Longest frame of the handshake (a hello is 74 bytes): what an
/// unauthenticated peer may make the other side read.
pub const MAX_HELLO: usize = 128;
/// Bytes of a handshake nonce.
pub const NONCE_BYTES: usize = 32;
/// A handshake nonce: fresh random bytes for each connection.
pub type Nonce = [u8; NONCE_BYTES];
/// An HMAC-SHA256 tag.
pub type Proof = [u8; 32];

/// Who is at the other end of a launcher connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// A rank of the job.
    Rank(Rank),
    /// The proxy of the host of this index in the launcher's host list.
    Proxy(u32),
}

impl Peer {
    /// Its kind byte and number, as written on the wire and under a proof.
    pub fn to_bytes(self) -> [u8; 5] {
        let (kind, n) = match self {
            Peer::Rank(r) => (PEER_RANK, r),
            Peer::Proxy(h) => (PEER_PROXY, h),
        };
        let mut bytes = [kind; 5];
        bytes[1..].copy_from_slice(&n.to_le_bytes());
        bytes
    }
}

const PEER_RANK: u8 = 1;
const PEER_PROXY: u8 = 2;

/// One message of the launcher's protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame {
    /// Launcher to newcomer (its first frame on every connection): the
    /// launcher's fresh nonce, which the answer must cover.
    Challenge(Nonce),
    /// Newcomer to launcher, its only frame before it is let in: who it
    /// is, its own fresh nonce, and its proof of the job key over both
    /// nonces (see `bootstrap::handshake`).
    Hello {
        /// The rank or proxy it says it is.
        peer: Peer,
        /// Its nonce, which the launcher's welcome must cover.
        nonce: Nonce,
        /// HMAC-SHA256 under the job key.
        proof: Proof,
    },
    /// Launcher to newcomer: let in, and the launcher's proof of the job
    /// key over both nonces.
    Welcome(Proof),
    /// Launcher to proxy: the ranks to start on its host, and how.
    Start(ProxyOrder),
    /// Rank to launcher: its entry, published once.
    Publish(Vec<u8>),
    /// Launcher to rank: every rank has published; where the ranks run.
    Fenced {
        /// How many hosts the job spans.
        hosts: u32,
        /// The ranks on the receiver's host.
        local: Vec<Rank>,
    },
    /// Rank to launcher: which rank's entry it wants.
    Lookup(Rank),
    /// Launcher to rank: that rank's entry (empty if it published none).
    Entry(Rank, Vec<u8>),
    /// Rank to launcher: arrived at its next barrier.
    Arrive,
    /// Launcher to rank: barriers up to this one are complete.
    Released(u64),
    /// Launcher to rank: the job lost this rank.
    Failed(Rank),
    /// Proxy to launcher: a rank of its host exited with this wait status.
    Exited {
        /// The rank.
        rank: Rank,
        /// Its raw wait status (as `ExitStatusExt::from_raw` takes it).
        status: i32,
    },
    /// Proxy to launcher: all its ranks are gone; this many named objects
    /// of dead processes were removed from its host's /dev/shm.
    ProxyDone {
        /// Leftovers removed.
        leftovers: u32,
    },
    /// Launcher to proxy: kill the ranks that still run.
    Kill,
}

/// What a proxy starts: its host's ranks of the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyOrder {
    /// The executable every rank runs.
    pub program: Vec<u8>,
    /// Its arguments.
    pub args: Vec<Vec<u8>>,
    /// Extra environment, as `(name, value)`.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
    /// The job's rank count.
    pub size: u32,
    /// The ranks of this host.
    pub ranks: Vec<Rank>,
    /// Whether to pin each rank to a core.
    pub pin: bool,
}

const CHALLENGE: u8 = 1;
const HELLO: u8 = 2;
const WELCOME: u8 = 12;
const START: u8 = 3;
const PUBLISH: u8 = 4;
const FENCED: u8 = 5;
const LOOKUP: u8 = 13;
const ENTRY: u8 = 14;
const ARRIVE: u8 = 6;
const RELEASED: u8 = 7;
const FAILED: u8 = 8;
const EXITED: u8 = 9;
const PROXY_DONE: u8 = 10;
const KILL: u8 = 11;

impl Frame {
    /// Writes the frame to `to`.
    pub fn write(&self, to: &mut impl Write) -> Result<()> {
        let mut out = Encoder(vec![0; 4]);
        match self {
            Frame::Challenge(nonce) => {
                out.u8(CHALLENGE);
                out.0.extend_from_slice(nonce);
            }
            Frame::Hello { peer, nonce, proof } => {
                out.u8(HELLO);
                out.0.extend_from_slice(&peer.to_bytes());
                out.0.extend_from_slice(nonce);
                out.0.extend_from_slice(proof);
            }
            Frame::Welcome(proof) => {
                out.u8(WELCOME);
                out.0.extend_from_slice(proof);
            }
            Frame::Start(order) => {
                out.u8(START);
                out.bytes(&order.program);
                out.list(&order.args, |out, a| out.bytes(a));
                out.list(&order.env, |out, (k, v)| {
                    out.bytes(k);
                    out.bytes(v);
                });
                out.u32(order.size);
                out.list(&order.ranks, |out, r| out.u32(*r));
                out.u8(order.pin.into());
            }
            Frame::Publish(mine) => {
                out.u8(PUBLISH);
                out.bytes(mine);
            }
            Frame::Fenced { hosts, local } => {
                out.u8(FENCED);
                out.u32(*hosts);
                out.list(local, |out, r| out.u32(*r));
            }
            Frame::Lookup(rank) => {
                out.u8(LOOKUP);
                out.u32(*rank);
            }
            Frame::Entry(rank, entry) => {
                out.u8(ENTRY);
                out.u32(*rank);
                out.bytes(entry);
            }
            Frame::Arrive => out.u8(ARRIVE),
            Frame::Released(n) => {
                out.u8(RELEASED);
                out.0.extend_from_slice(&n.to_le_bytes());
            }
            Frame::Failed(rank) => {
                out.u8(FAILED);
                out.u32(*rank);
            }
            Frame::Exited { rank, status } => {
                out.u8(EXITED);
                out.u32(*rank);
                out.u32(*status as u32);
            }
            Frame::ProxyDone { leftovers } => {
                out.u8(PROXY_DONE);
                out.u32(*leftovers);
            }
            Frame::Kill => out.u8(KILL),
        }
        let len = out.0.len() - 4;
        if len > MAX_FRAME {
            return Err(Error::Bootstrap(format!(
                "a launcher frame of {len} bytes is over the {MAX_FRAME}-byte limit"
            )));
        }
        out.0[..4].copy_from_slice(&(len as u32).to_le_bytes());
        to.write_all(&out.0)
            .map_err(|e| Error::io("writing to the launcher connection", e))
    }

    /// Reads one frame from `from`; `Ok(None)` at a clean end of stream.
    pub fn read(from: &mut impl Read) -> Result<Option<Frame>> {
        Frame::read_at_most(from, MAX_FRAME)
    }

    /// The first frame in `bytes` and the bytes it took; `Ok(None)` while
    /// it is incomplete. A length of 0 or over `limit` is an error at once,
    /// so a poll loop never buffers more than one frame it accepts.
    pub fn parse(bytes: &[u8], limit: usize) -> Result<Option<(Frame, usize)>> {
        let Some(len) = bytes.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = frame_length(*len, limit)?;
        match bytes[4..].get(..len) {
            None => Ok(None),
            Some(body) => Ok(Frame::decode(body)?.map(|frame| (frame, 4 + len))),
        }
    }

    /// [`Frame::read`] of a frame of at most `limit` bytes: what an
    /// unauthenticated peer's first frame (a hello) may take.
    pub fn read_at_most(from: &mut impl Read, limit: usize) -> Result<Option<Frame>> {
        let mut len = [0u8; 4];
        match from.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(Error::io("reading from the launcher connection", e)),
        }
        let len = frame_length(len, limit)?;
        // The body grows with the bytes that arrive, not with the length a
        // peer claims: a liar that then sends nothing holds no memory.
        let mut body = Vec::new();
        from.take(len as u64)
            .read_to_end(&mut body)
            .map_err(|e| Error::io("reading from the launcher connection", e))?;
        if body.len() < len {
            return Err(Error::io(
                "reading from the launcher connection",
                std::io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        Frame::decode(&body)
    }

    fn decode(body: &[u8]) -> Result<Option<Frame>> {
        let mut d = Decoder(body);
        let frame = match d.u8()? {
            CHALLENGE => Frame::Challenge(d.array()?),
            HELLO => Frame::Hello {
                peer: match (d.u8()?, d.u32()?) {
                    (PEER_RANK, r) => Peer::Rank(r),
                    (PEER_PROXY, h) => Peer::Proxy(h),
                    (kind, _) => return Err(malformed(format!("unknown peer kind {kind}"))),
                },
                nonce: d.array()?,
                proof: d.array()?,
            },
            WELCOME => Frame::Welcome(d.array()?),
            START => Frame::Start(ProxyOrder {
                program: d.bytes()?,
                args: d.list(Decoder::bytes)?,
                env: d.list(|d| Ok((d.bytes()?, d.bytes()?)))?,
                size: d.u32()?,
                ranks: d.list(Decoder::u32)?,
                pin: d.u8()? != 0,
            }),
            PUBLISH => Frame::Publish(d.bytes()?),
            FENCED => Frame::Fenced {
                hosts: d.u32()?,
                local: d.list(Decoder::u32)?,
            },
            LOOKUP => Frame::Lookup(d.u32()?),
            ENTRY => Frame::Entry(d.u32()?, d.bytes()?),
            ARRIVE => Frame::Arrive,
            RELEASED => {
                Frame::Released(u64::from_le_bytes(d.take(8)?.try_into().expect("8 bytes")))
            }
            FAILED => Frame::Failed(d.u32()?),
            EXITED => Frame::Exited {
                rank: d.u32()?,
                status: d.u32()? as i32,
            },
            PROXY_DONE => Frame::ProxyDone {
                leftovers: d.u32()?,
            },
            KILL => Frame::Kill,
            tag => return Err(malformed(format!("unknown frame tag {tag}"))),
        };
        if !d.0.is_empty() {
            return Err(malformed(format!("{} trailing bytes", d.0.len())));
        }
        Ok(Some(frame))
    }
}

/// The body length a frame's first 4 bytes give, checked against `limit`.
fn frame_length(len: [u8; 4], limit: usize) -> Result<usize> {
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > limit.min(MAX_FRAME) {
        return Err(malformed(format!("a frame length of {len} bytes")));
    }
    Ok(len)
}

fn malformed(what: String) -> Error {
    Error::Bootstrap(format!("malformed launcher frame: {what}"))
}

struct Encoder(Vec<u8>);

impl Encoder {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }

    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }

    fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }

    fn list<T>(&mut self, items: &[T], mut each: impl FnMut(&mut Self, &T)) {
        self.u32(items.len() as u32);
        for item in items {
            each(self, item);
        }
    }
}

struct Decoder<'a>(&'a [u8]);

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if n > self.0.len() {
            return Err(malformed(format!(
                "a field of {n} bytes where {} are left",
                self.0.len()
            )));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn bytes(&mut self) -> Result<Vec<u8>> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    /// A counted list; the count cannot make it allocate more than the
    /// frame holds (every item takes at least one byte).
    fn list<T>(&mut self, mut item: impl FnMut(&mut Self) -> Result<T>) -> Result<Vec<T>> {
        let count = self.u32()? as usize;
        if count > self.0.len() {
            return Err(malformed(format!(
                "a list of {count} items in {} bytes",
                self.0.len()
            )));
        }
        let mut items = Vec::with_capacity(count);
        for _ in 0..count {
            items.push(item(self)?);
        }
        Ok(items)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames() -> Vec<Frame> {
        vec![
            Frame::Challenge([7; NONCE_BYTES]),
            Frame::Hello {
                peer: Peer::Rank(7),
                nonce: [1; NONCE_BYTES],
                proof: [2; 32],
            },
            Frame::Hello {
                peer: Peer::Proxy(2),
                nonce: [3; NONCE_BYTES],
                proof: [4; 32],
            },
            Frame::Welcome([5; 32]),
            Frame::Start(ProxyOrder {
                program: b"/bin/prog".to_vec(),
                args: vec![b"-n".to_vec(), Vec::new()],
                env: vec![(b"A".to_vec(), b"1".to_vec())],
                size: 6,
                ranks: vec![1, 4],
                pin: true,
            }),
            Frame::Publish(vec![1, 2, 3]),
            Frame::Fenced {
                hosts: 3,
                local: vec![1, 4, 7],
            },
            Frame::Lookup(u32::MAX),
            Frame::Entry(5, vec![9; 100]),
            Frame::Arrive,
            Frame::Released(u64::MAX),
            Frame::Failed(3),
            Frame::Exited {
                rank: 1,
                status: -1,
            },
            Frame::ProxyDone { leftovers: 2 },
            Frame::Kill,
        ]
    }

    #[test]
    fn every_frame_reads_back_as_written() {
        let mut stream = Vec::new();
        for frame in frames() {
            frame.write(&mut stream).unwrap();
        }
        let mut from = &stream[..];
        for frame in frames() {
            assert_eq!(Frame::read(&mut from).unwrap(), Some(frame));
        }
        assert_eq!(Frame::read(&mut from).unwrap(), None);
    }

    #[test]
    fn garbage_is_an_error_not_a_crash_or_a_huge_allocation() {
        // Every truncation and every single-byte corruption of every frame.
        for frame in frames() {
            let mut bytes = Vec::new();
            frame.write(&mut bytes).unwrap();
            for cut in 1..bytes.len() {
                assert!(Frame::read(&mut &bytes[..cut]).is_err() || cut < 4);
            }
            for at in 4..bytes.len() {
                for value in [0u8, 0x7f, 0xff] {
                    let mut bad = bytes.clone();
                    bad[at] = value;
                    let _ = Frame::read(&mut &bad[..]);
                }
            }
        }
        let huge = [0xffu8, 0xff, 0xff, 0x7f, PUBLISH];
        assert!(Frame::read(&mut &huge[..]).is_err());
        let mut counted = vec![0u8; 4];
        counted.extend_from_slice(&[FENCED, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        let len = (counted.len() - 4) as u32;
        counted[..4].copy_from_slice(&len.to_le_bytes());
        let err = Frame::read(&mut &counted[..]).unwrap_err().to_string();
        assert!(err.contains("malformed launcher frame"), "{err}");
        // A length within the limit but no body: an error, not a wait or a
        // buffer of that size.
        let claimed = ((256u32 << 20) - 1).to_le_bytes();
        assert!(Frame::read(&mut &claimed[..]).is_err());
        // A handshake frame may not claim more than MAX_HELLO bytes.
        let mut long = Vec::new();
        Frame::Publish(vec![0; MAX_HELLO]).write(&mut long).unwrap();
        assert!(Frame::read(&mut &long[..]).is_ok());
        assert!(Frame::read_at_most(&mut &long[..], MAX_HELLO).is_err());
        assert!(Frame::parse(&long[..8], MAX_HELLO).is_err());
    }

    /// `parse` takes frames from a buffer that fills a byte at a time as
    /// `read` takes them from a stream.
    #[test]
    fn parse_waits_for_the_whole_frame() {
        let mut stream = Vec::new();
        for frame in frames() {
            frame.write(&mut stream).unwrap();
        }
        let (mut filled, mut at, mut parsed) = (0, 0, Vec::new());
        while filled < stream.len() {
            filled += 1;
            while let Some((frame, took)) = Frame::parse(&stream[at..filled], MAX_FRAME).unwrap() {
                parsed.push(frame);
                at += took;
            }
        }
        assert_eq!(parsed, frames());
        assert_eq!(at, stream.len());
    }
}
