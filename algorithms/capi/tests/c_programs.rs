//! The C test programs of `tests/c`, compiled with gcc against `catena.h`
//! and this build's `libcatena.so`, run as jobs of 1 to 8 processes under
//! catena's launcher and (feature `mpi`) under `mpiexec`, where they also
//! check catena's splits against MPICH's `MPI_Comm_split`.

use std::path::{Path, PathBuf};
use std::process::Command;

use catena_run::launch::{launch, LaunchSpec};

/// Where cargo put this build's `libcatena.so`: next to the test binary's
/// directory (`target/<profile>/deps/..`).
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let deps = exe.parent().expect("deps");
    for dir in [deps, deps.parent().expect("profile dir")] {
        if dir.join("libcatena.so").exists() {
            return dir.to_path_buf();
        }
    }
    panic!("libcatena.so is not built next to {}", deps.display());
}

fn here() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compiles `tests/c/<name>.c` (with `extra` flags) into the target dir.
fn compile(name: &str, output: &str, extra: &[String]) -> PathBuf {
    let lib = library_dir();
    let out = lib.join(output);
    let status = Command::new("gcc")
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&out)
        .arg(here().join("tests/c").join(format!("{name}.c")))
        .arg("-I")
        .arg(here().join("include"))
        .args(extra)
        .arg(format!("-L{}", lib.display()))
        // An RPATH, not a RUNPATH: cargo's LD_LIBRARY_PATH names
        // target/<profile> first, whose copy of the library is stale while
        // only tests are built.
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()))
        .arg("-lcatena")
        .status()
        .expect("running gcc (apt-get install gcc)");
    assert!(status.success(), "gcc failed on {name}.c");
    out
}

/// `program` under the launcher on `ranks` ranks: it succeeds, says its
/// checks passed, and leaves nothing in /dev/shm.
fn passes_under_the_launcher(program: &Path, ranks: u32) {
    let mut spec = LaunchSpec::new(ranks, program);
    spec.capture_output = true;
    let report = launch(&spec).expect("launching a C test");
    assert!(
        report.success(),
        "{} on {ranks} ranks: {:?}\n{}",
        program.display(),
        report.first_failure,
        report.output
    );
    assert!(report.output.contains("checks passed"), "{}", report.output);
    assert_eq!(report.leftover_segments, 0, "{}", report.output);
}

#[test]
fn capi_test_under_the_launcher() {
    let program = compile("capi_test", "capi_test", &[]);
    for ranks in 1..=8 {
        passes_under_the_launcher(&program, ranks);
    }
}

/// catena starts once per process: `catena_init` on a second thread and
/// after `catena_finalize` is `CATENA_ERR_STATE`.
#[test]
fn init_once_per_process_under_the_launcher() {
    let program = compile("init_once", "init_once", &["-pthread".to_string()]);
    for ranks in [1, 3] {
        passes_under_the_launcher(&program, ranks);
    }
}

/// The same under `mpiexec`, where catena initialized MPI and finalized
/// it: the second `catena_init` returns instead of ending the process
/// inside MPICH.
#[cfg(feature = "mpi")]
#[test]
fn init_once_per_process_under_mpiexec() {
    let program = compile("init_once", "init_once_mpi", &["-pthread".to_string()]);
    for ranks in [1, 2] {
        let (out, err) = mpiexec(ranks, &program, &[], None);
        assert!(out.contains("checks passed"), "{out}{err}");
    }
}

/// MPICH's compiler and linker flags (`mpicc -show` without the compiler).
#[cfg(feature = "mpi")]
fn mpich_flags() -> Vec<String> {
    let out = Command::new("mpicc")
        .arg("-show")
        .output()
        .expect("mpicc (apt-get install mpich)");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .skip(1)
        .map(String::from)
        .collect()
}

#[cfg(feature = "mpi")]
#[test]
fn capi_test_under_mpiexec_against_mpich() {
    let mut flags = vec!["-DWITH_MPI".to_string()];
    flags.extend(mpich_flags());
    let program = compile("capi_test", "capi_test_mpi", &flags);
    for ranks in [1, 2, 3, 4, 8] {
        let (out, err) = mpiexec(ranks, &program, &[], None);
        assert!(out.contains("checks passed"), "{out}{err}");
    }
}

/// `catena_init_mpi` on each half of `MPI_COMM_WORLD`: two catena jobs in
/// one `mpiexec`, each ranked as its half, matching MPI on it.
#[cfg(feature = "mpi")]
#[test]
fn catena_on_a_program_communicator() {
    let program = compile("init_mpi", "init_mpi", &mpich_flags());
    for ranks in [1, 2, 3, 5] {
        let (out, err) = mpiexec(ranks, &program, &[], None);
        assert!(out.contains("checks passed"), "{out}{err}");
    }
}

