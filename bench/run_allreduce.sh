#!/usr/bin/env bash
# Allreduce bus bandwidth: Tandem's MPI communicator (bench/allreduce_perf) vs a plain
# MPI_Allreduce program (bench/peers/mpi_allreduce_peer), one after the other in one run, with
# the same mpirun placement, flags and sizes. Prints both outputs, then a markdown table of busbw
# per size from 1 MiB up with the ratio Tandem / MPI (goal: >= 0.90 at every size).
# ROUNDS > 1 alternates the two programs that many times and keeps each one's best busbw per
# size: on a shared machine, neighbours' load then hurts both sides alike.
#   bench/run_allreduce.sh [extra allreduce_perf flags]
#   NP=2 ITERS=20 WARMUP=5 MIN=1M MAX=64M ROUNDS=1 BUILD_DIR=build bench/run_allreduce.sh -d float -o sum
set -euo pipefail
cd "$(dirname "$0")/.."
NP=${NP:-2}
BUILD_DIR=${BUILD_DIR:-build}
FLAGS=(-b "${MIN:-1M}" -e "${MAX:-64M}" -f 2 -n "${ITERS:-20}" -w "${WARMUP:-5}" -c 1 "$@")
if [[ ! -x "$BUILD_DIR/bin/allreduce_perf" || ! -x "$BUILD_DIR/bin/mpi_allreduce_peer" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
  ninja -C "$BUILD_DIR" allreduce_perf mpi_allreduce_peer >/dev/null
fi
# Root in containers; more ranks than cores when asked for.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun -np "$NP" --oversubscribe --bind-to none)
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
for round in $(seq 1 "${ROUNDS:-1}"); do
  "${MPIRUN[@]}" "$BUILD_DIR/bin/allreduce_perf" --backend mpi "${FLAGS[@]}" >"$out_dir/tandem.$round"
  "${MPIRUN[@]}" "$BUILD_DIR/bin/mpi_allreduce_peer" "${FLAGS[@]}" >"$out_dir/peer.$round"
done
cat "$out_dir/tandem.1" "$out_dir/peer.1"
python3 - "$out_dir" <<'PY'
import glob, sys
def rows(prefix):
    out = {}
    for path in sorted(glob.glob(f"{sys.argv[1]}/{prefix}.*")):
      for line in open(path).read().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        f = line.split()
        # size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
        best = out.get(int(f[0]), (0.0, 0.0))
        out[int(f[0])] = (max(best[0], float(f[7])), max(best[1], float(f[11])))
    return out
t, p = rows("tandem"), rows("peer")
print("\n| size (B) | Tandem busbw out/in (GB/s) | MPI busbw out/in (GB/s) | ratio out | ratio in |")
print("|---|---|---|---|---|")
worst = None
for size in sorted(t):
    if size < (1 << 20) or size not in p:
        continue
    (to, ti), (po, pi) = t[size], p[size]
    ro, ri = to / po if po else float("nan"), ti / pi if pi else float("nan")
    worst = min(ro, ri) if worst is None else min(worst, ro, ri)
    print(f"| {size} | {to:.2f} / {ti:.2f} | {po:.2f} / {pi:.2f} | {ro:.2f} | {ri:.2f} |")
if worst is not None:
    print(f"\nworst ratio {worst:.2f} (goal >= 0.90)")
PY
