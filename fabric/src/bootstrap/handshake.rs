//! How a proxy or rank of a job across hosts and the launcher prove to each
//! other that they hold the job key: HMAC-SHA256 under the key over both
//! sides' fresh nonces, so that an exchange seen once is worth nothing on
//! another connection, and the key itself never crosses the network.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::wire::{Frame, Nonce, Peer, Proof, MAX_HELLO};
use crate::{Error, Result};

/// Bytes of a job key.
const KEY_BYTES: usize = 32;

/// The secret every process of one job across hosts holds: made by the
/// launcher, handed to each proxy on its remote-exec command's standard
/// input and to each rank in its environment (which only its own user can
/// read), never on a command line.
#[derive(Clone, PartialEq, Eq)]
pub struct JobKey([u8; KEY_BYTES]);

impl std::fmt::Debug for JobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobKey(..)")
    }
}

impl JobKey {
    /// A fresh random key.
    pub fn generate() -> JobKey {
        JobKey(random_bytes())
    }

    /// The key as hex digits, as proxies and ranks are given it.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// The key `to_hex` wrote; an error that does not repeat the text.
    pub fn from_hex(text: &str) -> Result<JobKey> {
        let text = text.trim_end_matches(['\n', '\r']);
        if text.len() != 2 * KEY_BYTES {
            return Err(Error::Bootstrap(format!(
                "a job key must be {} hex digits, not {}",
                2 * KEY_BYTES,
                text.len()
            )));
        }
        let mut key = [0u8; KEY_BYTES];
        hex::decode_to_slice(text, &mut key)
            .map_err(|_| Error::Bootstrap("a job key of other than hex digits".into()))?;
        Ok(JobKey(key))
    }

    fn mac(&self, what: &[u8], launcher: &Nonce, joiner: &Nonce, peer: Peer) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        for part in [what, launcher, joiner, &peer.to_bytes()] {
            mac.update(part);
        }
        mac
    }

    /// What a newcomer answers the launcher's challenge with.
    pub fn hello_proof(&self, launcher: &Nonce, joiner: &Nonce, peer: Peer) -> Proof {
        self.mac(HELLO, launcher, joiner, peer)
            .finalize()
            .into_bytes()
            .into()
    }

    /// Whether `proof` is the hello proof of this key (in constant time).
    pub fn checks_hello(
        &self,
        proof: &Proof,
        launcher: &Nonce,
        joiner: &Nonce,
        peer: Peer,
    ) -> bool {
        self.mac(HELLO, launcher, joiner, peer)
            .verify_slice(proof)
            .is_ok()
    }

    /// What the launcher welcomes a newcomer with.
    pub fn welcome_proof(&self, launcher: &Nonce, joiner: &Nonce, peer: Peer) -> Proof {
        self.mac(WELCOME, launcher, joiner, peer)
            .finalize()
            .into_bytes()
            .into()
    }

    fn checks_welcome(&self, proof: &Proof, launcher: &Nonce, joiner: &Nonce, peer: Peer) -> bool {
        self.mac(WELCOME, launcher, joiner, peer)
            .verify_slice(proof)
            .is_ok()
    }
}

/// Domain separation: a hello proof is never a valid welcome, nor back.
const HELLO: &[u8] = b"catena launcher hello v1";
const WELCOME: &[u8] = b"catena launcher welcome v1";

/// A fresh nonce.
pub fn nonce() -> Nonce {
    random_bytes()
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&crate::os::random_u64().to_le_bytes()[..chunk.len()]);
    }
    bytes
}

/// The newcomer's side on a fresh connection to the launcher: answers its
/// challenge as `peer` and checks its welcome, each read within `timeout`.
/// After `Ok` the connection carries the job's frames; after an error it
/// is worth nothing (the caller may connect again).
pub fn join(stream: &mut TcpStream, key: &JobKey, peer: Peer, timeout: Duration) -> Result<()> {
    let _ = stream.set_read_timeout(Some(timeout));
    let challenge = match read_handshake_frame(stream)? {
        Frame::Challenge(nonce) => nonce,
        other => return Err(unexpected("a challenge", &other)),
    };
    let mine = nonce();
    Frame::Hello {
        peer,
        nonce: mine,
        proof: key.hello_proof(&challenge, &mine, peer),
    }
    .write(stream)?;
    match read_handshake_frame(stream)? {
        Frame::Welcome(proof) if key.checks_welcome(&proof, &challenge, &mine, peer) => {}
        Frame::Welcome(_) => {
            return Err(Error::Bootstrap(
                "the launcher's welcome does not prove the job key: not this job's launcher".into(),
            ))
        }
        other => return Err(unexpected("a welcome", &other)),
    }
    let _ = stream.set_read_timeout(None);
    Ok(())
}

fn read_handshake_frame(stream: &mut impl Read) -> Result<Frame> {
    Frame::read_at_most(stream, MAX_HELLO)?.ok_or_else(|| {
        Error::Bootstrap("the launcher closed the connection during the handshake".into())
    })
}

fn unexpected(wanted: &str, got: &Frame) -> Error {
    let name = format!("{got:?}");
    let name = name.split(['(', ' ', '{']).next().unwrap_or_default();
    Error::Bootstrap(format!(
        "the launcher sent a {name} frame where {wanted} belongs"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::wire::NONCE_BYTES;

    #[test]
    fn a_key_reads_back_from_its_hex_and_nothing_else_does() {
        let key = JobKey::generate();
        assert_eq!(JobKey::from_hex(&key.to_hex()).unwrap(), key);
        assert_eq!(JobKey::from_hex(&(key.to_hex() + "\n")).unwrap(), key);
        assert_ne!(JobKey::generate(), key);
        for bad in ["", "00", &"g".repeat(64), &"0".repeat(65), &"é".repeat(32)] {
            let err = JobKey::from_hex(bad).unwrap_err().to_string();
            assert!(err.contains("job key") && !err.contains("gg"), "{err}");
        }
        assert!(!format!("{key:?}").contains(&key.to_hex()[..8]));
    }

    /// A proof holds for its key, both nonces, its peer and its direction
    /// only: change any one and it fails.
    #[test]
    fn a_proof_is_bound_to_key_nonces_peer_and_direction() {
        let (key, other) = (JobKey::generate(), JobKey::generate());
        let (a, b, c) = ([1; NONCE_BYTES], [2; NONCE_BYTES], [3; NONCE_BYTES]);
        let peer = Peer::Rank(0);
        let proof = key.hello_proof(&a, &b, peer);
        assert!(key.checks_hello(&proof, &a, &b, peer));
        assert!(!other.checks_hello(&proof, &a, &b, peer));
        assert!(!key.checks_hello(&proof, &c, &b, peer));
        assert!(!key.checks_hello(&proof, &a, &c, peer));
        assert!(!key.checks_hello(&proof, &a, &b, Peer::Proxy(0)));
        assert!(!key.checks_hello(&proof, &a, &b, Peer::Rank(1)));
        assert!(!key.checks_welcome(&proof, &a, &b, peer));
        let welcome = key.welcome_proof(&a, &b, peer);
        assert!(key.checks_welcome(&welcome, &a, &b, peer));
        assert!(!key.checks_hello(&welcome, &a, &b, peer));
    }
}
