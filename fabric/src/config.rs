//! Every `CATENA_*` environment variable the transport reads, in one place,
//! and how numeric ones are parsed: a malformed value is a typed error
//! naming the variable, never a silent default.

use crate::{Error, Result};

/// Job id the launcher gives its ranks.
pub const ENV_JOB: &str = "CATENA_JOB";
/// The descriptor by which the launcher's ranks inherit the job segment.
pub const ENV_JOB_FD: &str = "CATENA_JOB_FD";
/// This process's rank, from the launcher.
pub const ENV_RANK: &str = "CATENA_RANK";
/// The job's rank count, from the launcher.
pub const ENV_SIZE: &str = "CATENA_SIZE";
/// Ranks the launcher started on this machine (decides spinning vs sleeping).
pub const ENV_LOCAL_SIZE: &str = "CATENA_LOCAL_SIZE";
/// The launcher's bootstrap address (`IP:port`), given to the ranks of a
/// job that spans hosts instead of a job segment.
pub const ENV_LAUNCHER: &str = "CATENA_LAUNCHER";
/// The job key (hex) a rank of a job that spans hosts proves at the
/// launcher's socket; its proxy reads it from standard input instead.
pub const ENV_JOB_KEY: &str = "CATENA_JOB_KEY";
/// Set in the process the launcher starts on each host of a job that spans
/// hosts: the launcher's address, which makes the process serve as the
/// host's proxy (see `catena_run::launch::serve_as_proxy`).
pub const ENV_PROXY: &str = "CATENA_PROXY";
/// The index of a proxy's host in the launcher's host list.
pub const ENV_PROXY_HOST: &str = "CATENA_PROXY_HOST";
/// Which bootstrap to use: `auto` (the default), `launcher`, `pmi`, `mpi`.
pub const ENV_BOOTSTRAP: &str = "CATENA_BOOTSTRAP";
/// Job id of a job started by `mpiexec` (rank 0 makes one up if unset).
pub const ENV_MPI_JOB: &str = "CATENA_MPI_JOB";
/// Core this rank pins itself to (`--pin`).
pub const ENV_PIN_CORE: &str = "CATENA_PIN_CORE";
/// How long a waiting rank re-polls before it parks, in microseconds.
pub const ENV_SPIN_US: &str = "CATENA_SPIN_US";
/// Size of each per-peer eager message ring, in bytes.
pub const ENV_RING_BYTES: &str = "CATENA_EAGER_RING_BYTES";
/// Per peer, the bytes of unreceived eager messages held before that peer's
/// sends wait for the receiver.
pub const ENV_INBOX_BYTES: &str = "CATENA_EAGER_INBOX_BYTES";
/// Messages of at least this many bytes go by rendezvous (their payload
/// straight into the receiver's bulk window) rather than through the ring.
pub const ENV_RENDEZVOUS_BYTES: &str = "CATENA_EAGER_RENDEZVOUS_BYTES";
/// Size of the bulk ring a receiver makes for each peer that sends it
/// rendezvous messages, in bytes.
pub const ENV_BULK_BYTES: &str = "CATENA_EAGER_BULK_BYTES";
/// Peers' entries a rank keeps before it forgets the one it learned first
/// (each is asked of the bootstrap again when needed).
pub const ENV_DIRECTORY_ENTRIES: &str = "CATENA_DIRECTORY_ENTRIES";
/// Bytes of each process's host arena, the memory its host peers share
/// (virtual: pages are made where regions are used).
pub const ENV_HOST_ARENA_BYTES: &str = "CATENA_HOST_ARENA_BYTES";
/// The radix of the trees a host's bcast and reduce take (see
/// [`HostTuning`]).
pub const ENV_HOST_TREE_RADIX: &str = "CATENA_HOST_TREE_RADIX";
/// Up to this many members a host's short allreduce exchanges every value
/// with every member.
pub const ENV_HOST_EXCHANGE_MAX: &str = "CATENA_HOST_EXCHANGE_MAX";
/// The radix of a host's short allreduce's trees above
/// `CATENA_HOST_EXCHANGE_MAX` members.
pub const ENV_HOST_ALLREDUCE_RADIX: &str = "CATENA_HOST_ALLREDUCE_RADIX";
/// From this many bytes a host collective's long data is copied straight
/// out of the writer's own buffer (one copy, where the system allows it),
/// not through its cells; `off` copies through cells always.
pub const ENV_HOST_SINGLE_COPY_MIN: &str = "CATENA_HOST_SINGLE_COPY_MIN";
/// Up to this many bytes (see `CATENA_HOST_SINGLE_COPY_MIN`).
pub const ENV_HOST_SINGLE_COPY_MAX: &str = "CATENA_HOST_SINGLE_COPY_MAX";
/// `on` (the default): between those bounds a writer learns which way,
/// one copy or cells, is faster (from its readers' reports, or where every
/// member writes and reads, from its own calls' times); `off`: one copy
/// always.
pub const ENV_HOST_SINGLE_COPY_LEARN: &str = "CATENA_HOST_SINGLE_COPY_LEARN";
/// `off`, `on` or a core number: a thread that drives ofi/ucx progress.
pub const ENV_PROGRESS_THREAD: &str = "CATENA_PROGRESS_THREAD";
/// Names the libfabric provider (`shm`, `tcp;ofi_rxm`, `verbs;ofi_rxm`, ...).
pub const ENV_OFI_PROVIDER: &str = "CATENA_OFI_PROVIDER";
/// Transports for catena's own UCP context only, overriding `UCX_TLS`: under
/// `mpiexec`, MPICH's UCP context in the same process reads `UCX_TLS` too.
pub const ENV_UCX_TLS: &str = "CATENA_UCX_TLS";
/// UCP endpoint error handling: `peer`, `none` or `auto`.
pub const ENV_UCX_ERR_MODE: &str = "CATENA_UCX_ERR_MODE";

