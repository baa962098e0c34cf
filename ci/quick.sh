#!/usr/bin/env bash
# The edit loop's tests: every crate's unit tests, the simulator's own
# (the eager protocol's races in virtual time) and the algorithms' tests
# in the simulator (the test names holding `sim`); default features, no
# fabric library, launcher or cluster needed. About 45 s on 2 cores once
# built (under 2 minutes is its bound). The whole suite, which CI runs, is
# ci/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export CATENA_FUZZ_SECONDS=${CATENA_FUZZ_SECONDS:-5}
cargo test --workspace --lib --quiet
cargo test -p catena-sim --tests --quiet
cargo test -p catena-algorithms --tests --quiet sim
