#!/usr/bin/env bash
# MPI_Comm_split of an unmodified MPI program (bench/c/split_time.c) with
# and without LD_PRELOAD=libcatena-mpi.so, N = 2, 4, 8, 16, alternating the
# two in each N (RUNS times each, 2 unless set); at N = 2 also warm (200
# warm-ups, 2001 repetitions: MPICH's split gets faster over its first 50
# or so calls); rank 0's CATENA_MPI_REPORT line with each interposed run.
# Then catena's split in the simulator at 65,536 and 1,048,576 ranks for
# comparison (the 1M run takes about 8 minutes and 4 GiB; --no-sim skips
# it). Builds what it needs (release, feature mpi).
# Usage: ci/interposer-figures.sh [--no-sim]
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
algorithms/capi/install.sh --features mpi "$out" > /dev/null
mpicc -O2 -o "$out/split_time" bench/c/split_time.c
cores=$(nproc)
runs=${RUNS:-2}
interposed() {
  mpiexec -n "$1" -genv LD_PRELOAD "$out/lib/libcatena-mpi.so" -genv CATENA_MPI_REPORT 1 \
    "$out/split_time" "${@:2}" 2> "$out/report"
  sed -n 's/^libcatena-mpi: rank 0: /    report: /p' "$out/report"
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $cores cores"
for n in 2 4 8 16; do
  flag=""
  [ "$n" -gt "$cores" ] && flag=" (OVERSUBSCRIBED: $n processes on $cores cores)"
  for run in $(seq "$runs"); do
    echo "MPICH$flag: $(mpiexec -n "$n" "$out/split_time")"
    echo "catena$flag: $(interposed "$n")"
  done
done
for run in $(seq "$runs"); do
  echo "MPICH, warm: $(mpiexec -n 2 "$out/split_time" 200 2001)"
  echo "catena, warm: $(interposed 2 200 2001)"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
[ "${1:-}" = "--no-sim" ] && exit 0
echo "catena's split in the simulator (Hash, 5-byte colors, few groups; LogGP; computation free):"
cargo build -q --release -p catena-bench
target/release/catena-bench sim --ranks 65536,1048576 --algorithms Hash --workloads 1 \
  --compute-factor 0 --csv "$out/sim.csv" 2>&1 | tail -8
