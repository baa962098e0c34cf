#!/usr/bin/env bash
# catena against MPICH with a core per process, on a many-core machine that
# has none of our tools (../shared/manycore/README.md): builds here what the
# comparison needs (release, all features: catena-bench and catena-run; the
# C library and the MPI_Comm_split interposer with install.sh; the
# unmodified MPI program bench/c/split_time.c with mpicc), packs it with
# ../shared/manycore/pack.sh into .manycore/ with the script to run there,
# .manycore/run.sh: `catena-bench collectives` at N = 16, 8, 4, 2 (each
# under a time limit, the whole under 5 minutes; N = 16 has 150 s), logging
# to $OUT (default /tmp/manycore-out).
#
# Here:   ci/manycore-figures.sh            (then carry .manycore/ there)
#         ci/manycore-figures.sh --check    (also runs .manycore/run.sh 2 here,
#                                            as it will run there)
# There:  OUT=/some/dir bash .manycore/run.sh [N ...]
set -euo pipefail
cd "$(dirname "$0")/.."
check=""
[ "${1:-}" = "--check" ] && check=1

cargo build --release --all-features -p catena-bench
cargo build --release -p catena-run
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
# The C library cargo just built for catena-bench (catena-capi with all its
# features: mpi, ofi, ucx), where cargo left it; else install.sh builds it.
if [ -f target/release/deps/libcatena.so ] && [ -f target/release/deps/libcatena.a ]; then
  algorithms/capi/install.sh --from target/release/deps --mpi "$prefix" > /dev/null
else
  algorithms/capi/install.sh --features mpi,ofi,ucx "$prefix" > /dev/null
fi
mpicc -O2 -o "$prefix/split_time" bench/c/split_time.c
rm -rf .manycore
../shared/manycore/pack.sh .manycore target/release/catena-bench target/release/catena-run \
  "$prefix/split_time" "$prefix/lib/libcatena.so" "$prefix/lib/libcatena-mpi.so"

cat > .manycore/run.sh <<'RUN'
#!/usr/bin/env bash
# Runs catena-bench collectives at each N given (default 16 8 4 2) from the
# bundle beside this script, each under a time limit so that the whole
# takes under 5 minutes; logs everything to $OUT/manycore.log and writes
# $OUT/collectives-N.csv.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/unpack.sh"
OUT=${OUT:-/tmp/manycore-out}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/manycore.log") 2>&1
cd /tmp
echo "== $(date -u +%FT%TZ) on $(hostname): $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
grep -m1 'model name' /proc/cpuinfo || true
echo "MPICH: $(mpiexec --version 2>&1 | grep -m1 -i 'version' || echo unknown)"
# 285 s in all: each N may use what the later ones leave (their shares,
# N = 16 the largest: its 16 MiB rows take longest).
share() { case $1 in 16) echo 150 ;; 8) echo 60 ;; 4) echo 45 ;; *) echo 30 ;; esac; }
left=285
ns=("$@")
[ ${#ns[@]} -gt 0 ] || ns=(16 8 4 2)
for i in "${!ns[@]}"; do
  n=${ns[$i]} limit=$left
  for later in "${ns[@]:i+1}"; do limit=$(( limit - $(share "$later") )); done
  [ "$limit" -ge 10 ] || { echo "== N = $n: no time left"; continue; }
  echo "== N = $n (at most $limit s)"
  start=$(date +%s)
  timeout -k 5 "$limit" catena-bench collectives -n "$n" --row-seconds 1 \
    --split-time /tmp/bundle/bin/split_time --interposer /tmp/bundle/lib/libcatena-mpi.so \
    --csv "$OUT/collectives-$n.csv"
  rc=$? took=$(( $(date +%s) - start ))
  echo "== N = $n: exit $rc$([ $rc = 124 ] && echo ' (time limit)'), $took s"
  left=$(( left - took ))
done
echo "== done; figures in $OUT/collectives-*.csv, this log in $OUT/manycore.log"
RUN
chmod +x .manycore/run.sh
echo "packed: $(du -sh .manycore | cut -f1) in .manycore; there: OUT=/some/dir bash .manycore/run.sh"

if [ -n "$check" ]; then
  echo "== checking the bundle here at N = 2 (OUT=$PWD/.manycore/out)"
  OUT=$PWD/.manycore/out bash .manycore/run.sh 2
fi
