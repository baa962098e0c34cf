//! The bootstrap of a rank that a PMIx server started (Slurm's
//! `srun --mpi=pmix`, Open MPI's `mpirun`), without MPI (feature `pmix`):
//! identity and placement from the job's PMIx attributes, this rank's
//! entry put under one key and committed, a fence that collects no data,
//! and a peer's entry got at first contact (PMIx's direct modex: the local
//! server fetches it from the peer's). Barriers are non-blocking fences.

use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use catena_pmix_sys as sys;

use super::{BarrierTicket, Bootstrap, Placement};
use crate::{Error, Rank, Result};

/// The key each rank's entry is put under.
const ENTRY_KEY: &CStr = c"catena.entry";
/// Bootstrap of a rank started by a PMIx server.
pub struct PmixBootstrap {
    /// This process, as PMIx names it.
    me: sys::pmix_proc_t,
    size: u32,
    local_ranks: Vec<Rank>,
    hosts: u32,
    job: String,
    published: AtomicBool,
    barriers_started: AtomicU64,
    /// Fences completed (or failed: `u64::MAX`), counted by PMIx's thread.
    barriers_done: Arc<AtomicU64>,
}

// SAFETY: the PMIx client library is thread-safe; `me` is plain data.
unsafe impl Send for PmixBootstrap {}
// SAFETY: as above.
unsafe impl Sync for PmixBootstrap {}

/// A barrier that failed in PMIx marks `barriers_done` so.
const FENCE_FAILED: u64 = u64::MAX;

impl PmixBootstrap {
    /// Joins the job of the PMIx server that started this process.
    pub fn init() -> Result<PmixBootstrap> {
        let mut me = sys::pmix_proc_t::default();
        // SAFETY: `me` is written by PMIx; no info is passed.
        check("PMIx_Init", unsafe {
            sys::PMIx_Init(&mut me, std::ptr::null_mut(), 0)
        })?;
        let mut job_proc = me;
        job_proc.rank = sys::PMIX_RANK_WILDCARD;
        // From here on, a failure finalizes PMIx again as the value drops.
        let mut boot = PmixBootstrap {
            me,
            size: 0,
            local_ranks: Vec::new(),
            hosts: 1,
            job: String::new(),
            published: AtomicBool::new(false),
            barriers_started: AtomicU64::new(0),
            barriers_done: Arc::new(AtomicU64::new(0)),
        };
        let timeout = Duration::from_secs(60);
        boot.size = get(&job_proc, sys::PMIX_JOB_SIZE, timeout)?.uint32()?;
        if boot.size == 0 || me.rank >= boot.size {
            return Err(Error::Bootstrap(format!(
                "PMIx made this rank {} of {}",
                me.rank, boot.size
            )));
        }
        let peers = get(&job_proc, sys::PMIX_LOCAL_PEERS, timeout)?.string()?;
        boot.local_ranks = local_peers(&peers, me.rank, boot.size)?;
        // Not every server says how many nodes; more ranks than this host's
        // then mean at least two.
        boot.hosts = match get(&job_proc, sys::PMIX_NUM_NODES, timeout) {
            Ok(nodes) => nodes.uint32()?.clamp(1, boot.size),
            Err(_) => 1 + u32::from(boot.local_ranks.len() < boot.size as usize),
        };
        // A job id is 1..=64 letters and digits: the namespace, which the
        // server made unique, without the rest.
        // SAFETY: PMIx wrote a NUL-terminated namespace.
        let nspace = unsafe { CStr::from_ptr(me.nspace.as_ptr()) }.to_string_lossy();
        let id: String = nspace
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(63)
            .collect();
        boot.job = format!("x{id}");
        Ok(boot)
    }

    /// `rank` of this job, as PMIx names it.
    fn peer(&self, rank: Rank) -> sys::pmix_proc_t {
        let mut proc_ = self.me;
        proc_.rank = rank;
        proc_
    }
}

/// `PMIX_LOCAL_PEERS` (`"0,1,2"`) as ranks, checked to be in the job and
/// to include this one.
fn local_peers(peers: &str, rank: Rank, size: u32) -> Result<Vec<Rank>> {
    let mut ranks: Vec<Rank> = peers
        .split(',')
        .map(|r| r.trim().parse::<Rank>().ok().filter(|&r| r < size))
        .collect::<Option<_>>()
        .ok_or_else(|| {
            Error::Bootstrap(format!(
                "PMIx's local peers {peers:?} are not ranks of a job of {size}"
            ))
        })?;
    ranks.sort_unstable();
    ranks.dedup();
    if !ranks.contains(&rank) {
        return Err(Error::Bootstrap(format!(
            "PMIx's local peers {peers:?} leave out this rank {rank}"
        )));
    }
    Ok(ranks)
}

