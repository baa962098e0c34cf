#!/usr/bin/env bash
# Fault injection: a 3-rank `catena-bench ring` job on every provider, under
# catena's launcher and under `mpiexec`, meets each fault below. One table
# row per cell: exit status, seconds from the fault until the job was over,
# catena's entries it left in /dev/shm (after the job, and after the next job
# of the same starter on the shm provider, which must remove leftovers of
# dead processes), other
# libraries' entries left (UCX, MPICH: reported, not catena's to remove),
# orphaned rank processes, and a note when a rank crashed. Exits non-zero if
# a cell breaks its promise (see `verdict`). Kills any orphan it finds.
# Runs in a private /dev/shm when it may (root: a tmpfs in a mount namespace
# of its own), so that other jobs on the machine do not count. About 2-3
# minutes on 2 cores.
#
#   kill-rank      SIGKILL rank 1 once the job runs: the job must end, non-zero.
#   stop-rank      SIGSTOP rank 1: survivors time out by their deadline
#                  (--timeout-s), and the job ends, non-zero.
#   kill-starter   SIGKILL the launcher / mpiexec: every rank must die with it.
#   bad-setting    rank 1 starts with CATENA_SPIN_US=bad (read after the
#                  address exchange): its error is printed, the job ends.
#   bad-bootstrap  a rank fails before the address exchange: rank 1 with
#                  CATENA_PIN_CORE=bad under the launcher, rank 0 with
#                  CATENA_MPI_JOB=bad under mpiexec.
#
# Starters: the launcher, mpiexec, and (as root, network providers only)
# both across two fake hosts (`hosts`, `mpi-hosts`: ci/fakehost, loopback
# only), where a killed starter must take every proxy and rank with it and
# a fake host must find nothing left in its own /dev/shm.
#
# Usage: ci/faults.sh [PROVIDER...]   (default: all five)
set -uo pipefail
cd "$(dirname "$0")/.."

if [ -z "${FAULTS_SHM:-}" ] && unshare --mount --propagation private true 2>/dev/null; then
  exec unshare --mount --propagation private sh -c \
    'if mount -t tmpfs -o mode=1777 tmpfs /dev/shm; then export FAULTS_SHM=private; else export FAULTS_SHM=shared; fi
     exec "$@"' sh "$0" "$@"
fi
echo "ci/faults.sh: /dev/shm is ${FAULTS_SHM:-shared}" >&2

RANKS=3
DEADLINE_S=5        # ring --timeout-s: how long survivors wait for a stopped rank
CELL_CAP_S=40       # a cell still running after this is a hang
GRACE_S=3           # the launcher's grace period after a rank failed
declare -A LIMIT_S=(  # a job must be over within this many seconds of the fault
  [kill-rank]=10
  [stop-rank]=$((DEADLINE_S + GRACE_S + 7))
  [kill-starter]=5
  [bad-setting]=10
  [bad-bootstrap]=10
)
FAULTS=(kill-rank stop-rank kill-starter bad-setting bad-bootstrap)
STARTERS=(launcher mpiexec)
if ! command -v mpiexec > /dev/null; then
  echo "ci/faults.sh: no mpiexec (MPICH): the launcher only" >&2
  STARTERS=(launcher)
fi
if unshare --uts --mount true 2>/dev/null; then
  STARTERS+=(hosts)
  [[ " ${STARTERS[*]} " == *" mpiexec "* ]] && STARTERS+=(mpi-hosts)
else
  echo "ci/faults.sh: unshare is not permitted: no cells across fake hosts" >&2
