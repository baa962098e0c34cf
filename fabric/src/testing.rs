//! Multi-process tests: a test binary re-executes itself once per rank under
//! the launcher, and each copy runs only the named test, in "rank mode".

use std::time::Duration;

use crate::launch::{launch, LaunchReport, LaunchSpec};
use crate::shm::{segment, ShmTransport};
use crate::{Error, Result};

/// Tells a re-executed test binary which test it runs as a rank.
pub const ENV_CASE: &str = "CATENA_TEST_CASE";
const FINALIZE_TIMEOUT: Duration = Duration::from_secs(120);

/// Whether this process is a rank of `case`.
pub fn is_rank_of(case: &str) -> bool {
    std::env::var(ENV_CASE).is_ok_and(|c| c == case)
}

/// In the test process: runs `case` (a top-level `#[test]` fn of this binary)
/// on `ranks` processes and returns the launcher's report. In a rank: runs
/// `body` on the shm transport, finalizes, and returns `None`. A failing body
/// panics, so its rank exits non-zero.
pub fn launch_case(
    case: &str,
    ranks: u32,
    body: impl FnOnce(&ShmTransport) -> Result<()>,
) -> Option<LaunchReport> {
    if is_rank_of(case) {
        let transport = crate::init().unwrap_or_else(|e| panic!("rank failed to start: {e}"));
        if let Err(e) = body(&transport) {
            panic!("rank {} of {case}: {e}", crate::Rma::rank(&transport));
        }
        match transport.finalize(FINALIZE_TIMEOUT) {
            // A test that lost a rank on purpose cannot meet at the barrier.
            Ok(()) | Err(Error::PeerGone { .. }) => {}
            Err(e) => panic!("finalize of {case}: {e}"),
        }
        return None;
    }
    let mut spec = LaunchSpec::new(
        ranks,
        std::env::current_exe().expect("the test binary's path"),
    );
    spec.args = [case, "--exact", "--nocapture", "--test-threads=1"]
        .map(Into::into)
        .to_vec();
    spec.env.push((ENV_CASE.into(), case.into()));
    spec.capture_output = true;
    let report = launch(&spec).unwrap_or_else(|e| panic!("launching {case}: {e}"));
    let left = segment::job_segments(&report.job_id);
    assert!(
        left.is_empty(),
        "{case}: segments left in /dev/shm: {left:?}"
    );
    Some(report)
}

/// Runs `case` on `ranks` processes and asserts that every rank succeeded and
/// that the ranks removed all their segments themselves.
pub fn run_case(case: &str, ranks: u32, body: impl FnOnce(&ShmTransport) -> Result<()>) {
    if let Some(report) = launch_case(case, ranks, body) {
        assert!(
            report.success(),
            "{case} failed: {:?}\n{}",
            report.first_failure,
            report.output
        );
        assert_eq!(
            report.leftover_segments, 0,
            "{case}: ranks did not remove their segments\n{}",
            report.output
        );
    }
}
