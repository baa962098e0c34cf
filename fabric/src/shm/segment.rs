//! Named POSIX shared-memory segments in /dev/shm: created 0600 with
//! job-unique names (`catena-<job>-...`), removed by their owner on drop, by
//! the launcher at job end, and by any later launcher if a job crashed.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64};

use memmap2::{MmapMut, MmapOptions};

use crate::os::process_alive;
use crate::{Error, Result};

/// Where POSIX shared-memory objects live on Linux.
pub const SHM_DIR: &str = "/dev/shm";
/// The prefix of every segment catena creates (so leftovers can be found).
pub const PREFIX: &str = "catena-";

/// A mapped segment; the creator owns it and unlinks it when dropped.
pub struct Segment {
    map: MmapMut,
    path: PathBuf,
    owner: bool,
}

impl Segment {
    /// Creates segment `name` of `len` zeroed bytes (failing if it exists) and
    /// maps it; this handle owns it and unlinks it when dropped.
    pub fn create(name: &str, len: usize) -> Result<Segment> {
        let path = PathBuf::from(SHM_DIR).join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| Error::io(format!("creating shared segment {}", path.display()), e))?;
        let map = Self::map(&file, len as u64, &path).inspect_err(|_| {
            let _ = fs::remove_file(&path);
        })?;
        Ok(Segment {
            map,
            path,
            owner: true,
        })
    }

    /// Maps an existing segment at its full size, without owning it.
    pub fn open(name: &str) -> Result<Segment> {
        let path = PathBuf::from(SHM_DIR).join(name);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening shared segment {}", path.display()), e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading size of {}", path.display()), e))?
            .len();
        let map = Self::map(&file, len, &path)?;
        Ok(Segment {
            map,
            path,
            owner: false,
        })
    }

    fn map(file: &File, len: u64, path: &std::path::Path) -> Result<MmapMut> {
        if file.metadata().map(|m| m.len()).unwrap_or(0) != len {
            file.set_len(len)
                .map_err(|e| Error::io(format!("sizing {}", path.display()), e))?;
        }
        // SAFETY: the file is a shared-memory object of catena's own job, and all
        // access to the mapping goes through raw pointers and atomics.
        unsafe {
            MmapOptions::new()
                .len(len as usize)
                .populate()
                .map_mut(file)
        }
        .map_err(|e| Error::io(format!("mapping {}", path.display()), e))
    }

    /// The mapping's size in bytes.
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// The first byte of the mapping; valid while this handle lives.
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr() as *mut u8
    }

    /// The u64 at byte `offset`, which must be 8-aligned and in bounds.
    pub fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.mapped_len());
        // SAFETY: aligned, in bounds, and the mapping outlives the borrow.
        unsafe { AtomicU64::from_ptr(self.base().add(offset) as *mut u64) }
    }

    /// The u32 at byte `offset`, which must be 4-aligned and in bounds.
    pub fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.mapped_len());
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(self.base().add(offset) as *mut u32) }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// A fresh job id, `p<pid>n<nonce>`: the pid lets a later launcher tell a
/// crashed job's leftovers from a live job's segments.
pub fn new_job_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    format!("p{}n{:x}", std::process::id(), nanos ^ (nanos >> 29))
}

fn job_owner_pid(name: &str) -> Option<i32> {
    let rest = name.strip_prefix(PREFIX)?.strip_prefix('p')?;
    rest[..rest.find('n')?].parse().ok()
}

/// The name of segment `what` of `job`: removed with the job's segments.
pub fn name(job: &str, what: &str) -> String {
    format!("{PREFIX}{job}-{what}")
}

/// Removes every segment of `job`; returns how many were removed.
pub fn remove_job(job: &str) -> usize {
    remove_matching(|name| name.starts_with(&format!("{PREFIX}{job}-")))
}

/// Removes the segments of jobs whose owning process no longer exists.
pub fn remove_stale() -> usize {
    remove_matching(|name| job_owner_pid(name).is_some_and(|pid| !process_alive(pid)))
}

/// Names of the segments of `job` still in /dev/shm.
pub fn job_segments(job: &str) -> Vec<String> {
    let prefix = format!("{PREFIX}{job}-");
    segment_names()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

fn segment_names() -> Vec<String> {
    let Ok(dir) = fs::read_dir(SHM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(PREFIX))
        .collect()
}

fn remove_matching(pred: impl Fn(&str) -> bool) -> usize {
    segment_names()
        .into_iter()
        .filter(|n| pred(n))
        .filter(|n| fs::remove_file(PathBuf::from(SHM_DIR).join(n)).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_carry_the_owner_pid() {
        let job = new_job_id();
        let name = format!("{PREFIX}{job}-r0-w0");
        assert_eq!(job_owner_pid(&name), Some(std::process::id() as i32));
        assert_eq!(job_owner_pid("catena-garbage"), None);
    }

    #[test]
    fn segments_are_private_and_removed_by_their_owner() {
        use std::os::unix::fs::PermissionsExt;
        let job = new_job_id();
        let name = format!("{PREFIX}{job}-test");
        let seg = Segment::create(&name, 4096).unwrap();
        let mode = fs::metadata(PathBuf::from(SHM_DIR).join(&name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        seg.u64_at(8)
            .store(42, std::sync::atomic::Ordering::Relaxed);
        let peer = Segment::open(&name).unwrap();
        assert_eq!(
            peer.u64_at(8).load(std::sync::atomic::Ordering::Relaxed),
            42
        );
        assert!(
            Segment::create(&name, 4096).is_err(),
            "names are never reused"
        );
        drop(seg);
        assert!(job_segments(&job).is_empty());
    }

    #[test]
    fn segments_of_dead_jobs_are_stale_and_live_ones_are_not() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let stale = format!("{PREFIX}p{dead}n1-r0-w0");
        let live_job = new_job_id();
        let live = format!("{PREFIX}{live_job}-r0-w0");
        let stale_seg = Segment::create(&stale, 64).unwrap();
        std::mem::forget(stale_seg); // as a crashed owner would
        let _live_seg = Segment::create(&live, 64).unwrap();
        remove_stale();
        assert!(!PathBuf::from(SHM_DIR).join(&stale).exists());
        assert_eq!(job_segments(&live_job), vec![live]);
    }
}