/// `install.sh` puts the library, header and `catena.pc` under a prefix,
/// and a program built with `pkg-config --cflags --libs catena` alone runs.
#[test]
fn installed_library_builds_with_pkg_config() {
    let prefix = std::env::temp_dir().join(format!("catena-install-{}", std::process::id()));
    let status = Command::new(here().join("install.sh"))
        .arg("--from")
        .arg(library_dir())
        .arg(&prefix)
        .status()
        .expect("running install.sh");
    assert!(status.success(), "install.sh failed");
    let pkg_config = |flag: &str| {
        let out = Command::new("pkg-config")
            .args([flag, "catena"])
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .output()
            .expect("pkg-config (apt-get install pkg-config)");
        assert!(out.status.success(), "pkg-config {flag} catena failed");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let libdir = pkg_config("--variable=libdir");
    let program = prefix.join("capi_test");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gcc -std=c11 -o {} {} $(pkg-config --cflags --libs catena) -Wl,--disable-new-dtags,-rpath,{libdir}",
            program.display(),
            here().join("tests/c/capi_test.c").display(),
        ))
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .status()
        .expect("gcc");
    assert!(
        status.success(),
        "building against the installed catena failed"
    );
    let mut spec = LaunchSpec::new(3, &program);
    spec.capture_output = true;
    let report = launch(&spec).expect("launching the installed capi_test");
    std::fs::remove_dir_all(&prefix).expect("removing the prefix");
    assert!(
        report.success(),
        "{:?}\n{}",
        report.first_failure,
        report.output
    );
}

/// Builds `libcatena-mpi.so` from `mpi/catena_mpi.c` against this build's
/// `libcatena.so`, once: the tests using it run at once, and one rewriting
/// it while another's `mpiexec` loads it would lose the preload.
#[cfg(feature = "mpi")]
fn build_interposer() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(compile_interposer).clone()
}

#[cfg(feature = "mpi")]
fn compile_interposer() -> PathBuf {
    let lib = library_dir();
    let out = lib.join("libcatena-mpi.so");
    let status = Command::new("mpicc")
        .args([
            "-shared", "-fPIC", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-o",
        ])
        .arg(&out)
        .arg(here().join("mpi/catena_mpi.c"))
        .arg("-I")
        .arg(here().join("include"))
        .arg(format!("-L{}", lib.display()))
        .arg(format!("-Wl,--disable-new-dtags,-rpath,{}", lib.display()))
        .arg("-lcatena")
        .status()
        .expect("mpicc (apt-get install mpich)");
    assert!(status.success(), "mpicc failed on catena_mpi.c");
    out
}

/// `mpiexec -n ranks` of `program` (with `env` before it, as `env` does):
/// its stdout, and its stderr.
#[cfg(feature = "mpi")]
fn mpiexec(
    ranks: u32,
    program: &Path,
    env: &[(&str, &str)],
    preload_mpiexec: Option<&Path>,
) -> (String, String) {
    let mut command = Command::new("timeout");
    command.args(["120", "mpiexec", "-n", &ranks.to_string()]);
    for (k, v) in env {
        command.args(["-genv", k, v]);
    }
    if let Some(preload) = preload_mpiexec {
        // The way the docs say it: the whole mpiexec preloaded.
        command.env("LD_PRELOAD", preload);
    }
    let out = command
        .arg(program)
        .output()
        .expect("mpiexec (apt-get install mpich)");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(
        out.status.success(),
        "{} under mpiexec -n {ranks} {env:?}: {}\n{stdout}{stderr}",
        program.display(),
        out.status
    );
    (stdout, stderr)
}

/// An unmodified MPI program splits alike with and without the interposer,
/// and with it every split of a known communicator ran in catena.
#[cfg(feature = "mpi")]
#[test]
fn interposed_mpi_comm_split_gives_mpichs_results() {
    let interposer = build_interposer();
    let program = compile("split_patterns", "split_patterns", &mpich_flags());
    let preload = interposer.to_str().expect("a UTF-8 path");
    for ranks in [1, 2, 3, 4, 5, 8] {
        let (plain, _) = mpiexec(ranks, &program, &[], None);
        let (interposed, report) = mpiexec(
            ranks,
            &program,
            &[("LD_PRELOAD", preload), ("CATENA_MPI_REPORT", "1")],
            None,
        );
        assert!(plain.lines().count() > 20, "{plain}");
        assert_eq!(
            plain, interposed,
            "results differ on {ranks} ranks\n{report}"
        );
        // 5 + 2 (column halves, halves of a dup) + 16 repeats, all known.
        assert!(
            report.contains("23 splits by catena, 0 by MPI"),
            "the interposer did not run every split on {ranks} ranks: {report}"
        );
        let (off, report) = mpiexec(
            ranks,
            &program,
            &[
                ("LD_PRELOAD", preload),
                ("CATENA_MPI", "off"),
                ("CATENA_MPI_REPORT", "1"),
            ],
            None,
        );
        assert_eq!(plain, off);
        assert!(!report.contains("splits by catena"), "{report}");
    }
    let (whole, report) = mpiexec(
        4,
        &program,
        &[("CATENA_MPI_REPORT", "1")],
        Some(&interposer),
    );
    assert_eq!(whole, mpiexec(4, &program, &[], None).0);
    assert!(report.contains("23 splits by catena"), "{report}");
}

