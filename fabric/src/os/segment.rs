//! Shared memory with no name: a sealed memfd, which no other process can
//! list, squat or plant, and which the kernel frees with its last holder.
//! Peers of the same user map it through `/proc/<owner pid>/fd/<fd>`.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::{AtomicU32, AtomicU64};

use memmap2::{MmapMut, MmapOptions};

use crate::{Error, Result};

/// A segment can neither shrink (a peer's mapping would fault with SIGBUS)
/// nor grow, nor lose these seals. Only a memfd can carry them, so they also
/// tell a segment from any other file a reused descriptor may name.
const SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// A mapping of a segment; it keeps the memory alive without a descriptor.
pub struct Segment {
    map: MmapMut,
}

impl Segment {
    /// Creates a sealed segment of `len` zeroed bytes and maps it, every
    /// page faulted in; peers can open it while the returned descriptor
    /// stays open.
    pub fn create(len: usize) -> Result<(Segment, OwnedFd)> {
        Self::create_with(len, true)
    }

    /// [`Segment::create`] whose pages are made when first touched: for a
    /// large arena of which a process uses a little.
    pub fn create_lazy(len: usize) -> Result<(Segment, OwnedFd)> {
        Self::create_with(len, false)
    }

    fn create_with(len: usize, populate: bool) -> Result<(Segment, OwnedFd)> {
        let flags = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
        // SAFETY: a valid C string and flags; the result is checked.
        let fd = unsafe { libc::memfd_create(c"catena".as_ptr(), flags) };
        if fd < 0 {
            return Err(os_error("creating shared memory (memfd_create)"));
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(len as u64)
            .map_err(|e| Error::io(format!("sizing shared memory to {len} bytes"), e))?;
        // SAFETY: F_ADD_SEALS on a descriptor we own.
        if unsafe { libc::fcntl(fd, libc::F_ADD_SEALS, SEALS) } != 0 {
            return Err(os_error("sealing shared memory"));
        }
        Ok((Self::map(&file, len, populate)?, file.into()))
    }

    /// Maps segment `fd` of process `pid` (of this user) if it is a segment
    /// of `len` bytes; `None` if that descriptor is closed, names something
    /// else, or the process is gone.
    pub fn open(pid: u32, fd: RawFd, len: usize) -> Result<Option<Segment>> {
        Self::open_with(pid, fd, len, true)
    }

    /// [`Segment::open`] without faulting the pages in.
    pub fn open_lazy(pid: u32, fd: RawFd, len: usize) -> Result<Option<Segment>> {
        Self::open_with(pid, fd, len, false)
    }

    fn open_with(pid: u32, fd: RawFd, len: usize, populate: bool) -> Result<Option<Segment>> {
        let path = format!("/proc/{pid}/fd/{fd}");
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&path);
        let file = match opened {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::io(
                    format!(
                        "opening {path}: the kernel lets a process open a peer's \
                         descriptors only while the peer is dumpable \
                         (prctl PR_SET_DUMPABLE) and of the same user"
                    ),
                    e,
                ))
            }
            // A descriptor that is no file (a socket) cannot be opened.
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return Ok(None),
            Err(e) => return Err(Error::io(format!("opening {path}"), e)),
        };
        if !is_segment(file.as_raw_fd(), len) {
            return Ok(None);
        }
        Self::map(&file, len, populate).map(Some)
    }

    /// Maps segment `fd`, inherited from the parent, if it is a segment of
    /// `len` bytes (else leaves `fd` alone), and closes `fd`, which this
    /// process's own children then cannot inherit.
    pub fn adopt(fd: RawFd, len: usize) -> Result<Segment> {
        if !is_segment(fd, len) {
            return Err(Error::Bootstrap(format!(
                "descriptor {fd} is not shared memory of {len} bytes"
            )));
        }
        // SAFETY: `fd` is open (checked), and nothing else in this process
        // uses the descriptor the launcher left for it.
        let file = unsafe { File::from_raw_fd(fd) };
        Self::map(&file, len, true)
    }

    fn map(file: &File, len: usize, populate: bool) -> Result<Segment> {
        // SAFETY: the file is a sealed memfd of `len` bytes that nobody can
        // shrink, and all access to the mapping goes through raw pointers
        // and atomics.
        let mut options = MmapOptions::new();
        options.len(len);
        if populate {
            options.populate();
        }
        let map = unsafe { options.map_mut(file) }
            .map_err(|e| Error::io(format!("mapping {len} bytes of shared memory"), e))?;
        Ok(Segment { map })
    }

    /// The mapping's size in bytes.
    #[inline]
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// The first byte of the mapping; valid while this handle lives.
    #[inline(always)]
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr() as *mut u8
    }

    /// The u64 at byte `offset`, which must be 8-aligned and in bounds.
    #[inline(always)]
    pub fn u64_at(&self, offset: usize) -> &AtomicU64 {
        assert!(offset % 8 == 0 && offset + 8 <= self.mapped_len());
        // SAFETY: aligned, in bounds, and the mapping outlives the borrow.
        unsafe { AtomicU64::from_ptr(self.base().add(offset) as *mut u64) }
    }

    /// The u32 at byte `offset`, which must be 4-aligned and in bounds.
    #[inline(always)]
    pub fn u32_at(&self, offset: usize) -> &AtomicU32 {
        assert!(offset % 4 == 0 && offset + 4 <= self.mapped_len());
        // SAFETY: as in `u64_at`.
        unsafe { AtomicU32::from_ptr(self.base().add(offset) as *mut u32) }
    }
}

