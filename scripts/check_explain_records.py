"""Check that GPU records carry the evidence docs/explain.md describes; used by scripts/gpu_check.sh.

  python scripts/check_explain_records.py DIR_OR_FILE...

For every measured record under the paths: it ran ok on CUDA; explain.kernels names the lm_head GEMM
kernel; an SDPA run names its attention kernels (and a pinned SDPA backend is the one that ran);
memory_split, power and mfu are available. At least one record must name an attention kernel (the
naive-attention rungs have none to name). Prints one summary line per record and one FAIL line per
problem; exit 0 when there is none, 1 otherwise. No torch import.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from harness.analysis.cells import Mfu
from harness.record.io import iter_records
from harness.record.view import RecordView

GIB = 2**30


def _gib(value) -> str:
    return "-" if value is None else f"{value / GIB:.2f} GiB"


def check_record(record: dict) -> tuple[str, list[str]]:
    """(summary line, problems) for one record."""
    r = RecordView(record)
    workload, explain = r.workload, r.explain
    label = f"{r.rung} B={workload.batch_size} ({r.run_id})"
    problems: list[str] = []
    if r.status != "ok":
        return label + f": status {r.status}", [f"{label}: status {r.status}: {r.reason}"]
    if r.environment.device != "cuda":
        problems.append(f"{label}: ran on {r.environment.device!r}, not cuda")

    def part(name: str):
        p = getattr(explain, name)
        if not p.available:
            problems.append(f"{label}: explain.{name} not available: {p.reason or 'missing'}")
        return p

    kernels = part("kernels")
    lm_head = kernels.lm_head_gemm  # an absent Gemm (every field None) where there is none
    if kernels.available and not lm_head.name:
        problems.append(f"{label}: explain.kernels.lm_head_gemm names no kernel (no GEMM with N = vocab_size, or vocab_size as the compiler pads it, was recorded)")
    attention = kernels.attention_kernels or []
    backend = kernels.sdpa_backend
    if kernels.available and workload.attention == "sdpa":
        if not attention:
            problems.append(f"{label}: attention=sdpa but explain.kernels.attention_kernels is empty (sdpa_backend {backend!r})")
        wanted = workload.sdpa_backend
        if wanted not in (None, "auto") and backend != wanted:
            problems.append(f"{label}: sdpa_backend {wanted!r} was pinned but the profile says {backend!r}")
    split, power, mfu = part("memory_split"), part("power"), part("mfu")

    if workload.attention == "sdpa":
        att_text = f"attention {backend}: {'; '.join(attention) or 'none'}"
    else:
        att_text = f"attention {workload.attention} (no fused attention kernel expected)"
    mfu_parts = []
    if mfu.mfu_datasheet is not None:
        datasheet = mfu.datasheet if isinstance(mfu.datasheet, dict) else {}
        mfu_parts.append(f"{Mfu(mfu.mfu_datasheet).text()} of the {datasheet.get('gpu')} datasheet {mfu.dtype} peak")
    elif mfu.available:
        mfu_parts.append(f"no datasheet peak ({mfu.datasheet_reason})")
    if mfu.mfu_measured is not None:
        mfu_parts.append(f"{Mfu(mfu.mfu_measured).text()} of the measured GEMM peak")  # above 100%: marked
    mean_w, clock = power.mean_w, power.sm_clock_mhz_mean
    padded = f", padded to {lm_head.padded_to}" if lm_head.padded_to else ""
    line = (f"{label}: lm_head {lm_head.name} [{lm_head.precision}{padded}] | {att_text} | "
            f"memory tensors {_gib(split.tensors_bytes)}, cache {_gib(split.allocator_cache_bytes)}, "
            f"outside {_gib(split.outside_allocator_bytes)} ({split.method or '-'}) | "
            f"power {'-' if mean_w is None else f'{mean_w:.0f} W'} mean, SM {'-' if clock is None else f'{clock:.0f} MHz'}"
            f"{', THROTTLED' if power.throttled else ''} | MFU {'; '.join(mfu_parts) or '-'}")
    return line, problems


def check(paths, out=print) -> int:
    records = [r for _path, r in iter_records(paths, warn=out) if RecordView(r).kind == "measured"]
    if not records:
        out(f"FAIL: no measured record under {', '.join(map(str, paths))}")
        return 1
    problems: list[str] = []
    named_attention = False
    for record in sorted(records, key=lambda r: (RecordView(r).rung_index or 0, str(RecordView(r).run_id))):
        line, found = check_record(record)
        out(line)
        problems += found
        named_attention = named_attention or bool(RecordView(record).explain.kernels.attention_kernels)
    if not named_attention:
        problems.append("no record names an attention kernel (run an attention=sdpa rung, e.g. sdpa-flash)")
    for p in problems:
        out(f"FAIL: {p}")
    out(f"{len(records)} record(s) checked: " + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: " + __doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    return check(argv)


if __name__ == "__main__":
    sys.exit(main())
