//! The provider conformance suite on the shm provider, with 2, 3 and 8
//! processes started by the launcher (and 2 and 4 by `mpiexec` with the
//! `mpi` feature), plus the shm provider's own promises.

use catena_fabric::shm::ShmTransport;
use catena_fabric::testing::run_case;
use catena_fabric::{block_on, conformance, Rma, Transport};

const NO_ENV: &[(&str, &str)] = &[];

catena_fabric::conformance_tests! {
    provider: ShmTransport;
    shm: NO_ENV, ranks [2, 3, 8], mpiexec [2, 4];
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
