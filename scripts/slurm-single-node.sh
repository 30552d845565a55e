#!/usr/bin/env bash
# A real single-node Slurm cluster on this machine: munged, slurmctld and slurmd, configured for
# localhost and run as root from a state folder of their own (nothing under /etc is changed).
#
#   scripts/slurm-single-node.sh start    # write the config, start the daemons, wait for the node to be idle
#   scripts/slurm-single-node.sh status   # the daemons' pids, sinfo and squeue
#   scripts/slurm-single-node.sh stop     # cancel its jobs, stop the daemons (by their pid files)
#
# Then `export SLURM_CONF=<state>/etc/slurm.conf` (start prints it) and sbatch, squeue, scancel,
# `nlgbench run SPEC --executor slurm` talk to it.
#
# Environment: NLGBENCH_SLURM_DIR (state folder, default ./.slurm in the repository),
# NLGBENCH_SLURM_PORT (slurmctld's port, default 6817; slurmd uses the next one).
#
# Made for containers (Docker, gVisor) without systemd: the daemons are started directly, each
# with its pid, log and spool files in the state folder. No cgroups: processes are tracked by
# their parent pid (proctrack/linuxproc), tasks are not bound to cores (task/none), and nothing is
# gathered for accounting (jobacct_gather/none). Slurm's cgroup plugins need a writable cgroup
# hierarchy with delegation, which containers rarely give; without them Slurm cannot enforce
# --mem (so no OUT_OF_MEMORY state here) but schedules, runs, times out and cancels as on a cluster.
# No slurmdbd either (it needs a MySQL server): sacct is unavailable, and finished jobs stay
# visible to squeue/scontrol for MinJobAge (here an hour), which is what nlgbench reads then.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
STATE="${NLGBENCH_SLURM_DIR:-$REPO/.slurm}"
PORT="${NLGBENCH_SLURM_PORT:-6817}"
CONF="$STATE/etc/slurm.conf"
SOCKET="$STATE/munge/munge.socket"
NODE="$(hostname -s)"
PARTITION="debug"

die() { echo "slurm-single-node: $*" >&2; exit 1; }

need() {
  for exe in munged slurmctld slurmd sinfo sbatch squeue scontrol; do
    command -v "$exe" >/dev/null || die "$exe not found: install Debian's slurm-wlm and munge (scripts/setup.sh does, as root)"
  done
}

pid_of() {  # the pid in a pid file if that process is alive, else nothing
  local file="$1" pid
  [ -f "$file" ] || return 0
  pid="$(tr -dc 0-9 <"$file")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then echo "$pid"; fi
}

write_config() {
  # This machine's CPU layout and memory as slurmd itself sees them (`slurmd -C`); 512 MiB of
  # memory are kept back for the daemons, so the node never reports less than it was configured with.
  local hw cpus mem
  hw="$(slurmd -C | head -n 1)"
  cpus="$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$hw")"
  mem="$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$hw")"
  [ -n "$cpus" ] && [ -n "$mem" ] || die "cannot read this machine's layout from 'slurmd -C': $hw"
  mem=$((mem > 1024 ? mem - 512 : mem))
  local layout
  layout="$(sed -e 's/^NodeName=[^ ]* //' -e 's/ RealMemory=[0-9]*//' <<<"$hw")"
  mkdir -p "$STATE"/{etc,munge,ctld,spool,log,run}
  chmod 755 "$STATE" "$STATE/munge"  # the socket must be reachable by every user who submits
  cat >"$CONF" <<EOF
# Written by scripts/slurm-single-node.sh for $NODE; rewritten on every start.
ClusterName=nlgbench
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCKET
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
PlugStackConfig=$STATE/etc/plugstack.conf
# No cgroups in a container: track job processes by parent pid, bind nothing, gather nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
# Several jobs share the node by CPU and memory; a job that asks for no memory gets this per CPU.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=$((mem / cpus))
SchedulerType=sched/backfill
ReturnToService=2
# Finished jobs stay known to squeue/scontrol this long (no accounting database here).
MinJobAge=3600
KillWait=10
InactiveLimit=0
NodeName=$NODE NodeAddr=127.0.0.1 $layout RealMemory=$mem State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$STATE/etc/cgroup.conf" <<EOF
# Not used: no cgroup plugin is configured in slurm.conf (containers give no delegated cgroups).
CgroupAutomount=no
EOF
  : >"$STATE/etc/plugstack.conf"
}

