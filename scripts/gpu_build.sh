#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, what a run on the lent GPU machine needs, into build-gpu/:
# Hopper code only (sm_90), libtandem as a shared library so the test and bench binaries stay
# small enough to carry (64 MiB in all), and portable x86-64 code (no -march=native: the GPU
# machine's CPU may differ). Then packs the Open MPI runtime into .device/.
#   scripts/gpu_build.sh            then, with the device tool:
#   run(command="bash scripts/gpu_run.sh", carry=[".device", "build-gpu"])
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-gpu
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF "/$BUILD/" "$exclude" 2>/dev/null || echo "/$BUILD/" >> "$exclude"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DBUILD_SHARED_LIBS=ON -DTANDEM_NATIVE_ARCH=OFF "${launcher[@]}" >/dev/null
# Every test executable (the whole suite runs there) and the GPU benchmarks.
targets=$(ninja -C "$BUILD" -t targets all | sed -n 's|^\(tests/[a-z_]*/test_[a-z_0-9]*\): .*|\1|p' | sort -u)
ninja -C "$BUILD" -j "${TANDEM_JOBS:-$(nproc)}" tandem tandem_cli xpu_cli bench_mlp_step bench_gemm_cuda \
  bench_cuda_bandwidth bench_reduce_cuda allreduce_perf $targets
pwd > "$BUILD/BUILT_AT"   # test binaries name the tandem CLI by this absolute path
strip --strip-unneeded "$BUILD"/libtandem.so "$BUILD"/bin/* "$BUILD"/tests/*/test_* 2>/dev/null || true
bash ../shared/gpu/pack.sh 2>/dev/null || echo "note: ../shared/gpu/pack.sh not found; carry .device yourself"
du -sh "$BUILD"/libtandem.so "$BUILD"/bin "$BUILD"/tests 2>/dev/null | sed 's/^/size: /'
