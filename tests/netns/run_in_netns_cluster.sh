#!/usr/bin/env bash
# Runs a command with a namespace cluster of N hosts up (scripts/netns_cluster.sh), one such job
# at a time on this machine (a lock), and takes the cluster down afterwards whatever happens:
# the command is killed after LIMIT seconds. Exits 77 (ctest's skip code) with the reason when
# this machine cannot make namespaces (not root, no netns/veth/bridge).
#   run_in_netns_cluster.sh N LIMIT -- command args...
set -u
[ $# -ge 4 ] && [ "$3" = "--" ] || { echo "usage: $0 N LIMIT -- command args..." >&2; exit 2; }
nodes=$1 limit=$2; shift 3
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/netns_cluster.sh
reason=$("$cluster" check); code=$?
if [ $code -ne 0 ]; then echo "SKIPPED: $reason"; exit 77; fi
exec 9>/run/lock/tandem-netns.lock
flock -w 120 9 || { echo "another namespace cluster job held the lock for 120 s" >&2; exit 1; }
trap '"$cluster" down' EXIT
trap 'exit 1' INT TERM
"$cluster" up "$nodes" || exit 1
timeout --kill-after=5 "$limit" "$@"
