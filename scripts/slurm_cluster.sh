#!/usr/bin/env bash
# A real Slurm cluster on this machine, for the `slurm` tests and for trying job scripts: one
# controller (slurmctld, host tandem-ctld at 10.77.0.1, the bridge of scripts/netns_cluster.sh)
# and N compute nodes (slurmd, hosts tandem-node0..N-1 at 10.77.0.10+i), each slurmd inside its
# network namespace and its own UTS namespace (so its hostname is its node name), authenticated
# by one munged with a fresh key. Debian 12's slurm-wlm 22.05 and munge; no cgroups
# (proctrack/linuxproc, task/none), select/linear (a job gets whole nodes), srun --mpi=pmix by
# default (Debian's Open MPI 4.1 is built against the same external PMIx 4 as Slurm's mpi/pmix
# plugin, and has no PMI-2 client: docs/MULTINODE.md). Everything lives under $TANDEM_SLURM_DIR
# (default /tmp/tandem-slurm): slurm.conf, the munge key and socket, spool, state and log files.
#
#   slurm_cluster.sh up [N]       install slurm-wlm/munge if missing, bring N nodes up (2..8,
#                                 default 2), wait until every node is idle
#   slurm_cluster.sh down         stop every daemon `up` started, remove the namespaces and files
#   slurm_cluster.sh status       the daemons and sinfo's view
#   slurm_cluster.sh env          the export line clients need (SLURM_CONF)
#   slurm_cluster.sh check        exit 0 when root, namespaces and the packages are here, else say why
#   slurm_cluster.sh run N LIMIT -- COMMAND...
#                                 COMMAND with the cluster up and SLURM_CONF set, holding the
#                                 lock scripts/netns_cluster.sh's runs hold, killed after LIMIT
#                                 seconds; the cluster is taken down afterwards whatever happens;
#                                 skips (77) instead of installing when the packages are missing
#
# Exit codes: 0 done; 2 usage error; 77 (ctest's skip code) when root, network namespaces or the
# packages are missing (`run` and `check`); 1 anything else.
set -euo pipefail

readonly here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly netns=$here/netns_cluster.sh
readonly state_dir=${TANDEM_SLURM_DIR:-/tmp/tandem-slurm}
readonly conf=$state_dir/slurm.conf
readonly lock=/run/lock/tandem-netns.lock
readonly ctld_host=tandem-ctld ctld_addr=10.77.0.1

usage() {
  echo "usage: $0 up [N] | down | status | env | check | run N LIMIT -- COMMAND..." >&2
  echo "       (N: 2..8 nodes, default 2; LIMIT: seconds)" >&2
  exit 2
}

packages_missing() {
  local b
  for b in slurmctld slurmd srun sbatch scontrol munged; do
    command -v "$b" >/dev/null || { echo "slurm cluster: $b is missing (scripts/install-deps.sh --slurm installs slurm-wlm and munge)"; return 0; }
  done
  return 1
}

check() {
  local reason
  reason=$("$netns" check) || { echo "${reason/netns cluster/slurm cluster}"; return 77; }
  if packages_missing >/dev/null; then packages_missing; return 77; fi
  command -v unshare >/dev/null || { echo "slurm cluster: unshare is missing (util-linux)"; return 77; }
}

write_conf() {
  local n=$1 i nodes=""
  for ((i = 0; i < n; i++)); do nodes+="${nodes:+,}tandem-node$i"; done
  {
    echo "# Written by scripts/slurm_cluster.sh; removed by its down."
    echo "ClusterName=tandem"
    echo "SlurmctldHost=$ctld_host($ctld_addr)"
    echo "AuthType=auth/munge"
    echo "AuthInfo=socket=$state_dir/munge/munge.socket"
    echo "CredType=cred/munge"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$state_dir/ctld"
    echo "SlurmctldPidFile=$state_dir/slurmctld.pid"
    echo "SlurmctldLogFile=$state_dir/log/slurmctld.log"
    echo "SlurmdSpoolDir=$state_dir/spool/%n"
    echo "SlurmdPidFile=$state_dir/%n.pid"
    echo "SlurmdLogFile=$state_dir/log/%n.log"
    # The nodes share this machine's /tmp: mpi/pmix's per-step directories must not collide.
    echo "TmpFS=$state_dir/tmp/%n"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SelectType=select/linear"
    echo "MpiDefault=pmix"
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "SchedulerType=sched/builtin"
    echo "SlurmdTimeout=10"
    echo "SlurmctldTimeout=10"
    echo "MessageTimeout=5"
    echo "KillWait=5"
    echo "MinJobAge=300"
    echo "InactiveLimit=0"
    echo "SlurmdParameters=config_overrides"
    for ((i = 0; i < n; i++)); do
      echo "NodeName=tandem-node$i NodeHostname=tandem-node$i NodeAddr=10.77.0.$((10 + i)) CPUs=2 State=UNKNOWN"
    done
    echo "PartitionName=debug Nodes=$nodes Default=YES MaxTime=INFINITE State=UP"
  } >"$conf"
}

