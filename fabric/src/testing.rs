//! Multi-process tests: a test binary re-executes itself once per rank, under
//! catena's launcher or under `mpiexec`, and each copy runs only the named
//! test, in "rank mode", on the provider the test names.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::conformance::Check;
use crate::launch::{launch, LaunchReport, LaunchSpec};
use crate::shm::ShmTransport;
use crate::{Error, Provider, Result};

/// Tells a re-executed test binary which test it runs as a rank.
pub const ENV_CASE: &str = "CATENA_TEST_CASE";
const FINALIZE_TIMEOUT: Duration = Duration::from_secs(120);
/// An `mpiexec` run that takes longer than this is killed.
const MPIEXEC_TIMEOUT: Duration = Duration::from_secs(300);

/// Whether this process is a rank of `case`.
pub fn is_rank_of(case: &str) -> bool {
    std::env::var(ENV_CASE).is_ok_and(|c| c == case)
}

/// Who starts the ranks of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Starter {
    /// catena's own launcher (the default way to run a job).
    Launcher,
    /// MPICH's `mpiexec -n` (the `mpi` feature bootstraps from MPI).
    Mpiexec,
}

/// In a rank of `case`: starts provider `P`, runs `body`, finalizes, and
/// returns true (a failing body panics, so the rank exits non-zero).
/// Elsewhere returns false.
pub fn run_as_rank<P: Provider>(case: &str, body: impl FnOnce(&P) -> Result<()>) -> bool {
    if !is_rank_of(case) {
        return false;
    }
    let transport = P::from_env().unwrap_or_else(|e| panic!("rank of {case} failed to start: {e}"));
    if let Err(e) = body(&transport) {
        panic!("rank {} of {case}: {e}", crate::Rma::rank(&transport));
    }
    match transport.finalize(FINALIZE_TIMEOUT) {
        // A test that lost a rank on purpose cannot meet at the barrier.
        Ok(()) | Err(Error::PeerGone { .. }) => {}
        Err(e) => panic!("finalize of {case}: {e}"),
    }
    true
}

/// Separates a test's name from the variant of a case it runs (a case id is
/// `test` or `test@variant`, e.g. one rank count of several).
const VARIANT: char = '@';

/// The arguments that make a re-executed test binary run only the test of
/// `case` (its name up to any `@variant`).
fn rank_args(case: &str) -> [&str; 4] {
    let test = case.split(VARIANT).next().unwrap_or(case);
    [test, "--exact", "--nocapture", "--test-threads=1"]
}

/// Whether this process is a rank of some case (not the test process).
pub fn in_a_rank() -> bool {
    std::env::var_os(ENV_CASE).is_some()
}

/// The name `cargo test --exact` knows a test by: `module` is the test's
/// `module_path!()` (whose first segment, the crate, the filter omits).
pub fn test_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_, inner)) => format!("{inner}::{test}"),
        None => test.to_string(),
    }
}

