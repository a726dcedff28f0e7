#!/usr/bin/env bash
# A cluster of N "hosts" on this machine: Linux network namespaces tandem-node0..N-1, each with
# one veth link (tdm-n<i> inside, tdm-h<i> outside) into the bridge tdm-br0 in the root
# namespace, and its own IPv4 address 10.77.0.(10+i)/24 (the bridge is 10.77.0.1, so mpirun in
# the root namespace reaches every node). Open MPI starts its daemons in them through
# scripts/netns_rsh.sh instead of ssh (docs/MULTINODE.md).
#
#   netns_cluster.sh up [N]          create N hosts (2..8, default 2); writes the hostfile
#   netns_cluster.sh down            remove every namespace, link and file `up` made
#   netns_cluster.sh status          the hosts, their addresses and byte counters
#   netns_cluster.sh hosts           the addresses, comma-separated (for mpirun -H)
#   netns_cluster.sh hostfile        the path of the hostfile `up` wrote (one slot per host)
#   netns_cluster.sh mpirun-args     the Open MPI flags that launch into the hosts over TCP
#   netns_cluster.sh check           exit 0 when this machine can make namespaces, else say why
#   netns_cluster.sh run N LIMIT -- COMMAND...
#                                    COMMAND with N hosts up, one such run at a time on this
#                                    machine (a lock), killed after LIMIT seconds; the hosts are
#                                    taken down afterwards whatever happens; COMMAND's exit code
#
# Exit codes: 0 done; 2 usage error; 77 (ctest's skip code) when not root or network
# namespaces/veth/bridges are unavailable; 1 anything else.
set -euo pipefail

readonly ns_prefix=tandem-node
readonly bridge=tdm-br0
readonly subnet=10.77.0
readonly state_dir=${TANDEM_NETNS_DIR:-/tmp/tandem-netns}
readonly here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
readonly lock=/run/lock/tandem-netns.lock

usage() {
  echo "usage: $0 up [N] | down | status | hosts | hostfile | mpirun-args | check | run N LIMIT -- COMMAND..." >&2
  echo "       (N: 2..8 hosts, default 2; LIMIT: seconds)" >&2
  exit 2
}

node_ip() { echo "$subnet.$((10 + $1))"; }
namespaces() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^$ns_prefix[0-9]*$" | sort -V || true; }

# Whether namespaces, veth pairs and bridges can be made here; prints the reason when not.
check() {
  if [ "$(id -u)" -ne 0 ]; then echo "netns cluster: needs root (ip netns, veth and bridges)"; return 77; fi
  command -v ip >/dev/null || { echo "netns cluster: the ip command is missing (apt-get install iproute2)"; return 77; }
  local probe=tandem-probe$$
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "netns cluster: cannot create a network namespace here (ip netns add failed)"; return 77
  fi
  local ok=0
  if ! ip link add tdm-pv$$ type veth peer name tdm-pv$$p 2>/dev/null; then
    echo "netns cluster: cannot create veth links here"; ok=77
  else
    ip link del tdm-pv$$ 2>/dev/null || true
    if ! ip link add tdm-pb$$ type bridge 2>/dev/null; then
      echo "netns cluster: cannot create a bridge here"; ok=77
    fi
    ip link del tdm-pb$$ 2>/dev/null || true
  fi
  ip netns del "$probe" 2>/dev/null || true
  return $ok
}

down() {
  local ns
  for ns in $(namespaces); do
    # Processes still inside (a rank, an orted) would keep the namespace's links alive.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
  done
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep '^tdm-h[0-9]*$' || true); do
    ip link del "$link" 2>/dev/null || true
  done
  ip link del "$bridge" 2>/dev/null || true
  # Open MPI's session directories of the hosts (named after them), left by killed daemons.
  rm -rf "${TMPDIR:-/tmp}"/ompi."$ns_prefix"[0-9]*.* "$state_dir"
}

