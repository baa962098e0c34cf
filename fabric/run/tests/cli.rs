//! The `catena-run` binary: a job's output prefixed by rank, the program's
//! arguments passed as given, a failed rank's status as the launcher's, and
//! a bad command line refused with a message.

use std::process::Command;

const RUN: &str = env!("CARGO_BIN_EXE_catena-run");

#[test]
fn every_rank_runs_the_program_with_its_arguments() {
    let script = "echo $CATENA_RANK of $CATENA_SIZE: [$0] [$1]";
    let out = Command::new(RUN)
        .args(["-n", "3", "--", "sh", "-c", script, "-x", "two words"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // Ranks print in any order.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines: Vec<&str> = stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "[0] 0 of 3: [-x] [two words]",
            "[1] 1 of 3: [-x] [two words]",
            "[2] 2 of 3: [-x] [two words]"
        ]
    );
}

#[test]
fn a_failed_rank_s_status_is_the_launcher_s() {
    let out = Command::new(RUN)
        .args(["-n", "2", "--", "sh", "-c", "exit $((CATENA_RANK * 3))"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("catena-run: rank 1 failed"), "{err}");
}

#[test]
fn a_command_line_without_a_program_is_refused() {
    let out = Command::new(RUN).args(["-n", "2"]).output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).is_empty());
}
