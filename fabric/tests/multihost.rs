//! Jobs that span hosts, on one machine: fake hosts (ci/fakehost: a host
//! name and a /dev/shm of their own, the loopback network) under catena's
//! launcher and under `mpiexec -hosts`. The conformance suite on every
//! network provider; a killed rank stops every rank on every host; shm
//! refuses such a job, naming the hosts.
#![cfg(any(feature = "ofi", feature = "ucx"))]

use std::time::Duration;

use catena_testkit::{
    conformance_suite, killed_peer_across, launch_case_across, skip_without_fake_hosts, OFI_TCP,
    UCX_TCP,
};

catena_testkit::across_hosts_tests!(suite_across_hosts: conformance_suite);

/// A killed rank on one host: every rank on every host notices within 10 s.
#[cfg(feature = "ucx")]
#[test]
fn ucx_killed_rank_stops_every_host() {
    killed_peer_across::<catena_fabric::ucx::UcxTransport>(
        "ucx_killed_rank_stops_every_host",
        6,
        3,
        UCX_TCP,
        Duration::from_secs(10),
    );
}

#[cfg(feature = "ofi")]
#[test]
fn ofi_killed_rank_stops_every_host() {
    killed_peer_across::<catena_fabric::ofi::OfiTransport>(
        "ofi_killed_rank_stops_every_host",
        4,
        2,
        OFI_TCP,
        Duration::from_secs(10),
    );
}

/// A whole host dies (its proxy is killed, and its ranks with it): the
/// ranks of the other host fail their waits with `PeerGone` and exit, the
/// launcher names the lost host, and the job is over within 10 s.
#[cfg(feature = "ucx")]
#[test]
fn a_lost_host_stops_the_job() {
    let case = "a_lost_host_stops_the_job";
    if skip_without_fake_hosts(case) {
        return;
    }
    let started = std::time::Instant::now();
    // Rank 3 runs on host1 with rank 1; it kills their proxy.
    let kill_proxy = || unsafe {
        libc::kill(libc::getppid(), libc::SIGKILL);
        loop {
            libc::pause();
        }
    };
    let Some(report) =
        launch_case_across::<catena_fabric::ucx::UcxTransport>(case, 4, 2, UCX_TCP, |t| {
            catena_fabric::block_on(
                t,
                catena_testkit::conformance::peer_killed(t, 3, kill_proxy),
            )
        })
    else {
        return;
    };
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}\n{}",
        report.output
    );
    assert_eq!(report.lost_hosts, ["host1"], "{}", report.output);
    assert_ne!(report.exit_code(), 0);
    for survivor in [0, 2] {
        assert!(
            report.statuses[survivor].success(),
            "rank {survivor}: {:?}\n{}",
            report.statuses[survivor],
            report.output
        );
    }
    for lost in [1, 3] {
        assert!(!report.statuses[lost].success(), "{}", report.output);
    }
}

/// shm cannot reach another host: every rank fails with an error naming
/// the hosts, and the job ends at once.
#[test]
fn shm_refuses_a_job_across_hosts() {
    let case = "shm_refuses_a_job_across_hosts";
    if skip_without_fake_hosts(case) {
        return;
    }
    let Some(report) =
        launch_case_across::<catena_fabric::shm::ShmTransport>(case, 4, 2, &[], |_| Ok(()))
    else {
        return;
    };
    assert!(!report.success(), "{}", report.output);
    for rank in 0..4 {
        let line = report
            .output
            .lines()
            .find(|l| l.starts_with(&format!("[{rank}]")) && l.contains("unavailable"))
            .unwrap_or_else(|| panic!("rank {rank} said nothing\n{}", report.output));
        let host = format!("spans 2 hosts (host{} with 2 of its 4 ranks)", rank % 2);
        assert!(line.contains(&host), "{line}");
    }
}
