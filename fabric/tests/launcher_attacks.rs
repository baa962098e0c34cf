//! The launcher across hosts attacked by another local user, as one would:
//! read every command line and environment it may, connect to the
//! launcher's port before the proxies do, claim to be proxy 0 and report
//! rank 0 killed, claim to be rank 0 and arrive at barriers, and flood the
//! port with idle connections. It must get nothing (no key, no frame past
//! the challenge), hold the launcher to a bounded number of descriptors
//! and threads, and the job must run to its end as if it were not there.
//! Needs root (to run the attacker as a user of its own) and fake hosts.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use catena_fabric::bootstrap::wire::{Frame, Peer, NONCE_BYTES};
use catena_fabric::bootstrap::{self, Bootstrap};
use catena_run::launch::{launch, serve_as_proxy, LaunchSpec};
use catena_testkit::{fake_hosts_permitted, skip_unavailable, FAKEHOST, LOOPBACK_ONLY};

const TEST: &str = "attacks_by_another_local_user_get_nothing";
const ROLE: &str = "ATTACK_ROLE";
const DIR: &str = "ATTACK_DIR";
/// The user the attacks run as, made if missing.
const ATTACKER: &str = "catena-attacker";
/// Idle connections the attacker opens at once.
const FLOOD: usize = 5_000;
const RANKS: u32 = 4;

