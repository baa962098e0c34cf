//! The provider conformance suite on the shm provider, with 2, 3 and 8
//! processes started by the launcher (and 2 and 4 by `mpiexec` with the
//! `mpi` feature), plus the shm provider's own promises.

use catena_fabric::shm::ShmTransport;
use catena_fabric::{block_on, Rma, Transport};
use catena_testkit::conformance;
use catena_testkit::run_case;

const NO_ENV: &[(&str, &str)] = &[];

catena_testkit::conformance_tests! {
    provider: ShmTransport;
    shm: NO_ENV, ranks [2, 3, 8], mpiexec [2, 4];
}

/// A rank that talks to two partners holds two connections, whatever the
/// job size: transport state is O(partners), never O(N).
#[test]
fn transport_state_grows_with_partners_only() {
    run_case("transport_state_grows_with_partners_only", 8, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let (right, left) = (
                (t.rank() + 1) % t.size(),
                (t.rank() + t.size() - 1) % t.size(),
            );
            t.send(right, 9, 1, b"hello", deadline).await?;
            let got = t.recv(Some(left), 9, 1, deadline).await?;
            assert_eq!((got.source, &got.data[..]), (left, &b"hello"[..]));
            assert_eq!(t.connection_count(), 2);
            Ok(())
        })
    });
}

/// A rank that went straight to `finalize` still serves its peers: they make
/// first contact with it and need ring credit from it (a send of 4 rings).
#[test]
fn finalize_keeps_serving_peers() {
    run_case("finalize_keeps_serving_peers", 3, |t| {
        if t.rank() != 0 {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let big =
                conformance::pattern(t.rank(), 0, 4 * catena_fabric::eager::DEFAULT_RING_BYTES);
            block_on(t, t.send(0, 9, 2, &big, deadline))?;
        }
        Ok(())
    });
}

/// Putting into 50 short-lived windows of a peer leaves no pile of mappings:
/// the origin keeps only mappings of live windows.
#[test]
fn mappings_of_freed_windows_are_dropped() {
    use catena_fabric::{LocalWindow, RemoteKey, Signal};
    run_case("mappings_of_freed_windows_are_dropped", 2, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            for round in 0..50u64 {
                if t.rank() == 1 {
                    let window = t.alloc_window(64)?;
                    t.send(0, 9, 3, window.key().as_bytes(), deadline).await?;
                    t.wait_signal(&window, 0, round + 1, deadline).await?;
                    drop(window);
                    t.send(0, 9, 4, &[], deadline).await?;
                } else {
                    let key = RemoteKey::from_bytes(&t.recv(Some(1), 9, 3, deadline).await?.data)?;
                    t.put_signal(
                        1,
                        &key,
                        8,
                        b"x",
                        Signal {
                            offset: 0,
                            add: round + 1,
                        },
                    )?;
                    t.recv(Some(1), 9, 4, deadline).await?;
                }
            }
            if t.rank() == 0 {
                // Rank 1's control and connection windows, and the last one.
                assert!(
                    t.peer_mapping_count() <= 3,
                    "{} mappings",
                    t.peer_mapping_count()
                );
            }
            Ok(())
        })
    });
}

/// Every file in /dev/shm whose name mentions job `job`.
fn named_in_dev_shm(job: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .expect("/dev/shm")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(job))
        .collect()
}

/// `block_on` polls with catena's waker, so that a wait leaves progress to
/// it. (A wait that took `block_on`'s waker for another runtime's made
/// progress on every pending poll, twice what `block_on` makes.)
#[test]
fn block_on_polls_with_catena_s_waker() {
    use std::task::Poll;
    run_case("block_on_polls_with_catena_s_waker", 1, |t| {
        let told = std::future::poll_fn(|cx| Poll::Ready(catena_fabric::polled_by_catena(cx)));
        assert!(block_on(t, told), "block_on's waker is not catena's");
        Ok(())
    });
}

