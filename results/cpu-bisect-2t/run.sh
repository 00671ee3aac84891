#!/bin/bash
# The real run behind results/cpu-bisect-2t: the landscape of results/cpu-bisect again, at this machine's default
# 2 torch threads instead of 1 (issue 27: does the thread count change which release matters?). Run from the
# repository root on an idle machine. Its output: logs/run-<date>.log.
set -u
out=results/cpu-bisect-2t
common=(--rung bf16 --good 2.1.2 --bad 2.15.0 --device cpu --threads 2 --repeats 2 --out "$out" --remove-venvs --free-disk)
step() {
  echo "=== $(date -u +%FT%TZ) start: python -m harness.bisect $*"
  echo "    disk free: $(df -h / | tail -1 | awk '{print $4}'), uv cache: $(du -sh ~/.cache/uv 2>/dev/null | cut -f1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0=$(date +%s)
  python -m harness.bisect "$@"
  local rc=$?  # before any $(...) below: they would overwrite $?
  echo "=== $(date -u +%FT%TZ) exit $rc after $(( $(date +%s) - t0 )) s; disk free: $(df -h / | tail -1 | awk '{print $4}'), uv cache: $(du -sh ~/.cache/uv 2>/dev/null | cut -f1)"
}
step "${common[@]}" --metric tokens_per_s --landscape --newest-patches
# the same landscape once more: it reuses every clean point and measures again the builds whose runs were timed
# under contention (2.1.2 and 2.2.2 in the first pass: a helper's tests, before they were capped; see README.md)
step "${common[@]}" --metric tokens_per_s --landscape --newest-patches
