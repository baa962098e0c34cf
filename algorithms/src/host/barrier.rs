//! Barrier inside a host by dissemination: in round i each member stores
//! the call's number into the flag of the member 2^i above it and waits
//! for its own flag from the member 2^i below; ceil(log2 n) crossings.
//! Flags only grow, so they need no reset and no flow control.

use catena_fabric::{wait_until, HostMemory, Time};

use super::Team;
use crate::Result;

/// Returns once every member has entered call `seq`.
pub(crate) async fn barrier<T: HostMemory>(
    team: &Team<'_, T>,
    seq: u64,
    deadline: Time,
) -> Result<()> {
    let t = team.t();
    let (me, n) = (team.me(), team.size());
    let own = team.peer(me)?;
    let (mut distance, mut round) = (1u32, 0u32);
    while distance < n {
        let to = (me + distance) % n;
        let flag = team.layout().barrier(round);
        t.host_store(team.peer(to)?, team.at(to, flag), seq)?;
        let mine = team.at(me, flag);
        wait_until(t, deadline, "a host barrier", || {
            Ok((t.host_load(own, mine)? >= seq).then_some(()))
        })
        .await?;
        distance *= 2;
        round += 1;
    }
    team.all_entered(seq);
    Ok(())
}
