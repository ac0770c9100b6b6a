#!/usr/bin/env bash
# A one-node SLURM cluster on this machine, for testing the submitit launcher (needs root and the
# Debian packages slurm-wlm, slurmdbd, munge and mariadb-server; `make setup-cluster` installs them).
#   scripts/local_slurm.sh start   # munged, MariaDB, slurmdbd, slurmctld, slurmd; partition `local`
#                                  # = this host's CPUs
# slurmdbd (job accounting) is there because submitit asks `sacct` for a job's state: without it a
# job killed by scancel would never be seen to end.
#   export SLURM_CONF=/tmp/promptlottery-slurm/slurm.conf   # what `start` prints: sbatch/squeue use it
#   scripts/local_slurm.sh stop    # stops the daemons it started and removes the state dir
# Everything lives in $LOCAL_SLURM_DIR (default /tmp/promptlottery-slurm); the daemons listen on the
# host name, which must resolve to a loopback address (checked), so nothing is reachable from outside.
set -euo pipefail

DIR=${LOCAL_SLURM_DIR:-/tmp/promptlottery-slurm}
CTLD_PORT=${LOCAL_SLURM_CTLD_PORT:-6817}
SLURMD_PORT=${LOCAL_SLURM_SLURMD_PORT:-6818}
DBD_PORT=${LOCAL_SLURM_DBD_PORT:-6819}
DB_PORT=${LOCAL_SLURM_DB_PORT:-63306}
CLUSTER=promptlottery-local
HOST=$(hostname -s)

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
ClusterName=$CLUSTER
SlurmctldHost=$HOST
SlurmUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
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
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=$HOST
AccountingStoragePort=$DBD_PORT
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdTimeout=60
KillWait=5
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=local Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$DIR/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=$HOST
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StorageLoc=slurm_acct_db
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/slurmdbd.log
EOF
  chmod 600 "$DIR/slurmdbd.conf"
}

start_db() {  # MariaDB for slurmdbd: loopback TCP, small buffers, its own data dir
  mkdir -p "$DIR/db"
  chown mysql:mysql "$DIR/db"
  mariadb-install-db --no-defaults --user=mysql --datadir="$DIR/db/data" >"$DIR/db/install.log" 2>&1
  setsid mariadbd --no-defaults --user=mysql --datadir="$DIR/db/data" --socket="$DIR/db/mysqld.sock" \
    --pid-file="$DIR/db/mariadbd.pid" --bind-address=127.0.0.1 --port="$DB_PORT" --skip-name-resolve \
    --innodb-buffer-pool-size=32M --performance-schema=OFF --log-error="$DIR/db/error.log" \
    </dev/null >/dev/null 2>&1 &
  for _ in $(seq 60); do
    mariadb-admin --no-defaults --socket="$DIR/db/mysqld.sock" ping >/dev/null 2>&1 && break
    sleep 0.5
  done
  mariadb --no-defaults --socket="$DIR/db/mysqld.sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';" || die "MariaDB did not start (log: $DIR/db/error.log)"
}

start() {
  [ "$(id -u)" -eq 0 ] || die "needs root (it starts munged, slurmctld and slurmd)"
  for b in munged slurmctld slurmd slurmdbd sinfo mariadbd; do
    command -v "$b" >/dev/null || die "$b not found: apt-get install slurm-wlm slurmdbd munge mariadb-server"
  done
  local addr
  addr=$(getent ahostsv4 "$HOST" | awk 'NR==1 {print $1}')
  [[ "$addr" == 127.* ]] || die "host name $HOST resolves to '$addr', not a loopback address: add '127.0.0.1 $HOST' to /etc/hosts"
  if [ -f "$DIR/slurmctld.pid" ] && kill -0 "$(cat "$DIR/slurmctld.pid")" 2>/dev/null; then
    echo "local_slurm: already running in $DIR"; echo "export SLURM_CONF=$DIR/slurm.conf"; return 0
  fi
  mkdir -p "$DIR/ctld" "$DIR/slurmd" "$DIR/munge"
  [ -s /etc/munge/munge.key ] || { mungekey --create --force 2>/dev/null || create-munge-key -f; }
  write_conf
  # the default socket: slurmdbd's clients (sacctmgr, sacct) look for it there whatever slurm.conf says
  mkdir -p /run/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then  # else a munged already serves it
    munged --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
      --seed-file="$DIR/munge/munged.seed" --force
  fi
  export SLURM_CONF=$DIR/slurm.conf
  trap 'stop >/dev/null 2>&1' EXIT  # a half-started cluster is stopped again
  start_db
  SLURM_CONF=$DIR/slurmdbd.conf slurmdbd
  for _ in $(seq 30); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
  sacctmgr -i add account local Cluster="$CLUSTER" >/dev/null
  sacctmgr -i add user root Account=local Cluster="$CLUSTER" >/dev/null
  slurmctld -f "$SLURM_CONF"
  slurmd -f "$SLURM_CONF"
  for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then
      echo "local_slurm: up dir=$DIR partition=local cpus=$(nproc)"
      echo "export SLURM_CONF=$SLURM_CONF"
      trap - EXIT
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
  stop_pidfile "$DIR/slurmdbd.pid"
  stop_pidfile "$DIR/db/mariadbd.pid"
  stop_pidfile "$DIR/munge/munged.pid"
  rm -rf "$DIR"
  echo "local_slurm: stopped dir=$DIR"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) die "usage: $0 start|stop" ;;
esac
