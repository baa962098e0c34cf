//! The launcher as a user meets it, through `catena-bench run` (the same
//! command line as `catena-run`, whose own binary fabric/run/tests checks):
//! rank-prefixed output, exit status of a failed rank, a rank killed
//! mid-run, and /dev/shm left clean; benchmarks that relaunch themselves.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BENCH: &str = env!("CARGO_BIN_EXE_catena-bench");

/// `catena-bench run`: the launcher.
fn launcher() -> Command {
    let mut cmd = Command::new(BENCH);
    cmd.arg("run");
    cmd
}

/// Files in /dev/shm whose name mentions job `job`.
fn named_after(job: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.contains(job))
        .collect()
}

/// The `ranks` ranks of launcher `pid` and their job id, once every one of
/// them maps shared memory (has joined the job).
fn joined_ranks(pid: u32, ranks: usize) -> (Vec<i32>, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let children: Vec<i32> =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default()
                .split_whitespace()
                .map(|c| c.parse().unwrap())
                .collect();
        let joined = |rank: &i32| {
            std::fs::read_to_string(format!("/proc/{rank}/maps"))
                .is_ok_and(|maps| maps.contains("/memfd:catena") || maps.contains("/dev/shm/"))
        };
        if children.len() == ranks && children.iter().all(joined) {
            let environ = std::fs::read(format!("/proc/{}/environ", children[0])).unwrap();
            let job = environ
                .split(|&b| b == 0)
                .find_map(|var| var.strip_prefix(b"CATENA_JOB="))
                .map(|job| String::from_utf8_lossy(job).into_owned())
                .expect("a rank knows its job");
            return (children, job);
        }
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `catena-bench run -n RANKS -- sh -c SCRIPT`.
fn run_shell(ranks: u32, script: &str) -> Command {
    let mut cmd = launcher();
    cmd.args(["-n", &ranks.to_string(), "--", "sh", "-c", script]);
    cmd
}

/// Stdout's lines, sorted (ranks print in any order).
fn sorted_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    lines.sort();
    lines
}

#[test]
fn output_is_prefixed_with_the_rank() {
    let out = run_shell(3, "echo hello from $CATENA_RANK of $CATENA_SIZE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        sorted_lines(&out),
        [
            "[0] hello from 0 of 3",
            "[1] hello from 1 of 3",
            "[2] hello from 2 of 3"
        ]
    );
}

/// More ranks than the machine can run (here 2^32 - 1) are refused up front
/// with the kernel limit named, not by an abort half-way through starting
/// them.
#[test]
fn a_job_too_large_for_the_machine_is_refused_up_front() {
    let child = run_shell(u32::MAX, "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("4294967295 ranks on one machine") && err.contains("allows"),
        "{err}"
    );
}

#[test]
fn a_failing_rank_stops_the_job_with_its_status() {
    let started = Instant::now();
    let status = run_shell(3, "if [ $CATENA_RANK = 2 ]; then exit 7; fi; exec sleep 60")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(7));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// A ring job of `ranks` in `dir` that runs until it is stopped, its
