#!/usr/bin/env bash
# Redo the GPU checks on any machine with an NVIDIA GPU, with the `local` env (this interpreter's torch;
# nothing is installed, nothing is downloaded). Run from the repository root:
#
#   bash scripts/gpu_check.sh [RESULTS_DIR]        # one budgeted call, "quick" (below); RESULTS_DIR default
#                                                  # results/gpu-<hostname>-<yyyymmdd>
#   GPU_CHECK_STEPS=all bash scripts/gpu_check.sh [RESULTS_DIR]     # every long step below (tens of minutes)
#
# quick (the default since 2026-11-29: a lent machine gives one command of at most 10 minutes, and the long steps
#   ran past it): python -m harness.gpu_check (docs/gpu-check.md): the sanity check, then single runs in order of value
#   (the seed ladder's best rung and cuDNN attention at B=64, cuDNN+CCE stacked, the best stack at the largest B it
#   fits with the baseline on as many sequences in micro-batches, interleaved repeats, then the rest; the answered
#   padding A/B only when asked) while
#   GPU_CHECK_BUDGET_S lasts (default 480, compare/report/packing included): no run starts that its estimate (the
#   committed records of this GPU, scaled by this call's runs) says would not finish. GPU_CHECK_PACK_TO=DIR packs
#   everything into DIR as three files after every run (default: $OUT where it is set, the folder a lent machine
#   sends back; else no packing); GPU_CHECK_TIERS=a,b,... picks and orders the tiers.
#   `python -m harness.gpu_check --dry-run` prints the plan with estimated H100 times, on any machine.
#
# Steps (GPU_CHECK_STEPS: quick, or any of these; all = "explain ladder padding batch overhead compare report"; the
# CUDA sanity check runs first whenever explain, ladder, padding, batch, overhead or tune is selected):
#   sanity   nvidia-smi and torch/CUDA; stops the script with one line when torch sees no CUDA device
#   explain  seed-ladder rungs bf16 and sdpa-flash of gpt2-124m with kernel capture on; then
#            scripts/check_explain_records.py: lm_head GEMM kernel named, attention kernel named (by the
#            sdpa-flash rung: bf16 still has naive attention), memory_split, power and mfu available
#   ladder   the whole seed ladder of gpt2-124m at each B in GPU_CHECK_BATCHES (default "16 32 64");
#            one harness.run per B (--batch-size, not --sweep: sweep points stay out of compare's ladders)
#   padding  plan padding of gpt2-124m (B=16): the tf32/bf16 rungs at vocab 50257 and 50304 with Inductor's
#            shape/comprehensive padding at torch's default and off (harness/plans/padding.yaml): how much
#            of the TF32 memory rise and of the vocab-padding speed-up is the compiler's own padding
#   batch    harness.batch_search, gpt2-124m, rung fused-adamw-clip (bf16, compiled), T=1024
#   overhead scripts/overhead_check.py: the harness's tokens/s against a bare loop of the same workload
#            (gpt2-124m, fused-adamw-clip, B=64), 3 alternated rounds; fails beyond 1%. Its 3 harness
#            records are 3 more repeats of the ladder's B=64 best rung (their agreement shows in compare)
#   tune     (not in all: GPU_CHECK_STEPS="tune compare report") python -m harness.tune on gpt2-124m
#            from the seed ladder's fused-adamw-clip at B=64, --from every results/gpu-*/ folder: the knobs that
#            helped alone on this GPU there, stacked (each beyond-ladder knob alone where this GPU has no such
#            records), the batch search on the winner (docs/beyond.md); records in RESULTS_DIR/fastest
#   compare  python -m harness.compare on RESULTS_DIR (and results/reference, the user's logged numbers)
#   report   python -m harness.report on the same, into RESULTS_DIR/report
#
# Every run uses the preset's 50 steps (warm-up 10) and torch.compile, one fresh worker process per
# rung; expect tens of minutes for the ladder and the batch search. OOM rungs are results, not failures.
# Records go to RESULTS_DIR/{explain,ladder,padding,batch-search}; each step's output also to RESULTS_DIR/logs/.
# A relative RESULTS_DIR is taken from the directory the script is started in. The explain runs have the
# same workload as the ladder's bf16 and sdpa-flash rungs at B=16, so compare counts them as repeats.
# Interpreter: $HARNESS_LOCAL_PYTHON, else python3 (as nox's bench-local). Exit 0 when every selected
# step passed, 1 when one failed (the others still run), 2 on bad settings or no CUDA device.