/// The shared memory of a job has no name: no mapping of a rank comes from
/// /dev/shm, and no file there mentions the job, while windows are live and
/// peers have mapped them.
#[test]
fn shared_memory_has_no_name() {
    use catena_fabric::LocalWindow;
    run_case("shared_memory_has_no_name", 3, |t| {
        block_on(t, async {
            let window = t.alloc_window(4096)?;
            let right = (t.rank() + 1) % t.size();
            let left = (t.rank() + t.size() - 1) % t.size();
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            t.send(left, 9, 5, window.key().as_bytes(), deadline)
                .await?;
            let key = catena_fabric::RemoteKey::from_bytes(
                &t.recv(Some(right), 9, 5, deadline).await?.data,
            )?;
            t.put(right, &key, 0, b"no names")?;
            conformance::barrier(t).await?;
            let named = named_in_dev_shm(t.job_id());
            assert!(named.is_empty(), "named in /dev/shm: {named:?}");
            let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
            let from_dev_shm: Vec<&str> =
                maps.lines().filter(|l| l.contains("/dev/shm/")).collect();
            assert!(
                from_dev_shm.is_empty(),
                "mapped from /dev/shm: {from_dev_shm:?}"
            );
            conformance::barrier(t).await
        })
    });
}

/// The names a job would have used, squatted before it uses them (as files
/// and as symlinks to a file of the squatter), change nothing: the job runs,
/// and the squatter's files are untouched.
#[test]
fn squatted_names_in_dev_shm_do_not_affect_a_job() {
    use catena_fabric::LocalWindow;
    run_case("squatted_names_in_dev_shm_do_not_affect_a_job", 2, |t| {
        let squatted: Vec<String> = (0..64)
            .map(|id| format!("/dev/shm/catena-{}-r{}-w{id}", t.job_id(), t.rank()))
            .collect();
        let bait = format!("/dev/shm/squat-bait-{}-{}", t.job_id(), t.rank());
        std::fs::write(&bait, [0u8; 8192]).expect("bait");
        for (i, path) in squatted.iter().enumerate() {
            if i % 2 == 0 {
                std::fs::write(path, [0u8; 8192]).expect("squat");
            } else {
                std::os::unix::fs::symlink(&bait, path).expect("squat with a symlink");
            }
        }
        let outcome = block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let window = t.alloc_window(64)?;
            let peer = 1 - t.rank();
            t.send(peer, 9, 6, window.key().as_bytes(), deadline)
                .await?;
            let key = catena_fabric::RemoteKey::from_bytes(
                &t.recv(Some(peer), 9, 6, deadline).await?.data,
            )?;
            t.put(peer, &key, 0, b"arrived")?;
            conformance::barrier(t).await?;
            let mut got = [0u8; 7];
            window.read(0, &mut got)?;
            assert_eq!(&got, b"arrived");
            conformance::barrier(t).await
        });
        let untouched = squatted
            .iter()
            .chain([&bait])
            .all(|p| std::fs::read(p).is_ok_and(|b| b == [0u8; 8192]));
        for path in squatted.iter().chain([&bait]) {
            let _ = std::fs::remove_file(path);
        }
        assert!(untouched, "a squatted file was written");
        outcome
    });
}

