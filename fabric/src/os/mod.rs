//! What catena asks of the operating system outside any provider: whether a
//! peer's process still exists (failure detection on this host), secrets
//! from the kernel's random source, room for open descriptors, and shared
//! memory with futex wake-ups and the fence a sleeper puts on its posters'
//! cores, which bootstraps, host memory and the shm provider all build on.

pub mod futex;
pub mod membarrier;
pub mod segment;

/// Whether process `pid` exists (it may belong to another user).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// A descriptor of process `pid` (`pidfd_open`), `None` where the kernel
/// gives none (before Linux 5.3, or the process is gone).
pub fn pidfd_open(pid: libc::pid_t) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: a plain system call; a descriptor it returns is ours alone.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    (fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether the process behind `pidfd` has exited (its descriptor reads as
/// ready); a failed look counts as exited.
pub fn pidfd_exited(pidfd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    let mut poll = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one pollfd of ours; a zero timeout never blocks.
    let ready = unsafe { libc::poll(&mut poll, 1, 0) };
    ready != 0
}

/// How many tasks the kernel has runnable on this machine now, the caller
/// among them (`/proc/loadavg`'s fourth field); `None` where it cannot be
/// read. About half a microsecond: the file stays open in each thread.
pub fn runnable_tasks() -> Option<u32> {
    use std::os::unix::fs::FileExt;
    thread_local! {
        static LOADAVG: Option<std::fs::File> = std::fs::File::open("/proc/loadavg").ok();
    }
    let mut text = [0u8; 128];
    let n = LOADAVG.with(|file| file.as_ref()?.read_at(&mut text, 0).ok())?;
    // "0.52 0.58 0.59 2/345 1234": runnable/total is the fourth field.
    let field = text[..n].split(|&b| b == b' ').nth(3)?;
    let runnable = field.split(|&b| b == b'/').next()?;
    std::str::from_utf8(runnable).ok()?.parse().ok()
}

/// 64 bits from the kernel's random source (job ids, window secrets).
pub fn random_u64() -> u64 {
    let mut bytes = [0u8; 8];
    let mut filled = 0;
    while filled < bytes.len() {
        // SAFETY: writes at most the rest of `bytes`.
        let n = unsafe {
            libc::getrandom(bytes[filled..].as_mut_ptr().cast(), bytes.len() - filled, 0)
        };
        // getrandom only fails when interrupted, before the pool is seeded.
        if n > 0 {
            filled += n as usize;
        }
    }
    u64::from_le_bytes(bytes)
}

/// Raises this process's soft limit of open descriptors to its hard limit:
/// the shm provider holds one descriptor per live window.
pub fn raise_open_file_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write the one struct given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (what `Instant` reads).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_MONOTONIC_COARSE` in nanoseconds: the same clock as of the last
/// tick, read without a time stamp counter.
#[inline]
pub fn coarse_monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a timespec to write; it cannot fail.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(1_000_000_000) + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_caller_is_among_the_runnable_tasks() {
        // Running this test makes at least one task runnable: a misread
        // field (the load averages, the total) would give none or too many.
        let runnable = super::runnable_tasks().expect("/proc/loadavg reads");
        let total: u32 = std::fs::read_to_string("/proc/loadavg")
            .unwrap()
            .split_whitespace()
            .nth(3)
            .and_then(|f| f.split('/').nth(1)?.parse().ok())
            .unwrap();
        assert!(runnable >= 1 && runnable <= total, "{runnable} of {total}");
    }
}
