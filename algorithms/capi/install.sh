#!/usr/bin/env bash
# Installs catena's C library (libcatena.so, libcatena.a), its header and a
# pkg-config file under PREFIX, so that
#   cc prog.c $(pkg-config --cflags --libs catena)
# works with PKG_CONFIG_PATH=PREFIX/lib/pkgconfig (or with PREFIX=/usr/local).
# With MPI, also the interposer libcatena-mpi.so (built with mpicc), for
#   LD_PRELOAD=PREFIX/lib/libcatena-mpi.so mpiexec -n N ./app
# For Open MPI programs, build it with Open MPI's compiler over a libcatena
# that joins through PMIx instead of MPI:
#   install.sh --features pmix --mpi --mpicc mpicc.openmpi PREFIX
#
# Usage: algorithms/capi/install.sh [--features LIST] [--from DIR] [--mpi]
#                                   [--mpicc CMD] PREFIX
#   --features  cargo features to build with (e.g. mpi,ofi,ucx,pmix; default
#               none); one with mpi implies --mpi
#   --from      take the libraries from DIR instead of building them
#   --mpi       build the interposer (libcatena.so must have feature mpi, or
#               feature pmix for an MPI whose launcher serves PMIx)
#   --mpicc     the MPI C compiler to build it with (default mpicc)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
features="" from="" mpi="" mpicc=mpicc
while [ $# -gt 1 ]; do
  case "$1" in
    --features) features=$2; shift 2
      case ",$features," in *,mpi,*) mpi=1 ;; esac ;;
    --from) from=$2; shift 2 ;;
    --mpi) mpi=1; shift ;;
    --mpicc) mpicc=$2; shift 2 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if [ $# -ne 1 ]; then
  echo "usage: $0 [--features LIST] [--from DIR] PREFIX" >&2
  exit 2
fi
prefix=$1
if [ -z "$from" ]; then
  cargo build --release --manifest-path "$here/Cargo.toml" ${features:+--features "$features"}
  from=$(cargo metadata --format-version 1 --no-deps --manifest-path "$here/Cargo.toml" |
    sed 's/.*"target_directory":"\([^"]*\)".*/\1/')/release
fi
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/../../Cargo.toml" | head -1)
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include"
install -m 755 "$from/libcatena.so" "$prefix/lib/"
install -m 644 "$from/libcatena.a" "$prefix/lib/"
install -m 644 "$here/include/catena.h" "$prefix/include/"
if [ -n "$mpi" ]; then
  "$mpicc" -shared -fPIC -std=c11 -O2 -o "$prefix/lib/libcatena-mpi.so" "$here/mpi/catena_mpi.c" \
    -I "$here/include" -L"$prefix/lib" -Wl,--disable-new-dtags,-rpath,"$prefix/lib" -lcatena
fi
cat > "$prefix/lib/pkgconfig/catena.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: catena
Description: scalable sub-communicators and collectives over one-sided puts
Version: $version
Libs: -L\${libdir} -lcatena
Cflags: -I\${includedir}
PC
echo "installed catena $version under $prefix"