/// A window's key stays the owner's: every one-bit change of it is
/// `InvalidKey` (before and after the window was mapped), keys of freed
/// windows are `WindowFreed` (mapped or not, and once new windows took their
/// place), and a file planted where a freed window's name was gets nothing.
#[test]
fn forged_and_stale_keys_write_nothing() {
    use catena_fabric::{Error, LocalWindow, RemoteKey};
    run_case("forged_and_stale_keys_write_nothing", 2, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            if t.rank() == 1 {
                let (forged, unmapped) = (t.alloc_window(64)?, t.alloc_window(64)?);
                t.send(0, 9, 7, forged.key().as_bytes(), deadline).await?;
                t.send(0, 9, 8, unmapped.key().as_bytes(), deadline).await?;
                let name = t.recv(Some(0), 9, 9, deadline).await?.data;
                drop((forged, unmapped));
                // Plant a live-looking window where the unmapped one's name was.
                let planted = format!("/dev/shm/{}", String::from_utf8_lossy(&name));
                let mut header = vec![0u8; 4096 + 64];
                header[..8].copy_from_slice(b"CATENAW1");
                header[8..16]
                    .copy_from_slice(&u64::from(name[name.len() - 1] - b'0').to_le_bytes());
                header[16..24].copy_from_slice(&64u64.to_le_bytes());
                header[24..32].copy_from_slice(&1u64.to_le_bytes());
                std::fs::write(&planted, &header).expect("planting");
                let successors = [t.alloc_window(64)?, t.alloc_window(64)?];
                t.send(0, 9, 10, &[], deadline).await?;
                t.recv(Some(0), 9, 11, deadline).await?; // stale puts tried
                let planted_bytes = std::fs::read(&planted).unwrap_or_default();
                let _ = std::fs::remove_file(&planted);
                assert!(planted_bytes == header, "the planted file got a put");
                for successor in successors {
                    let mut got = [0u8; 64];
                    successor.read(0, &mut got)?;
                    assert_eq!(got, [0u8; 64], "a stale key wrote into a new window");
                }
            } else {
                let forged_key = t.recv(Some(1), 9, 7, deadline).await?.data;
                let unmapped_key =
                    RemoteKey::from_bytes(&t.recv(Some(1), 9, 8, deadline).await?.data)?;
                for mapped in [false, true] {
                    for at in 0..forged_key.len() {
                        for bit in 0..8 {
                            let mut forged = forged_key.clone();
                            forged[at] ^= 1 << bit;
                            let put = t.put(1, &RemoteKey::from_bytes(&forged)?, 0, &[7; 8]);
                            assert!(
                                matches!(put, Err(Error::InvalidKey(_))),
                                "byte {at} bit {bit} (mapped: {mapped}): {put:?}"
                            );
                        }
                    }
                    // Map the genuine window, then forge again.
                    t.put(1, &RemoteKey::from_bytes(&forged_key)?, 8, &[0; 8])?;
                }
                let id = u32::from_le_bytes(unmapped_key.as_bytes()[5..9].try_into().unwrap());
                assert!(id < 10, "window ids are small here");
                let name = format!("catena-{}-r1-w{id}", t.job_id());
                t.send(1, 9, 9, name.as_bytes(), deadline).await?;
                t.recv(Some(1), 9, 10, deadline).await?; // freed and replaced
                for key in [RemoteKey::from_bytes(&forged_key)?, unmapped_key] {
                    let stale = t.put(1, &key, 0, &[9; 8]);
                    assert!(
                        matches!(stale, Err(Error::WindowFreed { rank: 1 })),
                        "{stale:?}"
                    );
                }
                t.send(1, 9, 11, &[], deadline).await?;
            }
            conformance::barrier(t).await
        })
    });
}

