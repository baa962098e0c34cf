//! A reference measurement for benchmarks: the floor under catena's ofi
//! put-signal latency, an 8-byte `fi_writedata` ping-pong written directly on
//! libfabric between the two ranks of a job, on the provider catena would
//! pick (same selection by `CATENA_OFI_PROVIDER`, same endpoint setup, same
//! memory registration), with none of catena's layers on the path.
//! `catena-bench put` prints it beside `OfiTransport`'s put + signal.
//!
//! This module is the only door into the libfabric internals (domain,
//! provider selection, error mapping, progress), which are otherwise private.
//! It is one function rather than a raw endpoint API (open, exchange names,
//! register, post `fi_writedata`, poll the CQ) because that API would have
//! to publish raw endpoint, memory-registration and CQ types with their
//! `unsafe` lifetime rules, for the sake of one caller. The measurement
//! itself is small, so it lives here whole and only its result crosses the
//! crate boundary.

use std::cell::Cell;
use std::ffi::c_void;
use std::time::{Duration, Instant};

use catena_ofi_sys as sys;

use super::domain::{CqEvent, Domain};
use super::errors::{fabric_error, is_again};
use super::info::{select, Request};
use super::progress::ProgressMode;
use crate::job::Job;
use crate::{Error, Result};

/// Round trips timed together, so that reading the clock is not latency.
const BATCH: usize = 100;
/// Longest wait for one message or completion.
const TIMEOUT: Duration = Duration::from_secs(30);
const SIZE: usize = 8;

/// Runs the ping-pong in the job this process was started into (see
/// [`Job::from_env`]), which must have exactly two ranks; both call this.
///
/// Rank 0 sends an 8-byte `fi_writedata` (`fi_inject_writedata` where the
/// provider's inject size allows, else waited for locally) carrying remote
/// CQ data, rank 1 answers each with one of its own, and each side learns
/// of the other's write by reading its CQ (no progress thread). Rank 0
/// times `round_trips` round trips in batches of 100, after a tenth as many
/// warm-up ones, and gets the median batch's mean half round trip in ns;
/// rank 1 (which only answers) gets `None`, and so does rank 0 when
/// `round_trips` are too few to time a batch. Both serve the peer until the
/// job's final barrier, so no write is cut off.
pub fn writedata_pingpong(round_trips: usize) -> Result<Option<f64>> {
    let mut job = Job::from_env()?;
    if job.size() != 2 {
        return Err(Error::Bootstrap(format!(
            "the raw ping-pong needs 2 ranks, not {}",
            job.size()
        )));
    }
    let domain = Domain::open(select(&Request::for_job(&job, false))?, ProgressMode::Off)?;
    let mut target = vec![0u64; 1];
    let source = [0x42u8; SIZE];
    let remote = u64::from(sys::FI_REMOTE_WRITE);
    // SAFETY: both buffers outlive their registrations, dropped at the end of
    // this function before `domain` (declared first, dropped last).
    let target_mr = unsafe { domain.register(target.as_mut_ptr().cast(), SIZE, remote)? };
    let source_mr = unsafe { domain.register(source.as_ptr(), SIZE, u64::from(sys::FI_WRITE))? };
    let virt = domain.info().has_mr_mode(sys::FI_MR_VIRT_ADDR);
    let mut entry = (target.as_ptr() as u64 * u64::from(virt))
        .to_le_bytes()
        .to_vec();
    entry.extend_from_slice(&target_mr.key().to_le_bytes());
    entry.extend_from_slice(&domain.name()?);
    job.publish(&entry)?;
    let peer = job.peer(1 - job.rank())?;
    let peer = &peer.address;
    let bad = || Error::Bootstrap("the peer published a malformed address".into());
    let addr = u64::from_le_bytes(peer.get(..8).ok_or_else(bad)?.try_into().expect("8 bytes"));
    let key = u64::from_le_bytes(
        peer.get(8..16)
            .ok_or_else(bad)?
            .try_into()
            .expect("8 bytes"),
    );
    let peer = Peer {
        domain: &domain,
        fi_addr: domain.insert(&peer[16..])?,
        addr,
        key,
        source: &source,
        desc: source_mr.desc(),
        arrived: Cell::new(0),
        taken: Cell::new(0),
        posted: Cell::new(0),
        completed: Cell::new(0),
    };

    let warm_up = round_trips / 10;
    let mut rtts = Vec::with_capacity(round_trips / BATCH + 1);
    let mut start = Instant::now();
    for i in 1..=warm_up + round_trips {
        if job.rank() == 0 {
            peer.send(i as u64)?;
            peer.receive()?;
            if i % BATCH == 0 {
                if i > warm_up {
                    rtts.push(start.elapsed().as_secs_f64() * 1e9 / BATCH as f64);
                }
                start = Instant::now();
            }
        } else {
            peer.receive()?;
            peer.send(i as u64)?;
        }
    }
    // Serve the peer until both are done, so no write is cut off.
    let ticket = job.start_finalize()?;
    let deadline = Instant::now() + TIMEOUT;
    while !job.finalize_done(ticket)? {
        peer.poll()?;
        if Instant::now() > deadline {
            return Err(Error::Timeout {
                what: "the raw ping-pong's final barrier",
            });
        }
    }
    drop((source_mr, target_mr, target));
    Ok((job.rank() == 0 && !rtts.is_empty()).then(|| median(&mut rtts) / 2.0))
}

