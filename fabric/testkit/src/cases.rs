//! Multi-process tests: a test binary re-executes itself once per rank, under
//! catena's launcher or under `mpiexec`, and each copy runs only the named
//! test, in "rank mode", on the provider the test names.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use catena_fabric::shm::ShmTransport;
use catena_fabric::{Error, Provider, Result};
use catena_run::launch::{launch, LaunchReport, LaunchSpec, Placement};

use crate::conformance::Check;

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
    /// MPICH's `mpiexec -n`, the ranks bootstrapping through Hydra's PMI-1
    /// descriptor (`CATENA_BOOTSTRAP=pmi`), with or without MPI linked.
    MpiexecByPmi,
    /// catena's launcher across this many fake hosts (see [`FAKEHOST`]),
    /// rank r on host r mod hosts.
    LauncherOnHosts(u32),
    /// catena's launcher across this many fake hosts, consecutive ranks
    /// on each (`--placement block`).
    LauncherInBlocksOnHosts(u32),
    /// `mpiexec -hosts` across this many fake hosts, placed alike.
    MpiexecOnHosts(u32),
    /// Slurm's `srun --mpi=` this plugin (`pmix` or `pmi2`), on the
    /// single-node Slurm `ci/slurm.sh start` runs; no MPI in the way.
    Srun(&'static str),
    /// Open MPI's `mpirun`, which serves PMIx to its processes.
    OpenMpiRun,
}

/// The script that stands in for ssh in the multi-host tests: it runs a
/// command as if on another host (its own host name and /dev/shm, the same
/// loopback network), and reports what the command left in that /dev/shm.
pub const FAKEHOST: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../ci/fakehost");

/// The environment that keeps a multi-host job's traffic on the loopback
/// network: libfabric's tcp and UCX (catena's and MPICH's) use `lo` only.
pub const LOOPBACK_ONLY: &[(&str, &str)] = &[("FI_TCP_IFACE", "lo"), ("UCX_NET_DEVICES", "lo")];

/// The variable that lets a test that cannot run here pass as skipped
/// (`1`), on a developer's machine without root; unset, such a test fails,
/// so that CI never counts one it did not run.
pub const ENV_SKIP_UNAVAILABLE: &str = "CATENA_TESTS_SKIP_UNAVAILABLE";

/// A test that cannot run here: skipped (true, the reason printed) where
/// [`ENV_SKIP_UNAVAILABLE`] allows it, else a failure naming the reason.
pub fn skip_unavailable(case: &str, why: &str) -> bool {
    if std::env::var(ENV_SKIP_UNAVAILABLE).as_deref() == Ok("1") {
        eprintln!("{case}: skipped ({ENV_SKIP_UNAVAILABLE}=1): {why}");
        return true;
    }
    panic!("{case} cannot run here: {why} (set {ENV_SKIP_UNAVAILABLE}=1 to skip it)");
}

/// In the test process of `case` across fake hosts: when fake hosts cannot
/// be made here, [`skip_unavailable`]. False in a rank or a proxy (their
/// test process already checked).
pub fn skip_without_fake_hosts(case: &str) -> bool {
    if in_a_rank() || std::env::var_os(catena_fabric::config::ENV_PROXY).is_some() {
        return false;
    }
    match fake_hosts_permitted() {
        Ok(()) => false,
        Err(why) => skip_unavailable(case, &why),
    }
}

