//! The provider conformance suite on the libfabric provider, over libfabric's
//! `shm` and `tcp;ofi_rxm` providers, with 2 and 4 processes started by the
//! launcher (and by `mpiexec` with the `mpi` feature), plus the libfabric
//! provider's own promises.
#![cfg(feature = "ofi")]

use catena_fabric::ofi::OfiTransport;
use catena_testkit::conformance::Check;
use catena_testkit::{conformance_case, Starter};

const SHM: &[(&str, &str)] = &[("CATENA_OFI_PROVIDER", "shm")];
const TCP: &[(&str, &str)] = &[("CATENA_OFI_PROVIDER", "tcp;ofi_rxm")];
/// libfabric's shm provider completes a write above its inject size (4 KiB)
/// only when the target calls into libfabric, so a 64 KiB ring write to a
/// napping rank waits for its nap to end, and its finalize then drains the
/// whole 16 MiB within that one poll. A ring within the inject size keeps
/// every ring write an inject, which returns at once.
const SHM_SMALL_RING: &[(&str, &str)] = &[
    ("CATENA_OFI_PROVIDER", "shm"),
    ("CATENA_EAGER_RING_BYTES", "2048"),
];
const SHM_THREAD: &[(&str, &str)] = &[
    ("CATENA_OFI_PROVIDER", "shm"),
    ("CATENA_PROGRESS_THREAD", "on"),
];

/// The libfabric-shm configuration: the small ring for the dropped-send case.
fn shm_env(check: Option<Check>) -> &'static [(&'static str, &'static str)] {
    match check {
        Some(Check::DroppedSendBreaksTheStream) => SHM_SMALL_RING,
        _ => SHM,
    }
}

type Env = fn(Option<Check>) -> &'static [(&'static str, &'static str)];

catena_testkit::conformance_tests! {
    provider: OfiTransport;
    shm: shm_env as Env, ranks [2, 4], mpiexec [2, 4];
    tcp: TCP, ranks [2, 4], mpiexec [2, 4];
}

/// A progress thread drives libfabric-shm beside the rank.
#[test]
fn shm_progress_thread_tagged_messages_2() {
    conformance_case::<OfiTransport>(
        "shm_progress_thread_tagged_messages_2",
        2,
        Starter::Launcher,
        SHM_THREAD,
        Check::TaggedMessages,
    );
}

/// Signals that do not fit in remote CQ data (window ids past 16 bits, an
/// addend past 24 bits) take the flush-then-atomic path, with the same
/// guarantee; the rank also holds AV entries only for the peers it used.
fn wide_signals(t: &OfiTransport, provider: &str) -> catena_fabric::Result<()> {
    use catena_fabric::{block_on, LocalWindow, Rma, Signal, Transport};
    use catena_testkit::conformance;
    assert_eq!(t.provider_name(), provider);
    for _ in 0..(1 << 16) {
        drop(t.alloc_window(8)?);
    }
    let (right, left) = (
        (t.rank() + 1) % t.size(),
        (t.rank() + t.size() - 1) % t.size(),
    );
    block_on(t, async {
        let deadline = t.deadline_in(std::time::Duration::from_secs(60));
        let window = t.alloc_window(8 + 100_000)?;
        t.send(left, 9, 1, window.key().as_bytes(), deadline)
            .await?;
        let key =
            catena_fabric::RemoteKey::from_bytes(&t.recv(Some(right), 9, 1, deadline).await?.data)?;
        let data = conformance::pattern(t.rank(), 1, 100_000);
        let add = 1 << 40;
        t.put_signal(right, &key, 8, &data, Signal { offset: 0, add })?;
        t.put_signal(right, &key, 8, &data[..10], Signal { offset: 0, add })?;
        t.wait_signal(&window, 0, 2 * add, deadline).await?;
        let mut got = vec![0u8; 100_000];
        window.read(8, &mut got)?;
        // The second put rewrote the first 10 bytes with the same bytes.
        let want = conformance::pattern(left, 1, 100_000);
        assert!(got == want, "data of a wide signal did not land before it");
        Ok(())
    })?;
    // Finalize serves peers still putting here, so no barrier is needed (a
    // barrier would make every rank a partner).
    assert!(t.peer_count() <= 2, "{} peers in the AV", t.peer_count());
    Ok(())
}

#[test]
fn shm_wide_signals_4() {
    catena_testkit::run_case_on::<OfiTransport>(
        "shm_wide_signals_4",
        4,
        Starter::Launcher,
        SHM,
        |t| wide_signals(t, "shm"),
    );
}

#[test]
fn tcp_wide_signals_4() {
    catena_testkit::run_case_on::<OfiTransport>(
        "tcp_wide_signals_4",
        4,
        Starter::Launcher,
        TCP,
        |t| wide_signals(t, "tcp;ofi_rxm"),
    );
}

