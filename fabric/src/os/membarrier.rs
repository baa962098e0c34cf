//! The asymmetric fence between a rank that posts and one that goes to
//! sleep: the sleeper asks the kernel (`membarrier`) to put a full fence
//! on every core running a catena process, so a poster's store needs none.

use std::sync::OnceLock;

// From linux/membarrier.h (the libc crate leaves them out).
const CMD_QUERY: libc::c_int = 0;
const CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: a plain system call with no pointers.
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_uint,
            0 as libc::c_int,
        )
    }
}

/// Whether this process is registered for [`fence_others`]: asked of the
/// kernel once, on first use. Only then may its stores that a sleeper
/// waits on be release stores (see [`crate::host::store_for_sleeper`]).
pub fn registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        let supported = membarrier(CMD_QUERY);
        supported >= 0
            && supported & libc::c_long::from(CMD_GLOBAL_EXPEDITED) != 0
            && membarrier(CMD_REGISTER_GLOBAL_EXPEDITED) == 0
    })
}

/// Runs a full fence on every core that runs a registered process now
/// (those not running passed one when they were switched out): each
/// store it made before is visible to this caller afterwards, and each
/// load it makes after sees what this caller stored before. `false` where
/// the kernel refused (Linux before 4.16, or a seccomp filter).
pub fn fence_others() -> bool {
    membarrier(CMD_GLOBAL_EXPEDITED) == 0
}