start_munge() {
  if [ -n "$(pid_of "$STATE/run/munged.pid")" ]; then return; fi
  if [ ! -s "$STATE/munge/munge.key" ]; then
    (umask 077 && head -c 1024 /dev/urandom >"$STATE/munge/munge.key")
  fi
  # --force: munged refuses to run as root or with a key under a folder it finds too open
  # (the repository's folders belong to the user); this key is this cluster's alone.
  munged --force --socket="$SOCKET" --key-file="$STATE/munge/munge.key" --pid-file="$STATE/run/munged.pid" \
    --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed" \
    || die "munged did not start: $(tail -n 3 "$STATE/log/munged.log" 2>/dev/null)"
}

wait_idle() {
  local i state=""
  for i in $(seq 1 120); do
    state="$(sinfo -h -n "$NODE" -o %T 2>/dev/null || true)"
    if [ "$state" = idle ] || [ "$state" = mixed ] || [ "$state" = allocated ]; then
      echo "slurm-single-node: node $NODE is $state (partition $PARTITION)"
      return
    fi
    sleep 0.5
  done
  die "node $NODE is not idle after 60 s (sinfo says '${state:-nothing}'); see $STATE/log/slurmctld.log and slurmd.log"
}

start() {
  need
  write_config
  export SLURM_CONF="$CONF"
  start_munge
  if [ -z "$(pid_of "$STATE/run/slurmctld.pid")" ]; then
    slurmctld -f "$CONF" -i || die "slurmctld did not start: $(tail -n 5 "$STATE/log/slurmctld.log" 2>/dev/null)"
  fi
  if [ -z "$(pid_of "$STATE/run/slurmd.pid")" ]; then
    slurmd -f "$CONF" -N "$NODE" || die "slurmd did not start: $(tail -n 5 "$STATE/log/slurmd.log" 2>/dev/null)"
  fi
  wait_idle
  echo "export SLURM_CONF=$CONF"
}

stop_one() {  # SIGTERM to the daemon of a pid file, then wait up to 20 s for it to exit
  local name="$1" file="$2" pid i
  pid="$(pid_of "$file")"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid"
  for i in $(seq 1 40); do
    kill -0 "$pid" 2>/dev/null || { echo "slurm-single-node: stopped $name (pid $pid)"; return 0; }
    sleep 0.5
  done
  echo "slurm-single-node: $name (pid $pid) did not stop after 20 s; sending SIGKILL" >&2
  kill -KILL "$pid" 2>/dev/null || true
}

cancel_jobs() {  # jobs still running when slurmd stops would leave their slurmstepd behind, waiting for it
  [ -n "$(pid_of "$STATE/run/slurmctld.pid")" ] && [ -n "$(pid_of "$STATE/run/slurmd.pid")" ] || return 0
  export SLURM_CONF="$CONF"
  local jobs i
  jobs="$(squeue -h -o %A 2>/dev/null | tr '\n' ' ')"
  [ -n "${jobs// /}" ] || return 0
  echo "slurm-single-node: cancelling jobs $jobs"
  # shellcheck disable=SC2086
  scancel $jobs 2>/dev/null || true
  for i in $(seq 1 60); do
    [ -z "$(squeue -h -o %A 2>/dev/null)" ] && return 0
    sleep 0.5
  done
  echo "slurm-single-node: jobs still ending after 30 s: $(squeue -h -o '%A %T' | tr '\n' ' ')" >&2
}

stop() {
  cancel_jobs
  stop_one slurmd "$STATE/run/slurmd.pid"
  stop_one slurmctld "$STATE/run/slurmctld.pid"
  stop_one munged "$STATE/run/munged.pid"
}

status() {
  local running=0 name
  for name in munged slurmctld slurmd; do
    local pid
    pid="$(pid_of "$STATE/run/$name.pid")"
    if [ -n "$pid" ]; then echo "$name: running (pid $pid)"; running=$((running + 1)); else echo "$name: not running"; fi
  done
  if [ "$running" = 3 ]; then
    export SLURM_CONF="$CONF"
    sinfo
    squeue
    echo "export SLURM_CONF=$CONF"
  else
    return 1
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
