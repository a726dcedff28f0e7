#!/usr/bin/env bash
# Allreduce bandwidth and DDP step time between 2 "hosts" that are network namespaces
# (scripts/netns_cluster.sh; docs/MULTINODE.md), over TCP on their veth links, with the links
# limited to RATE (a tc token bucket, tbf, with BURST on both root-side ends; "none" leaves them
# unlimited; this kernel has no netem).
#   RATE=1gbit bench/run_netns.sh allreduce [allreduce_perf flags]
#   RATE=1gbit MODEL=mlp_deep bench/run_netns.sh ddp BUCKET_MIB...   (bench_ddp, batch 128 per rank)
# Needs root; the cluster is taken down at the end whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
RATE=${RATE:-none}
what=${1:-}; shift || true
case "$what" in allreduce|ddp) ;; *) echo "usage: RATE=1gbit $0 allreduce [flags] | ddp BUCKET_MIB..." >&2; exit 2 ;; esac
cluster=scripts/netns_cluster.sh
# Under the cluster's lock with 2 hosts up (and down again at the end): this script again.
if [ -z "${TANDEM_NETNS_BENCH_INSIDE:-}" ]; then
  exec "$cluster" run 2 3600 -- env TANDEM_NETNS_BENCH_INSIDE=1 "$PWD/bench/run_netns.sh" "$what" "$@"
fi
if [ "$RATE" != none ]; then
  for link in tdm-h0 tdm-h1; do tc qdisc replace dev "$link" root tbf rate "$RATE" burst "${BURST:-128kb}" latency 50ms; done
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
read -r -a mpirun_args <<<"$("$cluster" mpirun-args)"
MPIRUN=(mpirun -np 2 -H "$("$cluster" hosts)" "${mpirun_args[@]}" -x OMP_NUM_THREADS)
echo "# link rate: $RATE (burst ${BURST:-128kb}); hosts: $("$cluster" hosts)"
if [ "$what" = allreduce ]; then
  "${MPIRUN[@]}" "$BUILD_DIR/bin/allreduce_perf" --backend mpi "$@" 2>&1 | grep -v setpgid
else
  for mib in "$@"; do
    "${MPIRUN[@]}" "$BUILD_DIR/bin/bench_ddp" "${MODEL:-mlp_deep}" 128 /usr/share/datasets/fashion-mnist "$mib" 2>&1 | grep '^{'
  done
fi
