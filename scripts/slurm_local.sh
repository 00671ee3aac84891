#!/usr/bin/env bash
# A real single-node Slurm on this machine (Debian/Ubuntu, as root): for CI and for trying
# `python -m harness.cluster slurm ...` without a cluster. CPU only; the GPU types are node features.
#
#   scripts/slurm_local.sh start     # apt-get install what is missing, write the configs, start the daemons
#   scripts/slurm_local.sh status    # sinfo, and whether the daemons run
#   scripts/slurm_local.sh stop      # stop the daemons this script started
#
# Accounting, as on real clusters: slurmdbd on a local MariaDB, so `sacct` knows every job. Where that
# cannot start (or SLURM_LOCAL_ACCOUNTING=none), Slurm runs without it and harness.cluster reads the job
# states from squeue alone (finished jobs stay there for MinJobAge=3600 s); the script says which.
# Writes /etc/slurm/slurm.conf and slurmdbd.conf (only if absent or written by this script before);
# state and logs go under $SLURM_LOCAL_DIR (default /var/tmp/harness-slurm).
# Exit status: 0 = running; 3 = cannot run here (not root, no apt, a daemon would not start), with one
# line saying why on stderr, so that a caller can skip loudly; 2 = usage.
# Knobs: SLURM_LOCAL_FEATURES (default a100,h100), SLURM_LOCAL_ACCOUNTING (dbd | none), SLURM_LOCAL_DIR.
set -euo pipefail

ACTION=${1:-start}
DIR=${SLURM_LOCAL_DIR:-/var/tmp/harness-slurm}
FEATURES=${SLURM_LOCAL_FEATURES:-a100,h100}
ACCOUNTING=${SLURM_LOCAL_ACCOUNTING:-dbd}
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
MARK="# written by gpt-harness scripts/slurm_local.sh"
NODE=$(hostname -s)

cannot() { echo "slurm_local: cannot run Slurm here: $*" >&2; exit 3; }
say() { echo "slurm_local: $*"; }

node_up() { sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; }

apt_install() {  # apt_install PACKAGE... (quiet; `apt-get update` once if the lists are stale)
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y --no-install-recommends "$@" >>"$DIR/apt.log" 2>&1 && return 0
  apt-get update >>"$DIR/apt.log" 2>&1 || return 1
  apt-get install -y --no-install-recommends "$@" >>"$DIR/apt.log" 2>&1
}

ours_or_absent() {
  [ ! -e "$1" ] || grep -qxF "$MARK" "$1" || cannot "$1 exists and was not written by this script; not touching it"
}

start_munge() {
  if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    [ -s /etc/munge/munge.key ] || mungekey --create --keyfile=/etc/munge/munge.key
    chown munge:munge /etc/munge/munge.key && chmod 600 /etc/munge/munge.key
    mkdir -p /run/munge /var/lib/munge /var/log/munge
    chown munge:munge /run/munge /var/lib/munge /var/log/munge
    runuser -u munge -- /usr/sbin/munged || cannot "munged would not start (see /var/log/munge/munged.log)"
    touch "$DIR/started-munged"
  fi
  for _ in $(seq 20); do
    munge -n </dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  cannot "munge does not answer (see /var/log/munge/munged.log)"
}

start_dbd() {  # slurmdbd on a local MariaDB; returns non-zero (and the caller goes on without) on any failure
  command -v slurmdbd >/dev/null && command -v mariadbd >/dev/null || apt_install slurmdbd mariadb-server || return 1
  if ! mysqladmin ping >/dev/null 2>&1; then
    service mariadb start >>"$DIR/log/mariadb.log" 2>&1 || return 1
    touch "$DIR/started-mariadb"
  fi
  [ ! -e "$DBD_CONF" ] || grep -qxF "$MARK" "$DBD_CONF" || return 1  # someone else's: leave it
  # Root over the local socket (MariaDB's unix_socket login for the OS root): no password anywhere.
  cat >"$DBD_CONF" <<EOF
$MARK
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=root
StorageLoc=harness_slurm_acct
PidFile=$DIR/slurmdbd.pid
LogFile=$DIR/log/slurmdbd.log
EOF
  chmod 600 "$DBD_CONF"
  pgrep -x slurmdbd >/dev/null || slurmdbd || return 1
  for _ in $(seq 30); do
    sacctmgr -n list cluster >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  return 1
}

