//! The provider conformance suite on the shm provider, with 2, 3 and 8
//! processes started by the launcher.

use catena_fabric::shm::ShmTransport;
use catena_fabric::testing::{killed_peer_case, run_case};
use catena_fabric::{block_on, conformance, Rma, Transport};

macro_rules! conformance_cases {
    ($($name:ident: $check:ident on $ranks:expr;)*) => {$(
        #[test]
        fn $name() {
            run_case(stringify!($name), $ranks, |t| block_on(t, conformance::$check(t)));
        }
    )*};
}

conformance_cases! {
    put_sizes_2: put_sizes on 2;
    put_sizes_3: put_sizes on 3;
    put_sizes_8: put_sizes on 8;
    many_puts_in_flight_2: many_puts_in_flight on 2;
    many_puts_in_flight_3: many_puts_in_flight on 3;
    many_puts_in_flight_8: many_puts_in_flight on 8;
    signals_and_atomics_2: signals_and_atomics on 2;
    signals_and_atomics_3: signals_and_atomics on 3;
    signals_and_atomics_8: signals_and_atomics on 8;
    tagged_messages_2: tagged_messages on 2;
    tagged_messages_3: tagged_messages on 3;
    tagged_messages_8: tagged_messages on 8;
    all_pairs_2: all_pairs on 2;
    all_pairs_3: all_pairs on 3;
    all_pairs_8: all_pairs on 8;
    bad_input_2: bad_input on 2;
    bad_input_3: bad_input on 3;
    bad_input_8: bad_input on 8;
    first_contact_retry_2: first_contact_retry on 2;
    first_contact_retry_3: first_contact_retry on 3;
    dropped_send_breaks_the_stream_2: dropped_send_breaks_the_stream on 2;
}

#[test]
fn peer_killed_2() {
    killed_peer_case::<ShmTransport>("peer_killed_2", 2, &[]);
}

#[test]
fn peer_killed_3() {
    killed_peer_case::<ShmTransport>("peer_killed_3", 3, &[]);
}

#[test]
fn peer_killed_8() {
    killed_peer_case::<ShmTransport>("peer_killed_8", 8, &[]);
}

/// A rank that talks to two partners holds two connections, whatever the
/// job size: transport state is O(partners), never O(N).
#[test]
fn transport_state_grows_with_partners_only() {
    run_case("transport_state_grows_with_partners_only", 8, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let (right, left) = (
                (t.rank() + 1) % t.size(),
                (t.rank() + t.size() - 1) % t.size(),
            );
            t.send(right, 9, 1, b"hello", deadline).await?;
            let got = t.recv(Some(left), 9, 1, deadline).await?;
            assert_eq!((got.source, &got.data[..]), (left, &b"hello"[..]));
            assert_eq!(t.connection_count(), 2);
            Ok(())
        })
    });
}

/// A rank that went straight to `finalize` still serves its peers: they make
/// first contact with it and need ring credit from it (a send of 4 rings).
#[test]
fn finalize_keeps_serving_peers() {
    run_case("finalize_keeps_serving_peers", 3, |t| {
        if t.rank() != 0 {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            let big =
                conformance::pattern(t.rank(), 0, 4 * catena_fabric::eager::DEFAULT_RING_BYTES);
            block_on(t, t.send(0, 9, 2, &big, deadline))?;
        }
        Ok(())
    });
}

/// Putting into 50 short-lived windows of a peer leaves no pile of mappings:
/// the origin keeps only mappings of live windows.
#[test]
fn mappings_of_freed_windows_are_dropped() {
    use catena_fabric::{LocalWindow, RemoteKey, Signal};
    run_case("mappings_of_freed_windows_are_dropped", 2, |t| {
        block_on(t, async {
            let deadline = t.deadline_in(std::time::Duration::from_secs(60));
            for round in 0..50u64 {
                if t.rank() == 1 {
                    let window = t.alloc_window(64)?;
                    t.send(0, 9, 3, window.key().as_bytes(), deadline).await?;
                    t.wait_signal(&window, 0, round + 1, deadline).await?;
                    drop(window);
                    t.send(0, 9, 4, &[], deadline).await?;
                } else {
                    let key = RemoteKey::from_bytes(&t.recv(Some(1), 9, 3, deadline).await?.data)?;
                    t.put_signal(
                        1,
                        &key,
                        8,
                        b"x",
                        Signal {
                            offset: 0,
                            add: round + 1,
                        },
                    )?;
                    t.recv(Some(1), 9, 4, deadline).await?;
                }
            }
            if t.rank() == 0 {
                // Rank 1's control and connection windows, and the last one.
                assert!(
                    t.peer_mapping_count() <= 3,
                    "{} mappings",
                    t.peer_mapping_count()
                );
            }
            Ok(())
        })
    });
}

/// The same suite on processes started by MPICH's `mpiexec`, bootstrapped
/// from MPI instead of the launcher.
#[cfg(feature = "mpi")]
mod under_mpiexec {
    use catena_fabric::conformance::Check;
    use catena_fabric::shm::ShmTransport;
    use catena_fabric::testing::{conformance_case, Starter};

    #[test]
    fn shm_suite_mpiexec_2() {
        conformance_case::<ShmTransport>(
            "under_mpiexec::shm_suite_mpiexec_2",
            2,
            Starter::Mpiexec,
            &[],
            Check::Suite,
        );
    }

    #[test]
    fn shm_suite_mpiexec_4() {
        conformance_case::<ShmTransport>(
            "under_mpiexec::shm_suite_mpiexec_4",
            4,
            Starter::Mpiexec,
            &[],
            Check::Suite,
        );
    }
}
