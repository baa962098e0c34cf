//! The ring shift: every rank sends to its right neighbour and receives from
//! its left one (`MPI_Sendrecv` around a ring). The building block of ring
//! exchanges and the hand-off benchmark.

use catena_fabric::{ContextId, Message, Rank, Result, Tag, Time, Transport};

/// Sends `data` to rank + `distance` and returns the message from
/// rank - `distance` (ranks taken modulo the job size).
pub async fn shift<T: Transport>(
    t: &T,
    distance: Rank,
    context: ContextId,
    tag: Tag,
    data: &[u8],
    deadline: Time,
) -> Result<Message> {
    let (rank, size) = (t.rank(), t.size());
    let distance = distance % size;
    t.send((rank + distance) % size, context, tag, data, deadline)
        .await?;
    t.recv(
        Some((rank + size - distance) % size),
        context,
        tag,
        deadline,
    )
    .await
}
