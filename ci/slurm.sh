#!/usr/bin/env bash
# A single-node Slurm for the tests that start jobs with srun: `ci/slurm.sh
# start` configures this machine as one node (its host name and cores),
# starts munged, slurmctld and slurmd as root and waits until the node is
# idle; `ci/slurm.sh stop` stops the three. Needs root and Debian's
# slurm-wlm and munge (see ../docs/launchers.md).
set -euo pipefail

host=$(hostname)
conf=/etc/slurm/slurm.conf

stop() {
  for pidfile in /run/slurmd.pid /run/slurmctld.pid /run/munge/munged.pid; do
    if [ -f "$pidfile" ]; then
      kill "$(cat "$pidfile")" 2>/dev/null || true
      rm -f "$pidfile"
    fi
  done
}

start() {
  if sinfo -h -o %T 2>/dev/null | grep -q idle; then
    return 0
  fi
  stop
  mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
  chown munge:munge /run/munge
  cat >"$conf" <<CONF
ClusterName=ci
SlurmctldHost=$host
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
JobAcctGatherType=jobacct_gather/none
NodeName=$host CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
CONF
  runuser -u munge -- /usr/sbin/munged
  slurmctld
  slurmd
  for _ in $(seq 100); do
    if sinfo -h -o %T 2>/dev/null | grep -q idle; then
      return 0
    fi
    sleep 0.2
  done
  echo "ci/slurm.sh: the node did not become idle; see /var/log/slurm" >&2
  sinfo >&2 || true
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: ci/slurm.sh start|stop" >&2; exit 2 ;;
esac
