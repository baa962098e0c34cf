//! The bootstrap of a rank that a PMI process manager started, without
//! MPI: PMI-1 (MPICH's Hydra `mpiexec`, at its descriptor `PMI_FD` or its
//! port `PMI_PORT`) or PMI-2 (Slurm's `srun --mpi=pmi2`). Each rank puts its
//! entry in the job's key-value space and a fence publishes them; a peer's
//! entry is got from the process manager at first contact; barriers are
//! fences. Every wait is bounded.

mod mapping;
mod wire;

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{BarrierTicket, Bootstrap, Placement};
use crate::config::{optional, required};
use crate::{Error, Rank, Result};
use wire::{malformed, number, Dialect, Wire};

/// The descriptor Hydra (and Slurm's PMI) hands each rank.
const ENV_PMI_FD: &str = "PMI_FD";
/// Where a PMI server listens instead (`host:port`).
const ENV_PMI_PORT: &str = "PMI_PORT";
const ENV_PMI_RANK: &str = "PMI_RANK";
/// Which process of the job this is, with `PMI_PORT`.
const ENV_PMI_ID: &str = "PMI_ID";
const ENV_PMI_SIZE: &str = "PMI_SIZE";
/// Slurm's PMI-2 job id: its presence says the descriptor speaks PMI-2.
const ENV_PMI_JOBID: &str = "PMI_JOBID";
/// The PMI version to speak, where the starter's environment does not say.
const ENV_PMI_VERSION: &str = "CATENA_PMI_VERSION";
/// The job attribute that says which node each rank runs on.
const PROCESS_MAPPING: &str = "PMI_process_mapping";

/// How long each step of the start-up may take.
const INIT_TIMEOUT: Duration = Duration::from_secs(60);
/// PMI-2's longest value (`PMI2_MAX_VALLEN`).
const PMI2_VALUE_MAX: usize = 1024;
/// Chunks one entry may span.
const MAX_CHUNKS: usize = 64;

/// Whether a PMI process manager started this process.
pub fn pmi_available() -> bool {
    std::env::var_os(ENV_PMI_FD).is_some() || std::env::var_os(ENV_PMI_PORT).is_some()
}

/// Bootstrap of a rank started by a PMI-1 or PMI-2 process manager.
pub struct PmiBootstrap {
    rank: Rank,
    size: u32,
    /// Ranks on this host as the environment says before the fence.
    local_size: u32,
    job: String,
    /// The key-value space: PMI-1's kvsname, PMI-2's job id.
    kvs: String,
    value_max: usize,
    wire: Mutex<Wire>,
    published: AtomicBool,
    barriers_started: AtomicU64,
}

