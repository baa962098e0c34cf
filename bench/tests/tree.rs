//! `catena-bench tree` as a user runs it: the load table, a small simulated
//! sweep whose CSV shows our trees beating the binomial tree, and a real
//! shm job whose every call is checked byte for byte.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_catena-bench");

#[test]
fn loads_table_shows_contention_free_schedules() {
    let out = Command::new(BENCH)
        .args([
            "tree",
            "loads",
            "--dims",
            "6,6,6",
            "--members",
            "64",
            "--groups",
            "2",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for construction in [
        "RectangleColours",
        "MissingNodeColours",
        "Planes",
        "Binomial",
    ] {
        assert!(text.contains(construction), "{text}");
    }
    // Every one of our schedules has max load 1: the column after the
    // colour count.
    for line in text.lines().skip(2).filter(|l| !l.contains("Binomial")) {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let colours = cols.iter().position(|c| c.parse::<u32>().is_ok()).unwrap();
        assert_eq!(cols[colours + 1], "1", "{line}");
    }
}

/// A case with no schedule (with the default seed, no four link-disjoint
/// chains of 64 on a 16x16 torus) is a "not found" row; the other rows
/// still print.
#[test]
fn a_case_without_a_schedule_does_not_abort_the_table() {
    let out = Command::new(BENCH)
        .args(["tree", "loads", "--dims", "16,16"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let not_found: Vec<&str> = text.lines().filter(|l| l.contains("not found")).collect();
    assert_eq!(not_found.len(), 1, "{text}");
    assert!(not_found[0].contains("simultaneous groups"), "{text}");
    for case in [
        "full torus",
        "missing node",
        "half the planes",
        "random members",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(case) && !l.contains("not found")),
            "{case} missing from\n{text}"
        );
    }
}

#[test]
fn a_simulated_sweep_writes_csv_and_plots() {
    let dir = std::env::temp_dir().join(format!("catena-tree-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("tree.csv");
    let out = Command::new(BENCH)
        .args([
            "tree",
            "sim",
            "--dims",
            "4,4,4",
            "--members",
            "32",
            "--groups",
            "2",
        ])
        .args([
            "--min-bytes",
            "262144",
            "--max-bytes",
            "262144",
            "--ops",
            "bcast",
        ])
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name| header.iter().position(|h| *h == name).unwrap();
    let (case, algo, speedup) = (col("case"), col("algorithm"), col("speedup_vs_binomial"));
    let ours: Vec<(String, f64)> = lines
        .map(|l| l.split(',').map(String::from).collect::<Vec<_>>())
        .filter(|c| c[algo] == "ours")
        .map(|c| (c[case].clone(), c[speedup].parse().unwrap()))
        .collect();
    assert_eq!(ours.len(), 5, "{text}");
    for (case, s) in &ours {
        assert!(*s > 1.0, "{case}: ours is {s}x the binomial tree");
    }
    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        let png = std::fs::read(dir.join("tree-missing-node.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_real_shm_job_checks_every_call() {
    let out = Command::new(BENCH)
        .args([
            "tree",
            "run",
            "-n",
            "4",
            "--max-bytes",
            "65536",
            "--repetitions",
            "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("scatter+allgather"), "{text}");
    assert!(text.contains("allreduce"), "{text}");
}