/// The value of a numeric setting, if set.
pub fn env_number(name: &str) -> Result<Option<usize>> {
    optional(name)
}

/// The value of an optional setting, if set; a malformed one is an error.
pub fn optional<T: std::str::FromStr>(name: &str) -> Result<Option<T>> {
    parse(name, std::env::var(name).ok().as_deref())
}

/// The value of a required setting of any parseable type.
pub fn required<T: std::str::FromStr>(name: &str) -> Result<T> {
    optional(name)?.ok_or_else(|| Error::Bootstrap(format!("{name} is not set")))
}

/// `raw`, the value of setting `name` if set, parsed.
fn parse<T: std::str::FromStr>(name: &str, raw: Option<&str>) -> Result<Option<T>> {
    match raw {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| Error::Bootstrap(format!("{name}={v:?} is not a number"))),
    }
}

/// The sizes `CATENA_EAGER_RING_BYTES` may ask for: room for a frame
/// header, and a connection window per partner that memory can hold.
pub const RING_BYTES: std::ops::RangeInclusive<usize> = 16..=1 << 30;

/// The eager ring size `CATENA_EAGER_RING_BYTES` asks for, else `default`.
pub fn ring_bytes(default: usize) -> Result<usize> {
    ring_size(env_number(ENV_RING_BYTES)?.unwrap_or(default))
}

/// `Bootstrap` unless `bytes` is in [`RING_BYTES`] (a size near
/// `usize::MAX` would overflow the connection window's length).
fn ring_size(bytes: usize) -> Result<usize> {
    if RING_BYTES.contains(&bytes) {
        return Ok(bytes);
    }
    Err(Error::Bootstrap(format!(
        "{ENV_RING_BYTES}={bytes}: a ring is {} to {} bytes",
        RING_BYTES.start(),
        RING_BYTES.end()
    )))
}

/// The per-peer eager inbox bound `CATENA_EAGER_INBOX_BYTES` asks for, else
/// `default`. Any size is sound (0 still lets in one unreceived message
/// per peer).
pub fn inbox_bytes(default: usize) -> Result<usize> {
    Ok(env_number(ENV_INBOX_BYTES)?.unwrap_or(default))
}

/// The sizes `CATENA_EAGER_BULK_BYTES` may ask for.
pub const BULK_BYTES: std::ops::RangeInclusive<usize> = 1..=1 << 30;

/// The rendezvous threshold `CATENA_EAGER_RENDEZVOUS_BYTES` and bulk ring
/// size `CATENA_EAGER_BULK_BYTES` ask for, else the defaults. Any threshold
/// is sound (a message below it goes through the ring, in pieces if it
/// must); a bulk ring is [`BULK_BYTES`].
pub fn rendezvous(default_threshold: usize, default_bulk: usize) -> Result<(usize, usize)> {
    let threshold = env_number(ENV_RENDEZVOUS_BYTES)?.unwrap_or(default_threshold);
    let bulk = env_number(ENV_BULK_BYTES)?.unwrap_or(default_bulk);
    if !BULK_BYTES.contains(&bulk) {
        return Err(Error::Bootstrap(format!(
            "{ENV_BULK_BYTES}={bulk}: a bulk ring is {} to {} bytes",
            BULK_BYTES.start(),
            BULK_BYTES.end()
        )));
    }
    Ok((threshold, bulk))
}

