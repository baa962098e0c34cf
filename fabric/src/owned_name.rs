//! Names for shared memory that others create in /dev/shm on catena's behalf
//! (libfabric's shm regions): unguessable, so that nobody can squat or
//! pre-create them, and stamped with their owner, so that any later catena
//! process removes what a dead owner left, and never a live owner's.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::{Error, Result};

const SHM_DIR: &str = "/dev/shm";
/// What every owned name starts with; nothing else of catena's does.
const PREFIX: &str = "catena-fi-";

/// The process that owns a name: its pid namespace, pid, and start time
/// (clock ticks after boot). The start time tells a reused pid from the
/// owner; the namespace, a process of another container sharing /dev/shm,
/// whose pids mean other processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    namespace: u64,
    pid: u32,
    started: u64,
}

impl Owner {
    /// This process.
    fn me() -> Result<Owner> {
        let pid = std::process::id();
        Ok(Owner {
            namespace: pid_namespace()?,
            pid,
            started: start_time(pid).ok_or_else(|| {
                Error::Bootstrap("cannot read this process's start time in /proc/self/stat".into())
            })?,
        })
    }

    /// Parses `n<namespace>-p<pid>-s<started>-<random hex>` plus whatever
    /// the creator appended (libfabric adds `:<uid>:<index>`).
    fn from_name(name: &str) -> Option<Owner> {
        let mut parts = name.strip_prefix(PREFIX)?.splitn(4, '-');
        let mut field = |tag: char| parts.next()?.strip_prefix(tag)?.parse::<u64>().ok();
        Some(Owner {
            namespace: field('n')?,
            pid: field('p')?.try_into().ok()?,
            started: field('s')?,
        })
    }

    /// Whether the owner has certainly exited: its pid is free or now
    /// belongs to a process started at another time. Unknown for owners of
    /// other pid namespaces, which count as alive.
    fn provably_dead(&self, namespace: u64) -> bool {
        self.namespace == namespace && start_time(self.pid) != Some(self.started)
    }
}

/// A fresh name for this process, `catena-fi-n<pid namespace>-p<pid>-
/// s<start time>-<128 random bits in hex>`.
pub fn fresh() -> Result<String> {
    let owner = Owner::me()?;
    let random = format!(
        "{:016x}{:016x}",
        crate::os::random_u64(),
        crate::os::random_u64()
    );
    Ok(format!(
        "{PREFIX}n{}-p{}-s{}-{random}",
        owner.namespace, owner.pid, owner.started
    ))
}

/// Removes the entries of /dev/shm whose owner is provably dead and that
/// this user owns (plain files only, never followed links); returns how
/// many. Safe to run concurrently with live jobs and other sweeps.
pub fn remove_dead() -> usize {
    remove_dead_of(|_| true)
}

/// [`remove_dead`] for the names of owners whose pid passes `owned_by` only
/// (e.g. the ranks of one job).
pub fn remove_dead_of(owned_by: impl Fn(u32) -> bool) -> usize {
    let (Ok(namespace), Ok(entries)) = (pid_namespace(), fs::read_dir(SHM_DIR)) else {
        return 0;
    };
    // SAFETY: geteuid has no failure mode.
    let me = unsafe { libc::geteuid() };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            let name = e.file_name();
            let Some(owner) = name.to_str().and_then(Owner::from_name) else {
                return false;
            };
            // DirEntry::metadata does not follow links.
            let mine = e.metadata().is_ok_and(|m| m.uid() == me && m.is_file());
            mine && owned_by(owner.pid) && owner.provably_dead(namespace)
        })
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// The inode of this process's pid namespace.
fn pid_namespace() -> Result<u64> {
    let link = fs::read_link("/proc/self/ns/pid")
        .map_err(|e| Error::io("reading /proc/self/ns/pid", e))?;
    // The link reads `pid:[4026531836]`.
    link.to_str()
        .and_then(|l| l.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok())
        .ok_or_else(|| Error::Bootstrap(format!("unexpected /proc/self/ns/pid: {link:?}")))
}

/// When process `pid` started (field 22 of /proc/<pid>/stat), if it exists
/// and is not a zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(Path::new("/proc").join(pid.to_string()).join("stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold anything.
    let mut fields = stat[stat.rfind(')')? + 2..].split(' ');
    let state = fields.next()?;
    if state == "Z" || state == "X" {
        return None;
    }
    fields.nth(18)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(name: &str) -> std::path::PathBuf {
        let path = Path::new(SHM_DIR).join(name);
        fs::write(&path, b"left behind").unwrap();
        path
    }

    #[test]
    fn names_carry_their_owner_and_128_random_bits() {
        let (a, b) = (fresh().unwrap(), fresh().unwrap());
        assert_ne!(a, b);
        let me = Owner::me().unwrap();
        for name in [&a, &b] {
            assert_eq!(Owner::from_name(name), Some(me), "{name}");
            let random = name.rsplit('-').next().unwrap();
            assert_eq!(random.len(), 32, "{name}: 128 bits in hex");
            assert!(random.bytes().all(|c| c.is_ascii_hexdigit()), "{name}");
        }
        assert_eq!(
            Owner::from_name(&format!("{a}:0:7")),
            Some(me),
            "libfabric's suffix"
        );
    }

    #[test]
    fn only_names_of_provably_dead_owners_are_removed() {
        let me = Owner::me().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = child.id();
        child.wait().unwrap();
        let tag = format!("{:x}", crate::os::random_u64());
        let name = |ns: u64, pid: u32, started: u64, what: &str| {
            format!("{PREFIX}n{ns}-p{pid}-s{started}-{tag}{what}:0:0")
        };
        let ns = me.namespace;
        let dead = [
            // The pid is free.
            plant(&name(ns, dead_pid, me.started, "gone")),
            // The pid was reused by a process started at another time.
            plant(&name(ns, me.pid, me.started + 1, "reused")),
        ];
        let alive = [
            plant(&fresh().unwrap()),
            // Another namespace's pid means another process: unknown.
            plant(&name(ns + 1, dead_pid, me.started, "elsewhere")),
            plant(&format!("catena-other-p{dead_pid}-{tag}")),
        ];
        assert!(remove_dead() >= dead.len());
        for path in &dead {
            assert!(!path.exists(), "{path:?} should be gone");
        }
        for path in &alive {
            assert!(path.exists(), "{path:?} should stay");
            fs::remove_file(path).unwrap();
        }
    }
}