/// The middle sample (the upper one of an even count), as `catena-bench`'s
/// reports take medians.
fn median(samples: &mut [f64]) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * 0.5).round() as usize]
}

struct Peer<'a> {
    domain: &'a Domain,
    fi_addr: sys::fi_addr_t,
    addr: u64,
    key: u64,
    source: &'a [u8; SIZE],
    desc: *mut c_void,
    /// Remote writes seen in the CQ, and those `receive` consumed.
    arrived: Cell<u64>,
    taken: Cell<u64>,
    /// Our writes that report a local completion, and those that did.
    posted: Cell<u64>,
    completed: Cell<u64>,
}

impl Peer<'_> {
    /// One 8-byte write carrying `imm` as remote CQ data, waited for locally
    /// unless the provider injects it.
    fn send(&self, imm: u64) -> Result<()> {
        let deadline = Instant::now() + TIMEOUT;
        let inject = SIZE <= self.domain.info().inject_size();
        loop {
            let ep = self.domain.ep()?;
            // SAFETY: `source` is registered (desc) and outlives the call and,
            // for fi_writedata, the completion waited for below.
            let ret = unsafe {
                if inject {
                    sys::fi_inject_writedata(
                        ep,
                        self.source.as_ptr().cast(),
                        SIZE,
                        imm,
                        self.fi_addr,
                        self.addr,
                        self.key,
                    )
                } else {
                    sys::fi_writedata(
                        ep,
                        self.source.as_ptr().cast(),
                        SIZE,
                        self.desc,
                        imm,
                        self.fi_addr,
                        self.addr,
                        self.key,
                        std::ptr::dangling_mut(),
                    )
                }
            };
            if ret == 0 {
                break;
            }
            if !is_again(ret) {
                return Err(fabric_error("fi_writedata", ret));
            }
            self.poll()?;
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "room in the transmit queue",
                });
            }
        }
        if !inject {
            self.posted.set(self.posted.get() + 1);
            self.wait_for(|p| p.completed.get() >= p.posted.get(), deadline)?;
        }
        Ok(())
    }

    /// Waits for the peer's next write.
    fn receive(&self) -> Result<()> {
        let want = self.taken.get() + 1;
        self.wait_for(|p| p.arrived.get() >= want, Instant::now() + TIMEOUT)?;
        self.taken.set(want);
        Ok(())
    }

    fn wait_for(&self, done: impl Fn(&Self) -> bool, deadline: Instant) -> Result<()> {
        while !done(self) {
            self.poll()?;
            if Instant::now() > deadline {
                return Err(Error::Timeout {
                    what: "a raw ping-pong message",
                });
            }
        }
        Ok(())
    }

    /// Reads the CQ, counting remote writes and local completions.
    fn poll(&self) -> Result<()> {
        let mut entries = [sys::fi_cq_data_entry::default(); 4];
        match self.domain.read_cq(&mut entries)? {
            CqEvent::Entries(n) => {
                for e in &entries[..n] {
                    let counter = if e.flags & u64::from(sys::FI_REMOTE_CQ_DATA) != 0 {
                        &self.arrived
                    } else {
                        &self.completed
                    };
                    counter.set(counter.get() + 1);
                }
                Ok(())
            }
            CqEvent::Empty => Ok(()),
            CqEvent::Failed { message, .. } => Err(Error::Fabric(Box::new(crate::FabricFailure {
                library: "libfabric",
                call: "fi_cq_read",
                message,
            }))),
        }
    }
}
