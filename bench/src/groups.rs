//! `catena-bench groups`: the communicator demo. N processes split the
//! world by where they run (host name and CPU socket, a string color), by a
//! computed color with reordering, with half of them staying out, and the
//! ranks divisible by 4 create a group among themselves alone; rank 0
//! prints every process's new communicators.

use std::time::Duration;

use std::cmp::Reverse;

use catena_algorithms::groupmap::RankRange;
use catena_algorithms::prelude::*;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Split algorithm (AllgatherGroup, GatherScatter, `Cheng<M>`, Bitonic, Radix, Hash, Hash64, Auto).
    #[arg(long, default_value = "Auto")]
    algorithm: Algorithm,
}

const TIMEOUT: Duration = Duration::from_secs(60);

/// This process's host name and the socket of the CPU it runs on.
fn placement() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "unknown-host".into(), |h| h.trim().to_string());
    // SAFETY: sched_getcpu has no preconditions.
    let cpu = unsafe { libc::sched_getcpu() };
    let socket = std::fs::read_to_string(format!(
        "/sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"
    ))
    .map_or_else(|_| "?".into(), |s| s.trim().to_string());
    format!("{host}/socket{socket}")
}

fn describe<T: Transport>(group: &Option<Comm<'_, T>>) -> String {
    match group {
        Some(c) => {
            let at = |a: Option<u32>| a.map_or("-".into(), |a| a.to_string());
            format!(
                "rank {} of {} (left {}, right {}, context {:#x})",
                c.rank(),
                c.size(),
                at(c.chain().left()),
                at(c.chain().right()),
                c.context()
            )
        }
        None => "not a member".into(),
    }
}

pub fn main(args: &Args) -> crate::Outcome {
    let t = catena_fabric::init()?;
    let world = Comm::world(&t)
        .with_timeout(TIMEOUT)
        .with_algorithm(args.algorithm);
    let (rank, size) = (world.rank(), world.size());
    let where_ = placement();
    let by_place = world.split_by_color(Some(where_.clone()))?;
    // Three colors, each group in descending world rank.
    let by_residue = world.split(Some(format!("rank mod 3 = {}", rank % 3)), Reverse(rank))?;
    let evens = world.split_by_color((rank % 2 == 0).then_some(()))?;
    // Only the ranks divisible by 4 make this one; the others take no part.
    let fours = GroupMap::from_ranges(
        size,
        &[RankRange::new(0, (size - 1) / 4 * 4, 4)],
        Strategy::Auto,
    )?;
    let by_four = match fours.rank(rank)? {
        Some(_) => world.create_group(fours, 0)?,
        None => None,
    };
    let line = format!(
        "rank {rank:>3} on {where_}\n    by host/socket   {}\n    by rank mod 3    {}\n    evens only       {}\n    created (4 | r)  {}",
        describe(&by_place),
        describe(&by_residue),
        describe(&evens),
        describe(&by_four),
    );
    let lines = world.gather(0, &line)?;
    if let Some(lines) = lines {
        println!(
            "catena-bench groups: {size} processes, split with {} (left/right are world ranks)",
            args.algorithm
        );
        for line in lines {
            println!("{line}");
        }
    }
    drop((by_place, by_residue, evens, by_four, world));
    t.finalize(TIMEOUT)?;
    Ok(0)
}