impl PmiBootstrap {
    /// Joins the job on the descriptor in `PMI_FD` (PMI-2 where
    /// `PMI_JOBID` or `CATENA_PMI_VERSION=2` says so), or at the PMI-1
    /// server's port in `PMI_PORT` (Hydra's `-pmi-port`).
    pub fn init() -> Result<PmiBootstrap> {
        let deadline = Instant::now() + INIT_TIMEOUT;
        let dialect = match optional::<u32>(ENV_PMI_VERSION)? {
            Some(1) => Dialect::V1,
            Some(2) => Dialect::V2,
            Some(v) => {
                return Err(Error::Bootstrap(format!(
                    "{ENV_PMI_VERSION}={v}: catena speaks PMI 1 and 2"
                )))
            }
            None if std::env::var_os(ENV_PMI_JOBID).is_some() => Dialect::V2,
            None => Dialect::V1,
        };
        let (mut wire, told) = match optional::<RawFd>(ENV_PMI_FD)? {
            Some(fd) => (Wire::on_descriptor(fd, dialect)?, None),
            None => match optional::<String>(ENV_PMI_PORT)? {
                Some(port) => {
                    let (wire, told) = Wire::at_port(&port, required(ENV_PMI_ID)?, deadline)?;
                    (wire, Some(told))
                }
                None => {
                    return Err(Error::Bootstrap(format!(
                        "neither {ENV_PMI_FD} nor {ENV_PMI_PORT} is set: no PMI process \
                         manager started this"
                    )))
                }
            },
        };
        let (rank, size, kvs, value_max) = match wire.dialect() {
            Dialect::V1 => {
                wire.call(
                    "init",
                    &[("pmi_version", "1"), ("pmi_subversion", "1")],
                    "response_to_init",
                    deadline,
                )?;
                let maxes = wire.call("get_maxes", &[], "maxes", deadline)?;
                let kvs = wire
                    .call("get_my_kvsname", &[], "my_kvsname", deadline)?
                    .remove("kvsname")
                    .ok_or_else(|| malformed("my_kvsname without a kvsname"))?;
                let (rank, size) = match told {
                    Some(told) => told,
                    None => (required(ENV_PMI_RANK)?, required(ENV_PMI_SIZE)?),
                };
                (rank, size, kvs, number(&maxes, "vallen_max")?)
            }
            Dialect::V2 => {
                // PMI-2 opens with PMI-1's `init`, asking for version 2.
                wire.send_as(
                    Dialect::V1,
                    "init",
                    &[("pmi_version", "2"), ("pmi_subversion", "0")],
                )?;
                let init = wire.reply("response_to_init", deadline)?;
                if init.get("pmi_version").map(String::as_str) != Some("2") {
                    return Err(Error::Bootstrap(format!(
                        "the PMI process manager does not speak PMI-2: {init:?}"
                    )));
                }
                let pmirank: String = required(ENV_PMI_RANK)?;
                // Slurm wants the job id it gave back (MPICH's client
                // sends it where the environment has one).
                let jobid = optional::<String>(ENV_PMI_JOBID)?;
                let mut attributes = vec![("pmirank", pmirank.as_str()), ("threaded", "FALSE")];
                if let Some(jobid) = &jobid {
                    attributes.insert(0, ("pmijobid", jobid.as_str()));
                }
                let full = wire.call("fullinit", &attributes, "fullinit-response", deadline)?;
                let kvs = wire
                    .call("job-getid", &[], "job-getid-response", deadline)?
                    .remove("jobid")
                    .ok_or_else(|| malformed("job-getid-response without a jobid"))?;
                (
                    number(&full, "rank")?,
                    number(&full, "size")?,
                    kvs,
                    PMI2_VALUE_MAX,
                )
            }
        };
        if size == 0 || rank >= size {
            return Err(Error::Bootstrap(format!(
                "the PMI process manager made this rank {rank} of {size}"
            )));
        }
        // A job id is 1..=64 letters and digits: the key-value space's name,
        // which the process manager made unique, without the rest.
        let job: String = kvs
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(63)
            .collect();
        Ok(PmiBootstrap {
            rank,
            size,
            local_size: local_count_from_env().unwrap_or(1).clamp(1, size),
            job: format!("p{job}"),
            kvs,
            value_max,
            wire: Mutex::new(wire),
            published: AtomicBool::new(false),
            barriers_started: AtomicU64::new(0),
        })
    }

    fn wire(&self) -> std::sync::MutexGuard<'_, Wire> {
        self.wire.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn put(&self, wire: &mut Wire, key: &str, value: &str, deadline: Instant) -> Result<()> {
        match wire.dialect() {
            Dialect::V1 => wire.call(
                "put",
                &[("kvsname", &self.kvs), ("key", key), ("value", value)],
                "put_result",
                deadline,
            ),
            Dialect::V2 => wire.call(
                "kvs-put",
                &[("key", key), ("value", value)],
                "kvs-put-response",
                deadline,
            ),
        }
        .map(drop)
    }

    /// The value of `key` in the job's key-value space (PMI-2: `job_attr`
    /// says it is an attribute of the job rather than a rank's put).
    fn get(&self, wire: &mut Wire, key: &str, job_attr: bool, deadline: Instant) -> Result<String> {
        let reply = match wire.dialect() {
            Dialect::V1 => wire.call(
                "get",
                &[("kvsname", &self.kvs), ("key", key)],
                "get_result",
                deadline,
            )?,
            Dialect::V2 if job_attr => wire.call(
                "info-getjobattr",
                &[("key", key)],
                "info-getjobattr-response",
                deadline,
            )?,
            Dialect::V2 => wire.call(
                "kvs-get",
                &[("jobid", &self.kvs), ("srcid", "-1"), ("key", key)],
                "kvs-get-response",
                deadline,
            )?,
        };
        if reply.get("found").is_some_and(|found| found != "TRUE") {
            return Err(Error::Bootstrap(format!(
                "the PMI process manager has no {key}"
            )));
        }
        reply
            .get("value")
            .cloned()
            .ok_or_else(|| malformed(&format!("the value of {key} is missing")))
    }

    fn start_fence(&self, wire: &mut Wire) -> Result<BarrierTicket> {
        match wire.dialect() {
            Dialect::V1 => wire.send("barrier_in", &[])?,
            Dialect::V2 => wire.send("kvs-fence", &[])?,
        }
        Ok(BarrierTicket(
            self.barriers_started.fetch_add(1, Ordering::AcqRel) + 1,
        ))
    }