set -uo pipefail

PY="${HARNESS_LOCAL_PYTHON:-python3}"
STEPS="${GPU_CHECK_STEPS:-quick}"
[[ "$STEPS" == "all" ]] && STEPS="explain ladder padding batch overhead compare report"
BUDGET="${GPU_CHECK_BUDGET_S:-480}"
BATCHES="${GPU_CHECK_BATCHES:-16 32 64}"
SENT_BACK="${OUT:-}"  # a lent machine's $OUT: what its command leaves there comes back (OUT is the results below)
OUT="${1:-results/gpu-${HOSTNAME:-$(uname -n)}-$(date +%Y%m%d)}"
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
PACK_TO="${GPU_CHECK_PACK_TO:-$SENT_BACK}"
case "$PACK_TO" in /*|"") ;; *) PACK_TO="$PWD/$PACK_TO" ;; esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 2

die() { echo "gpu_check: $*" >&2; exit 2; }

if [[ "$STEPS" == "quick" ]]; then  # the budgeted call: harness.gpu_check does every step itself
  [[ "$BUDGET" =~ ^[1-9][0-9]*$ ]] || die "GPU_CHECK_BUDGET_S: '$BUDGET' is not a positive whole number of seconds"
  quick=("$PY" -m harness.gpu_check --budget-s "$BUDGET" --out "$OUT")
  [[ -n "$PACK_TO" ]] && quick+=(--pack-to "$PACK_TO")
  [[ -n "${GPU_CHECK_TIERS:-}" ]] && quick+=(--tiers "$GPU_CHECK_TIERS")
  exec "${quick[@]}"
fi
for s in $STEPS; do
  case "$s" in
    sanity|explain|ladder|padding|batch|overhead|tune|compare|report) ;;
    *) die "unknown step '$s' in GPU_CHECK_STEPS (known: sanity explain ladder padding batch overhead tune compare report; or quick or all alone)" ;;
  esac
done
for b in $BATCHES; do
  [[ "$b" =~ ^[1-9][0-9]*$ ]] || die "GPU_CHECK_BATCHES: '$b' is not a positive integer"
done
wants() { [[ " $STEPS " == *" $1 "* ]]; }

LOGS="$OUT/logs"
declare -a SUMMARY=()
FAILED=0

# logged LOGFILE CMD...: run CMD with stdout and stderr shown and appended to LOGFILE; returns CMD's status.
logged() {
  local log="$1"
  shift
  "$@" 2>&1 | tee -a "$log"
  return "${PIPESTATUS[0]}"
}

STEP_T0=0
begin() {
  STEP_T0=$(date +%s)
  echo
  echo "=== gpu_check: $1 ($(date '+%H:%M:%S'))"
}
end() {  # end NAME STATUS [NOTE]
  local secs=$(( $(date +%s) - STEP_T0 ))
  local verdict="ok"
  if [[ "$2" -ne 0 ]]; then
    verdict="FAILED (exit $2)"
    FAILED=1
  fi
  echo "=== gpu_check: $1: $verdict, ${secs}s${3:+ ($3)}"
  SUMMARY+=("$(printf '%-10s %-16s %6ss  %s' "$1" "$verdict" "$secs" "${3:-}")")
}

# ------------------------------------------------------------------ (a) sanity: a CUDA device, or stop
if wants sanity || wants explain || wants ladder || wants padding || wants batch || wants overhead || wants tune; then
  begin "sanity"
  command -v "$PY" >/dev/null 2>&1 || die "no interpreter '$PY' (set HARNESS_LOCAL_PYTHON)"
  torch_info="$("$PY" -m harness.gpu_check.sanity 2>&1)"
  status=$?
  if [[ $status -eq 3 ]]; then
    echo "${torch_info##*$'\n'}" >&2  # its last line says why
    exit 2
  fi
  mkdir -p "$LOGS"
  if command -v nvidia-smi >/dev/null 2>&1; then
    logged "$LOGS/sanity.log" nvidia-smi
    logged "$LOGS/sanity.log" nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,power.limit,clocks.max.sm --format=csv
  else
    echo "warning: nvidia-smi is not on PATH" | tee -a "$LOGS/sanity.log"
  fi
  printf '%s\n' "$torch_info" | tee -a "$LOGS/sanity.log"
  end "sanity" "$status" "$LOGS/sanity.log"
  if [[ $status -ne 0 ]]; then
    echo "gpu_check: the torch/CUDA sanity check failed (above); not running the GPU steps" >&2
    exit 1
  fi
fi
mkdir -p "$LOGS"

# ------------------------------------------------------------------ (b) explain: kernels, memory, power, MFU
if wants explain; then
  begin "explain"
  logged "$LOGS/explain.log" "$PY" -m harness.run --env local --plan seed-ladder --preset gpt2-124m --rungs bf16,sdpa-flash --device cuda --set profile_steps=3 --out "$OUT/explain"
  status=$?
  logged "$LOGS/explain.log" "$PY" scripts/check_explain_records.py "$OUT/explain"
  check=$?
  end "explain" $(( status || check )) "run exit $status, record check exit $check"
fi

# ------------------------------------------------------------------ (c) the seed ladder at several B
if wants ladder; then
  for b in $BATCHES; do
    begin "ladder B=$b"
    logged "$LOGS/ladder-b$b.log" "$PY" -m harness.run --env local --plan seed-ladder --preset gpt2-124m --batch-size "$b" --device cuda --out "$OUT/ladder"
    end "ladder-$b" $?
  done
fi

# ------------------------------------------------------------------ (c2) the compiler's own padding, A/B
if wants padding; then
  begin "padding"
  logged "$LOGS/padding.log" "$PY" -m harness.run --env local --plan padding --preset gpt2-124m --device cuda --out "$OUT/padding"
  end "padding" $?
fi

# ------------------------------------------------------------------ (d) batch search, fused-adamw-clip, T=1024
if wants batch; then
  begin "batch"
  logged "$LOGS/batch-search.log" "$PY" -m harness.batch_search --env local --plan seed-ladder --rung fused-adamw-clip --preset gpt2-124m --seq-len 1024 --device cuda --out "$OUT/batch-search"
  status=$?
  end "batch" "$status" "$(grep '^answer:' "$LOGS/batch-search.log" | tail -n 1)"
fi

# ------------------------------------------------------------------ (e) harness vs a bare loop
if wants overhead; then
  begin "overhead"
  logged "$LOGS/overhead.log" "$PY" scripts/overhead_check.py --env local --plan seed-ladder --rung fused-adamw-clip --preset gpt2-124m --batch-size 64 --device cuda --rounds 3 --tolerance 0.01 --out "$OUT/overhead-check"
  status=$?
  end "overhead" "$status" "$(grep '^harness / bare' "$LOGS/overhead.log" | tail -n 1)"
fi

# ------------------------------------------------------------------ (e2) the fastest equivalent configuration
if wants tune; then
  begin "tune"
  tune=("$PY" -m harness.tune --env local --preset gpt2-124m --batch-size 64 --device cuda --out "$OUT/fastest")
  # the committed GPU records: what helped alone on this GPU there is stacked, not run alone again
  for d in results/gpu-*/; do [[ -d "$d" ]] && tune+=(--from "$d"); done
  logged "$LOGS/tune.log" "${tune[@]}"
  status=$?
  end "tune" "$status" "$(grep '^best:' "$LOGS/tune.log" | tail -n 1)"
fi

# ------------------------------------------------------------------ (f) compare, and the report
paths=("$OUT")
if [[ -d results/reference ]]; then
  paths+=("results/reference")
fi
if wants compare; then
  begin "compare"
  : > "$OUT/compare.txt"
  logged "$OUT/compare.txt" "$PY" -m harness.compare "${paths[@]}"
  end "compare" $? "$OUT/compare.txt"
fi
if wants report; then
  begin "report"
  logged "$LOGS/report.log" "$PY" -m harness.report "${paths[@]}" -o "$OUT/report"
  end "report" $? "$OUT/report/report.md"
fi

echo
echo "=== gpu_check summary: $OUT"
printf '%s\n' ${SUMMARY[@]+"${SUMMARY[@]}"}
exit "$FAILED"