write_conf() {  # write_conf dbd|none
  ours_or_absent "$CONF"
  local cpus mem accounting
  cpus=$(nproc)
  # 512 MiB below MemTotal: the node is never drained for "low RealMemory" when the kernel's count moves.
  mem=$(awk '/^MemTotal:/ {print int($2 / 1024) - 512}' /proc/meminfo)
  if [ "$1" = dbd ]; then
    accounting="JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost"
  else
    accounting="JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none"
  fi
  cat >"$CONF" <<EOF
$MARK
ClusterName=harness-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/d
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
# No cgroups (containers, CI): plain process tracking, no task binding.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobContainerType=job_container/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
$accounting
ReturnToService=2
SlurmdTimeout=60
# Finished jobs stay in slurmctld (and so in squeue --states=all) for an hour: without accounting that is
# the only place their state is.
MinJobAge=3600
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Features=$FEATURES State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
  [ "$(id -u)" = 0 ] || cannot "starting slurmctld and slurmd needs root"
  mkdir -p "$DIR/ctld" "$DIR/d" "$DIR/log" /etc/slurm
  if pgrep -x slurmctld >/dev/null && pgrep -x slurmd >/dev/null && node_up; then
    say "already running"; sinfo; return 0
  fi
  if ! { command -v slurmctld && command -v slurmd && command -v munged && command -v sbatch; } >/dev/null; then
    command -v apt-get >/dev/null || cannot "slurmctld/slurmd/munged are not installed and there is no apt-get"
    apt_install slurm-wlm munge || cannot "apt-get install slurm-wlm munge failed (see $DIR/apt.log)"
  fi
  start_munge
  local mode=none
  if [ "$ACCOUNTING" = dbd ]; then
    write_conf dbd  # first: sacctmgr, which tells when slurmdbd is up, finds slurmdbd through it
    if start_dbd; then mode=dbd; else
      say "accounting: slurmdbd/MariaDB would not start (see $DIR/log/, $DIR/apt.log); going on without it: sacct knows no jobs, squeue does"
    fi
  fi
  [ "$mode" = dbd ] || write_conf none
  pgrep -x slurmctld >/dev/null || slurmctld -i || cannot "slurmctld would not start (see $DIR/log/slurmctld.log)"
  pgrep -x slurmd >/dev/null || slurmd || cannot "slurmd would not start (see $DIR/log/slurmd.log)"
  for _ in $(seq 60); do
    if node_up; then
      say "running: Slurm $(sinfo -V | awk '{print $2}'), node $NODE ($(nproc) CPUs, features $FEATURES), accounting: $mode"
      sinfo
      return 0
    fi
    sleep 1
  done
  tail -5 "$DIR/log/slurmctld.log" "$DIR/log/slurmd.log" >&2 || true
  cannot "the node did not come up within 60 s (logs above)"
}

stop() {
  local pidfile pid
  for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/slurmdbd.pid"; do
    [ -s "$pidfile" ] || continue
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    rm -f "$pidfile"
  done
  if [ -e "$DIR/started-mariadb" ]; then service mariadb stop >/dev/null 2>&1 || true; rm -f "$DIR/started-mariadb"; fi
  if [ -e "$DIR/started-munged" ] && [ -s /run/munge/munged.pid ]; then
    kill "$(cat /run/munge/munged.pid)" 2>/dev/null || true; rm -f "$DIR/started-munged"
  fi
  say "stopped"
}

case "$ACTION" in
  start) start ;;
  stop) stop ;;
  status) if pgrep -x slurmctld >/dev/null && node_up; then sinfo; else say "not running"; exit 1; fi ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
