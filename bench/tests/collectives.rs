//! `catena-bench collectives` as a user runs it, briefly: catena and
//! MPICH in one `mpiexec` job (every row checked, then timed on both
//! sides), the C API's rows, the interposer's jobs, and catena alone under
//! the launcher.

use std::collections::HashMap;
use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_catena-bench");

/// The CSV's rows as column -> cell.
fn rows(csv: &str) -> Vec<HashMap<String, String>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .map(|h| h.to_string())
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

fn run(name: &str, args: &[&str]) -> (String, Vec<HashMap<String, String>>) {
    let csv = std::env::temp_dir().join(format!(
        "catena-collectives-{name}-{}.csv",
        std::process::id()
    ));
    let out = Command::new(BENCH)
        .args(["collectives", "-n", "2", "--row-seconds", "0.02"])
        .args(["--repetitions", "3", "--csv"])
        .arg(&csv)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let _ = std::fs::remove_file(&csv);
    (stdout, rows(&text))
}

/// Every row ran and was checked on both sides: barrier, two sizes of
/// every collective, the splits, create_group, alltoall through Rust and
/// through the C API, and the interposer's `MPI_Comm_split`.
#[cfg(feature = "mpi")]
#[test]
fn every_row_runs_checked_beside_mpich() {
    let (stdout, rows) = run(
        "mpi",
        &[
            "--sizes",
            "8,65536",
            "--elements",
            "2000",
            "--interposer-runs",
            "2",
        ],
    );
    let count = |op: &str| rows.iter().filter(|r| r["op"] == op).count();
    assert_eq!(count("barrier"), 1, "{stdout}");
    for op in [
        "bcast",
        "reduce",
        "allreduce",
        "allgather",
        "gather",
        "scatter",
    ] {
        assert_eq!(count(op), 2, "{op}: {stdout}");
    }
    assert_eq!(count("split"), 7, "{stdout}");
    assert_eq!(count("create_group"), 3, "{stdout}");
    assert_eq!(count("alltoall (Rust)"), 3, "{stdout}");
    assert_eq!(count("alltoall (C API)"), 3, "{stdout}");
    assert_eq!(count("MPI_Comm_split (split_time.c)"), 1, "{stdout}");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for row in &rows {
        assert_eq!(row["status"], "ok", "{row:?}");
        for side in ["catena", "mpich"] {
            let us: f64 = row[&format!("{side}_us")].parse().unwrap();
            assert!(us > 0.0, "{row:?}");
        }
        // Ratios only with a core per process.
        assert_eq!(row["ratio"].is_empty(), cores < 2, "{row:?}");
    }
    assert!(stdout.contains("catena/MPICH"), "{stdout}");
}

/// Without MPICH: catena alone under catena's launcher, no ratio.
#[test]
fn catena_alone_runs_under_the_launcher() {
    let (stdout, rows) = run(
        "alone",
        &["--no-mpi", "--only", "barrier,allreduce", "--sizes", "8"],
    );
    assert_eq!(rows.len(), 2, "{stdout}");
    for row in &rows {
        assert_eq!(row["status"], "ok", "{row:?}");
        assert!(row["catena_us"].parse::<f64>().unwrap() > 0.0);
        assert!(row["mpich_us"].is_empty() && row["ratio"].is_empty());
    }
}