/// In the test process: runs `case` (a top-level `#[test]` fn of this binary)
/// on `ranks` processes of provider `P` started by the launcher, with `env`
/// added, and returns the launcher's report. In a rank: see [`run_as_rank`].
pub fn launch_case_on<P: Provider>(
    case: &str,
    ranks: u32,
    env: &[(&str, &str)],
    body: impl FnOnce(&P) -> Result<()>,
) -> Option<LaunchReport> {
    if run_as_rank(case, body) {
        return None;
    }
    let mut spec = LaunchSpec::new(
        ranks,
        std::env::current_exe().expect("the test binary's path"),
    );
    spec.args = rank_args(case).map(Into::into).to_vec();
    spec.env.push((ENV_CASE.into(), case.into()));
    spec.env
        .extend(env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    spec.capture_output = true;
    Some(launch(&spec).unwrap_or_else(|e| panic!("launching {case}: {e}")))
}

/// [`launch_case_on`] for the default shm provider.
pub fn launch_case(
    case: &str,
    ranks: u32,
    body: impl FnOnce(&ShmTransport) -> Result<()>,
) -> Option<LaunchReport> {
    launch_case_on(case, ranks, &[], body)
}

/// Runs `case` on `ranks` processes of provider `P` started by `starter`, and
/// asserts that every rank succeeded and left nothing in /dev/shm.
pub fn run_case_on<P: Provider>(
    case: &str,
    ranks: u32,
    starter: Starter,
    env: &[(&str, &str)],
    body: impl FnOnce(&P) -> Result<()>,
) {
    match starter {
        Starter::Launcher => {
            if let Some(report) = launch_case_on(case, ranks, env, body) {
                assert!(
                    report.success(),
                    "{case} failed: {:?}\n{}",
                    report.first_failure,
                    report.output
                );
                assert_eq!(
                    report.leftover_segments, 0,
                    "{case}: the job left named objects in /dev/shm\n{}",
                    report.output
                );
            }
        }
        Starter::Mpiexec => {
            if !run_as_rank(case, body) {
                run_under_mpiexec(case, ranks, env);
            }
        }
    }
}

/// [`run_case_on`] for the default shm provider under the launcher.
pub fn run_case(case: &str, ranks: u32, body: impl FnOnce(&ShmTransport) -> Result<()>) {
    run_case_on(case, ranks, Starter::Launcher, &[], body)
}

/// Runs this test binary's `case` under `mpiexec -n ranks` and asserts that
/// it succeeded within `MPIEXEC_TIMEOUT`.
fn run_under_mpiexec(case: &str, ranks: u32, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new("mpiexec")
        .arg("-n")
        .arg(ranks.to_string())
        .arg(&exe)
        .args(rank_args(case))
        .env(ENV_CASE, case)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting mpiexec (is MPICH installed?): {e}"));
    let readers = [
        drain(child.stdout.take().expect("piped")),
        drain(child.stderr.take().expect("piped")),
    ];
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for mpiexec") {
            break Some(status);
        }
        if started.elapsed() > MPIEXEC_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output: String = readers.map(|r| r.join().unwrap_or_default()).concat();
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!("{case} under mpiexec failed: {s}\n{output}"),
        None => panic!("{case} under mpiexec ran past {MPIEXEC_TIMEOUT:?}\n{output}"),
    }
}

fn drain(mut from: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = from.read_to_string(&mut text);
        text
    })
}

/// The environment of a provider configuration's conformance cases: one for
/// every case (a slice), or chosen per check (a function; `None` asks for
/// the killed-peer case's).
pub trait CaseEnv {
    /// The variables to set in the ranks of `check`'s case.
    fn env(&self, check: Option<Check>) -> &'static [(&'static str, &'static str)];
}

impl CaseEnv for &'static [(&'static str, &'static str)] {
    fn env(&self, _: Option<Check>) -> &'static [(&'static str, &'static str)] {
        self
    }
}

impl CaseEnv for fn(Option<Check>) -> &'static [(&'static str, &'static str)] {
    fn env(&self, check: Option<Check>) -> &'static [(&'static str, &'static str)] {
        self(check)
    }
}

/// Runs conformance `check` as test `test` once per rank count in `ranks`,
/// each in a job of its own (case `test@N`). In a rank, runs only the case
/// this process belongs to.
pub fn conformance_on<P: Provider + crate::ControlWindows>(
    test: &str,
    ranks: &[u32],
    starter: Starter,
    env: &dyn CaseEnv,
    check: Check,
) {
    for &n in ranks {
        let case = format!("{test}{VARIANT}{n}");
        if !in_a_rank() || is_rank_of(&case) {
            conformance_case::<P>(&case, n, starter, env.env(Some(check)), check);
        }
    }
}

/// [`killed_peer_case`] once per rank count in `ranks` (cases `test@N`).
pub fn killed_peer_on<P: Provider>(test: &str, ranks: &[u32], env: &dyn CaseEnv) {
    for &n in ranks {
        let case = format!("{test}{VARIANT}{n}");
        if !in_a_rank() || is_rank_of(&case) {
            killed_peer_case::<P>(&case, n, env.env(None));
        }
    }
}

/// Runs conformance `check` as test `case` on `ranks` processes of `P`.
pub fn conformance_case<P: Provider + crate::ControlWindows>(
    case: &str,
    ranks: u32,
    starter: Starter,
    env: &[(&str, &str)],
    check: Check,
) {
    run_case_on::<P>(case, ranks, starter, env, |t| {
        crate::block_on(t, crate::conformance::run(t, check))
    });
}