/// Which algorithm a host's collectives take for short values (those that
/// fit a mailbox slot), by the team's size, and how they move long ones. The defaults were measured on
/// 16 cores of one socket (an Intel Xeon): a member that posts to several
/// others pays for each post, so bcast and reduce, measured call after
/// call, go fastest along binary trees; an allreduce waits for its result,
/// so it exchanges all values among up to 8 members and takes shallower
/// trees above. And from which length long values are copied once, out of
/// their writer's buffer, rather than twice, through its cells: measured
/// on two cores of that Xeon (`catena-bench collectives -n 2`, bcast),
/// one copy wins from 64 KiB (5.3 to 7.2 µs where cells take 11) to 8 MiB,
/// cells from 16 MiB. On another machine (two cores of an AMD EPYC VM)
/// cells won at every length from 64 KiB, so between the bounds a writer
/// learns which way is faster from the calls it makes (see
/// `single_copy_learn`).
/// The variables exist to measure them again elsewhere.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostTuning {
    /// The radix of bcast's and reduce's trees (`CATENA_HOST_TREE_RADIX`;
    /// a radix of at least the team's size sends to every member directly).
    pub tree_radix: u32,
    /// Up to this many members a short allreduce exchanges every value
    /// with every member (`CATENA_HOST_EXCHANGE_MAX`).
    pub exchange_max: u32,
    /// The radix of a short allreduce's trees (up to member 0 and down)
    /// above `exchange_max` members (`CATENA_HOST_ALLREDUCE_RADIX`).
    pub allreduce_radix: u32,
    /// From this many bytes long data is copied once, straight out of its
    /// writer's buffer, where the provider offers that
    /// (`CATENA_HOST_SINGLE_COPY_MIN`; `usize::MAX`, `off`, never) ...
    pub single_copy_min: usize,
    /// ... up to this many (`CATENA_HOST_SINGLE_COPY_MAX`) where the
    /// writer would otherwise wait (bcast, gather): a longer one streams
    /// faster through cells, where writer and reader copy in parallel,
    /// each a half of the memory traffic. Where every member copies (an
    /// allgather, a scatter whose root copies its own piece meanwhile, the
    /// slices of reduce and allreduce) one copy is taken at any length
    /// from the minimum.
    pub single_copy_max: usize,
    /// Whether, between those bounds, a host collective's writer learns
    /// which way is faster, from its readers' reports (bcast, gather,
    /// scatter) or its own calls' times (allgather, reductions)
    /// (`CATENA_HOST_SINGLE_COPY_LEARN`, `on` or `off`); a single copy
    /// always where it does not.
    pub single_copy_learn: bool,
}

impl Default for HostTuning {
    fn default() -> HostTuning {
        HostTuning {
            tree_radix: 2,
            exchange_max: 8,
            allreduce_radix: 4,
            single_copy_min: 64 << 10,
            single_copy_max: 8 << 20,
            single_copy_learn: true,
        }
    }
}

/// The radixes `CATENA_HOST_TREE_RADIX` and `CATENA_HOST_ALLREDUCE_RADIX`
/// may ask for.
pub const HOST_RADIX: std::ops::RangeInclusive<u32> = 2..=1024;

/// The host tuning the `CATENA_HOST_*` variables ask for, else the
/// defaults.
pub fn host_tuning() -> Result<HostTuning> {
    let default = HostTuning::default();
    Ok(HostTuning {
        tree_radix: host_radix(ENV_HOST_TREE_RADIX, optional(ENV_HOST_TREE_RADIX)?)?
            .unwrap_or(default.tree_radix),
        exchange_max: optional(ENV_HOST_EXCHANGE_MAX)?.unwrap_or(default.exchange_max),
        allreduce_radix: host_radix(
            ENV_HOST_ALLREDUCE_RADIX,
            optional(ENV_HOST_ALLREDUCE_RADIX)?,
        )?
        .unwrap_or(default.allreduce_radix),
        single_copy_min: single_copy_min(std::env::var(ENV_HOST_SINGLE_COPY_MIN).ok().as_deref())?
            .unwrap_or(default.single_copy_min),
        single_copy_max: optional(ENV_HOST_SINGLE_COPY_MAX)?.unwrap_or(default.single_copy_max),
        single_copy_learn: on_off(
            ENV_HOST_SINGLE_COPY_LEARN,
            std::env::var(ENV_HOST_SINGLE_COPY_LEARN).ok().as_deref(),
        )?
        .unwrap_or(default.single_copy_learn),
    })
}