start_munge() {
  mkdir -p "$state_dir/munge"
  chmod 700 "$state_dir/munge"
  head -c 1024 /dev/urandom >"$state_dir/munge/munge.key"
  chmod 400 "$state_dir/munge/munge.key"
  munged --force --socket="$state_dir/munge/munge.socket" --key-file="$state_dir/munge/munge.key" \
         --pid-file="$state_dir/munge/munged.pid" --log-file="$state_dir/log/munged.log" \
         --seed-file="$state_dir/munge/munged.seed"
}

# Runs a daemon in its own UTS namespace named $1, inside network namespace $2 (empty: the root one).
in_host() {
  local host=$1 ns=$2
  shift 2
  local prefix=()
  [ -z "$ns" ] || prefix=(nsenter --net="/run/netns/$ns")
  "${prefix[@]}" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@" && return 0
  echo "slurm cluster: $1 on $host did not start; the end of its log:" >&2
  tail -n 12 "$state_dir/log/${1/slurmd/$host}.log" >&2 2>/dev/null || true
  return 1
}

wait_idle() {
  local n=$1 tries=0
  while :; do
    local idle
    idle=$(SLURM_CONF=$conf sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 == "idle"' | wc -l) || true
    [ "$idle" -ge "$n" ] && return 0
    tries=$((tries + 1))
    if [ $tries -ge 150 ]; then
      echo "slurm cluster: only $idle of $n nodes idle after 30 s; the ends of the daemons' logs:" >&2
      SLURM_CONF=$conf sinfo -N >&2 || true
      local log
      for log in "$state_dir"/log/*.log; do echo "== $log" >&2; tail -n 8 "$log" >&2; done
      return 1
    fi
    sleep 0.2
  done
}

up() {
  local n=${1:-2}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 8 ] ||
    { echo "slurm cluster: N=$n is not allowed; give 2..8 nodes" >&2; exit 2; }
  if packages_missing >/dev/null; then "$here/install-deps.sh" --slurm; fi
  local reason
  reason=$(check) || { echo "$reason" >&2; exit 77; }
  down
  TANDEM_NETNS_DIR=$state_dir/netns "$netns" up "$n" >/dev/null
  mkdir -p "$state_dir/ctld" "$state_dir/log" "$state_dir/spool"
  write_conf "$n"
  start_munge
  in_host "$ctld_host" "" slurmctld -f "$conf" -i || { down; exit 1; }
  local i
  for ((i = 0; i < n; i++)); do
    mkdir -p "$state_dir/spool/tandem-node$i" "$state_dir/tmp/tandem-node$i"
    in_host "tandem-node$i" "tandem-node$i" slurmd -f "$conf" || { down; exit 1; }
  done
  wait_idle "$n" || { down; exit 1; }
  echo "slurm cluster: controller $ctld_host ($ctld_addr), $n nodes idle; export SLURM_CONF=$conf"
}

# Running and not a zombie (this machine's init reaps exited daemons late).
alive() { local state; state=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $state != Z* ]]; }

down() {
  local f pids=()
  for f in "$state_dir"/tandem-node*.pid "$state_dir/slurmctld.pid" "$state_dir/munge/munged.pid"; do
    [ -s "$f" ] || continue
    # Only our daemons: a pid file left from before a reboot may name another process now.
    local pid; pid=$(cat "$f")
    [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" =~ ^(slurmd|slurmctld|munged)$ ]] && pids+=("$pid")
  done
  local tries=0
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    while alive "$pid" && [ $tries -lt 50 ]; do sleep 0.1; tries=$((tries + 1)); done
    kill -9 "$pid" 2>/dev/null || true
  done
  # The jobs' processes (slurmstepd and tasks) inside the hosts go with the namespaces.
  TANDEM_NETNS_DIR=$state_dir/netns "$netns" down
  rm -rf "$state_dir"
}

status() {
  [ -f "$conf" ] || { echo "slurm cluster: down"; return 0; }
  local f
  for f in "$state_dir/munge/munged.pid" "$state_dir/slurmctld.pid" "$state_dir"/tandem-node*.pid; do
    [ -e "$f" ] || continue
    local pid; pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then echo "$(basename "$f" .pid): running (pid $pid)"; else echo "$(basename "$f" .pid): not running"; fi
  done
  SLURM_CONF=$conf sinfo -N || true
}

run() {
  [ $# -ge 4 ] && [ "$3" = "--" ] && [[ "$2" =~ ^[0-9]+$ ]] || usage
  local n=$1 limit=$2
  shift 3
  local reason
  reason=$(check) || { echo "SKIPPED: $reason"; exit 77; }
  exec 9>"$lock"
  flock -w 600 9 || { echo "slurm cluster: another run held $lock for 600 s" >&2; exit 1; }
  trap down EXIT
  trap 'exit 1' INT TERM
  up "$n"
  local code=0
  SLURM_CONF=$conf timeout --kill-after=5 "$limit" "$@" || code=$?
  exit $code
}

case "${1:-}" in
  up) shift; [ $# -le 1 ] || usage; up "$@" ;;
  down) [ $# -eq 1 ] || usage; down ;;
  status) [ $# -eq 1 ] || usage; status ;;
  env) [ $# -eq 1 ] || usage; echo "export SLURM_CONF=$conf" ;;
  check) [ $# -eq 1 ] || usage; check ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