/// Whether fake hosts can be made here (`unshare` of the UTS and mount
/// namespaces, which needs root); the reason when not.
pub fn fake_hosts_permitted() -> std::result::Result<(), String> {
    let ok = Command::new("unshare")
        .args(["--uts", "--mount", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match ok {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!(
            "`unshare --uts --mount` is not permitted here ({status})"
        )),
        Err(e) => Err(format!("no unshare: {e}")),
    }
}

fn fake_host_names(hosts: u32) -> Vec<String> {
    (0..hosts).map(|h| format!("host{h}")).collect()
}

/// Asserts that every rank of `case` ran a test: a rank whose `--exact`
/// filter matched none (a case named otherwise than its test) exits 0
/// having run nothing, and the case would pass without running.
fn assert_ranks_ran(case: &str, output: &str) {
    let idle = output
        .lines()
        .filter(|l| l.trim_end().ends_with("running 0 tests"));
    assert_eq!(
        idle.count(),
        0,
        "{case}: a rank ran no test (is the case named by its test's path?)\n{output}"
    );
}

/// What the fake hosts said they found left in their /dev/shm.
fn fake_host_leftovers(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|line| line.contains("left in /dev/shm"))
        .collect()
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
        panic!(
            "rank {} of {case}: {e}",
            catena_fabric::Rma::rank(&transport)
        );
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
    launch_case_across::<P>(case, ranks, 0, env, body)
}

/// [`launch_case_on`] across `hosts` fake hosts (0: this machine only).
/// A copy of this binary started as a host's proxy serves as one and exits.
pub fn launch_case_across<P: Provider>(
    case: &str,
    ranks: u32,
    hosts: u32,
    env: &[(&str, &str)],
    body: impl FnOnce(&P) -> Result<()>,
) -> Option<LaunchReport> {
    launch_case_placed(case, ranks, (hosts, Placement::Cyclic), env, body)
}

/// [`launch_case_across`] with the ranks placed on the hosts by
/// `placement`.
pub fn launch_case_placed<P: Provider>(
    case: &str,
    ranks: u32,
    (hosts, placement): (u32, Placement),
    env: &[(&str, &str)],
    body: impl FnOnce(&P) -> Result<()>,
) -> Option<LaunchReport> {
    if let Some(code) = catena_run::launch::serve_as_proxy() {
        std::process::exit(code);
    }
    if run_as_rank(case, body) {
        return None;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut spec = LaunchSpec::new(ranks, &exe);
    spec.args = rank_args(case).map(Into::into).to_vec();
    spec.env.push((ENV_CASE.into(), case.into()));
    spec.env
        .extend(env.iter().map(|(k, v)| ((*k).into(), (*v).into())));
    spec.capture_output = true;
    if hosts > 0 {
        spec.hosts = fake_host_names(hosts);
        spec.placement = placement;
        spec.remote_exec = vec![FAKEHOST.into()];
        spec.proxy_command = std::iter::once(exe.into_os_string())
            .chain(rank_args(case).map(Into::into))
            .collect();
        spec.bootstrap_address = Some(std::net::Ipv4Addr::LOCALHOST.into());
        spec.env.extend(
            LOOPBACK_ONLY
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into())),
        );
    }
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
    let (hosts, placement) = match starter {
        Starter::LauncherOnHosts(h) | Starter::MpiexecOnHosts(h) => (h, Placement::Cyclic),
        Starter::LauncherInBlocksOnHosts(h) => (h, Placement::Block),
        _ => (0, Placement::Cyclic),
    };
    if hosts > 0 && skip_without_fake_hosts(case) {
        return;
    }
    match starter {
        Starter::Launcher | Starter::LauncherOnHosts(_) | Starter::LauncherInBlocksOnHosts(_) => {
            if let Some(report) = launch_case_placed(case, ranks, (hosts, placement), env, body) {
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
                let left = fake_host_leftovers(&report.output);
                assert!(left.is_empty(), "{case}: {left:?}\n{}", report.output);
                assert_ranks_ran(case, &report.output);
            }
        }
        Starter::Mpiexec | Starter::MpiexecOnHosts(_) => {
            if !run_as_rank(case, body) {
                run_under(mpiexec(ranks, hosts), case, env);
            }
        }
        Starter::MpiexecByPmi => {
            if !run_as_rank(case, body) {
                let by_pmi = [(catena_fabric::config::ENV_BOOTSTRAP, "pmi")];
                run_under(mpiexec(ranks, hosts), case, &[env, &by_pmi].concat());
            }
        }
        Starter::Srun(plugin) => {
            if !run_as_rank(case, body) {
                let mut srun = Command::new("srun");
                // -O: more tasks than the node has cores.
                srun.arg(format!("--mpi={plugin}"))
                    .args(["-O", "-n"])
                    .arg(ranks.to_string());
                run_under(srun, case, env);
            }
        }
        Starter::OpenMpiRun => {
            if !run_as_rank(case, body) {
                // By its full name: MPICH's stays the default `mpirun`.
                let mut mpirun = Command::new("mpirun.openmpi");
                mpirun
                    .args(["--allow-run-as-root", "--oversubscribe", "-n"])
                    .arg(ranks.to_string());
                run_under(mpirun, case, env);
            }
        }
    }
}

