#!/usr/bin/env bash
# The figures of docs/hosts.md, in one run on this machine, across fake
# hosts (ci/fakehost; needs root), loopback only: put latency and bandwidth
# between two fake hosts per network provider next to ucx_perftest and
# fi_pingpong across the same two hosts, catena's split against MPICH's
# MPI_Comm_split for N = 4 and 8 across 2 hosts, and the two-level against
# the flat collectives for N = 8 across 2 hosts. Needs the release build:
#   cargo build --release -p catena-bench --features mpi,ofi,ucx
#   cargo build --release -p catena-run
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release
fakehost=$PWD/ci/fakehost
hosts=(--hosts host0,host1 --remote-exec "$fakehost" --bootstrap-address 127.0.0.1)
export UCX_NET_DEVICES=lo FI_TCP_IFACE=lo
out=$(mktemp -d)
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

echo "== put between two fake hosts (8 B half round trip; 1 MiB puts), 3 runs each"
for config in "ucx/tcp UCX_TLS=tcp,self" "ofi/tcp CATENA_OFI_PROVIDER=tcp;ofi_rxm" \
  "ucx/tcp UCX_TLS=tcp,self" "ofi/tcp CATENA_OFI_PROVIDER=tcp;ofi_rxm" \
  "ucx/tcp UCX_TLS=tcp,self" "ofi/tcp CATENA_OFI_PROVIDER=tcp;ofi_rxm"; do
  set -- $config
  env "$2" "$bin/catena-run" -n 2 "${hosts[@]}" -- \
    "$bin/catena-bench" put --provider "$1" --max-size 1048576 --round-trips 5000 \
    --csv "$out/put.csv" > /dev/null
  awk -F, -v c="$1" '/^put_ns/ {p=$3} /^put_signal_ns/ {s=$3} $2==1048576 {b=$3}
    END {printf "catena %s: put %.1f us, put+signal %.1f us (%.2fx), 1 MiB %.2f GB/s\n", c, p/1e3, s/1e3, s/p, b}' "$out/put.csv"
done
pair() { # server and client of a tool, one per fake host
  "$fakehost" host1 "$1" > "$out/server.log" 2>&1 &
  sleep 1
  "$fakehost" host0 "$2" 2>&1
  wait
}
for port in 13371 13372 13373; do
  UCX_TLS=tcp,self pair "ucx_perftest -p $port" \
    "ucx_perftest 127.0.0.1 -p $port -t ucp_put_lat -s 8 -n 20000" |
    awk '/^Final/ {printf "ucx_perftest ucp_put_lat 8 B: %.1f us (typical)\n", $3}'
  UCX_TLS=tcp,self pair "ucx_perftest -p $((port + 10))" \
    "ucx_perftest 127.0.0.1 -p $((port + 10)) -t ucp_put_bw -s 1048576 -n 2000" |
    awk '/^Final/ {printf "ucx_perftest ucp_put_bw 1 MiB: %.2f GB/s (overall)\n", $7 * 1048576 / 1e9}'
done
pair "fi_pingpong -p 'tcp;ofi_rxm' -e rdm -I 5000 -S 8" \
  "fi_pingpong -p 'tcp;ofi_rxm' -e rdm -I 5000 -S 8 127.0.0.1" |
  awk '$1 == 8 {printf "fi_pingpong tcp;ofi_rxm 8 B send/recv: %s us one way\n", $7}'

echo "== split across 2 fake hosts (ucx over tcp; MPICH over its own UCX)"
for n in 4 8; do
  CATENA_UCX_TLS=tcp,self "$bin/catena-bench" split -n "$n" "${hosts[@]}" --provider ucx \
    --csv "$out/split.csv" 2>&1 | sed -n '/median split time/,/^$/p'
done

echo "== two-level against flat collectives, 8 ranks across 2 fake hosts"
CATENA_UCX_TLS=tcp,self "$bin/catena-bench" hierarchy -n 8 "${hosts[@]}" --provider ucx 2>&1 | sed 's/^\[0\] //'
CATENA_OFI_PROVIDER='tcp;ofi_rxm' "$bin/catena-bench" hierarchy -n 8 "${hosts[@]}" --provider ofi 2>&1 | sed 's/^\[0\] //'
rm -rf "$out"
