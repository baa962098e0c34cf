//! The fabric libraries' own benchmark tools, run in the same session as
//! `catena-bench put` so that its figures have references: `ucx_perftest`
//! (`ucp_put_lat`, `ucp_put_bw`) and libfabric's `fi_pingpong`, which
//! measures send/recv (not RMA) and is labelled as such.

use std::process::{Command, Stdio};
use std::time::Duration;

/// One server + client run of a tool; the client's stdout.
fn pair(
    program: &str,
    env: &[(&str, &str)],
    server: &[String],
    client: &[String],
) -> Option<String> {
    let mut srv = Command::new(program)
        .args(server)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    std::thread::sleep(Duration::from_millis(500));
    let out = Command::new("timeout")
        .arg("120")
        .arg(program)
        .args(client)
        .envs(env.iter().copied())
        .stderr(Stdio::null())
        .output();
    let _ = srv.kill();
    let _ = srv.wait();
    let out = out.ok().filter(|o| o.status.success())?;
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn port() -> u16 {
    20_000 + (std::process::id() % 20_000) as u16
}

#[cfg(feature = "ucx")]
/// `ucx_perftest -t test -s size` with `env` (its `UCX_TLS`), server on
/// core 1 and client on core 0; the final CSV line's fields.
fn ucx_perftest(
    test: &str,
    size: usize,
    iterations: usize,
    env: &[(&str, &str)],
) -> Option<Vec<f64>> {
    let common = |core: &str| -> Vec<String> {
        [
            "-t",
            test,
            "-s",
            &size.to_string(),
            "-n",
            &iterations.to_string(),
            "-p",
            &port().to_string(),
            "-c",
            core,
            "-f",
            "-v",
        ]
        .map(String::from)
        .to_vec()
    };
    let mut client = vec!["localhost".to_string()];
    client.extend(common("0"));
    let out = pair("ucx_perftest", env, &common("1"), &client)?;
    // CSV: iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,...
    let last = out
        .lines()
        .rev()
        .find(|l| l.starts_with(|c: char| c.is_ascii_digit()))?;
    last.split(',').map(|f| f.trim().parse().ok()).collect()
}

#[cfg(feature = "ucx")]
/// Median one-way latency of an 8 B `ucp_put_lat`, in ns.
pub fn ucp_put_lat(env: &[(&str, &str)]) -> Option<f64> {
    ucx_perftest("ucp_put_lat", 8, 100_000, env).map(|f| f[1] * 1e3)
}

#[cfg(feature = "ucx")]
/// `ucp_put_bw` bandwidth for `size`-byte puts, in GB/s.
pub fn ucp_put_bw(size: usize, env: &[(&str, &str)]) -> Option<f64> {
    let iterations = ((1usize << 30) / size).clamp(16, 100_000);
    ucx_perftest("ucp_put_bw", size, iterations, env).map(|f| f[5] * (1 << 20) as f64 / 1e9)
}

#[cfg(feature = "ofi")]
/// `fi_pingpong` (send/recv on an RDM endpoint) 8 B one-way latency, in ns.
pub fn fi_pingpong(provider: &str, env: &[(&str, &str)]) -> Option<f64> {
    let port = port().to_string();
    let server: Vec<String> = [
        "-p", provider, "-e", "rdm", "-I", "20000", "-S", "8", "-B", &port,
    ]
    .map(String::from)
    .to_vec();
    let mut client = server.clone();
    client.truncate(8);
    client.extend(["-P".into(), port.clone(), "127.0.0.1".into()]);
    let out = pair("fi_pingpong", env, &server, &client)?;
    // bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
    let row = out.lines().rev().find(|l| l.starts_with('8'))?;
    row.split_whitespace()
        .nth(6)?
        .parse::<f64>()
        .ok()
        .map(|us| us * 1e3)
}