/// Whether descriptor `fd` (any number) is a segment, a sealed memfd of
/// this user, of `len` bytes.
fn is_segment(fd: RawFd, len: usize) -> bool {
    // SAFETY: both calls only read the descriptor's seals and status, and
    // fail with EBADF on a number that is not open.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fcntl(fd, libc::F_GET_SEALS) == SEALS
            && libc::fstat(fd, &mut stat) == 0
            && stat.st_mode & libc::S_IFMT == libc::S_IFREG
            && stat.st_uid == libc::geteuid()
            && u64::try_from(stat.st_size) == Ok(len as u64)
    }
}

fn os_error(what: &str) -> Error {
    Error::io(what, std::io::Error::last_os_error())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn a_peer_maps_a_segment_by_pid_and_descriptor() {
        let (seg, fd) = Segment::create(4096).unwrap();
        seg.u64_at(8).store(42, Ordering::Relaxed);
        let peer = Segment::open(std::process::id(), fd.as_raw_fd(), 4096)
            .unwrap()
            .expect("mapped");
        assert_eq!(peer.u64_at(8).load(Ordering::Relaxed), 42);
        assert!(
            Segment::open(std::process::id(), fd.as_raw_fd(), 8192)
                .unwrap()
                .is_none(),
            "the size is checked"
        );
    }

    #[test]
    fn only_sealed_segments_are_opened_or_adopted() {
        let plain = tempfile_in_dev_shm();
        let fd = plain.as_raw_fd();
        assert!(Segment::open(std::process::id(), fd, 4096)
            .unwrap()
            .is_none());
        assert!(Segment::adopt(fd, 4096).is_err());
        assert!(Segment::adopt(-1, 4096).is_err());
        assert!(Segment::adopt(1_000_000, 4096).is_err());
        // A descriptor that is no file at all.
        assert!(Segment::open(std::process::id(), 0, 4096)
            .map(|s| s.is_none())
            .unwrap_or(true));
        drop(plain);
        let (seg, fd) = Segment::create(64).unwrap();
        let closed = fd.as_raw_fd();
        drop(fd);
        assert!(Segment::open(std::process::id(), closed, 64)
            .unwrap()
            .is_none());
        assert_eq!(seg.mapped_len(), 64, "the mapping outlives the descriptor");
    }

    #[test]
    fn a_segment_cannot_be_shrunk_under_its_mappings() {
        let (_seg, fd) = Segment::create(8192).unwrap();
        let file = File::from(fd);
        assert!(file.set_len(64).is_err());
        assert!(file.set_len(1 << 20).is_err());
    }

    /// A plain file of 4096 bytes, already unlinked.
    fn tempfile_in_dev_shm() -> File {
        let path = format!("/dev/shm/catena-segment-test-{}", std::process::id());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file.set_len(4096).unwrap();
        file
    }
}
