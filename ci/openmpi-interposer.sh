#!/usr/bin/env bash
# The MPI_Comm_split interposer for Open MPI programs: libcatena built with
# PMIx and without MPI (catena joins through mpirun's PMIx server), the
# interposer compiled by Open MPI's mpicc (its pointer handles), and the C
# and Fortran split programs run under Open MPI's mpirun -n 1..8 with and
# without it: the outputs must be byte-identical (the Fortran lines, printed
# by several ranks, sorted) and every split must have run in catena.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$(mktemp -d /tmp/catena-openmpi.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
algorithms/capi/install.sh --features pmix --mpi --mpicc mpicc.openmpi "$prefix" >/dev/null
mpicc.openmpi -std=c11 -O1 -o "$prefix/split_patterns" algorithms/capi/tests/c/split_patterns.c
# Debian's mpif90.openmpi names no -L for libmpi itself, so with MPICH the
# default MPI, -lmpi would find MPICH's: name Open MPI's directory first.
mpif90.openmpi -O1 -L"$(mpicc.openmpi --showme:libdirs | cut -d' ' -f1)" \
  -o "$prefix/split_patterns_f" algorithms/capi/tests/fortran/split_patterns.f90
run() {
  timeout 120 mpirun.openmpi --allow-run-as-root --oversubscribe "$@"
}
check() { # program, ranks, splits catena must run, how to order the output
  local program=$1 n=$2 splits=$3 order=$4
  local plain interposed
  plain=$(run -n "$n" "$prefix/$program" | $order)
  interposed=$(run -x LD_PRELOAD="$prefix/lib/libcatena-mpi.so" -x CATENA_MPI_REPORT=1 \
    -n "$n" "$prefix/$program" 2>"$prefix/report" | $order)
  if [ "$plain" != "$interposed" ]; then
    echo "ci/openmpi-interposer.sh: $program on $n ranks differs with the interposer" >&2
    diff <(echo "$plain") <(echo "$interposed") >&2 || true
    cat "$prefix/report" >&2
    exit 1
  fi
  if ! grep -q "$splits splits by catena, 0 by MPI" "$prefix/report"; then
    echo "ci/openmpi-interposer.sh: $program on $n ranks: not every split ran in catena" >&2
    cat "$prefix/report" >&2
    exit 1
  fi
  echo "$program on $n ranks: $(echo "$plain" | wc -l) lines alike; $splits splits by catena"
}
for n in 1 2 3 4 5 6 7 8; do
  check split_patterns "$n" 23 cat
  check split_patterns_f "$n" 13 sort
done