/// `raw`, the value of switch `name` if set: `on` or `off`.
fn on_off(name: &str, raw: Option<&str>) -> Result<Option<bool>> {
    match raw.map(str::trim) {
        None => Ok(None),
        Some("on") => Ok(Some(true)),
        Some("off") => Ok(Some(false)),
        Some(v) => Err(Error::Bootstrap(format!(
            "{name}={v:?} is neither on nor off"
        ))),
    }
}

/// `CATENA_HOST_SINGLE_COPY_MIN`'s value `raw`, if set: bytes, or `off`
/// (never: `usize::MAX`).
fn single_copy_min(raw: Option<&str>) -> Result<Option<usize>> {
    match raw.map(str::trim) {
        Some("off") => Ok(Some(usize::MAX)),
        _ => parse(ENV_HOST_SINGLE_COPY_MIN, raw),
    }
}

/// `Bootstrap` unless `radix`, the value of `name` if set, is in
/// [`HOST_RADIX`] (any `exchange_max` is sound: a larger team takes trees).
fn host_radix(name: &str, radix: Option<u32>) -> Result<Option<u32>> {
    match radix {
        Some(radix) if !HOST_RADIX.contains(&radix) => Err(Error::Bootstrap(format!(
            "{name}={radix}: a radix is {} to {}",
            HOST_RADIX.start(),
            HOST_RADIX.end()
        ))),
        _ => Ok(radix),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Parses values directly: setting the environment from a test races
    // with every other test thread that reads it.
    #[test]
    fn a_malformed_number_names_the_variable() {
        let err = parse::<usize>(ENV_RING_BYTES, Some("12x"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(ENV_RING_BYTES) && err.contains("12x"), "{err}");
        let huge = parse::<usize>(ENV_RING_BYTES, Some("99999999999999999999999"));
        assert!(huge.is_err());
        assert_eq!(
            parse::<usize>(ENV_RING_BYTES, Some(" 42 ")).unwrap(),
            Some(42)
        );
        assert_eq!(parse::<usize>(ENV_RING_BYTES, None).unwrap(), None);
    }

    #[test]
    fn ring_sizes_outside_the_range_are_refused() {
        for bad in [0, 15, (1 << 30) + 1, usize::MAX] {
            let err = ring_size(bad).unwrap_err().to_string();
            assert!(err.contains(ENV_RING_BYTES), "{err}");
        }
        for good in [16, 2048, 1 << 30] {
            assert_eq!(ring_size(good).unwrap(), good);
        }
    }

    #[test]
    fn single_copies_start_at_a_number_of_bytes_or_never() {
        assert_eq!(single_copy_min(None).unwrap(), None);
        assert_eq!(single_copy_min(Some(" off ")).unwrap(), Some(usize::MAX));
        assert_eq!(single_copy_min(Some("4096")).unwrap(), Some(4096));
        let err = single_copy_min(Some("on")).unwrap_err().to_string();
        assert!(err.contains(ENV_HOST_SINGLE_COPY_MIN), "{err}");
    }

    #[test]
    fn switches_are_on_or_off() {
        let name = ENV_HOST_SINGLE_COPY_LEARN;
        assert_eq!(on_off(name, None).unwrap(), None);
        assert_eq!(on_off(name, Some(" on")).unwrap(), Some(true));
        assert_eq!(on_off(name, Some("off")).unwrap(), Some(false));
        let err = on_off(name, Some("1")).unwrap_err().to_string();
        assert!(err.contains(name), "{err}");
    }

    #[test]
    fn host_radixes_outside_the_range_are_refused() {
        for radix in [0, 1, 1025, u32::MAX] {
            let err = host_radix(ENV_HOST_TREE_RADIX, Some(radix))
                .unwrap_err()
                .to_string();
            assert!(err.contains(ENV_HOST_TREE_RADIX), "{err}");
        }
        for radix in [Some(2), Some(4), Some(1024), None] {
            assert_eq!(host_radix(ENV_HOST_ALLREDUCE_RADIX, radix).unwrap(), radix);
        }
    }
}