/// A rank killed under `mpiexec` (which knows nothing of catena's shared
/// memory) leaves nothing in /dev/shm: the kernel frees what it held.
#[cfg(feature = "mpi")]
#[test]
fn a_killed_rank_under_mpiexec_leaves_nothing_in_dev_shm() {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};
    const CASE: &str = "a_killed_rank_under_mpiexec_leaves_nothing_in_dev_shm";
    let ran = catena_testkit::run_as_rank::<ShmTransport>(CASE, |t| {
        block_on(t, async {
            let _window = t.alloc_window(4096)?;
            conformance::barrier(t).await?;
            if t.rank() == 1 {
                // SAFETY: kills this process, as a crash would.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            // Until mpiexec stops the job, or the victim is seen gone.
            let deadline = t.deadline_in(Duration::from_secs(30));
            let _ = t.recv(Some(1), 9, 12, deadline).await;
            Ok(())
        })
    });
    if ran {
        return;
    }
    let job = catena_fabric::bootstrap::new_job_id();
    let mut mpiexec = Command::new("mpiexec")
        .args(["-n", "3"])
        .arg(std::env::current_exe().unwrap())
        .args([CASE, "--exact", "--nocapture", "--test-threads=1"])
        .env(catena_testkit::ENV_CASE, CASE)
        .env(catena_fabric::config::ENV_MPI_JOB, &job)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("mpiexec");
    let deadline = Instant::now() + Duration::from_secs(60);
    while mpiexec.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = mpiexec.kill();
    let status = mpiexec.wait().unwrap();
    assert!(!status.success(), "a killed rank fails the job");
    let left = named_in_dev_shm(&job);
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// A put into a window of a rank that died is `PeerGone`, and writes
/// nowhere: its memory went with it (or, where a mapping keeps it, nobody
/// reads it).
#[test]
fn a_dead_ranks_window_is_peer_gone() {
    use catena_fabric::{Error, LocalWindow, RemoteKey};
    use std::os::unix::process::ExitStatusExt;
    let Some(report) = catena_testkit::launch_case("a_dead_ranks_window_is_peer_gone", 2, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            if t.rank() == 1 {
                let window = t.alloc_window(64)?;
                t.send(0, 9, 13, window.key().as_bytes(), deadline).await?;
                t.recv(Some(0), 9, 14, deadline).await?;
                // SAFETY: kills this process, as a crash would.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                unreachable!("killed");
            }
            let key = RemoteKey::from_bytes(&t.recv(Some(1), 9, 13, deadline).await?.data)?;
            t.send(1, 9, 14, &[], deadline).await?;
            let gone = t.recv(Some(1), 9, 15, deadline).await;
            assert!(matches!(gone, Err(Error::PeerGone { rank: 1 })), "{gone:?}");
            let put = t.put(1, &key, 0, b"to the dead");
            assert!(matches!(put, Err(Error::PeerGone { rank: 1 })), "{put:?}");
            Ok(())
        })
    }) else {
        return;
    };
    assert!(report.statuses[0].success(), "{}", report.output);
    assert_eq!(
        report.statuses[1].signal(),
        Some(libc::SIGKILL),
        "{}",
        report.output
    );
}

/// Counts this process's allocations (every test of this binary runs in
/// processes of its own, so each counts its own).
struct Counting;

static ALLOCATIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

// SAFETY: defers every call to the system allocator, counting on the way.
unsafe impl std::alloc::GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// An 8 B ping-pong received into a buffer allocates nothing once its
/// connection is made: a message that lands while the executor makes
/// progress is left in the ring to the receive that waits for it, which
/// takes it straight into its buffer, rather than drained to the heap.
#[test]
fn a_waited_for_message_goes_from_the_ring_into_its_buffer() {
    run_case(
        "a_waited_for_message_goes_from_the_ring_into_its_buffer",
        2,
        |t| {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let (me, peer) = (t.rank(), 1 - t.rank());
            let mut buf = [0u8; 8];
            let mut round = |n: u64| {
                block_on(t, async {
                    let ping = n.to_le_bytes();
                    if me == 0 {
                        t.send(peer, 9, 16, &ping, deadline).await?;
                        t.recv_into(Some(peer), 9, 16, &mut buf, deadline).await?;
                    } else {
                        t.recv_into(Some(peer), 9, 16, &mut buf, deadline).await?;
                        t.send(peer, 9, 16, &buf, deadline).await?;
                    }
                    assert_eq!(buf, ping);
                    Ok::<_, catena_fabric::Error>(())
                })
            };
            for n in 0..100 {
                round(n)?;
            }
            let before = ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed);
            for n in 100..20_100 {
                round(n)?;
            }
            let allocated = ALLOCATIONS.load(std::sync::atomic::Ordering::Relaxed) - before;
            assert_eq!(allocated, 0, "rank {me}: 20,000 round trips allocated");
            Ok(())
        },
    );
}