/// MPICH's `mpiexec -n ranks`, across `hosts` fake hosts if any.
fn mpiexec(ranks: u32, hosts: u32) -> Command {
    let mut mpiexec = Command::new("mpiexec");
    if hosts > 0 {
        mpiexec
            .args(["-launcher", "ssh", "-launcher-exec", FAKEHOST, "-hosts"])
            .arg(fake_host_names(hosts).join(","))
            .envs(LOOPBACK_ONLY.iter().copied());
    }
    mpiexec.arg("-n").arg(ranks.to_string());
    mpiexec
}

/// [`run_case_on`] for the default shm provider under the launcher.
pub fn run_case(case: &str, ranks: u32, body: impl FnOnce(&ShmTransport) -> Result<()>) {
    run_case_on(case, ranks, Starter::Launcher, &[], body)
}

/// Runs this test binary's `case` under `starter` (a cluster launcher's
/// command up to the program) and asserts that it succeeded within
/// `MPIEXEC_TIMEOUT` and that no fake host found leftovers in its /dev/shm.
fn run_under(mut starter: Command, case: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let launcher = starter.get_program().to_string_lossy().into_owned();
    let mut child = starter
        .arg(&exe)
        .args(rank_args(case))
        .env(ENV_CASE, case)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("starting {launcher} (is it installed? srun needs ci/slurm.sh start): {e}")
        });
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
        Some(s) => panic!("{case} under {launcher} failed: {s}\n{output}"),
        None => panic!("{case} under {launcher} ran past {MPIEXEC_TIMEOUT:?}\n{output}"),
    }
    let left = fake_host_leftovers(&output);
    assert!(
        left.is_empty(),
        "{case} under {launcher}: {left:?}\n{output}"
    );
    assert_ranks_ran(case, &output);
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
pub fn conformance_on<P: Provider + catena_fabric::ControlWindows>(
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
pub fn conformance_case<P: Provider + catena_fabric::ControlWindows>(
    case: &str,
    ranks: u32,
    starter: Starter,
    env: &[(&str, &str)],
    check: Check,
) {
    run_case_on::<P>(case, ranks, starter, env, |t| {
        catena_fabric::block_on(t, crate::conformance::run(t, check))
    });
}

/// Runs `conformance::peer_killed` as test `case` on `ranks` processes of `P`
/// started by the launcher: the last rank SIGKILLs itself, and every other
/// rank must notice, fail its waits with `PeerGone` and exit cleanly.
pub fn killed_peer_case<P: Provider>(case: &str, ranks: u32, env: &[(&str, &str)]) {
    killed_peer_across::<P>(case, ranks, 0, env, Duration::from_secs(20))
}

/// [`killed_peer_case`] across `hosts` fake hosts (0: this machine), where
/// the job must be over within `limit`.
pub fn killed_peer_across<P: Provider>(
    case: &str,
    ranks: u32,
    hosts: u32,
    env: &[(&str, &str)],
    limit: Duration,
) {
    use std::os::unix::process::ExitStatusExt;
    if hosts > 0 && skip_without_fake_hosts(case) {
        return;
    }
    let victim = ranks - 1;
    let started = Instant::now();
    let die = || unsafe {
        libc::kill(libc::getpid(), libc::SIGKILL);
    };
    let Some(report) = launch_case_across::<P>(case, ranks, hosts, env, |t| {
        catena_fabric::block_on(t, crate::conformance::peer_killed(t, victim, die))
    }) else {
        return;
    };
    assert!(
        started.elapsed() < limit,
        "the launcher took {:?}\n{}",
        started.elapsed(),
        report.output
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

/// The whole conformance suite as a rank's body (for [`run_case_on`]).
pub fn conformance_suite<P: Provider + catena_fabric::ControlWindows>(t: &P) -> Result<()> {
    catena_fabric::block_on(t, crate::conformance::run(t, Check::Suite))
}

/// libfabric's tcp provider, for the multi-host tests.
pub const OFI_TCP: &[(&str, &str)] = &[("CATENA_OFI_PROVIDER", "tcp;ofi_rxm")];
/// UCX over tcp, for catena's context only (MPICH's own, under `mpiexec`,
/// keeps its defaults: MPICH 4.0's finalize over tcp alone hangs).
pub const UCX_TCP: &[(&str, &str)] = &[("CATENA_UCX_TLS", "tcp,self")];

/// `body::<P>` on every network provider, across 2 fake hosts × 2 ranks
/// and 3 fake hosts × 2 ranks, under catena's launcher (the 3 hosts with
/// consecutive ranks on each, the 2 dealt ranks in turn) and under
/// `mpiexec` (ranks in turn; features `ofi`, `ucx`, `mpi` of the calling
/// crate), as `#[test]`s in module `$module`:
///
/// ```ignore
/// catena_testkit::across_hosts_tests!(split_across_hosts: every_algorithm_matches_the_reference);
/// ```
///
/// Skipped, with the reason printed, where fake hosts cannot be made.
#[macro_export]
macro_rules! across_hosts_tests {
    ($module:ident: $body:ident) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            // A build without a network provider runs no case: the body
            // still counts as used.
            #[cfg(not(any(feature = "ofi", feature = "ucx")))]
            const _: () = {
                let _ = $body::<$crate::fabric::shm::ShmTransport>;
            };
            $crate::across_hosts_tests!(@case "ofi", $body, ofi_2x2, $crate::fabric::ofi::OfiTransport, OFI_TCP, 4, LauncherOnHosts(2));
            $crate::across_hosts_tests!(@case "ofi", $body, ofi_3x2_blocks, $crate::fabric::ofi::OfiTransport, OFI_TCP, 6, LauncherInBlocksOnHosts(3));
            $crate::across_hosts_tests!(@case "ucx", $body, ucx_2x2, $crate::fabric::ucx::UcxTransport, UCX_TCP, 4, LauncherOnHosts(2));
            $crate::across_hosts_tests!(@case "ucx", $body, ucx_3x2_blocks, $crate::fabric::ucx::UcxTransport, UCX_TCP, 6, LauncherInBlocksOnHosts(3));
            #[cfg(feature = "mpi")]
            mod mpiexec {
                #[allow(unused_imports)]
                use super::*;
                $crate::across_hosts_tests!(@case "ofi", $body, ofi_2x2, $crate::fabric::ofi::OfiTransport, OFI_TCP, 4, MpiexecOnHosts(2));
                $crate::across_hosts_tests!(@case "ofi", $body, ofi_3x2, $crate::fabric::ofi::OfiTransport, OFI_TCP, 6, MpiexecOnHosts(3));
                $crate::across_hosts_tests!(@case "ucx", $body, ucx_2x2, $crate::fabric::ucx::UcxTransport, UCX_TCP, 4, MpiexecOnHosts(2));
                $crate::across_hosts_tests!(@case "ucx", $body, ucx_3x2, $crate::fabric::ucx::UcxTransport, UCX_TCP, 6, MpiexecOnHosts(3));
            }
        }
    };
    (@case $feature:literal, $body:ident, $name:ident, $provider:ty, $env:ident, $ranks:literal, $starter:ident($hosts:literal)) => {
        #[cfg(feature = $feature)]
        #[test]
        fn $name() {
            $crate::run_case_on::<$provider>(
                &$crate::test_name(module_path!(), stringify!($name)),
                $ranks,
                $crate::Starter::$starter($hosts),
                $crate::$env,
                $body::<$provider>,
            );
        }
    };
}

/// Every conformance case of one provider, as `#[test]`s: for each
/// configuration (a module of tests), every check of
/// [`Check`] but `Suite` on each of the rank counts, the killed-peer case on
/// each, [`freed_windows_are_bounded`](crate::conformance::freed_windows_are_bounded)
/// on one rank, and the whole [`SUITE`](crate::conformance::SUITE) under
/// `mpiexec` by PMI and (feature `mpi` of the calling crate) by MPI:
///
/// ```ignore
/// catena_testkit::conformance_tests! {
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

            fn case_env() -> &'static dyn $crate::CaseEnv {
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
                host_memory HostMemory,
                receive_into_buffers ReceiveIntoBuffers,
            );

            #[test]
            fn peer_killed() {
                $crate::killed_peer_on::<$provider>(
                    &$crate::test_name(module_path!(), "peer_killed"),
                    &[$($n),+],
                    case_env(),
                );
            }

            /// Alone in its process: it reads the process's own figures.
            #[test]
            fn freed_windows_are_bounded() {
                $crate::run_case_on::<$provider>(
                    &$crate::test_name(module_path!(), "freed_windows_are_bounded"),
                    1,
                    $crate::Starter::Launcher,
                    case_env().env(None),
                    $crate::conformance::freed_windows_are_bounded,
                );
            }

            $(
                #[cfg(feature = "mpi")]
                #[test]
                fn suite_under_mpiexec() {
                    $crate::conformance_on::<$provider>(
                        &$crate::test_name(module_path!(), "suite_under_mpiexec"),
                        &[$($m),+],
                        $crate::Starter::Mpiexec,
                        case_env(),
                        $crate::conformance::Check::Suite,
                    );
                }

                /// Under Hydra's `mpiexec` through its PMI-1 descriptor,
                /// no MPI in the way.
                #[test]
                fn suite_under_mpiexec_by_pmi() {
                    $crate::conformance_on::<$provider>(
                        &$crate::test_name(module_path!(), "suite_under_mpiexec_by_pmi"),
                        &[$($m),+],
                        $crate::Starter::MpiexecByPmi,
                        case_env(),
                        $crate::conformance::Check::Suite,
                    );
                }

                // The cluster launchers come with the `pmix` feature (the
                // packages that bring PMIx bring Slurm and Open MPI); srun
                // needs the Slurm of `ci/slurm.sh start`.

                /// Under `srun --mpi=pmix`.
                #[cfg(feature = "pmix")]
                #[test]
                fn suite_under_srun_pmix() {
                    $crate::conformance_on::<$provider>(
                        &$crate::test_name(module_path!(), "suite_under_srun_pmix"),
                        &[$($m),+],
                        $crate::Starter::Srun("pmix"),
                        case_env(),
                        $crate::conformance::Check::Suite,
                    );
                }

                /// Under `srun --mpi=pmi2`: the PMI-2 wire protocol.
                #[cfg(feature = "pmix")]
                #[test]
                fn suite_under_srun_pmi2() {
                    $crate::conformance_on::<$provider>(
                        &$crate::test_name(module_path!(), "suite_under_srun_pmi2"),
                        &[$($m),+],
                        $crate::Starter::Srun("pmi2"),
                        case_env(),
                        $crate::conformance::Check::Suite,
                    );
                }

                /// Under Open MPI's `mpirun`, through its PMIx server.
                #[cfg(feature = "pmix")]
                #[test]
                fn suite_under_openmpi_mpirun() {
                    $crate::conformance_on::<$provider>(
                        &$crate::test_name(module_path!(), "suite_under_openmpi_mpirun"),
                        &[$($m),+],
                        $crate::Starter::OpenMpiRun,
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
                $crate::conformance_on::<$provider>(
                    &$crate::test_name(module_path!(), stringify!($name)),
                    &$ranks,
                    $crate::Starter::Launcher,
                    case_env(),
                    $crate::conformance::Check::$check,
                );
            }
        )+
    };
}
