//! Names in /dev/shm for shared memory that others create by name
//! (libfabric's shm provider names its regions): scoped to a job, so that
//! the launcher can remove what a killed rank of its job left behind.

use std::fs;
use std::path::PathBuf;

/// Where POSIX shared-memory objects live on Linux.
pub const SHM_DIR: &str = "/dev/shm";
/// The prefix of every name catena hands out.
pub const PREFIX: &str = "catena-";

/// The name of object `what` of `job`.
pub fn name(job: &str, what: &str) -> String {
    format!("{PREFIX}{job}-{what}")
}

/// Names of `job`'s objects still in /dev/shm.
pub fn job_names(job: &str) -> Vec<String> {
    let prefix = name(job, "");
    let Ok(dir) = fs::read_dir(SHM_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Removes `job`'s objects from /dev/shm; returns how many were removed.
/// Only the job's own names match: job ids are random, never reused.
pub fn remove_job(job: &str) -> usize {
    job_names(job)
        .into_iter()
        .filter(|n| fs::remove_file(PathBuf::from(SHM_DIR).join(n)).is_ok())
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_removes_its_own_names_only() {
        let (mine, other) = (crate::job::new_job_id(), crate::job::new_job_id());
        for job in [&mine, &other] {
            fs::write(PathBuf::from(SHM_DIR).join(name(job, "ofi-r0")), b"").unwrap();
        }
        assert_eq!(remove_job(&mine), 1);
        assert!(job_names(&mine).is_empty());
        assert_eq!(remove_job(&other), 1);
    }
}
