//! `catena-bench sim` as a user runs it: a small sweep writes its CSV and
//! plots (charged cases run 3 times, with their spread), and the
//! accounting shows what the seed promises about memory:
//! Hash (split only) holds the same bytes per rank at every N, Bitonic at
//! most O(log N) more.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_catena-bench");

/// (algorithm, ranks) -> algorithm bytes per rank, from the CSV.
fn memory(csv: &str, algorithm: &str) -> Vec<(u32, u64)> {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name| header.iter().position(|h| *h == name).unwrap();
    let (a, n, m) = (
        col("algorithm"),
        col("ranks"),
        col("algorithm_bytes_per_rank"),
    );
    lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[a] == algorithm)
        .map(|c| (c[n].parse().unwrap(), c[m].parse().unwrap()))
        .collect()
}

#[test]
fn a_sweep_writes_csv_and_plots_and_memory_stays_small() {
    let dir = std::env::temp_dir().join(format!("catena-sim-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("sim.csv");
    let out = Command::new(BENCH)
        .args(["sim", "--max-ranks", "4096", "--algorithms", "Hash,Bitonic"])
        .args(["--workloads", "1", "--csv"])
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let hash = memory(&text, "Hash");
    assert_eq!(
        hash.iter().map(|h| h.0).collect::<Vec<_>>(),
        [16, 64, 256, 1024, 4096]
    );
    // Constant in N: the bytes at 4096 ranks are those at 16.
    assert_eq!(hash[0].1, hash[4].1, "Hash per-rank bytes: {hash:?}");
    // O(log N): each factor 4 in N adds at most a few cache entries.
    let bitonic = memory(&text, "Bitonic");
    for w in bitonic.windows(2) {
        assert!(
            w[1].1 <= w[0].1 + 256,
            "Bitonic per-rank bytes: {bitonic:?}"
        );
    }
    // Computation is charged: each case ran 3 times, the median kept and
    // the spread beside it.
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name| header.iter().position(|h| *h == name).unwrap();
    let (runs, low, mid, high) = (
        col("runs"),
        col("virtual_ms_low"),
        col("virtual_ms"),
        col("virtual_ms_high"),
    );
    for line in lines {
        let c: Vec<&str> = line.split(',').collect();
        let ms = |i: usize| c[i].parse::<f64>().unwrap();
        assert_eq!(c[runs], "3", "{line}");
        assert!(ms(low) <= ms(mid) && ms(mid) <= ms(high), "{line}");
    }
    if std::path::Path::new("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf").exists() {
        let png = std::fs::read(dir.join("sim-split-5B-few.png")).unwrap();
        assert_eq!(&png[1..4], b"PNG");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
