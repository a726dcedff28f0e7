#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, what a run on the lent GPU machine needs, into build-gpu/:
# Hopper code only (sm_90), the library's layers as shared libraries so the test and bench
# binaries stay small enough to carry (64 MiB in all), and portable x86-64 code (no
# -march=native: the GPU machine's CPU may differ). Then packs the Open MPI runtime into .device/.
# The build folder holds object files too (over the carry limit), so the binaries, with their
# layout, are copied into .gpu/ (git-ignored), which is what travels:
#   scripts/gpu_build.sh            then, with the device tool:
#   run(command="bash scripts/gpu_run.sh gpu", carry=[".device", ".gpu"]), then "suite", then "bench"
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-gpu
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
for ignored in "/$BUILD/" "/.gpu/"; do
  grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
done
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DBUILD_SHARED_LIBS=ON -DTANDEM_NATIVE_ARCH=OFF "${launcher[@]}" >/dev/null
# Every test executable (the whole suite runs there) and the GPU benchmarks.
targets=$(ninja -C "$BUILD" -t targets all | sed -n 's|^\(tests/[a-z_]*/test_[a-z_0-9]*\): .*|\1|p' | sort -u)
ninja -C "$BUILD" -j "${TANDEM_JOBS:-$(nproc)}" tandem tandem_cli xpu_cli bench_mlp_step bench_gemm_cuda \
  bench_cuda_bandwidth bench_reduce_cuda bench_attention_cuda allreduce_perf $targets
rm -rf .gpu && mkdir -p .gpu
# Test binaries name the CLI and plugins by absolute paths under this checkout's build-gpu/:
# gpu_run.sh makes that path lead to the carried copy.
pwd > .gpu/BUILT_AT
(cd "$BUILD" && find . -path ./CMakeFiles -prune -o -type f \( -name 'libtandem*.so' -o -path './bin/*' \
  -o -regex '\./tests/[a-z_]*/test_[a-z_0-9]*' \) -print | while read -r f; do
    mkdir -p "../.gpu/$(dirname "$f")" && cp "$f" "../.gpu/$f"
  done)
strip --strip-unneeded $(find .gpu -type f ! -name BUILT_AT) 2>/dev/null || true
bash ../shared/gpu/pack.sh 2>/dev/null || echo "note: ../shared/gpu/pack.sh not found; carry .device yourself"
du -sh .gpu .device 2>/dev/null | sed 's/^/carry: /'
