//! The row no single job can hold: an unmodified MPI program's
//! `MPI_Comm_split` (bench/c/split_time.c) under `mpiexec`, with and
//! without `LD_PRELOAD=libcatena-mpi.so` (the interposer). Two separate
//! jobs by necessity, alternated so that drift hits both alike.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::sample::{Result, Timing};
use super::{Args, Figure};

const OP: &str = "MPI_Comm_split (split_time.c)";
const CASE: &str = "LD_PRELOAD interposer";

/// The interposer's row: alternating runs of the program without and with
/// it; a row saying why where either is missing or a run fails.
pub(crate) fn row(args: &Args) -> Figure {
    match measure(args) {
        Ok(figure) => figure,
        Err(why) => Figure::failed(OP, CASE, format!("not run: {why}")),
    }
}

fn measure(args: &Args) -> Result<Figure> {
    let exe = std::env::current_exe()?;
    let here = exe.parent().ok_or("this program has no folder")?;
    let program = split_time(args, here)?;
    let library = interposer(args, here)?;
    eprintln!(
        "catena-bench collectives: {} under mpiexec -n {}, without and with LD_PRELOAD={}, {} runs each ...",
        program.display(),
        args.job.ranks,
        library.display(),
        args.interposer_runs
    );
    let (mut plain, mut interposed) = (Vec::new(), Vec::new());
    for _ in 0..args.interposer_runs {
        plain.push(run(args, &program, None)?);
        interposed.push(run(args, &program, Some(&library))?);
    }
    let timing = |mut runs: Vec<f64>| Timing {
        seconds: median(&mut runs),
        samples: runs.len(),
        batch: 1,
    };
    Ok(Figure {
        op: OP.into(),
        case: CASE.into(),
        catena: Some(timing(interposed)),
        mpich: Some(timing(plain)),
        heap: None,
        rss: None,
        status: "ok".into(),
    })
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n % 2 {
        1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// One job: the program's median split time (seconds; the slowest rank's
/// per repetition, its median over 21).
fn run(args: &Args, program: &Path, preload: Option<&Path>) -> Result<f64> {
    let mut mpiexec = Command::new("mpiexec");
    mpiexec
        .args(args.job.hosts.mpiexec_args(args.job.ranks))
        .arg("-n")
        .arg(args.job.ranks.to_string());
    if let Some(library) = preload {
        // Rank 0 then says how many splits catena ran.
        mpiexec.arg("-genv").arg("LD_PRELOAD").arg(library);
        mpiexec.args(["-genv", "CATENA_MPI_REPORT", "1"]);
    }
    let out = mpiexec
        .arg(program)
        .output()
        .map_err(|e| format!("starting mpiexec: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let with = match preload {
        Some(_) => "with the interposer",
        None => "without the interposer",
    };
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        return Err(format!(
            "{with}: mpiexec failed ({}): {}",
            out.status,
            tail.join(" / ")
        )
        .into());
    }
    // "libcatena-mpi: rank 0: 24 splits by catena, 0 by MPI; ..."
    if preload.is_some() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let by_catena = stderr
            .split(" splits by catena")
            .next()
            .and_then(|before| before.rsplit(' ').next())
            .and_then(|n| n.parse::<u64>().ok());
        if !matches!(by_catena, Some(n) if n > 0) {
            return Err(format!("{with}: catena ran no split (stderr: {stderr:?})").into());
        }
    }
    // "N = 2: MPI_Comm_split median 0.012 ms (slowest rank; ...)"
    let ms = stdout
        .split("median ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|ms| ms.parse::<f64>().ok())
        .ok_or_else(|| format!("{with}: no median in {stdout:?}"))?;
    Ok(ms * 1e-3)
}

/// The program: `--split-time`, else `split_time` beside this program,
/// built there with mpicc from bench/c/split_time.c where missing or
/// older than its source.
fn split_time(args: &Args, here: &Path) -> Result<PathBuf> {
    if let Some(given) = &args.split_time {
        return existing(given, "--split-time");
    }
    let beside = here.join("split_time");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("c/split_time.c");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    match (beside.is_file(), source.is_file()) {
        (true, false) => return Ok(beside),
        (true, true) if modified(&beside) >= modified(&source) => return Ok(beside),
        (false, false) => {
            return Err(
                "no split_time beside this program and no source to build it: give --split-time"
                    .into(),
            )
        }
        _ => {}
    }
    eprintln!(
        "catena-bench collectives: building {} with mpicc",
        beside.display()
    );
    let status = Command::new("mpicc")
        .args(["-O2", "-o"])
        .arg(&beside)
        .arg(&source)
        .status()
        .map_err(|e| format!("starting mpicc: {e}"))?;
    match status.success() {
        true => Ok(beside),
        false => Err(format!("mpicc {} failed: {status}", source.display()).into()),
    }
}

/// The interposer: `--interposer`, else libcatena-mpi.so beside this
/// program or in ../lib (an install prefix, the many-core bundle), else
/// the one in catena-mpi/ beside this program, installed there by
/// algorithms/capi/install.sh from the libcatena.so cargo built with this
/// program (same features, `mpi` among them) and installed again whenever
/// that library is newer.
fn interposer(args: &Args, here: &Path) -> Result<PathBuf> {
    const NAME: &str = "libcatena-mpi.so";
    if let Some(given) = &args.interposer {
        return existing(given, "--interposer");
    }
    for candidate in [here.join(NAME), here.join("../lib").join(NAME)] {
        if candidate.is_file() {
            return Ok(candidate.canonicalize()?);
        }
    }
    let prefix = here.join("catena-mpi");
    let installed = prefix.join("lib").join(NAME);
    let install = Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/capi/install.sh");
    // cargo leaves the C library of the catena-capi this program links in
    // deps/ (and `cargo build` copies it up, where an older build's copy
    // may have been left): the newer of the two.
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let from = [here.to_path_buf(), here.join("deps")]
        .into_iter()
        .filter(|dir| dir.join("libcatena.so").is_file() && dir.join("libcatena.a").is_file())
        .max_by_key(|dir| modified(&dir.join("libcatena.so")));
    let (from, install) = match (from, install.is_file()) {
        (Some(from), true) => (from, install),
        _ if installed.is_file() => return Ok(installed),
        _ => {
            return Err(format!(
                "no {NAME} found: give --interposer, or build it with \
                 algorithms/capi/install.sh --features mpi PREFIX"
            )
            .into())
        }
    };
    if modified(&installed) >= modified(&from.join("libcatena.so")) {
        return Ok(installed);
    }
    eprintln!(
        "catena-bench collectives: installing the interposer under {}",
        prefix.display()
    );
    let status = Command::new(&install)
        .arg("--from")
        .arg(&from)
        .arg("--mpi")
        .arg(&prefix)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| format!("starting {}: {e}", install.display()))?;
    match status.success() {
        true => Ok(installed),
        false => Err(format!("{} failed: {status}", install.display()).into()),
    }
}

fn existing(path: &Path, option: &str) -> Result<PathBuf> {
    match path.is_file() {
        true => Ok(path.canonicalize()?),
        false => Err(format!("{option} {}: no such file", path.display()).into()),
    }
}
