#!/usr/bin/env bash
# Runs a command that must fail: passes when it exits non-zero within LIMIT seconds and its
# combined output matches every REGEX given. Usage:
#   expect_job_failure.sh [--code N] LIMIT REGEX [REGEX...] -- command args...
# --code N: the exit code must be N. A REGEX written "once:REGEX" must match exactly one line
# (an error printed by the rank that failed and by no other).
set -u
code_wanted=""
if [ "$1" = "--code" ]; then code_wanted=$2; shift 2; fi
limit=$1; shift
patterns=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do patterns+=("$1"); shift; done
shift
out=$(mktemp)
start=$(date +%s)
timeout --kill-after=5 "$limit" "$@" >"$out" 2>&1
code=$?
elapsed=$(( $(date +%s) - start ))
cat "$out"
echo "--- exit code $code after ${elapsed}s (limit ${limit}s)"
status=0
if [ "$code" -eq 0 ]; then echo "FAIL: the job succeeded, expected a failure"; status=1; fi
if [ -n "$code_wanted" ] && [ "$code" -ne "$code_wanted" ]; then
  echo "FAIL: exit code $code, expected $code_wanted"; status=1
fi
# timeout(1) exits 124 (or 137 after --kill-after); a job killed by a signal also gives 137,
# so the clock decides.
if [ "$elapsed" -ge "$limit" ]; then echo "FAIL: the job hung until the ${limit}s limit"; status=1; fi
for p in "${patterns[@]}"; do
  if [ "${p#once:}" != "$p" ]; then
    n=$(grep -Ec -- "${p#once:}" "$out")
    [ "$n" -eq 1 ] || { echo "FAIL: /${p#once:}/ matches $n lines, expected exactly 1"; status=1; }
  else
    grep -Eq -- "$p" "$out" || { echo "FAIL: output does not match /$p/"; status=1; }
  fi
done
rm -f "$out"
[ $status -eq 0 ] && echo "PASS"
exit $status