#[test]
fn attacks_by_another_local_user_get_nothing() {
    if let Some(code) = serve_as_proxy() {
        std::process::exit(code);
    }
    let dir = std::env::var_os(DIR).map(PathBuf::from);
    match std::env::var(ROLE).as_deref() {
        Ok("rank") => return rank(&dir.expect("ATTACK_DIR")),
        Ok("attacker") => return attacker(&dir.expect("ATTACK_DIR")),
        _ => {}
    }
    // SAFETY: no arguments, no memory.
    if unsafe { libc::geteuid() } != 0
        && skip_unavailable(TEST, "needs root, to run the attacker as another user")
    {
        return;
    }
    if let Err(why) = fake_hosts_permitted() {
        if skip_unavailable(TEST, &why) {
            return;
        }
    }
    let (uid, gid) = attacker_user();
    let dir = tempdir();

    // The proxies start only once the attacker is connected (`go`).
    let exe = std::env::current_exe().unwrap();
    let mut spec = LaunchSpec::new(RANKS, &exe);
    spec.args = test_args();
    spec.hosts = vec!["host0".into(), "host1".into()];
    let hold = format!(
        "while [ ! -e {0}/go ]; do sleep 0.02; done; exec {FAKEHOST} \"$@\"",
        dir.display()
    );
    spec.remote_exec = vec!["sh".into(), "-c".into(), hold.into(), "held".into()];
    spec.proxy_command = std::iter::once(exe.clone().into_os_string())
        .chain(test_args())
        .collect();
    spec.bootstrap_address = Some(std::net::Ipv4Addr::LOCALHOST.into());
    spec.capture_output = true;
    spec.env = [(ROLE, "rank"), (DIR, dir.to_str().unwrap())]
        .iter()
        .chain(LOOPBACK_ONLY)
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    // A secret in the launcher's environment, not named for the ranks.
    std::env::set_var("ATTACK_PLANTED_SECRET", "s3cr3t-of-the-launcher");
    // The attacker's copy of this binary is made before the launcher's
    // thread forks: a child forked while the copy is open for writing
    // holds it so, and executing it then fails with "Text file busy".
    let attacker_exe = dir.join("attacker");
    std::fs::copy(&exe, &attacker_exe).unwrap();
    std::fs::set_permissions(&attacker_exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let job = std::thread::spawn(move || launch(&spec));

    let attack = Command::new(&attacker_exe)
        .args(test_args())
        .env(ROLE, "attacker")
        .env(DIR, &dir)
        .current_dir(&dir)
        .uid(uid)
        .gid(gid)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();

    wait_for(&dir.join("early"), Duration::from_secs(30));
    let (threads_before, fds_before) = (threads(), open_fds());
    touch(&dir.join("go"));
    wait_for(&dir.join("flooding"), Duration::from_secs(60));
    let (threads, fds) = (threads(), open_fds());
    touch(&dir.join("measured"));
    let key = job_key_of_a_rank();
    let out = attack.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    println!("{TEST}: the attacker (uid {uid}) reports:\n{said}");
    println!(
        "{TEST}: the launcher held {threads_before} threads, {fds_before} descriptors before \
         the proxies came; {threads} threads, {fds} descriptors during the flood"
    );
    touch(&dir.join("done"));
    let report = job.join().unwrap().unwrap();

    assert!(out.status.success(), "the attacker failed: {said}");
    assert!(report.success(), "the job failed:\n{}", report.output);
    assert!(report.lost_hosts.is_empty(), "{:?}", report.lost_hosts);
    for r in 0..RANKS {
        assert!(report
            .output
            .contains(&format!("rank {r} looked up all and passed")));
    }
    assert!(!said.contains(&key), "the attacker found the job key");
    for line in said.lines().filter(|l| l.starts_with("got ")) {
        assert!(line.ends_with(" 0 bytes past the challenge"), "{line}");
    }
    assert_eq!(
        said.lines().filter(|l| l.starts_with("got ")).count(),
        3,
        "{said}"
    );
    let flood: usize = field(&said, "flood held ");
    assert!(
        flood >= 1000,
        "the flood held only {flood} connections: {said}"
    );
    // No thread per connection; a descriptor per rank and proxy and at
    // most 64 newcomers (the server's cap), and a few of the flood's being
    // closed.
    assert_eq!(threads, threads_before, "threads grew during the flood");
    let most = fds_before + RANKS as usize + 2 + 64 + 4;
    assert!(
        fds <= most,
        "{fds} descriptors during the flood (at most {most})"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rank: publishes its entry, looks up every peer's, and passes two
/// barriers, the second once the attacks are over.
fn rank(dir: &Path) {
    assert!(
        std::env::var_os("ATTACK_PLANTED_SECRET").is_none(),
        "a variable of the launcher not on the allow-list reached a rank"
    );
    let boot = bootstrap::from_env().unwrap();
    let me = boot.rank();
    boot.publish(&me.to_le_bytes(), Duration::from_secs(60))
        .unwrap();
    let all: Vec<Vec<u8>> = (0..boot.size())
        .map(|r| boot.lookup(r, Duration::from_secs(60)).unwrap())
        .collect();
    let expected: Vec<Vec<u8>> = (0..boot.size()).map(|r| r.to_le_bytes().to_vec()).collect();
    assert_eq!(all, expected);
    barrier(&*boot);
    touch(&dir.join(format!("rank{me}")));
    wait_for(&dir.join("done"), Duration::from_secs(120));
    barrier(&*boot);
    println!("rank {me} looked up all and passed");
}

fn barrier(boot: &dyn Bootstrap) {
    let ticket = boot.start_barrier().unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while !boot.barrier_done(ticket).unwrap() {
        assert!(Instant::now() < until, "barrier timed out");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The other user: everything it can try, and what it got from each.
fn attacker(dir: &Path) {
    let launcher = loop {
        if let Some(at) = scan_processes().1 {
            break at;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Before any proxy: one idle, one posing as proxy 0 that reports rank 0
    // killed, one posing as rank 0 that arrives at barriers.
    let mut idle = TcpStream::connect(launcher).unwrap();
    let mut proxy = TcpStream::connect(launcher).unwrap();
    forge_hello(&mut proxy, Peer::Proxy(0));
    write_frame(&mut proxy, Frame::Exited { rank: 0, status: 9 });
    let mut rank0 = TcpStream::connect(launcher).unwrap();
    forge_hello(&mut rank0, Peer::Rank(0));
    for _ in 0..5 {
        write_frame(&mut rank0, Frame::Arrive);
    }
    touch(&dir.join("early"));
    for r in 0..RANKS {
        wait_for(&dir.join(format!("rank{r}")), Duration::from_secs(60));
    }
    // The ranks run: what can be read of them and their proxies now.
    let (tokens, _) = scan_processes();
    println!(
        "found {} key-like words in what it could read",
        tokens.len()
    );
    for token in tokens {
        println!("found {token}");
    }
    // The flood.
    raise_fd_limit();
    let flood: Vec<TcpStream> = (0..FLOOD)
        .map_while(|_| TcpStream::connect(launcher).ok())
        .collect();
    println!("flood held {}", flood.len());
    touch(&dir.join("flooding"));
    wait_for(&dir.join("measured"), Duration::from_secs(60));
    drop(flood);
    for (name, stream) in [
        ("idle", &mut idle),
        ("proxy 0", &mut proxy),
        ("rank 0", &mut rank0),
    ] {
        println!(
            "got as {name}: {} bytes past the challenge",
            past_the_challenge(stream)
        );
    }
    std::io::stdout().flush().unwrap();
}

/// What another user reads of every process: hex words as long as a job
/// key from command lines and environments, and the launcher's address
/// (`CATENA_PROXY=` on the remote-exec command lines).
fn scan_processes() -> (Vec<String>, Option<SocketAddr>) {
    let (mut tokens, mut launcher) = (Vec::new(), None);
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        for file in ["cmdline", "environ"] {
            let Ok(bytes) = std::fs::read(entry.path().join(file)) else {
                continue;
            };
            for word in bytes.split(|&b| b == 0 || b == b' ' || b == b'=' || b == b'\'') {
                let word = String::from_utf8_lossy(word);
                if word.len() == 64 && word.bytes().all(|b| b.is_ascii_hexdigit()) {
                    tokens.push(word.to_string());
                }
            }
            let text = String::from_utf8_lossy(&bytes);
            if let Some(at) = text.split("CATENA_PROXY=").nth(1) {
                let at: String = at
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != '\0')
                    .collect();
                launcher = launcher.or(at.trim_matches('\'').parse().ok());
            }
        }
    }
    (tokens, launcher)
}

/// Answers the challenge as `peer` with a proof made up.
fn forge_hello(stream: &mut TcpStream, peer: Peer) {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert!(matches!(Frame::read(stream), Ok(Some(Frame::Challenge(_)))));
    let hello = Frame::Hello {
        peer,
        nonce: [7; NONCE_BYTES],
        proof: [0x5a; 32],
    };
    write_frame(stream, hello);
}

fn write_frame(stream: &mut TcpStream, frame: Frame) {
    // The launcher may have closed it already: what it sends is the point.
    let _ = frame.write(stream);
}

/// Bytes the launcher sent on `stream` after its challenge, until it
/// closed the connection or 2 s passed.
fn past_the_challenge(stream: &mut TcpStream) -> usize {
    stream
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let challenge = 4 + 1 + NONCE_BYTES;
    let mut got = Vec::new();
    let _ = stream.read_to_end(&mut got);
    // The idle connection has not read its challenge yet.
    let already_read = if got.len() >= challenge && got[4] == 1 {
        challenge
    } else {
        0
    };
    got.len() - already_read
}

fn raise_fd_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit to fill, then to read.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(FLOOD as u64 + 64);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
}

/// The attacker's uid and gid: the user `catena-attacker`, made if
/// missing, else `nobody`.
fn attacker_user() -> (u32, u32) {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, ATTACKER]).output().ok()?;
        String::from_utf8(out.stdout).ok()?.trim().parse().ok()
    };
    if id("-u").is_none() {
        let _ = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                ATTACKER,
            ])
            .status();
    }
    match (id("-u"), id("-g")) {
        (Some(uid), Some(gid)) => (uid, gid),
        _ => (65534, 65534),
    }
}