/// stderr piped.
fn endless_ring(ranks: u32, dir: &std::path::Path) -> std::process::Child {
    launcher()
        .current_dir(dir)
        .args(["-n", &ranks.to_string(), "--", BENCH, "ring"])
        .args(["--rounds", "100000000", "--csv", "/dev/null"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_killed_rank_ends_the_job_within_10_s_and_leaves_no_segments() {
    let launcher = endless_ring(4, &std::env::temp_dir());
    // Wait until the ranks run (have joined the job), then kill one.
    let (ranks, job) = joined_ranks(launcher.id(), 4);
    let victim = ranks[2];
    let killed_at = Instant::now();
    unsafe { libc::kill(victim, libc::SIGKILL) };
    let out = launcher.wait_with_output().unwrap();
    assert!(
        killed_at.elapsed() < Duration::from_secs(10),
        "the launcher took {:?}",
        killed_at.elapsed()
    );
    assert_eq!(out.status.code(), Some(128 + libc::SIGKILL));
    assert_eq!(named_after(&job), Vec::<String>::new());
}

/// A rank that crashes (SIGSEGV) is reported as killed by that signal, as
/// a shell reports it (128 + 11), not as a rank that exited with 1: the
/// crash handler libinfinipath installs when it is loaded (Debian's
/// libfabric brings it into every build with `ofi`) is kept out of ranks.
#[test]
fn a_crashed_rank_is_reported_by_its_signal() {
    // UCX writes its backtrace (a `.btr` file) where the rank runs.
    let dir = std::env::temp_dir().join(format!("catena-crash-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let launcher = endless_ring(2, &dir);
    let (ranks, _) = joined_ranks(launcher.id(), 2);
    unsafe { libc::kill(ranks[1], libc::SIGSEGV) };
    let out = launcher.wait_with_output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        out.status.code(),
        Some(128 + libc::SIGSEGV),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A job's shared memory has no name in /dev/shm while it runs, and a
/// SIGKILL of its launcher (which then removes nothing) leaves none.
#[test]
fn a_killed_launcher_leaves_nothing_in_dev_shm() {
    let mut launcher = self::launcher()
        .args(["-n", "3", "--", BENCH, "ring", "--rounds", "100000000"])
        .args(["--csv", "/dev/null"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (ranks, job) = joined_ranks(launcher.id(), 3);
    let named_while_running = named_after(&job);
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    // Ranks that outlive their launcher are not this test's subject.
    for &rank in &ranks {
        unsafe { libc::kill(rank, libc::SIGKILL) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while ranks
        .iter()
        .any(|r| std::path::Path::new(&format!("/proc/{r}")).exists())
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(named_while_running, Vec::<String>::new());
    assert_eq!(named_after(&job), Vec::<String>::new());
}

/// The direct children of `pid` (its ranks, for a launcher).
fn children_of(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .map(|c| c.parse().unwrap())
        .collect()
}

/// Whether `pid` still runs: not gone and not a zombie awaiting its reaper.
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| Some(stat[stat.rfind(')')? + 2..].starts_with(|c| c != 'Z')))
        .unwrap_or(false)
}

/// SIGKILL gives the launcher no chance to stop its ranks, so the kernel
/// must: every rank dies with it (parent-death signal), within a generous
/// bound, instead of running on as an orphan.
#[test]
fn ranks_die_with_a_killed_launcher() {
    let mut launcher = self::launcher()
        .args(["-n", "3", "--", "sleep", "600"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = launcher.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    let ranks = loop {
        let ranks = children_of(pid);
        if ranks.len() == 3 {
            break ranks;
        }
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    launcher.kill().unwrap();
    launcher.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while ranks.iter().any(|&r| running(r)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let orphans: Vec<i32> = ranks.into_iter().filter(|&r| running(r)).collect();
    for &orphan in &orphans {
        unsafe { libc::kill(orphan, libc::SIGKILL) };
    }
    assert_eq!(orphans, Vec::<i32>::new(), "ranks outlived their launcher");
}

#[test]
fn the_program_gets_its_arguments_as_given() {
    let script = "echo $CATENA_RANK of $CATENA_SIZE: [$0] [$1]";
    let args = ["-n", "3", "--", "sh", "-c", script, "-x", "two words"];
    let run = launcher().args(args).output().unwrap();
    assert!(run.status.success(), "{run:?}");
    assert_eq!(sorted_lines(&run).len(), 3, "{run:?}");
    assert_eq!(sorted_lines(&run)[1], "[1] 1 of 3: [-x] [two words]");
}

#[test]
fn the_ring_benchmark_checks_and_reports_every_rank() {
    let csv = std::env::temp_dir().join(format!("catena-ring-test-{}.csv", std::process::id()));
    let out = Command::new(BENCH)
        .args(["ring", "-n", "3", "--rounds", "200", "--csv"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let rows = std::fs::read_to_string(&csv).unwrap();
    let _ = std::fs::remove_file(&csv);
    assert_eq!(
        rows.lines().next(),
        Some("rank,mean_us,median_us,p90_us,p99_us,max_us")
    );
    assert_eq!(rows.lines().count(), 4, "{rows}");
}

#[test]
fn the_groups_demo_prints_every_process_s_communicators() {
    for algorithm in ["Auto", "Bitonic", "Hash"] {
        let out = Command::new(BENCH)
            .args(["groups", "-n", "5", "--algorithm", algorithm])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        // Rank 4 is the last of group "rank mod 3 = 1" (ranks 1 and 4, in
        // descending rank order: 4 first), a member of the evens, and of
        // the group ranks 0 and 4 create.
        for line in [
            "by rank mod 3    rank 0 of 2 (left -, right 1, context 0x",
            "evens only       rank 2 of 3 (left 2, right -, context 0x",
            "created (4 | r)  rank 1 of 2 (left 0, right -, context 0x",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
        // Ranks 1 and 3 are not evens; ranks 1, 2 and 3 not in the created group.
        assert_eq!(text.matches("not a member").count(), 5, "{text}");
        assert_eq!(text.matches("by host/socket   rank ").count(), 5, "{text}");
    }
}

#[test]
fn an_orphan_holding_the_output_open_does_not_hang_the_launcher() {
    let started = Instant::now();
    let status = run_shell(2, "sleep 30 & echo started")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// The same binary runs a real multi-process job under both starters: the
/// launcher (`catena-bench ring -n 4` relaunches itself) and `mpiexec -n 4`
/// (it bootstraps from MPI). Every rank checks each message it receives.
#[cfg(feature = "mpi")]
#[test]
fn ring_runs_under_the_launcher_and_under_mpiexec() {
    let ring = ["ring", "--rounds", "300", "--bytes", "64", "--csv"];
    for (what, mut cmd) in [
        ("launcher", Command::new(BENCH)),
        ("mpiexec", Command::new("mpiexec")),
    ] {
        let csv =
            std::env::temp_dir().join(format!("catena-ring-{what}-{}.csv", std::process::id()));
        if what == "mpiexec" {
            cmd.args(["-n", "4", BENCH]);
            cmd.args(ring).arg(&csv);
        } else {
            cmd.args(ring).arg(&csv).args(["-n", "4"]);
        }
        let out = cmd.stdin(Stdio::null()).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{what}: {out:?}");
        assert!(stdout.contains("4 ranks"), "{what}: {stdout}");
        let rows = std::fs::read_to_string(&csv).unwrap().lines().count();
        assert_eq!(rows, 1 + 4, "{what}: one CSV row per rank");
        let _ = std::fs::remove_file(&csv);
    }
}

/// A rank that fails at start-up under `mpiexec` (rank 1 with a malformed
/// setting, after the address exchange; rank 0 with a malformed job id,
/// before it) prints its error and ends the whole job with a non-zero
/// status, instead of leaving it hanging in `MPI_Finalize` and collectives.
#[cfg(feature = "mpi")]
#[test]
fn a_rank_failing_at_start_up_aborts_the_mpiexec_job() {
    let ring = [BENCH, "ring", "--rounds", "100000000", "--timeout-s", "600"];
    let cases = [
        (
            "CATENA_SPIN_US",
            "1",
            "CATENA_SPIN_US=\"bad id\" is not a number",
        ),
        (
            "CATENA_MPI_JOB",
            "0",
            "CATENA_MPI_JOB=\"bad id\": a job id is",
        ),
    ];
    // Names the job, so that the segments of the ranks mpiexec killed can
    // be removed afterwards (the shm provider's named segments).
    let job = format!("startupfailure{}", std::process::id());
    for (variable, rank, error) in cases {
        let script =
            format!("if [ $PMI_RANK = {rank} ]; then export {variable}='bad id'; fi; exec \"$@\"");
        let mut mpiexec = Command::new("mpiexec")
            .args(["-n", "3", "sh", "-c", &script, "sh"])
            .args(ring)
            .args(["--csv", "/dev/null"])
            .env("CATENA_MPI_JOB", &job)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while mpiexec.try_wait().unwrap().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = mpiexec.kill();
        let out = mpiexec.wait_with_output().unwrap();
        let prefix = format!("catena-{job}-");
        for entry in std::fs::read_dir("/dev/shm").unwrap().flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.code().is_some_and(|c| c != 0),
            "{variable}: {out:?}"
        );
        assert!(err.contains(error), "{variable}: {err}");
        assert!(err.contains("MPI_Abort"), "{variable}: {err}");
    }
}

/// Entries of /dev/shm now.
#[cfg(all(feature = "mpi", feature = "ofi"))]
fn shm_entries() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect()
}

/// A rank killed under `mpiexec` on ofi/shm leaves libfabric's regions
/// (libfabric names them `<source address>:<uid>:<index>`) of every rank
/// `mpiexec` then killed; the next catena job on this machine removes them.
#[cfg(all(feature = "mpi", feature = "ofi"))]
#[test]
fn libfabric_regions_of_a_killed_mpiexec_job_are_removed_by_the_next_job() {
    let before = shm_entries();
    let ring = |rounds: &str| {
        let mut cmd = Command::new("mpiexec");
        cmd.args([
            "-n",
            "2",
            BENCH,
            "ring",
            "--provider",
            "ofi",
            "--csv",
            "/dev/null",
        ])
        .args(["--rounds", rounds])
        .env("CATENA_OFI_PROVIDER", "shm")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        cmd
    };
    let mut killed = ring("100000000").spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let regions = || -> Vec<String> {
        shm_entries()
            .difference(&before)
            .filter(|n| n.contains(':'))
            .cloned()
            .collect()
    };
    while regions().len() < 2 {
        assert!(Instant::now() < deadline, "the job never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // mpiexec's proxy is its child, the ranks are the proxy's.
    let proxy = children_of(killed.id())[0];
    let rank = children_of(proxy as u32)[0];
    unsafe { libc::kill(rank, libc::SIGKILL) };
    killed.wait().unwrap();
    let left = regions();
    assert!(
        !left.is_empty(),
        "the killed job left no region to clean up"
    );
    // Named by catena (unguessable, owner-stamped), not after the pid.
    assert!(left.iter().all(|r| r.starts_with("catena-fi-")), "{left:?}");
    assert!(ring("10").status().unwrap().success());
    let still = regions();
    assert!(
        left.iter().all(|r| !still.contains(r)),
        "left {left:?}, still there {still:?}"
    );
}