/// `MPI_Comm_idup` stays nonblocking under the interposer (rank 1 idups,
/// then sends to rank 0, which receives before its own idup), and the
/// new communicator splits as MPI splits it.
#[cfg(feature = "mpi")]
#[test]
fn interposed_mpi_comm_idup_does_not_block() {
    let interposer = build_interposer();
    let program = compile("idup", "idup", &mpich_flags());
    let preload = interposer.to_str().expect("a UTF-8 path");
    let sorted = |text: String| {
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines.sort();
        lines
    };
    for ranks in [2, 3] {
        let plain = sorted(mpiexec(ranks, &program, &[], None).0);
        let (interposed, report) = mpiexec(ranks, &program, &[("LD_PRELOAD", preload)], None);
        assert_eq!(plain, sorted(interposed), "{report}");
        assert_eq!(plain.len(), ranks as usize, "{plain:?}");
    }
}

/// A Fortran program (MPICH's `mpi` module) gets catena's split too: MPICH's
/// Fortran bindings call the C `MPI_*` entry points the interposer defines.
/// Its lines (printed by several ranks, so sorted) are the same with and
/// without the interposer.
#[cfg(feature = "mpi")]
#[test]
fn interposed_fortran_mpi_comm_split_gives_mpichs_results() {
    let interposer = build_interposer();
    let program = library_dir().join("split_patterns_f");
    let status = Command::new("mpif90")
        .args(["-O1", "-Wall", "-o"])
        .arg(&program)
        .arg(here().join("tests/fortran/split_patterns.f90"))
        .status()
        .expect("mpif90 (libmpich-dev brings gfortran)");
    assert!(status.success(), "mpif90 failed on split_patterns.f90");
    let preload = interposer.to_str().expect("a UTF-8 path");
    let sorted = |text: String| {
        let mut lines: Vec<String> = text.lines().map(String::from).collect();
        lines.sort();
        lines
    };
    for ranks in [1, 3, 4, 5] {
        let plain = sorted(mpiexec(ranks, &program, &[], None).0);
        let (interposed, report) = mpiexec(
            ranks,
            &program,
            &[("LD_PRELOAD", preload), ("CATENA_MPI_REPORT", "1")],
            None,
        );
        assert!(plain.len() > 12, "{plain:?}");
        assert!(!plain
            .iter()
            .any(|l| l.contains("wrong") || l.contains("got a")));
        assert_eq!(
            plain,
            sorted(interposed),
            "results differ on {ranks} ranks\n{report}"
        );
        // Rank 0 calls all 13 (every third joins the sparse one).
        assert!(
            report.contains("13 splits by catena, 0 by MPI"),
            "the interposer did not run every split on {ranks} ranks: {report}"
        );
    }
}

/// Every function `catena.h` declares is called by one of the C test
/// programs (or their shared `check.h`), so none ships untried from C.
#[test]
fn every_header_function_is_called_by_a_c_program() {
    let header = std::fs::read_to_string(here().join("include/catena.h")).expect("catena.h");
    let declared: Vec<&str> = header
        .lines()
        .filter(|line| line.starts_with(|c: char| c.is_ascii_lowercase()))
        .filter_map(|line| {
            let name = &line[line.find("catena_")?..];
            let end = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))?;
            name[end..].starts_with('(').then(|| &name[..end])
        })
        .collect();
    assert!(
        declared.len() > 50,
        "only {} functions found in catena.h",
        declared.len()
    );
    let mut programs = String::new();
    for entry in std::fs::read_dir(here().join("tests/c")).expect("tests/c") {
        let path = entry.expect("a test program").path();
        if path.extension().is_some_and(|e| e == "c" || e == "h") {
            programs += &std::fs::read_to_string(&path).expect("a C program");
        }
    }
    let uncalled: Vec<&&str> = declared
        .iter()
        .filter(|name| !programs.contains(&format!("{name}(")))
        .collect();
    assert!(uncalled.is_empty(), "no C test program calls {uncalled:?}");
}
