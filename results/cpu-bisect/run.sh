#!/bin/bash
# The real run behind results/cpu-bisect (docs/bisect.md): run from the repository root on an idle machine.
# Each step reuses the clean records the ones before it left in results/cpu-bisect/records (runs timed under
# contention are measured again: they count nowhere). Its output: logs/run-<date>.log.
set -u
out=results/cpu-bisect
common=(--rung bf16 --good 2.1.2 --bad 2.15.0 --device cpu --threads 1 --repeats 2 --out "$out" --remove-venvs --free-disk)
step() {
  echo "=== $(date -u +%FT%TZ) start: python -m harness.bisect $*"
  echo "    disk free: $(df -h / | tail -1 | awk '{print $4}'), uv cache: $(du -sh ~/.cache/uv 2>/dev/null | cut -f1), load: $(cut -d' ' -f1-3 /proc/loadavg)"
  local t0=$(date +%s)
  python -m harness.bisect "$@"
  local rc=$?  # before any $(...) below: they would overwrite $? (the 2026-11-24 log says "exit 0" for each step for that reason)
  echo "=== $(date -u +%FT%TZ) exit $rc after $(( $(date +%s) - t0 )) s; disk free: $(df -h / | tail -1 | awk '{print $4}'), uv cache: $(du -sh ~/.cache/uv 2>/dev/null | cut -f1)"
}
step "${common[@]}" --metric tokens_per_s
step "${common[@]}" --metric tokens_per_s --landscape --newest-patches
step "${common[@]}" --metric peak_memory
# the tokens/s bisect once more: two of its first points had a run timed under contention, which the landscape
# measured again; this reuses every clean point and says the answer on them
step "${common[@]}" --metric tokens_per_s
