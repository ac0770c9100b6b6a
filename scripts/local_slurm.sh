#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the submitit launcher (needs root and the
# Debian packages slurm-wlm and munge; `make setup-cluster` installs them).
#   scripts/local_slurm.sh start   # munged, slurmctld, slurmd; partition `local` = this host's CPUs
#   export SLURM_CONF=/tmp/promptlottery-slurm/slurm.conf   # what `start` prints: sbatch/squeue use it
#   scripts/local_slurm.sh stop    # stops the daemons it started and removes the state dir
# Everything lives in $LOCAL_SLURM_DIR (default /tmp/promptlottery-slurm); the daemons listen on the
# host name, which must resolve to a loopback address (checked), so nothing is reachable from outside.
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-/tmp/promptlottery-slurm}
CTLD_PORT=${LOCAL_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${LOCAL_SLURM_SLURMD_PORT:-6818}
HOST=$(hostname -s)
MUNGE_SOCKET=$DIR/munge/munge.socket

die() { echo "local_slurm: $*" >&2; exit 1; }

stop_pidfile() {  # stop_pidfile FILE: TERM the pid in FILE (if alive), wait up to 10 s
  local f=$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f "$f"
}

write_conf() {
  local cpus mem_mb
  cpus=$(nproc)
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))
  cat >"$DIR/slurm.conf" <<EOF
ClusterName=promptlottery-local
SlurmctldHost=$HOST
SlurmUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/slurmd
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
# no cgroups (containers, sandboxes): processes are tracked by parent pid, tasks are not pinned
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  [ "$(id -u)" -eq 0 ] || die "needs root (it starts munged, slurmctld and slurmd)"
  for b in munged slurmctld slurmd sinfo; do command -v "$b" >/dev/null || die "$b not found: apt-get install slurm-wlm munge"; done
  local addr
  addr=$(getent ahostsv4 "$HOST" | awk 'NR==1 {print $1}')
  [[ "$addr" == 127.* ]] || die "host name $HOST resolves to '$addr', not a loopback address: add '127.0.0.1 $HOST' to /etc/hosts"
  if [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
    echo "local_slurm: already running in $DIR"; echo "export SLURM_CONF=$DIR/slurm.conf"; return 0
  fi
  mkdir -p "$DIR/ctld" "$DIR/slurmd" "$DIR/munge"
  [ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || create-munge-key -f; }
  write_conf
  munged --socket="$MUNGE_SOCKET" --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
    --seed-file="$DIR/munge/munged.seed" --force
  export SLURM_CONF=$DIR/slurm.conf
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "local_slurm: up dir=$DIR partition=local cpus=$(nproc)"
      echo "export SLURM_CONF=$SLURM_CONF"
      return 0
    fi
    sleep 0.5
  done
  sinfo 2>&1 || true
  tail -5 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
  die "the node did not become idle in 30 s (logs in $DIR)"
}

stop() {
  stop_pidfile "$DIR/slurmd.pid"
  stop_pidfile "$DIR/slurmctld.pid"
  stop_pidfile "$DIR/munge/munged.pid"
  rm -rf "$DIR"
  echo "local_slurm: stopped dir=$DIR"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
