#!/usr/bin/env bash
# The scaling model (engine/strategies/scaling_model.h, docs/SCALING.md) against measured DDP
# steps between network-namespace "hosts" (scripts/netns_cluster.sh) whose links are limited to
# each RATE (a tc token bucket on every host's link, as bench/run_netns.sh does):
#   1. the step profile (forward, backward, optimizer) of bench_ddp's mlp_deep (784, eight hidden
#      layers of 512, 10; Adam; batch 128) measured by `tandem plan --predict` in one process, one
#      thread;
#   2. per host count and rate: alpha and bus bandwidth fitted to allreduce_perf's out-of-place
#      times (least squares of t = 2 (p - 1) alpha + 2 (p - 1) / p * n / B over 256 KiB-16 MiB);
#   2b. per host count, the host CPU per byte (gamma) from one run with no rate limit:
#      bench_ddp's step less its exposed communication less the one-process profile, over the
#      bytes a rank sends a step (2 (p - 1) / p of the gradients' bytes); the CPU time the TCP
#      stack and copies take from the cores that compute (docs/SCALING.md);
#   3. the model's step from 1, 2 and 2b (`tandem plan --predict --predict_step_ms=...
#      --predict_host_ns_per_byte=...`) beside bench_ddp's measured step (BATCHES steps of
#      mlp_deep over the same links), one JSON line each with the relative error.
#   RATES="200mbit 1gbit" HOSTS="2 3" BATCHES=40 bench/run_scaling_check.sh
# Needs root (namespaces, tc); the cluster is taken down after each run whatever happens.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TANDEM_BUILD_DIR:-build}
RATES=${RATES:-200mbit 1gbit}
HOSTS=${HOSTS:-2 3}
BATCHES=${BATCHES:-40}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}
MODEL_FLAGS=(--model.hidden=[512,512,512,512,512,512,512,512] --data.batch_size=128 --data.root="$DATA")
cluster=scripts/netns_cluster.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

if [ -z "${TANDEM_SCALING_INSIDE:-}" ]; then
  profile=$("$BUILD_DIR/bin/tandem" plan --trainer.accelerator=cpu "${MODEL_FLAGS[@]}" --predict 2>/dev/null |
    python3 -c 'import json, sys
p = json.load(sys.stdin)["prediction"]["step_profile"]
print("%.3f,%.3f,%.3f" % (p["forward_ms"], p["backward_ms"], p["optimizer_ms"]))')
  echo "# step profile (forward,backward,optimizer ms, one process, 1 thread): $profile; load: $(cut -d' ' -f1-3 /proc/loadavg)"
  for hosts in $HOSTS; do
    gamma=0
    for rate in none $RATES; do
      out=$("$cluster" run "$hosts" 1800 -- env TANDEM_SCALING_INSIDE=1 RATE="$rate" HOSTS_UP="$hosts" PROFILE="$profile" \
        GAMMA="$gamma" BATCHES="$BATCHES" DATA="$DATA" TANDEM_BUILD_DIR="$BUILD_DIR" "$PWD/bench/run_scaling_check.sh")
      echo "$out"
      [ "$rate" = none ] && gamma=$(echo "$out" | python3 -c 'import json, sys; print(json.loads(sys.stdin.read().splitlines()[-1])["host_ns_per_byte"])')
    done
  done
  exit 0
fi

# Inside the cluster's lock with HOSTS_UP hosts.
read -r -a mpirun_args <<<"$("$cluster" mpirun-args)"
MPIRUN=(mpirun -np "$HOSTS_UP" -H "$("$cluster" hosts)" "${mpirun_args[@]}" -x OMP_NUM_THREADS)
PLAN=("$BUILD_DIR/bin/tandem" plan --trainer.accelerator=cpu --trainer.num_nodes="$HOSTS_UP" --trainer.devices=1
  "${MODEL_FLAGS[@]}" --predict_step_ms="$PROFILE")
measure_step() { "${MPIRUN[@]}" "$BUILD_DIR/bin/bench_ddp" mlp_deep 128 "$DATA" 25 "$BATCHES" 2>/dev/null | grep '^{'; }
if [ "$RATE" = none ]; then  # the links as they are: fit gamma
  measured=$(measure_step)
  plan=$("${PLAN[@]}" 2>/dev/null)
  MEASURED="$measured" PLAN="$plan" python3 -c 'import json, os
m = json.loads(os.environ["MEASURED"]); p = json.loads(os.environ["PLAN"])["prediction"]
ranks = p["ranks"]; sent = 2 * (ranks - 1) / ranks * sum(p["bucket_bytes"])
compute = sum(float(x) for x in os.environ["PROFILE"].split(","))
host_ms = max(0.0, m["step_ms"] - m["exposed_comm_ms_per_step"] - compute)
print(json.dumps({"hosts": ranks, "rate": "none", "measured_step_ms": m["step_ms"],
                  "measured_exposed_ms": m["exposed_comm_ms_per_step"], "profile_compute_ms": round(compute, 1),
                  "host_ms": round(host_ms, 1), "bytes_sent": int(sent), "host_ns_per_byte": round(host_ms * 1e6 / sent, 3),
                  "load": open("/proc/loadavg").read().split()[:3]}))'
  exit 0
fi
for ((i = 0; i < HOSTS_UP; ++i)); do
  tc qdisc replace dev "tdm-h$i" root tbf rate "$RATE" burst 128kb latency 50ms
done
link=$("${MPIRUN[@]}" "$BUILD_DIR/bin/allreduce_perf" --backend mpi -b 256K -e 16M -f 2 -n 10 -w 3 -c 1 2>/dev/null |
  P="$HOSTS_UP" python3 -c 'import os, sys
p = int(os.environ["P"])
rows = [l.split() for l in sys.stdin if l.strip() and l.split()[0].isdigit()]
n = [float(r[0]) for r in rows]; t = [float(r[5]) * 1e-6 for r in rows]
k = len(n); mn = sum(n) / k; mt = sum(t) / k
b = sum((x - mn) * (y - mt) for x, y in zip(n, t)) / sum((x - mn) ** 2 for x in n)
a = max(0.0, mt - b * mn)
print("%.3f,%.6f" % (a / (2 * (p - 1)) * 1e6, 2 * (p - 1) / p / b / 1e9))')
measured=$(measure_step)
predicted=$("${PLAN[@]}" --predict_intra="$link" --predict_inter="$link" --predict_host_ns_per_byte="$GAMMA" 2>/dev/null)
MEASURED="$measured" PREDICTED="$predicted" LINK="$link" GAMMA="$GAMMA" python3 -c 'import json, os
m = json.loads(os.environ["MEASURED"]); p = json.loads(os.environ["PREDICTED"])["prediction"]
alpha_us, gbps = os.environ["LINK"].split(",")
print(json.dumps({"hosts": p["ranks"], "rate": os.environ["RATE"], "alpha_us": float(alpha_us), "busbw_gbps": float(gbps),
                  "host_ns_per_byte": float(os.environ["GAMMA"]), "predicted_host_ms": round(p["host_cpu_ms"], 1),
                  "predicted_step_ms": round(p["step_ms"], 1), "measured_step_ms": m["step_ms"],
                  "error": round(p["step_ms"] / m["step_ms"] - 1, 3),
                  "predicted_exposed_ms": round(p["exposed_communication_ms"], 1),
                  "measured_exposed_ms": m["exposed_comm_ms_per_step"],
                  "load": open("/proc/loadavg").read().split()[:3]}))'
