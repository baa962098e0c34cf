//! The ring shift on real processes: every rank gets exactly its left
//! neighbour's bytes, for several distances and rounds.

use std::time::Duration;

use catena_algorithms::chain::shift;
use catena_fabric::{block_on, Rma};
use catena_testkit::{run_case, test_name};

fn payload(rank: u32, round: u32) -> Vec<u8> {
    format!("rank {rank} round {round}").into_bytes()
}

fn shifts_deliver_the_left_neighbours_bytes(case: &str, ranks: u32) {
    run_case(&test_name(module_path!(), case), ranks, |t| {
        block_on(t, async {
            let size = t.size();
            for round in 0..50 {
                let distance = round % (size + 1);
                let deadline = t.deadline_in(Duration::from_secs(60));
                let got = shift(t, distance, 7, 1, &payload(t.rank(), round), deadline).await?;
                let from = (t.rank() + size - distance % size) % size;
                assert_eq!((got.source, got.data), (from, payload(from, round)));
            }
            Ok(())
        })
    });
}

#[test]
fn shift_on_1() {
    shifts_deliver_the_left_neighbours_bytes("shift_on_1", 1);
}

#[test]
fn shift_on_3() {
    shifts_deliver_the_left_neighbours_bytes("shift_on_3", 3);
}

#[test]
fn shift_on_8() {
    shifts_deliver_the_left_neighbours_bytes("shift_on_8", 8);
}
