//! `catena-bench groupmap --quick` as a user runs it: the CSV covers every
//! class and Table 6.1 communicator, every map answers correctly, nothing
//! beats information theory where it applies, a stride costs the same
//! bytes at any size, and the plots are written.

use std::collections::HashMap;
use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_catena-bench");

/// The CSV's rows as column name -> cell.
fn rows(csv: &str) -> Vec<HashMap<&str, &str>> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| header.iter().copied().zip(l.split(',')).collect())
        .collect()
}

fn number(row: &HashMap<&str, &str>, column: &str) -> f64 {
    row[column]
        .parse()
        .unwrap_or_else(|_| panic!("{column} of {row:?}"))
}

#[test]
fn quick_run_writes_csv_and_plots_that_hold_up() {
    let dir = std::env::temp_dir().join(format!("catena-groupmap-test-{}", std::process::id()));
    let out = Command::new(BENCH)
        .args(["groupmap", "--quick", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(dir.join("groupmap.csv")).unwrap();
    let rows = rows(&text);

    let workloads: Vec<String> = ["A", "B", "C", "D", "E"]
        .map(String::from)
        .into_iter()
        .chain((1..=14).map(|i| format!("T{i}")))
        .collect();
    for w in &workloads {
        assert!(rows.iter().any(|r| r["workload"] == w), "no rows for {w}");
    }
    for r in &rows {
        assert!(
            !r["note"].starts_with("WRONG") && !r["note"].starts_with("error"),
            "{r:?}"
        );
    }

    // The bound is log2 C(world, n) (+ log2 n!) bits: what any encoding of an
    // arbitrary n-member map needs. Only maps drawn uniformly from all of
    // them must respect it; strides and ranges are far more compressible.
    let random = ["A", "T8", "T9", "T10", "T11", "T12"];
    let bound: HashMap<(&str, &str), f64> = rows
        .iter()
        .filter(|r| r["what"] == "bound")
        .map(|r| ((r["workload"], r["map"]), number(r, "bytes")))
        .collect();
    let mut checked = 0;
    for r in rows.iter().filter(|r| r["what"].starts_with("strategy:")) {
        assert!(!r["bytes"].is_empty(), "a strategy failed: {r:?}");
        if random.contains(&r["workload"]) {
            let floor = bound[&(r["workload"], r["map"])];
            assert!(
                number(r, "bytes") >= floor,
                "below the bound {floor}: {r:?}"
            );
            checked += 1;
        }
    }
    assert!(
        checked >= 3 * random.len(),
        "{checked} strategy rows checked"
    );

    // A stride is O(1): its bytes do not grow with the members.
    let strides: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r["workload"] == "B" && r["what"] == "Stride+Sorted")
        .map(|r| (number(r, "members"), number(r, "bytes")))
        .collect();
    assert!(!strides.is_empty());
    assert!(
        strides.iter().all(|s| s.1 == strides[0].1),
        "Stride bytes by members: {strides:?}"
    );

    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        for plot in ["A", "B", "C", "D", "E", "table"] {
            let png = std::fs::read(dir.join(format!("groupmap-{plot}.png"))).unwrap();
            assert_eq!(&png[1..4], b"PNG", "groupmap-{plot}.png");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
