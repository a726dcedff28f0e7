#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, what ONE call on the lent GPU machine runs (scripts/gpu_run.sh),
# and puts it where the call's carry takes it:
#   .gpu/     the binaries (stripped; laid out as in build-gpu/ so their RUNPATHs still lead to the
#             libtandem*.so beside them), targets.txt (target name -> path), BUILT_AT (this checkout)
#   .device/  Open MPI's runtime as Debian packages and device-env.sh (../shared/gpu/pack.sh),
#             lib/ (libraries that machine lacks: yaml-cpp), fallback/ (libraries used there only
#             where its ldconfig lacks them: libgomp, libudev), data/fashion-mnist/ (the training
#             file pair, all that `tandem fit` reads)
# The build is Hopper only (sm_90), the library's layers as shared libraries (small binaries) and
# portable x86-64 code (no -march=native: that machine's CPU may differ). Binaries are found by
# target name, not by source folder. Then the call, with the device tool:
#   run(command="bash scripts/gpu_run.sh", carry=[".device", ".gpu"], timeout_s=540)
# The carry and the working tree travel together, 64 MiB at most: the script prints the sizes and
# fails when they are over.
#   scripts/gpu_build.sh     (TANDEM_JOBS=N parallel jobs, default nproc; FASHION_MNIST_ROOT=dataset dir)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-gpu
LIMIT_BYTES=$((64 * 1024 * 1024))
TARGETS=(tandem_cli test_cuda_backend test_cuda_cli test_nccl bench_mlp_step bench_gpt bench_gemm_cuda bench_attention_cuda
  allreduce_perf)
DATA_ROOT=${FASHION_MNIST_ROOT:-/usr/share/datasets/fashion-mnist}
# ../shared beside the main checkout (also from a linked worktree, whose ../shared is elsewhere).
PACK=${PACK:-$(dirname "$(git rev-parse --path-format=absolute --git-common-dir)")/../shared/gpu/pack.sh}
[ -f "$PACK" ] || { echo "gpu_build.sh: $PACK not found (set PACK=path/to/pack.sh)" >&2; exit 2; }
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz; do
  [ -f "$DATA_ROOT/$f" ] || { echo "gpu_build.sh: $DATA_ROOT/$f not found; install Debian's dataset-fashion-mnist (scripts/install-deps.sh --data) or set FASHION_MNIST_ROOT" >&2; exit 2; }
done
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
for ignored in "/$BUILD/" "/.gpu/" "/.device/"; do
  grep -qxF "$ignored" "$exclude" 2>/dev/null || echo "$ignored" >> "$exclude"
done

start=$(date +%s)
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90-real \
  -DBUILD_SHARED_LIBS=ON -DTANDEM_NATIVE_ARCH=OFF "${launcher[@]}" >/dev/null
ninja -C "$BUILD" -j "${TANDEM_JOBS:-$(nproc)}" "${TARGETS[@]}"
echo "gpu_build.sh: built ${TARGETS[*]} in $(( $(date +%s) - start )) s"

# .gpu/: each target's executable at its path in the build folder, and every libtandem*.so.
rm -rf .gpu && mkdir -p .gpu
pwd > .gpu/BUILT_AT  # test binaries name the CLI by absolute path here: gpu_run.sh makes it lead to .gpu
ninja -C "$BUILD" -t targets all > .gpu/ninja-targets.tmp
for target in "${TARGETS[@]}"; do
  path=$(sed -n "s|^\([^:[]*\): [A-Z]*_EXECUTABLE_LINKER__${target}_[A-Za-z]*\$|\1|p" .gpu/ninja-targets.tmp | head -1)
  [ -n "$path" ] && [ -f "$BUILD/$path" ] || { echo "gpu_build.sh: no executable for target $target" >&2; exit 1; }
  echo "$target $path" >> .gpu/targets.txt
done
rm .gpu/ninja-targets.tmp
root=$PWD
(cd "$BUILD" && { cut -d' ' -f2 "$root/.gpu/targets.txt"; find . -path ./CMakeFiles -prune -o -name 'libtandem*.so*' -print; } |
  while read -r f; do mkdir -p "$root/.gpu/$(dirname "$f")" && cp -P "$f" "$root/.gpu/$f"; done)
find .gpu -type f ! -name '*.txt' ! -name BUILT_AT -exec strip --strip-unneeded {} +

# .device/: Open MPI (pack.sh), then the libraries and data beside it.
if [ -d .git ]; then
  bash "$PACK" >/dev/null
else
  # A linked worktree: .git is a file, so pack.sh's edit of .git/info/exclude cannot be made here;
  # it packs in a scratch repository (reusing packages already downloaded) and the result moves here.
  scratch=$(mktemp -d)
  git init -q "$scratch"
  [ -d .device/debs ] && mkdir -p "$scratch/.device" && cp -a .device/debs "$scratch/.device/"
  (cd "$scratch" && bash "$PACK" >/dev/null)
  mkdir -p .device && rm -rf .device/debs && mv "$scratch/.device/debs" "$scratch/.device/device-env.sh" .device/
  rm -rf "$scratch"
fi
rm -rf .device/lib .device/fallback .device/data
mkdir -p .device/lib .device/fallback .device/data/fashion-mnist
libs_of() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u; }
binaries=$(sed "s|^[^ ]* |.gpu/|" .gpu/targets.txt; find .gpu -name 'libtandem*.so*' -type f)
# shellcheck disable=SC2086
libs_of $binaries > .device/needed.txt
copy_lib() {  # copy_lib SONAME-PREFIX DIR: the resolved library, under its soname
  local found
  found=$(awk -v p="$1" 'index($1, p) == 1 {print $1, $2; exit}' .device/needed.txt)
  [ -n "$found" ] || { echo "gpu_build.sh: no binary links $1; nothing to carry for it" >&2; return 0; }
  cp -L "${found#* }" "$2/${found%% *}"
}
copy_lib libyaml-cpp.so .device/lib
copy_lib libgomp.so .device/fallback
copy_lib libudev.so .device/fallback
rm .device/needed.txt
cp "$DATA_ROOT"/train-images-idx3-ubyte.gz "$DATA_ROOT"/train-labels-idx1-ubyte.gz .device/data/fashion-mnist/

# What travels: tracked and untracked-not-ignored files, and the two carried folders.
tree_bytes=$(git ls-files -z --cached --others --exclude-standard |
  { xargs -0 stat -c %s 2>/dev/null || true; } | awk '{s += $1} END {print s + 0}')  # (deleted files: no size)
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
bytes() { du -sb "$@" | awk '{s += $1} END {print s}'; }
gpu_bytes=$(bytes .gpu) device_bytes=$(bytes .device)
total=$((tree_bytes + gpu_bytes + device_bytes))
echo "carry: .gpu $(mib "$gpu_bytes"), .device $(mib "$device_bytes") (Open MPI $(mib "$(bytes .device/debs)"),"\
" libraries $(mib "$(bytes .device/lib .device/fallback)"), data $(mib "$(bytes .device/data)")),"\
" working tree $(mib "$tree_bytes"): $(mib "$total") of 64 MiB"
if [ "$total" -gt "$LIMIT_BYTES" ]; then
  echo "gpu_build.sh: what travels is $(mib "$total"), over the device tool's 64 MiB" >&2
  exit 1
fi
