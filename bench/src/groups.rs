//! `catena-bench groups`: the split demo. N processes split themselves by
//! where they run (host name and CPU socket, a string color), then by a
//! computed color with reordering, then with half of them staying out, and
//! rank 0 prints every process's new group.

use std::time::Duration;

use catena_algorithms::{gather, split, Algorithm, Chain, Color, Key, Split};
use catena_fabric::{block_on, Provider, Rma};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub job: crate::JobArgs,
    /// Split algorithm (AllgatherGroup, GatherScatter, `Cheng<M>`, Bitonic, Radix, Hash, Hash64, Auto).
    #[arg(long, default_value = "Auto")]
    algorithm: Algorithm,
}

const CTX: u64 = 0xBE_0004;
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

fn describe(split: &Split) -> String {
    match split {
        Split::Member(g) => {
            let at = |a: Option<u32>| a.map_or("-".into(), |a| a.to_string());
            format!(
                "group {}/{}: rank {} of {} (left {}, right {})",
                g.id,
                g.count,
                g.chain.rank(),
                g.chain.size(),
                at(g.chain.left()),
                at(g.chain.right())
            )
        }
        Split::NotMember { groups } => format!("not a member ({groups} groups made)"),
    }
}

pub fn main(args: &Args) -> crate::Outcome {
    let t = catena_fabric::init()?;
    let world = Chain::world(&t, CTX);
    let (rank, size) = (t.rank(), t.size());
    let where_ = placement();
    let lines = block_on(&t, async {
        let deadline = t.deadline_in(TIMEOUT);
        let by_place = split(
            &t,
            &world,
            Color::Is(where_.clone()),
            Key::<u32>::ParentOrder,
            args.algorithm,
            deadline,
        )
        .await?;
        // Three colors, each group in descending world rank.
        let by_residue = split(
            &t,
            &world,
            Color::Is(format!("rank mod 3 = {}", rank % 3)),
            Key::Is(std::cmp::Reverse(rank)),
            args.algorithm,
            deadline,
        )
        .await?;
        let evens = split(
            &t,
            &world,
            if rank % 2 == 0 {
                Color::<()>::Everyone
            } else {
                Color::NotMember
            },
            Key::<u32>::ParentOrder,
            args.algorithm,
            deadline,
        )
        .await?;
        let line = format!(
            "rank {rank:>3} on {where_}\n    by host/socket   {}\n    by rank mod 3    {}\n    evens only       {}",
            describe(&by_place),
            describe(&by_residue),
            describe(&evens)
        );
        gather(&t, &world, 0, &line, deadline).await
    })?;
    if let Some(lines) = lines {
        println!(
            "catena-bench groups: {size} processes, split with {} (left/right are world ranks)",
            args.algorithm
        );
        for line in lines {
            println!("{line}");
        }
    }
    t.finalize(TIMEOUT)?;
    Ok(0)
}