/// A value PMIx returned, freed when dropped.
struct Value(*mut sys::pmix_value_t);

impl Value {
    fn uint32(&self) -> Result<u32> {
        // SAFETY: PMIx returned a valid value; its type says which field.
        unsafe {
            match u32::from((*self.0).type_) {
                sys::PMIX_UINT32 => Ok((*self.0).data.uint32),
                t => Err(Error::Bootstrap(format!(
                    "PMIx value of type {t}, not uint32"
                ))),
            }
        }
    }

    fn string(&self) -> Result<String> {
        // SAFETY: as above; a string value is NUL-terminated or null.
        unsafe {
            match u32::from((*self.0).type_) {
                sys::PMIX_STRING if !(*self.0).data.string.is_null() => {
                    Ok(CStr::from_ptr((*self.0).data.string)
                        .to_string_lossy()
                        .into_owned())
                }
                t => Err(Error::Bootstrap(format!(
                    "PMIx value of type {t}, not a string"
                ))),
            }
        }
    }

    fn bytes(&self) -> Result<Vec<u8>> {
        // SAFETY: as above; a byte object holds `size` bytes at `bytes`.
        unsafe {
            match u32::from((*self.0).type_) {
                sys::PMIX_BYTE_OBJECT => {
                    let bo = (*self.0).data.bo;
                    if bo.size == 0 {
                        return Ok(Vec::new());
                    }
                    if bo.bytes.is_null() {
                        return Err(Error::Bootstrap("a PMIx byte object without bytes".into()));
                    }
                    Ok(std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec())
                }
                t => Err(Error::Bootstrap(format!(
                    "PMIx value of type {t}, not bytes"
                ))),
            }
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        // SAFETY: PMIx allocated the value with malloc (PMIX_VALUE_RELEASE
        // is this destruct and a free).
        unsafe {
            sys::PMIx_Value_destruct(self.0);
            libc::free(self.0.cast());
        }
    }
}

/// `key` of `proc_`, waiting at most `timeout` for the server.
fn get(proc_: &sys::pmix_proc_t, key: &[u8], timeout: Duration) -> Result<Value> {
    let key = CStr::from_bytes_with_nul(key).expect("a PMIx key constant");
    let mut info = sys::pmix_info_t::default();
    let seconds = timeout.as_secs().clamp(1, i32::MAX as u64) as i32;
    // SAFETY: loads an int into a fresh info; PMIX_TIMEOUT is a valid key.
    check("PMIx_Info_load", unsafe {
        sys::PMIx_Info_load(
            &mut info,
            sys::PMIX_TIMEOUT.as_ptr().cast(),
            (&seconds as *const i32).cast(),
            sys::PMIX_INT as u16,
        )
    })?;
    let mut value: *mut sys::pmix_value_t = std::ptr::null_mut();
    // SAFETY: valid proc, key and info; PMIx writes `value` on success.
    let status = unsafe { sys::PMIx_Get(proc_, key.as_ptr(), &info, 1, &mut value) };
    check(&format!("PMIx_Get of {}", key.to_string_lossy()), status)?;
    if value.is_null() {
        return Err(Error::Bootstrap(format!(
            "PMIx_Get of {} returned no value",
            key.to_string_lossy()
        )));
    }
    Ok(Value(value))
}

/// `Ok` if PMIx said success, else `Bootstrap` naming the call and PMIx's
/// own words for the status.
fn check(call: &str, status: sys::pmix_status_t) -> Result<()> {
    if status == sys::PMIX_SUCCESS as sys::pmix_status_t {
        return Ok(());
    }
    // SAFETY: PMIx returns a static string for any status.
    let said = unsafe { CStr::from_ptr(sys::PMIx_Error_string(status)) };
    Err(Error::Bootstrap(format!(
        "{call} failed: {} ({status})",
        said.to_string_lossy()
    )))
}

/// Counts a completed fence (PMIx's callback, on its own thread).
unsafe extern "C" fn fence_done(status: sys::pmix_status_t, done: *mut c_void) {
    // SAFETY: `done` is the Arc `start_barrier` leaked for this call.
    let done = unsafe { Arc::from_raw(done.cast::<AtomicU64>()) };
    if status == sys::PMIX_SUCCESS as sys::pmix_status_t {
        let _ = done.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n != FENCE_FAILED).then_some(n + 1)
        });
    } else {
        done.store(FENCE_FAILED, Ordering::Release);
    }
}