up() {
  local n=${1:-2}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 2 ] && [ "$n" -le 8 ] ||
    { echo "netns cluster: N=$n is not allowed; give 2..8 hosts" >&2; exit 2; }
  check >&2 || exit $?
  down  # idempotent: a cluster left by a killed run is replaced
  ip link add "$bridge" type bridge
  # Traffic between hosts stays on the bridge: a firewall's FORWARD policy (Docker sets DROP)
  # must not see it. Best effort: older kernels lack these per-bridge switches.
  ip link set "$bridge" type bridge nf_call_iptables 0 nf_call_ip6tables 0 nf_call_arptables 0 2>/dev/null || true
  ip addr add "$subnet.1/24" dev "$bridge"
  ip link set "$bridge" up
  mkdir -p "$state_dir"
  : >"$state_dir/hostfile"
  local i
  for ((i = 0; i < n; i++)); do
    local ns=$ns_prefix$i
    ip netns add "$ns"
    ip link add "tdm-h$i" type veth peer name "tdm-n$i" netns "$ns"
    ip link set "tdm-h$i" master "$bridge" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(node_ip "$i")/24" dev "tdm-n$i"
    ip -n "$ns" link set "tdm-n$i" up
    echo "$(node_ip "$i") slots=1" >>"$state_dir/hostfile"
  done
  # Wait until every link is up and its bridge port forwards (no ping here: iputils is optional).
  for ((i = 0; i < n; i++)); do
    local tries=0
    until [ "$(cat "/sys/class/net/tdm-h$i/operstate")" = up ] &&
          [ "$(cat "/sys/class/net/tdm-h$i/brport/state")" = 3 ]; do
      tries=$((tries + 1))
      [ $tries -lt 50 ] || { echo "netns cluster: the link of host $(node_ip "$i") does not come up" >&2; down; exit 1; }
      sleep 0.1
    done
  done
  echo "netns cluster: $n hosts up: $(hosts); hostfile $state_dir/hostfile"
}

hosts() { local ns out=""; for ns in $(namespaces); do out+="${out:+,}$(node_ip "${ns#"$ns_prefix"}")"; done; echo "$out"; }

status() {
  local list; list=$(namespaces)
  [ -n "$list" ] || { echo "netns cluster: down"; return 0; }
  local ns
  for ns in $list; do
    local i=${ns#"$ns_prefix"}
    echo "$ns $(node_ip "$i") rx_bytes=$(ip netns exec "$ns" cat "/sys/class/net/tdm-n$i/statistics/rx_bytes")" \
         "tx_bytes=$(ip netns exec "$ns" cat "/sys/class/net/tdm-n$i/statistics/tx_bytes")"
  done
}

# Daemons through our agent (no ssh), launched one by one from mpirun (no tree spawn: a daemon
# in one namespace must not start the next); out-of-band and MPI traffic over TCP on the
# cluster's subnet only: no shared memory (vader), no loopback, no eth0. A daemon that stops
# answering (a host cut off) is declared lost after 3 + 3 x 1 s of TCP keepalive instead of
# Open MPI's default 300 + 9 x 20 s.
mpirun_args() {
  echo "--mca plm_rsh_agent $here/netns_rsh.sh --mca plm_rsh_no_tree_spawn 1" \
       "--mca btl tcp,self --mca btl_tcp_if_include $subnet.0/24 --mca oob_tcp_if_include $subnet.0/24" \
       "--mca oob_tcp_keepalive_time 3 --mca oob_tcp_keepalive_intvl 1 --mca oob_tcp_keepalive_probes 3"
}

run() {
  [ $# -ge 4 ] && [ "$3" = "--" ] && [[ "$2" =~ ^[0-9]+$ ]] || usage
  local n=$1 limit=$2
  shift 3
  local reason
  reason=$(check) || { echo "SKIPPED: $reason"; exit 77; }
  exec 9>"$lock"
  flock -w 600 9 || { echo "netns cluster: another run held $lock for 600 s" >&2; exit 1; }
  trap down EXIT
  trap 'exit 1' INT TERM
  up "$n"
  local code=0
  timeout --kill-after=5 "$limit" "$@" || code=$?
  exit $code
}

case "${1:-}" in
  up) shift; [ $# -le 1 ] || usage; up "$@" ;;
  down) [ $# -eq 1 ] || usage; down ;;
  status) [ $# -eq 1 ] || usage; status ;;
  hosts) [ $# -eq 1 ] || usage; hosts ;;
  hostfile) [ $# -eq 1 ] || usage; echo "$state_dir/hostfile" ;;
  mpirun-args) [ $# -eq 1 ] || usage; mpirun_args ;;
  check) [ $# -eq 1 ] || usage; check ;;
  run) shift; run "$@" ;;
  *) usage ;;
esac