/// A provider libfabric does not have is refused up front, naming the ones
/// it has. Runs as a job of one in a child process, so that the variable is
/// set only there.
#[test]
fn unknown_provider_is_unavailable() {
    const CASE: &str = "unknown_provider_is_unavailable";
    if catena_testkit::is_rank_of(CASE) {
        match OfiTransport::from_env() {
            Err(catena_fabric::Error::Unavailable(unavailable)) => {
                assert_eq!(unavailable.requested, "nonexistent");
                let available = &unavailable.available;
                assert!(available.contains("shm"), "available: {available}");
            }
            Err(e) => panic!("expected Unavailable, got {e}"),
            Ok(_) => panic!("a nonexistent provider was accepted"),
        }
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([CASE, "--exact", "--nocapture", "--test-threads=1"])
        .env(catena_testkit::ENV_CASE, CASE)
        .env("CATENA_OFI_PROVIDER", "nonexistent")
        .output()
        .expect("running the test binary");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// libfabric's shm provider names each rank's region with an owned name,
/// never after the pid: one that others cannot predict (a file planted at a
/// predicted name crashes a rank with SIGBUS), carrying the owner's pid so
/// that later catena processes remove it once the owner is dead.
#[test]
fn shm_regions_are_unguessable_and_owned() {
    catena_testkit::run_case_on::<OfiTransport>(
        "shm_regions_are_unguessable_and_owned",
        2,
        Starter::Launcher,
        SHM,
        |t| {
            use catena_fabric::Rma;
            let stamp = format!("-p{}-", std::process::id());
            let regions: Vec<String> = std::fs::read_dir("/dev/shm")
                .expect("/dev/shm")
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.starts_with("catena-fi-") && n.contains(&stamp))
                .collect();
            assert_eq!(regions.len(), 1, "rank {}: regions {regions:?}", t.rank());
            // `<owner stamp>-<32 hex digits>:<uid>:<index>`
            let random = regions[0]
                .split(':')
                .next()
                .unwrap()
                .rsplit('-')
                .next()
                .unwrap();
            assert_eq!(random.len(), 32, "{regions:?}");
            assert!(random.bytes().all(|b| b.is_ascii_hexdigit()), "{regions:?}");
            Ok(())
        },
    );
}

/// A peer that exits (closing its endpoint, so libfabric unlinks its shm
/// region) before this rank first contacts it is `PeerGone`. libfabric
/// 1.17's shm provider keeps such a peer unmapped and its progress then
/// dereferenced the missing region: the survivor died of SIGSEGV.
#[test]
fn shm_a_peer_gone_before_first_contact_is_peer_gone() {
    use catena_fabric::{block_on, Error, Rma, Transport};
    use catena_run::launch::{launch, LaunchSpec};
    use std::time::{Duration, Instant};

    const CASE: &str = "shm_a_peer_gone_before_first_contact_is_peer_gone";
    if catena_testkit::is_rank_of(CASE) {
        let t = OfiTransport::from_env().expect("start-up");
        let job = std::env::var(catena_fabric::config::ENV_JOB).expect("a launched job");
        let [closed, done] = ["closed", "done"]
            .map(|what| std::env::temp_dir().join(format!("{CASE}-{job}-{what}")));
        let wait_for = |path: &std::path::Path| {
            let deadline = Instant::now() + Duration::from_secs(60);
            while !path.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = std::fs::remove_file(path);
        };
        if t.rank() == 1 {
            // Close the endpoint, but stay alive: the pid check cannot tell.
            drop(t);
            std::fs::write(&closed, b"").expect("telling rank 0");
            wait_for(&done);
            return;
        }
        wait_for(&closed);
        let deadline = t.deadline_in(Duration::from_secs(10));
        let sent = block_on(&t, t.send(1, 7, 7, b"hello", deadline));
        std::fs::write(&done, b"").expect("telling rank 1");
        assert!(matches!(sent, Err(Error::PeerGone { rank: 1 })), "{sent:?}");
        std::mem::forget(t);
        return;
    }
    let mut spec = LaunchSpec::new(2, std::env::current_exe().unwrap());
    spec.args = vec![CASE.into(), "--exact".into(), "--nocapture".into()];
    spec.env = [("CATENA_TEST_CASE", CASE), ("CATENA_OFI_PROVIDER", "shm")]
        .map(|(k, v)| (k.into(), v.into()))
        .to_vec();
    spec.capture_output = true;
    let report = launch(&spec).unwrap();
    assert!(
        report.success(),
        "{:?}\n{}",
        report.first_failure,
        report.output
    );
}
