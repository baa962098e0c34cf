//! What catena asks of the operating system outside any provider: whether a
//! peer's process still exists (failure detection on this host).

/// Whether process `pid` exists (it may belong to another user).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}