/// Runs `conformance::peer_killed` as test `case` on `ranks` processes of `P`
/// started by the launcher: the last rank SIGKILLs itself, and every other
/// rank must notice, fail its waits with `PeerGone` and exit cleanly.
pub fn killed_peer_case<P: Provider>(case: &str, ranks: u32, env: &[(&str, &str)]) {
    use std::os::unix::process::ExitStatusExt;
    let victim = ranks - 1;
    let started = Instant::now();
    let die = || unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    };
    let Some(report) = launch_case_on::<P>(case, ranks, env, |t| {
        crate::block_on(t, crate::conformance::peer_killed(t, victim, die))
    }) else {
        return;
    };
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the launcher took {:?}",
        started.elapsed()
    );
    assert_eq!(
        report.first_failure.map(|(r, s)| (r, s.signal())),
        Some((victim, Some(libc::SIGKILL))),
        "{}",
        report.output
    );
    for (rank, status) in report.statuses.iter().enumerate() {
        if rank as u32 != victim {
            assert!(
                status.success(),
                "survivor {rank} failed: {status:?}\n{}",
                report.output
            );
        }
    }
    assert_ne!(report.exit_code(), 0);
}

/// Every conformance case of one provider, as `#[test]`s: for each
/// configuration (a module of tests), every check of
/// [`Check`] but `Suite` on each of the rank counts, the killed-peer case on each, and (feature `mpi` of the calling
/// crate) the whole [`SUITE`](crate::conformance::SUITE) under `mpiexec`:
///
/// ```ignore
/// catena_fabric::conformance_tests! {
///     provider: OfiTransport;
///     shm: SHM, ranks [2, 4], mpiexec [2, 4];
///     tcp: TCP, ranks [2, 4], mpiexec [2, 4];
/// }
/// ```
///
/// A configuration's environment is a [`CaseEnv`]. A new check added to
/// `Check` and this macro's list runs on every provider by itself.
#[macro_export]
macro_rules! conformance_tests {
    (
        provider: $provider:ty;
        $($config:ident: $env:expr, ranks [$($n:literal),+] $(, mpiexec [$($m:literal),+])?;)+
    ) => {$(
        mod $config {
            #[allow(unused_imports)]
            use super::*;

            fn case_env() -> &'static dyn $crate::testing::CaseEnv {
                &$env
            }

            $crate::conformance_tests!(@checks $provider, [$($n),+];
                put_sizes PutSizes,
                many_puts_in_flight ManyPutsInFlight,
                signals_and_atomics SignalsAndAtomics,
                tagged_messages TaggedMessages,
                all_pairs AllPairs,
                bad_input BadInput,
                forged_keys ForgedKeys,
                stale_keys StaleKeys,
                first_contact_retry FirstContactRetry,
                dropped_send_breaks_the_stream DroppedSendBreaksTheStream,
            );

            #[test]
            fn peer_killed() {
                $crate::testing::killed_peer_on::<$provider>(
                    &$crate::testing::test_name(module_path!(), "peer_killed"),
                    &[$($n),+],
                    case_env(),
                );
            }

            $(
                #[cfg(feature = "mpi")]
                #[test]
                fn suite_under_mpiexec() {
                    $crate::testing::conformance_on::<$provider>(
                        &$crate::testing::test_name(module_path!(), "suite_under_mpiexec"),
                        &[$($m),+],
                        $crate::testing::Starter::Mpiexec,
                        case_env(),
                        $crate::conformance::Check::Suite,
                    );
                }
            )?
        }
    )+};
    (@checks $provider:ty, $ranks:tt; $($name:ident $check:ident,)+) => {
        /// Fails to compile when `Check` gains a check this list lacks.
        #[allow(dead_code)]
        fn every_check_is_listed(check: $crate::conformance::Check) {
            match check {
                $($crate::conformance::Check::$check)|+ | $crate::conformance::Check::Suite => {}
            }
        }
        $(
            #[test]
            fn $name() {
                $crate::testing::conformance_on::<$provider>(
                    &$crate::testing::test_name(module_path!(), stringify!($name)),
                    &$ranks,
                    $crate::testing::Starter::Launcher,
                    case_env(),
                    $crate::conformance::Check::$check,
                );
            }
        )+
    };
}
