//! A process holds the entries (addresses, key secrets) of the peers it
//! contacts or that contact it, and no others, under every starter: a rank
//! of 16 that sends to its right neighbour, receives from its left and
//! passes a dissemination barrier holds at most those of its neighbours and
//! barrier partners (7 of its 15 peers), at every step (a peer ahead of it
//! may already have reached it in the barrier).

use std::collections::BTreeSet;

use catena_fabric::{block_on, ContextId, Error, Provider, Rank, Result, Tag};
use catena_testkit::conformance::barrier;
use catena_testkit::{run_case_on, Starter};

const RANKS: u32 = 16;
const CTX: ContextId = 0xD1;
const TAG_RING: Tag = 77;

/// The ring, then the barrier, checking what the directory holds after each.
fn ring<P: Provider>(t: &P) -> Result<()> {
    let (rank, size) = (t.rank(), t.size());
    let (left, right) = ((rank + size - 1) % size, (rank + 1) % size);
    let mut partners = BTreeSet::from([left, right]);
    let mut distance = 1;
    while distance < size {
        partners.insert((rank + distance) % size);
        partners.insert((rank + size - distance) % size);
        distance *= 2;
    }
    let held = |step: &str| -> Result<()> {
        let allowed = &partners;
        let held = t.job().directory_ranks();
        let strangers: Vec<Rank> = held
            .iter()
            .filter(|r| !allowed.contains(r))
            .copied()
            .collect();
        if !strangers.is_empty() {
            return Err(Error::Bootstrap(format!(
                "rank {rank} holds the entries of {strangers:?} after {step}, \
                 which it never contacted (it holds {held:?})"
            )));
        }
        Ok(())
    };
    held("start-up")?;
    let deadline = t.deadline_in(std::time::Duration::from_secs(60));
    block_on(
        t,
        t.send(right, CTX, TAG_RING, &rank.to_le_bytes(), deadline),
    )?;
    let got = block_on(t, t.recv(Some(left), CTX, TAG_RING, deadline))?;
    if got.data[..] != left.to_le_bytes() {
        return Err(Error::Bootstrap(format!(
            "rank {rank} got {:?} from its left",
            got.data
        )));
    }
    held("the ring")?;
    if !t.job().directory_ranks().contains(&right) {
        return Err(Error::Bootstrap(format!(
            "rank {rank} sent to {right} without its entry"
        )));
    }
    block_on(t, barrier(t))?;
    held("the barrier")?;
    if rank == 0 {
        let usage = t.job().directory_use();
        println!(
            "rank 0 of {size}: {} peers' entries, {} bytes, {} lookups",
            usage.entries, usage.bytes, usage.lookups
        );
    }
    Ok(())
}

#[test]
fn under_the_launcher_a_rank_holds_only_its_partners() {
    run_case_on::<catena_fabric::shm::ShmTransport>(
        "under_the_launcher_a_rank_holds_only_its_partners",
        RANKS,
        Starter::Launcher,
        &[],
        ring,
    );
}

/// Across two fake hosts the launcher answers each lookup.
#[cfg(feature = "ucx")]
#[test]
fn across_hosts_a_rank_holds_only_its_partners() {
    run_case_on::<catena_fabric::ucx::UcxTransport>(
        "across_hosts_a_rank_holds_only_its_partners",
        8,
        Starter::LauncherOnHosts(2),
        catena_testkit::UCX_TCP,
        ring,
    );
}

/// Hydra's PMI-1 key-value space answers each lookup.
#[test]
fn under_mpiexec_by_pmi_a_rank_holds_only_its_partners() {
    run_case_on::<catena_fabric::shm::ShmTransport>(
        "under_mpiexec_by_pmi_a_rank_holds_only_its_partners",
        RANKS,
        Starter::MpiexecByPmi,
        &[],
        ring,
    );
}

/// PMIx's direct modex answers each lookup.
#[cfg(feature = "pmix")]
#[test]
fn under_srun_pmix_a_rank_holds_only_its_partners() {
    run_case_on::<catena_fabric::shm::ShmTransport>(
        "under_srun_pmix_a_rank_holds_only_its_partners",
        RANKS,
        Starter::Srun("pmix"),
        &[],
        ring,
    );
}

/// Slurm's PMI-2 key-value space answers each lookup.
#[cfg(feature = "pmix")]
#[test]
fn under_srun_pmi2_a_rank_holds_only_its_partners() {
    run_case_on::<catena_fabric::shm::ShmTransport>(
        "under_srun_pmi2_a_rank_holds_only_its_partners",
        RANKS,
        Starter::Srun("pmi2"),
        &[],
        ring,
    );
}
