//! The provider conformance suite on the UCX provider, over shared memory
//! (`UCX_TLS=posix,cma,self`) and over TCP (`UCX_TLS=tcp,self`: on every
//! interface, so UCX spreads puts over several lanes; and on `lo` alone, one
//! lane, where signals carry small data), with 2 and 4 processes started by
//! the launcher, and the whole suite under `mpiexec` (where MPICH runs its
//! own UCP context in the same processes).
#![cfg(feature = "ucx")]

use catena_fabric::ucx::UcxTransport;
use catena_testkit::conformance::Check;
use catena_testkit::{conformance_case, Starter};

const SHM: &[(&str, &str)] = &[("UCX_TLS", "posix,cma,self")];
const TCP: &[(&str, &str)] = &[("UCX_TLS", "tcp,self")];
const TCP_ONE_LANE: &[(&str, &str)] = &[("UCX_TLS", "tcp,self"), ("UCX_NET_DEVICES", "lo")];
const TCP_THREAD: &[(&str, &str)] = &[("UCX_TLS", "tcp,self"), ("CATENA_PROGRESS_THREAD", "on")];
const SHM_CATENA_ONLY: &[(&str, &str)] = &[("CATENA_UCX_TLS", "posix,cma,self")];
const TCP_CATENA_ONLY: &[(&str, &str)] = &[("CATENA_UCX_TLS", "tcp,self")];

/// Under mpiexec MPICH's own UCP context reads `UCX_TLS` too (and MPICH
/// 4.0's finalize over tcp alone hangs), so catena's transports are set for
/// catena only.
fn shm_env(check: Option<Check>) -> &'static [(&'static str, &'static str)] {
    match check {
        Some(Check::Suite) => SHM_CATENA_ONLY,
        _ => SHM,
    }
}

fn tcp_env(check: Option<Check>) -> &'static [(&'static str, &'static str)] {
    match check {
        Some(Check::Suite) => TCP_CATENA_ONLY,
        _ => TCP,
    }
}

fn tcp_one_lane_env(_: Option<Check>) -> &'static [(&'static str, &'static str)] {
    TCP_ONE_LANE
}

type Env = fn(Option<Check>) -> &'static [(&'static str, &'static str)];

catena_testkit::conformance_tests! {
    provider: UcxTransport;
    shm: shm_env as Env, ranks [2, 4], mpiexec [2, 4];
    tcp: tcp_env as Env, ranks [2, 4], mpiexec [2, 4];
    tcp_one_lane: tcp_one_lane_env as Env, ranks [2, 4];
}

/// A progress thread drives the tcp worker (software-emulated RMA) beside
/// the rank.
#[test]
fn tcp_progress_thread_signals_and_atomics_4() {
    conformance_case::<UcxTransport>(
        "tcp_progress_thread_signals_and_atomics_4",
        4,
        Starter::Launcher,
        TCP_THREAD,
        Check::SignalsAndAtomics,
    );
}

#[test]
fn tcp_progress_thread_all_pairs_4() {
    conformance_case::<UcxTransport>(
        "tcp_progress_thread_all_pairs_4",
        4,
        Starter::Launcher,
        TCP_THREAD,
        Check::AllPairs,
    );
}

/// A rank killed while its peer streams puts into it: the survivor's put
/// fails with `PeerGone`, and its endpoint, closed by force with data still
/// in flight, must be fully discarded before the worker goes (UCX 1.13
/// aborts in `ucp_worker_destroy` on an endpoint whose discard is pending).
#[test]
fn tcp_peer_killed_mid_put() {
    use catena_fabric::{block_on, Error, LocalWindow, RemoteKey, Rma, Transport};
    const CASE: &str = "tcp_peer_killed_mid_put";
    const BIG: usize = 16 << 20;
    let report = catena_testkit::launch_case_on::<UcxTransport>(CASE, 2, TCP, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let window = t.alloc_window(BIG)?;
            let peer = 1 - t.rank();
            t.send(peer, 9, 1, window.key().as_bytes(), deadline)
                .await?;
            let key = RemoteKey::from_bytes(&t.recv(Some(peer), 9, 1, deadline).await?.data)?;
            if t.rank() == 1 {
                // SAFETY: ends this process, as the test wants.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            }
            let data = vec![7u8; BIG];
            for _ in 0..10_000 {
                match t.put(peer, &key, 0, &data) {
                    Ok(()) => {}
                    Err(Error::PeerGone { .. }) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
            Err(Error::Protocol(
                "puts to a killed rank kept succeeding".into(),
            ))
        })
    });
    if let Some(report) = report {
        assert!(
            report.statuses[0].success(),
            "the survivor failed: {:?}\n{}",
            report.statuses[0],
            report.output
        );
    }
}

/// Over tcp a signal's message carries its data, and UCX's endpoint flush
/// does not wait for active messages: `flush` must not say a put + signal
/// landed before the target handled it. The target here does not progress
/// for a second, so a flush with a shorter deadline must time out; once it
/// progresses, the flush succeeds and the data is there.
#[test]
fn tcp_flush_waits_for_signal_messages() {
    use catena_fabric::{block_on, Error, LocalWindow, RemoteKey, Rma, Signal, Transport};
    use std::time::Duration;
    const CASE: &str = "tcp_flush_waits_for_signal_messages";
    let report = catena_testkit::launch_case_on::<UcxTransport>(CASE, 2, TCP_ONE_LANE, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(Duration::from_secs(30));
            let window = t.alloc_window(64)?;
            let peer = 1 - t.rank();
            t.send(peer, 9, 1, window.key().as_bytes(), deadline)
                .await?;
            let key = RemoteKey::from_bytes(&t.recv(Some(peer), 9, 1, deadline).await?.data)?;
            if t.rank() == 1 {
                // Ready, then deaf for a second.
                t.send(peer, 9, 2, &[], deadline).await?;
                std::thread::sleep(Duration::from_secs(1));
                t.wait_signal(&window, 0, 1, deadline).await?;
                let mut got = [0u8; 8];
                window.read(8, &mut got)?;
                if got != [7; 8] {
                    return Err(Error::Protocol(format!("the data is {got:?}")));
                }
                return t.send(peer, 9, 3, &[], deadline).await;
            }
            t.recv(Some(peer), 9, 2, deadline).await?;
            t.put_signal(peer, &key, 8, &[7; 8], Signal { offset: 0, add: 1 })?;
            match t
                .flush(peer, t.deadline_in(Duration::from_millis(300)))
                .await
            {
                Err(Error::Timeout { .. }) => {}
                other => {
                    return Err(Error::Protocol(format!(
                        "a flush while the target was deaf gave {other:?}"
                    )))
                }
            }
            t.flush(peer, deadline).await?;
            t.recv(Some(peer), 9, 3, deadline).await.map(drop)
        })
    });
    if let Some(report) = report {
        assert!(
            report.success(),
            "{:?}\n{}",
            report.first_failure,
            report.output
        );
    }
}
