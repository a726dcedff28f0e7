#!/usr/bin/env bash
# scripts/gpu_run.sh spends a loan's scarce device time, so it refuses bad input before any step
# runs: an unknown phase and an ONLY name that is not a step exit 2 and name what is allowed; a
# checkout without the carried binaries (.gpu/) exits 1 and says how to make them. Needs no GPU.
# The script runs from a scratch copy of scripts/, so a developer's real .gpu/ is never used.
#   tests/gpu/gpu_run_refuses_bad_input.sh SCRIPTS_DIR
set -u
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/scripts"
cp "$1/gpu_run.sh" "$tree/scripts/"
run() { OUT="$tree/out" bash "$tree/scripts/gpu_run.sh" "$@" 2>&1; }
fail() {
  echo "FAIL: $*"
  exit 1
}

out=$(ONLY="cuda_tests benchh_gemm" run)
rc=$?
[ "$rc" -eq 2 ] || fail "a misspelt step exited $rc, expected 2: $out"
[[ $out == *"'benchh_gemm', which is not a step"*"bench_gemm"* ]] || fail "a misspelt step said: $out"
[ ! -e "$tree/out" ] || fail "a misspelt step began the run (it wrote $tree/out)"

out=$(run run)
rc=$?
[ "$rc" -eq 2 ] || fail "an unknown phase exited $rc, expected 2: $out"
[[ $out == *"unknown phase 'run'"*"check"* ]] || fail "an unknown phase said: $out"

out=$(ONLY=cuda_tests run)
rc=$?
[ "$rc" -eq 1 ] || fail "no .gpu/ exited $rc, expected 1: $out"
[[ $out == *"no .gpu/ here: run scripts/gpu_build.sh"* ]] || fail "no .gpu/ said: $out"
echo "gpu_run.sh refused each bad input"