/// A receive that looked once and was then left unpolled (a posted request
/// its program does not test) does not keep its peer's ring from being
/// drained: while this rank waits on something else, the peer's sends of
/// two rings' worth get credit, and the receive completes when polled.
#[test]
fn a_receive_left_unpolled_holds_back_no_credit() {
    use catena_fabric::{LocalWindow, RemoteKey, Signal};
    use std::future::Future;
    use std::task::Context;
    run_case("a_receive_left_unpolled_holds_back_no_credit", 2, |t| {
        let deadline = t.deadline_in(std::time::Duration::from_secs(20));
        let window = t.alloc_window(64)?;
        let piece = [7u8; 2048];
        if t.rank() == 0 {
            block_on(t, t.send(1, 9, 19, window.key().as_bytes(), deadline))?;
            let mut posted = std::pin::pin!(t.recv(Some(1), 9, 17, deadline));
            let mut cx = Context::from_waker(catena_fabric::catena_waker());
            assert!(posted.as_mut().poll(&mut cx).is_pending());
            block_on(t, t.wait_signal(&window, 0, 1, deadline))?;
            for _ in 0..64 {
                let got = block_on(t, t.recv(Some(1), 9, 18, deadline))?;
                assert_eq!(got.data, piece);
            }
            assert_eq!(block_on(t, posted)?.data, b"late");
        } else {
            let key = RemoteKey::from_bytes(&block_on(t, t.recv(Some(0), 9, 19, deadline))?.data)?;
            block_on(t, async {
                for _ in 0..64 {
                    t.send(0, 9, 18, &piece, deadline).await?;
                }
                Ok::<_, catena_fabric::Error>(())
            })?;
            let signal = Signal { offset: 0, add: 1 };
            t.put_signal(0, &key, 8, &[], signal)?;
            block_on(t, t.send(0, 9, 17, b"late", deadline))?;
        }
        Ok(())
    });
}

/// Credit that receives taken straight from the ring leave owing (they
/// return it when a receive next finds the ring empty, not at once) comes
/// back while a receive waits on that ring: in a 16 KiB ring (credit in
/// 4 KiB batches), six 1 KiB frames taken leave 6 KiB owing, and the
/// largest inline message (12 KiB and its header) fits only once they are
/// returned, while the receive that waits for it is polled round after
/// round. Exact bytes of every message are checked.
#[test]
fn credit_left_owing_comes_back_while_a_receive_waits() {
    use catena_fabric::config::ENV_RING_BYTES;
    use catena_testkit::{run_case_on, Starter};
    use std::future::Future;
    use std::task::Poll;
    let env = [(ENV_RING_BYTES, "16384")];
    let case = "credit_left_owing_comes_back_while_a_receive_waits";
    run_case_on(case, 1, Starter::Launcher, &env, |t: &ShmTransport| {
        let deadline = t.deadline_in(std::time::Duration::from_secs(20));
        let me = t.rank();
        for i in 0..6u8 {
            block_on(t, t.send(me, 9, 30, &[i; 960], deadline))?;
        }
        for i in 0..6u8 {
            let got = block_on(t, t.recv(Some(me), 9, 30, deadline))?;
            assert_eq!(got.data, [i; 960], "small message {i}");
        }
        let big = conformance::pattern(me, 31, 12 << 10);
        let mut send = std::pin::pin!(t.send(me, 9, 31, &big, deadline));
        let mut recv = std::pin::pin!(t.recv(Some(me), 9, 31, deadline));
        let mut sent = None;
        let got = block_on(
            t,
            std::future::poll_fn(|cx| {
                if sent.is_none() {
                    if let Poll::Ready(result) = send.as_mut().poll(cx) {
                        sent = Some(result);
                    }
                }
                recv.as_mut().poll(cx)
            }),
        )?;
        sent.expect("the send ended before its message arrived")?;
        assert_eq!(got.data, big, "the largest inline message");
        Ok(())
    });
}
