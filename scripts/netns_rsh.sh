#!/usr/bin/env bash
# Open MPI's launcher agent for the namespace cluster of scripts/netns_cluster.sh, in ssh's
# place (--mca plm_rsh_agent): `netns_rsh.sh HOST COMMAND...` runs COMMAND with /bin/sh inside
# the network namespace named HOST (tandem-node<i>) or whose link carries the address HOST, as
# ssh would run it on that host.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 HOST COMMAND..." >&2; exit 2; }
host=$1; shift
for ns in $(ip netns list | awk '{print $1}' | grep '^tandem-node[0-9]*$'); do
  if [ "$ns" = "$host" ] || ip -n "$ns" -4 -o addr show | awk '{print $4}' | grep -qx "$host/24"; then
    # Its own hostname too (a UTS namespace): Open MPI names its session directories in the
    # shared /tmp after the host, and hosts sharing one would remove each other's files.
    exec ip netns exec "$ns" unshare --uts /bin/sh -c "echo $ns > /proc/sys/kernel/hostname && $*"
  fi
done
echo "netns_rsh: no tandem-node namespace is named '$host' or has that address; is the cluster up (scripts/netns_cluster.sh status)?" >&2
exit 255