fi
declare -A PROVIDER_ARGS=(
  [shm]="shm"
  [ofi-shm]="ofi CATENA_OFI_PROVIDER=shm"
  [ofi-tcp]="ofi CATENA_OFI_PROVIDER=tcp;ofi_rxm"
  [ucx-shm]="ucx CATENA_UCX_TLS=posix,cma,self"
  [ucx-tcp]="ucx CATENA_UCX_TLS=tcp,self"
)
PROVIDERS=("$@")
((${#PROVIDERS[@]})) || PROVIDERS=(shm ofi-shm ofi-tcp ucx-shm ucx-tcp)

# Only the cells' own settings reach the ranks.
while read -r v; do unset "$v"; done < <(env | grep -o '^CATENA_[A-Z_]*')

echo "ci/faults.sh: building catena-bench (all features)" >&2
cargo build -q -p catena-bench --all-features --bins || exit 1
cargo build -q -p catena-run || exit 1
BENCH=$PWD/target/debug/catena-bench
RUN=$PWD/target/debug/catena-run
WORK=$(mktemp -d)
MARK="catena-faults-$$"
# Whatever way the script ends, no rank of any cell outlives it.
cleanup() {
  local p
  for p in $(pgrep -f "^$BENCH ring .*$WORK/$MARK-" || true); do
    echo "ci/faults.sh: killing orphan $p" >&2
    kill -CONT "$p" 2>/dev/null
    kill -KILL "$p" 2>/dev/null
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

# Makes one rank fail at start-up when the cell asks for it, then runs the
# rank itself (exec keeps the launcher's parent-death signal).
WRAP='r=${CATENA_RANK:-${PMI_RANK:-}}
if [ -n "${FAULT_VAR:-}" ] && [ "$r" = "$FAULT_RANK" ]; then export "$FAULT_VAR=$FAULT_VALUE"; fi
unset FAULT_VAR FAULT_RANK FAULT_VALUE
exec "$@"'

shm_list() { ls -1 /dev/shm | sort; }

# Rank processes of cell $1 (their command line starts with the binary),
# and the launcher's proxies on fake hosts (the launcher started again with
# no arguments; one cell runs at a time).
rank_pids() { pgrep -f "^$BENCH ring .*$WORK/$MARK-$1\.csv" || true; pgrep -fx "$RUN" || true; }

# The pid of rank $2 of cell $1, from its environment.
rank_pid() {
  local p
  for p in $(rank_pids "$1"); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qxE "(CATENA_RANK|PMI_RANK)=$2"; then
      echo "$p"
      return
    fi
  done
}

# Starts a job of cell $1 on provider $2 with starter $3, $4 ranks, $5 rounds,
# in the background; sets STARTER_PID.
start_job() {
  local cell=$1 provider=$2 starter=$3 ranks=$4 rounds=$5
  local -a spec
  read -r -a spec <<< "${PROVIDER_ARGS[$provider]}"
  local -a envs=("${spec[@]:1}")
  local -a ring=("$BENCH" ring --provider "${spec[0]}" --rounds "$rounds"
    --timeout-s "$DEADLINE_S" --ready-file "$WORK/$cell.ready" --csv "$WORK/$MARK-$cell.csv")
  local -a starter_cmd=(mpiexec -n "$ranks")
  [ "$starter" = launcher ] && starter_cmd=("$RUN" -n "$ranks" --)
  if [ "$starter" = hosts ]; then
    starter_cmd=("$RUN" -n "$ranks" --hosts host0,host1 --remote-exec "$PWD/ci/fakehost"
      --bootstrap-address 127.0.0.1 --envlist FAULT_VAR,FAULT_RANK,FAULT_VALUE --)
    envs+=(FI_TCP_IFACE=lo UCX_NET_DEVICES=lo)
  fi
  if [ "$starter" = mpi-hosts ]; then
    starter_cmd=(mpiexec -launcher ssh -launcher-exec "$PWD/ci/fakehost" -hosts host0,host1
      -n "$ranks")
    envs+=(FI_TCP_IFACE=lo UCX_NET_DEVICES=lo)
  fi
  # In $WORK: what crashing libraries write to the working directory (UCX
  # writes `<binary>.<pid>.btr` backtraces) stays out of the repository.
  (cd "$WORK" && exec env "${envs[@]}" "${starter_cmd[@]}" sh -c "$WRAP" sh "${ring[@]}" \
    > "$WORK/$cell.out" 2>&1 < /dev/null) &
  STARTER_PID=$!
}

# Seconds since $1 (an $EPOCHREALTIME), and whether $1 > $2.
since() { awk -v a="$EPOCHREALTIME" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
greater() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }

# Entries in $2 (a list) not in $1, without those of other users' or other
# live jobs (a name carrying the pid of a live process outside this cell).
new_entries() {
  local before=$1 after=$2 cell_pids=$3 name pid
  comm -13 <(echo "$before") <(echo "$after") | while read -r name; do
    [ -n "$name" ] || continue
    pid=$(echo "$name" | sed -nE 's/^catena-fi-n[0-9]+-p([0-9]+)-.*/\1/p')
    if [ -n "$pid" ] && ! grep -qx "$pid" <<< "$cell_pids" && kill -0 "$pid" 2>/dev/null; then
      continue
    fi
    [ -O "/dev/shm/$name" ] && echo "$name"
  done
}

failures=0
ALL_LEFT="$WORK/left"
: > "$ALL_LEFT"
printf '%-8s %-9s %-13s %5s %6s %5s %5s %6s %7s  %s\n' \
  provider starter fault exit secs left next other orphans verdict
cell_no=0
for provider in "${PROVIDERS[@]}"; do
  for starter in "${STARTERS[@]}"; do
    for fault in "${FAULTS[@]}"; do
      # shm reaches one host only (it refuses a job across hosts).
      [[ "$starter" == *hosts ]] && [[ "$provider" != *-tcp ]] && continue
      cell_no=$((cell_no + 1))
      cell="c$cell_no"
      unset FAULT_VAR FAULT_RANK FAULT_VALUE
      case "$fault/$starter" in
        bad-setting/*) export FAULT_VAR=CATENA_SPIN_US FAULT_RANK=1 FAULT_VALUE=bad ;;
        bad-bootstrap/launcher | bad-bootstrap/hosts) export FAULT_VAR=CATENA_PIN_CORE FAULT_RANK=1 FAULT_VALUE=bad ;;
        bad-bootstrap/mpiexec | bad-bootstrap/mpi-hosts) export FAULT_VAR=CATENA_MPI_JOB FAULT_RANK=0 FAULT_VALUE=bad-id ;;
      esac
      before=$(shm_list)
      start_job "$cell" "$provider" "$starter" "$RANKS" 100000000
      starter_pid=$STARTER_PID
      unset FAULT_VAR FAULT_RANK FAULT_VALUE
      started=$EPOCHREALTIME
      seen=""
      note=""
      # (bash reports the jobs this kills on stderr: kept out of the table)
      {
        # Wait until every rank joined the job (or a start-up failure ended it).
        while [ "$(ls "$WORK" | grep -c "^$cell\.ready\.")" -lt "$RANKS" ] && kill -0 "$starter_pid" 2>/dev/null; do
          sleep 0.05
          seen+=$'\n'$(rank_pids "$cell")
          greater "$(since "$started")" "$CELL_CAP_S" && break
        done
        seen+=$'\n'$(rank_pids "$cell")
        case "$fault" in
          kill-rank | stop-rank | kill-starter)
              victim=$(rank_pid "$cell" 1)
            fault_at=$EPOCHREALTIME
            case "$fault" in
              kill-rank) [ -n "$victim" ] && kill -KILL "$victim" ;;
              stop-rank) [ -n "$victim" ] && kill -STOP "$victim" ;;
              kill-starter) kill -KILL "$starter_pid" ;;
            esac
            [ -n "$victim" ] || [ "$fault" = kill-starter ] || note="no rank 1 found"
            ;;
          *) fault_at=$started ;;
        esac
        # The job is over when the starter exited and (after kill-starter)
        # every rank is gone.
        hung=0
        while kill -0 "$starter_pid" 2>/dev/null || { [ "$fault" = kill-starter ] && [ -n "$(rank_pids "$cell")" ]; }; do
          seen+=$'\n'$(rank_pids "$cell")
          if greater "$(since "$fault_at")" "$CELL_CAP_S"; then
            hung=1
            kill -KILL "$starter_pid" 2>/dev/null
            break
          fi
          sleep 0.05
        done
        wait "$starter_pid"
        code=$?
      } 2>> "$WORK/shell.err"
      secs=$(since "$fault_at")
      # Ranks still running a moment later are orphans.
      for _ in 1 2 3 4 5 6 7 8 9 10; do
        [ -z "$(rank_pids "$cell")" ] && break
        sleep 0.2
      done
      orphans=$(rank_pids "$cell")
      n_orphans=$(echo -n "$orphans" | grep -c . || true)
      for p in $orphans; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
      cell_pids=$( (echo "$seen"; echo "$starter_pid") | grep -E '^[0-9]+$' | sort -u)
      left=$(new_entries "$before" "$(shm_list)" "$cell_pids")
      next_left=$left
      if [ -n "$left" ]; then
        # The next job of this starter must sweep what dead processes left:
        # a job on the shm provider, which uses nothing of libfabric's or
        # UCX's (so their own cleanup is not what removes it), except
        # across hosts, which shm does not reach.
        next_provider=shm
        [[ "$starter" == *hosts ]] && next_provider=$provider
        start_job "$cell-next" "$next_provider" "$starter" 2 10
        wait "$STARTER_PID" || note+="the next job failed"
        next_left=$(comm -12 <(echo "$left") <(shm_list))
      fi
      echo "$next_left" >> "$ALL_LEFT"
      other=$(echo "$next_left" | grep -v '^catena-' || true)
      next_left=$(echo "$next_left" | grep '^catena-' || true)
      n_left=$(echo -n "$left" | grep -c '^catena-' || true)
      n_next=$(echo -n "$next_left" | grep -c . || true)
      n_other=$(echo -n "$other" | grep -c . || true)
      crash=""
      for btr in "$WORK"/*.btr; do
        [ -e "$btr" ] || continue
        crash+=" $(grep -m1 -oE '\((uc[a-z]+_[a-z_]+)\+' "$btr" | tr -d '(+')"
        mv "$btr" "$btr.seen"
      done

      verdict=ok
      why=()
      ((hung)) && why+=("hung past ${CELL_CAP_S}s")
      [ "$code" -eq 0 ] && why+=("exit 0")
      greater "$secs" "${LIMIT_S[$fault]}" && why+=("over ${LIMIT_S[$fault]}s")
      ((n_orphans)) && why+=("orphans")
      [ -n "$note" ] && why+=("$note")
      ((n_next)) && why+=("left: $(echo "$next_left" | head -3 | tr '\n' ' ')")
      grep -q "left in /dev/shm" "$WORK/$cell.out" && why+=("$(grep -m1 "left in /dev/shm" "$WORK/$cell.out")")
      ((n_other)) && verdict+="; other: $(echo "$other" | tr '\n' ' ')"
      [ -n "$crash" ] && verdict+="; a rank crashed in$crash"
      if ((${#why[@]})); then
        verdict="FAIL: ${why[*]}"
        failures=$((failures + 1))
        sed 's/^/    | /' "$WORK/$cell.out" | tail -5
      fi
      printf '%-8s %-9s %-13s %5s %6.1f %5s %5s %6s %7s  %s\n' \
        "$provider" "$starter" "$fault" "$code" "$secs" "$n_left" "$n_next" "$n_other" "$n_orphans" "$verdict"
    done
  done
done

# Whatever the cells left goes, so the machine stays clean.
grep -v '^$' "$ALL_LEFT" | sort -u | while read -r name; do rm -f "/dev/shm/$name"; done
echo "ci/faults.sh: $cell_no cells, $failures failed"
((failures == 0))
