#!/usr/bin/env bash
# MPI_Comm_split of an unmodified MPI program (bench/c/split_time.c) with
# and without LD_PRELOAD=libcatena-mpi.so, N = 2, 4, 8, 16, alternating the
# two in each N; then catena's split in the simulator at 65,536 and
# 1,048,576 ranks for comparison (the 1M run takes about 8 minutes and
# 4 GiB). Builds what it needs (release, feature mpi).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
algorithms/capi/install.sh --features mpi "$out" > /dev/null
mpicc -O2 -o "$out/split_time" bench/c/split_time.c
cores=$(nproc)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); $cores cores"
for n in 2 4 8 16; do
  flag=""
  [ "$n" -gt "$cores" ] && flag=" (OVERSUBSCRIBED: $n processes on $cores cores)"
  for run in 1 2; do
    echo "MPICH$flag: $(mpiexec -n "$n" "$out/split_time")"
    echo "catena$flag: $(mpiexec -n "$n" -genv LD_PRELOAD "$out/lib/libcatena-mpi.so" "$out/split_time")"
  done
done
echo "catena's split in the simulator (Hash, 5-byte colors, few groups; LogGP; computation free):"
cargo build -q --release -p catena-bench
target/release/catena-bench sim --ranks 65536,1048576 --algorithms Hash --workloads 1 \
  --compute-factor 0 --csv "$out/sim.csv" 2>&1 | tail -8