    /// Waits for the barrier of `ticket` until `deadline`.
    fn wait_fence(&self, wire: &mut Wire, ticket: BarrierTicket, deadline: Instant) -> Result<()> {
        while wire.barriers_out < ticket.0 {
            let expected = wire.barrier_reply();
            wire.reply(expected, deadline)?;
            wire.barriers_out += 1;
        }
        Ok(())
    }

    /// Where the ranks run, by the process manager's mapping; a job it
    /// does not map counts as one host per rank (so nothing is shared
    /// between ranks the bootstrap cannot place).
    fn placement(&self, wire: &mut Wire, deadline: Instant) -> Result<Placement> {
        match self.get(wire, PROCESS_MAPPING, true, deadline) {
            Ok(mapping) => mapping::placement(&mapping, self.rank, self.size),
            Err(Error::Bootstrap(why)) if why.contains("has no") => Ok(Placement {
                hosts: self.size,
                local_ranks: vec![self.rank],
            }),
            Err(e) => Err(e),
        }
    }
}

/// The ranks on this host by the process manager's environment: Hydra's
/// `MPI_LOCALNRANKS`, or the first count of Slurm's
/// `SLURM_STEP_TASKS_PER_NODE` (`4(x2),3`: the first host's).
fn local_count_from_env() -> Option<u32> {
    ["MPI_LOCALNRANKS", "SLURM_STEP_TASKS_PER_NODE"]
        .iter()
        .find_map(|name| {
            let value = std::env::var(name).ok()?;
            let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
}

/// Keys of one rank's entry: its count of chunks, then each chunk.
fn chunk_key(rank: Rank, chunk: Option<usize>) -> String {
    match chunk {
        None => format!("catena-{rank}-n"),
        Some(i) => format!("catena-{rank}-{i}"),
    }
}

impl Bootstrap for PmiBootstrap {
    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn job_id(&self) -> &str {
        &self.job
    }

    fn local_size(&self) -> u32 {
        self.local_size
    }

    fn publish(&self, mine: &[u8], timeout: Duration) -> Result<Placement> {
        if self.published.swap(true, Ordering::AcqRel) {
            return Err(Error::Bootstrap("the entry is published once".into()));
        }
        let deadline = Instant::now() + timeout;
        // Values are hex (no spaces, `=` or `;` on the wire), cut to what
        // the process manager takes.
        let chunk = self.value_max.saturating_sub(2).max(16) & !1;
        let text = hex::encode(mine);
        let pieces: Vec<&str> = text
            .as_bytes()
            .chunks(chunk)
            .map(|c| std::str::from_utf8(c).expect("hex digits"))
            .collect();
        if pieces.len() > MAX_CHUNKS {
            return Err(Error::Bootstrap(format!(
                "an entry of {} bytes is more than the process manager holds",
                mine.len()
            )));
        }
        let mut wire = self.wire();
        let wire = &mut *wire;
        self.put(
            wire,
            &chunk_key(self.rank, None),
            &pieces.len().to_string(),
            deadline,
        )?;
        for (i, piece) in pieces.iter().enumerate() {
            self.put(wire, &chunk_key(self.rank, Some(i)), piece, deadline)?;
        }
        let ticket = self.start_fence(wire)?;
        self.wait_fence(wire, ticket, deadline)?;
        self.placement(wire, deadline)
    }

    fn lookup(&self, rank: Rank, timeout: Duration) -> Result<Vec<u8>> {
        super::lookup_allowed(self.published.load(Ordering::Acquire), rank, self.size)?;
        let deadline = Instant::now() + timeout;
        let mut wire = self.wire();
        let count = self.get(&mut wire, &chunk_key(rank, None), false, deadline)?;
        let count: usize = count
            .parse()
            .ok()
            .filter(|&n| n <= MAX_CHUNKS)
            .ok_or_else(|| malformed(&format!("rank {rank}'s chunk count {count:?}")))?;
        let mut text = String::new();
        for i in 0..count {
            text.push_str(&self.get(&mut wire, &chunk_key(rank, Some(i)), false, deadline)?);
        }
        hex::decode(&text).map_err(|_| malformed(&format!("rank {rank}'s entry is not hex")))
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        self.start_fence(&mut self.wire())
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        Ok(self.wire().count_barriers()? >= ticket.0)
    }

    /// A PMI process manager ends the whole job when a rank dies; it tells
    /// the others nothing.
    fn failed_rank(&self) -> Option<Rank> {
        None
    }
}

impl Drop for PmiBootstrap {
    /// Tells the process manager this rank is done (Hydra counts a rank
    /// that exits without it as failed only by its exit status).
    fn drop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut wire = self.wire();
        let _ = match wire.dialect() {
            Dialect::V1 => wire.call("finalize", &[], "finalize_ack", deadline),
            Dialect::V2 => wire.call("finalize", &[], "finalize-response", deadline),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::wire::tests::{soon, v2, wire_to};
    use super::*;

    fn bootstrap(wire: Wire, kvs: &str) -> PmiBootstrap {
        PmiBootstrap {
            rank: 1,
            size: 4,
            local_size: 1,
            job: "pj".into(),
            kvs: kvs.into(),
            value_max: 64,
            wire: Mutex::new(wire),
            published: AtomicBool::new(false),
            barriers_started: AtomicU64::new(0),
        }
    }

    /// PMI-2: an entry longer than one value goes out in chunks, a fence
    /// publishes it, the mapping places the rank, and a lookup gets one
    /// peer's chunks back and nothing else.
    #[test]
    fn pmi2_publishes_in_chunks_and_looks_up_one_peer() {
        let kv = std::sync::Arc::new(Mutex::new(std::collections::HashMap::new()));
        let server = kv.clone();
        let wire = wire_to(Dialect::V2, move |request| {
            let reply = wire::parse_v2(request).unwrap();
            let mut kv = server.lock().unwrap();
            Some(match reply["cmd"].as_str() {
                "kvs-put" => {
                    kv.insert(reply["key"].clone(), reply["value"].clone());
                    v2("cmd=kvs-put-response;rc=0;")
                }
                "kvs-fence" => v2("cmd=kvs-fence-response;rc=0;"),
                "info-getjobattr" => {
                    v2("cmd=info-getjobattr-response;found=TRUE;value=(vector,(0,2,2));rc=0;")
                }
                "kvs-get" => match kv.get(&reply["key"]) {
                    Some(v) => v2(&format!("cmd=kvs-get-response;found=TRUE;value={v};rc=0;")),
                    None => v2("cmd=kvs-get-response;found=FALSE;rc=0;"),
                },
                "finalize" => v2("cmd=finalize-response;rc=0;"),
                _ => return None,
            })
        });
        let pmi = bootstrap(wire, "kvs");
        assert!(pmi.lookup(0, Duration::from_secs(1)).is_err());
        let mine: Vec<u8> = (0..100).collect();
        let placement = pmi.publish(&mine, Duration::from_secs(5)).unwrap();
        assert_eq!(
            placement,
            Placement {
                hosts: 2,
                local_ranks: vec![0, 1]
            }
        );
        assert_eq!(kv.lock().unwrap()["catena-1-n"], "4");
        assert_eq!(pmi.lookup(1, Duration::from_secs(5)).unwrap(), mine);
        let err = pmi.lookup(2, Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("has no catena-2-n"), "{err}");
        assert!(matches!(
            pmi.lookup(4, Duration::from_secs(1)),
            Err(Error::InvalidRank { .. })
        ));
        let ticket = pmi.start_barrier().unwrap();
        let deadline = soon();
        while !pmi.barrier_done(ticket).unwrap() {
            assert!(Instant::now() < deadline);
        }
    }

    /// A forged chunk count or a value that is not hex is a typed error.
    #[test]
    fn forged_entries_are_errors() {
        let wire = wire_to(Dialect::V1, |line| {
            Some(match line {
                "cmd=barrier_in" => "cmd=barrier_out
"
                .into(),
                l if l.contains("key=PMI_process_mapping") => {
                    "cmd=get_result rc=0 value=(vector,(0,1,4))
"
                    .into()
                }
                l if l.starts_with("cmd=put") => "cmd=put_result rc=0
"
                .into(),
                l if l.contains("key=catena-2-n") => "cmd=get_result rc=0 value=99999
"
                .into(),
                l if l.contains("key=catena-3-n") => "cmd=get_result rc=0 value=1
"
                .into(),
                l if l.contains("key=catena-3-0") => "cmd=get_result rc=0 value=xyz
"
                .into(),
                _ => "cmd=finalize_ack
"
                .into(),
            })
        });
        let pmi = bootstrap(wire, "kvs");
        let placement = pmi.publish(b"abc", Duration::from_secs(5)).unwrap();
        assert_eq!(placement.local_ranks, vec![0, 1, 2, 3]);
        let err = pmi.lookup(2, Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("chunk count"), "{err}");
        let err = pmi.lookup(3, Duration::from_secs(5)).unwrap_err();
        assert!(err.to_string().contains("not hex"), "{err}");
    }
}
