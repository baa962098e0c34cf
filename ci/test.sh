#!/usr/bin/env bash
# The whole test suite, as CI runs it: installs the Debian packages it needs
# when they are missing, then formatting, clippy, docs (no warnings), every
# test with all features (each fuzz target for CATENA_FUZZ_SECONDS, 20 s
# here), the examples as 8-process jobs under catena's launcher and under
# the cluster launchers (Hydra's mpiexec, a single-node Slurm's srun with
# PMIx and PMI-2, Open MPI's mpirun), the Open MPI build of the interposer
# (ci/openmpi-interposer.sh), the fault-injection script
# ci/faults.sh, and finally checks that nothing of catena's was left in
# /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/.."

# A C toolchain and libc headers for linking; libfabric, UCX and MPICH with
# their headers, pkg-config and libclang for the bindgen -sys crates (features
# ofi, ucx, mpi, pmix); mpich for mpiexec; the libraries' own tools (fi_info,
# fi_pingpong, ucx_info, ucx_perftest) for diagnostics and catena-bench;
# OpenPMIx, Slurm with munge, and Open MPI as the cluster launchers.
packages=(gcc libc6-dev pkg-config clang libclang-dev libfabric-dev libfabric-bin
  libucx-dev ucx-utils libmpich-dev mpich fonts-dejavu-core libpmix-dev
  slurm-wlm munge openmpi-bin libopenmpi-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "ci/test.sh: these Debian packages are missing and installing them needs root: ${missing[*]}" >&2
    exit 1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
# Installing Open MPI makes it the default mpiexec, mpicc and MPI headers;
# everything here expects MPICH's (Open MPI's tools go by their full names).
if [ "$(id -u)" -eq 0 ]; then
  update-alternatives --quiet --set mpirun /usr/bin/mpirun.mpich
  update-alternatives --quiet --set mpi /usr/bin/mpicc.mpich
  update-alternatives --quiet --set mpi-x86_64-linux-gnu /usr/include/x86_64-linux-gnu/mpich
fi
# srun needs a running Slurm: this machine as its one node, for the suite
# (one that already runs is used and left running).
if ! sinfo -h -o %T 2>/dev/null | grep -q idle; then
  ci/slurm.sh start
  trap 'ci/slurm.sh stop' EXIT
fi

# Each step says how far into the suite it starts, so that a log shows
# where the 30-minute budget goes.
step() { echo "ci/test.sh: $* (at ${SECONDS} s)" >&2; }

before=$(ls /dev/shm | grep -c '^catena-' || true)
step formatting, clippy, docs
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --all-features -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features
step the tests
CATENA_FUZZ_SECONDS=${CATENA_FUZZ_SECONDS:-20} cargo test --workspace --all-features
step the examples
# The examples, each as a real job of 8 processes under the launcher (8: a 2x2x2 torus, so the tree broadcast uses 3 colours).
# A dev build: what the jobs check (their output, how they start) does not
# depend on the profile, and the release build of the examples took 3.5 of
# the suite's 30 minutes from an empty target (the interposer's install
# below still builds the library in release, LTO and all).
cargo build -p catena-run
cargo build -p catena-algorithms --features pmix --examples
for example in algorithms/examples/*.rs; do
  name=$(basename "$example" .rs)
  echo "example $name:"
  timeout 120 target/debug/catena-run -n 8 -- "target/debug/examples/$name"
  # Built without MPI, the same binary starts under each cluster launcher
  # through what it serves: PMI-1 at a descriptor or a port (Hydra), PMIx
  # and PMI-2 (Slurm; -O: more tasks than cores), PMIx (Open MPI).
  echo "example $name under mpiexec (PMI):"
  timeout 120 mpiexec -n 8 "target/debug/examples/$name"
  echo "example $name under mpiexec -pmi-port (PMI at a port):"
  timeout 120 mpiexec -pmi-port -n 8 "target/debug/examples/$name"
  echo "example $name under srun --mpi=pmix:"
  timeout 120 srun --mpi=pmix -O -n 8 "target/debug/examples/$name"
  echo "example $name under srun --mpi=pmi2:"
  timeout 120 srun --mpi=pmi2 -O -n 8 "target/debug/examples/$name"
  echo "example $name under Open MPI's mpirun (PMIx):"
  timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe -n 8 "target/debug/examples/$name"
done
step the interposer for Open MPI
# The MPI_Comm_split interposer built for Open MPI programs.
ci/openmpi-interposer.sh
step the fault cells
ci/faults.sh
after=$(ls /dev/shm | grep -c '^catena-' || true)
if [ "$after" -gt "$before" ]; then
  echo "ci/test.sh: the tests left catena segments in /dev/shm:" >&2
  ls /dev/shm | grep '^catena-' >&2
  exit 1
fi
step done