impl Bootstrap for PmixBootstrap {
    fn rank(&self) -> Rank {
        self.me.rank
    }

    fn size(&self) -> u32 {
        self.size
    }

    fn job_id(&self) -> &str {
        &self.job
    }

    fn local_size(&self) -> u32 {
        self.local_ranks.len() as u32
    }

    fn publish(&self, mine: &[u8], timeout: Duration) -> Result<Placement> {
        if self.published.swap(true, Ordering::AcqRel) {
            return Err(Error::Bootstrap("the entry is published once".into()));
        }
        let mut value = sys::pmix_value_t {
            type_: sys::PMIX_BYTE_OBJECT as u16,
            ..Default::default()
        };
        value.data.bo = sys::pmix_byte_object_t {
            bytes: mine.as_ptr() as *mut c_char,
            size: mine.len(),
        };
        // SAFETY: PMIx copies the value; `mine` outlives the call.
        check("PMIx_Put", unsafe {
            sys::PMIx_Put(sys::PMIX_GLOBAL as u8, ENTRY_KEY.as_ptr(), &mut value)
        })?;
        // SAFETY: no arguments.
        check("PMIx_Commit", unsafe { sys::PMIx_Commit() })?;
        // A fence that collects nothing: peers' entries are got one at a
        // time, at first contact.
        let ticket = self.start_barrier()?;
        let deadline = std::time::Instant::now() + timeout;
        while !self.barrier_done(ticket)? {
            if std::time::Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: "the PMIx fence after publishing",
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(Placement {
            hosts: self.hosts,
            local_ranks: self.local_ranks.clone(),
        })
    }

    fn lookup(&self, rank: Rank, timeout: Duration) -> Result<Vec<u8>> {
        super::lookup_allowed(self.published.load(Ordering::Acquire), rank, self.size)?;
        let key = ENTRY_KEY.to_bytes_with_nul();
        get(&self.peer(rank), key, timeout)
            .and_then(|value| value.bytes())
            .map_err(|e| Error::Bootstrap(format!("rank {rank}'s entry: {e}")))
    }

    fn start_barrier(&self) -> Result<BarrierTicket> {
        let done = Arc::into_raw(self.barriers_done.clone()) as *mut c_void;
        // SAFETY: all of this job's processes (null: the caller's
        // namespace); `done` is reclaimed by the callback, or here if PMIx
        // refused the call.
        let status = unsafe {
            sys::PMIx_Fence_nb(
                std::ptr::null(),
                0,
                std::ptr::null(),
                0,
                Some(fence_done),
                done,
            )
        };
        if let Err(e) = check("PMIx_Fence_nb", status) {
            // SAFETY: PMIx did not take `done`.
            drop(unsafe { Arc::from_raw(done.cast::<AtomicU64>()) });
            return Err(e);
        }
        Ok(BarrierTicket(
            self.barriers_started.fetch_add(1, Ordering::AcqRel) + 1,
        ))
    }

    fn barrier_done(&self, ticket: BarrierTicket) -> Result<bool> {
        match self.barriers_done.load(Ordering::Acquire) {
            FENCE_FAILED => Err(Error::Bootstrap(
                "a PMIx fence failed (a rank of the job is gone?)".into(),
            )),
            done => Ok(done >= ticket.0),
        }
    }

    /// The PMIx server ends the job when a rank dies; fences then fail.
    fn failed_rank(&self) -> Option<Rank> {
        None
    }
}

impl Drop for PmixBootstrap {
    fn drop(&mut self) {
        // SAFETY: PMIx was initialized by this value; no info.
        unsafe { sys::PMIx_Finalize(std::ptr::null(), 0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_peers_parse_and_lies_are_errors() {
        assert_eq!(local_peers("3,1,2", 2, 4).unwrap(), vec![1, 2, 3]);
        for bad in ["", "0,x", "0,4", "1,3"] {
            let err = local_peers(bad, 0, 4).unwrap_err();
            assert!(err.to_string().contains("local peers"), "{bad}: {err}");
        }
    }
}