/// A directory both users may write in: an unguessable name, made here
/// (never one found), sticky so that neither removes the other's files.
fn tempdir() -> PathBuf {
    let name = format!("catena-attacks-{:016x}", catena_fabric::os::random_u64());
    let dir = std::env::temp_dir().join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// The job key, from the environment of a rank (which root may read).
fn job_key_of_a_rank() -> String {
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        let env = String::from_utf8_lossy(&env);
        if env.split('\0').any(|v| v == "ATTACK_ROLE=rank") {
            if let Some(key) = env
                .split('\0')
                .find_map(|v| v.strip_prefix("CATENA_JOB_KEY="))
            {
                return key.to_string();
            }
        }
    }
    panic!("no rank with a job key found");
}

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    field(&status, "Threads:")
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn field(text: &str, name: &str) -> usize {
    text.lines()
        .find_map(|l| l.split_once(name).map(|(_, v)| v))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

fn test_args() -> Vec<std::ffi::OsString> {
    [TEST, "--exact", "--nocapture", "--test-threads=1"]
        .iter()
        .map(Into::into)
        .collect()
}

/// Makes `path` exist, never through a link another user planted there
/// (root writes in a directory the attacker may write in) and never
/// truncating what is there.
fn touch(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn wait_for(path: &Path, within: Duration) {
    let until = Instant::now() + within;
    while !path.exists() {
        assert!(Instant::now() < until, "{} never came", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}
