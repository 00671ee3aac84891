"""Sweep analysis: records grouped by the sweep they belong to, tokens/s and peak memory against the value.

A curve is one sweep (record["sweep"]: name, field) of one rung of one plan, in one env on one device, of one
measurement but for the swept field (harness.record.model's one rule: the workload hash less that field, and the
flags hash); its points are the swept values, repeats of a value merged: tokens/s by the one rule of
harness.analysis.stats (tokens per step / the median of the repeats' timed steps pooled, as every table has it), peak
memory the largest over the repeats of each run's most inclusive metric (RecordView.peak_memory(widest=True), the
metric harness.analysis.fit judges a run by: a value whose largest run does not fit does not fit).

The knee of a curve: the smallest value whose tokens/s is within `tolerance` (default 2%) of the best
tokens/s of the curve's ok points; past it, a larger value buys less than `tolerance` more throughput.

Every per-record rule (device, peak memory, timed steps, the lm_head kernel) is harness.record.view.RecordView's:
peak memory is its most inclusive metric (CUDA: NVML device used, else the allocator's peak reserved; CPU: the
worker's peak RSS). This module only groups and sweeps (analysis: harness.batch_search, harness.tune and the report
call it; it was harness/sweep.py in the runner layer).

No torch import: harness.compare and harness.report import this where only the results are.

    sweep_rows(records)              -> list of dicts, one per (curve, value), in a stable order
    sweep_curves(records)            -> list of dicts, one per curve (values, tokens/s, memory, knee), for plots
    sweep_notes()                    -> what the knee, memory and kernel columns of a sweeps table mean

harness.compare's sweeps table (harness/analysis/tables/sweeps.py) is where they are shown.
"""

from __future__ import annotations

import json

from harness.analysis import cell_values
from harness.record.model import workload_hash
from harness.record.view import RecordView

KNEE_TOLERANCE = 0.02
KNEE_DEFINITION = ("knee = the smallest {what} whose tokens/s is within {tol:g}% of the best tokens/s among the "
                   "{among}; beyond it tokens/s rises by less than that")
MEMORY_NAME = "peak memory"
MEMORY_DEFINITION = f"{MEMORY_NAME}: CUDA = NVML device used, else allocator peak reserved; CPU = worker peak RSS"
MISSING = "-"


class SweepError(ValueError):
    pass


# ---------------------------------------------------------------- the knee

def value_key(value) -> tuple:
    """Numbers ascending, then anything else as text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def knee(points, tolerance: float = KNEE_TOLERANCE):
    """The knee of (value, tokens/s) points: the smallest value whose tokens/s >= (1 - tolerance) * best.

    Points with tokens/s None are ignored; None when no point has a throughput."""
    if not 0 <= tolerance < 1:
        raise SweepError(f"knee tolerance {tolerance!r}: expected a fraction in [0, 1)")
    usable = [(v, t) for v, t in points if t is not None]
    if not usable:
        return None
    best = max(t for _, t in usable)
    return min((v for v, t in usable if t >= (1.0 - tolerance) * best), key=value_key)


def knee_definition(tolerance: float = KNEE_TOLERANCE, what: str = "value", among: str = "curve's ok points") -> str:
    return KNEE_DEFINITION.format(tol=tolerance * 100, what=what, among=among)


# ---------------------------------------------------------------- grouping

CURVE_FIELDS = ("sweep", "field", "plan", "rung", "env", "device", "measurement")


def curve_key(record: RecordView | dict) -> tuple:
    """The curve a sweep record belongs to (CURVE_FIELDS): runs of one measurement but for the swept field, so two
    sweeps of one name made with other flags or another workload are two curves, never pooled as repeats."""
    r = RecordView.of(record)
    field = str(r.sweep.field)
    measurement = f"{workload_hash(r.workload.to_dict(), without=(field,))[:12]}/{(r.flags_hash or '')[:12]}"
    return (str(r.sweep.name), field, str(r.plan), str(r.rung), str(r.env), r.device_label, measurement)


def _merge(records: list[RecordView]) -> dict:
    """One point from the repeats of one value: median tokens/s of the ok ones, the largest peak memory."""
    ok = [r for r in records if r.ok]
    status = "ok" if ok else records[0].status
    if ok and len(ok) < len(records):
        status = f"ok ({len(records) - len(ok)} not)"
    samples = [r.timed_ms for r in ok]
    tokens = next((r.tokens_per_step for r in ok if r.tokens_per_step), None)
    step_ms = cell_values.median([x for s in samples for x in s])
    known = [(b, w) for b, w in (r.peak_memory(widest=True) for r in records) if b is not None]
    peak, source = max(known) if known else (None, MISSING)
    kernels = sorted({r.lm_head_kernel for r in ok or records} - {None})
    return {
        "status": status,
        "runs": len(records),
        "tokens_per_s": cell_values.throughput(samples, tokens, run_medians=[r.timed_median for r in ok]).point,
        "step_ms": step_ms,
        "peak_memory_bytes": peak,
        "memory_source": source,
        "usable_memory_bytes": records[0].usable_memory_bytes,
        "lm_head_kernel": " | ".join(kernels) if kernels else MISSING,
        "reason": None if ok else records[0].reason,
        "run_ids": [r.run_id for r in records],
    }


def sweep_rows(records, tolerance: float = KNEE_TOLERANCE) -> list[dict]:
    """One row per (curve, swept value), curves in name/field/plan/rung/env/device order, values ascending.

    Keys: CURVE_FIELDS (measurement: the curve's workload-less-the-swept-field and flags hashes, short), value, status, runs, tokens_per_s, step_ms, vs_best
    (tokens/s / the curve's best), peak_memory_bytes, memory_source, usable_memory_bytes, lm_head_kernel
    ('-' where no kernel capture), kernel_changed (lm_head kernel differs from the previous value's),
    is_best, is_knee, mark (text of the last three), reason, run_ids. Records without a sweep are ignored."""
    return _rows(_by_curve(records), tolerance)


def _by_curve(records) -> dict[tuple, list[RecordView]]:
    """curve_key -> its records, in the order given (records without a sweep left out)."""
    curves: dict[tuple, list] = {}
    for r in map(RecordView.of, records):
        if r.sweep:
            curves.setdefault(curve_key(r), []).append(r)
    return curves


def _rows(curves: dict[tuple, list[RecordView]], tolerance: float) -> list[dict]:
    rows = []
    for key in sorted(curves):
        by_value: dict[str, list[RecordView]] = {}
        for r in curves[key]:
            by_value.setdefault(json.dumps(r.sweep.value, sort_keys=True), []).append(r)
        points = []
        for group in by_value.values():
            points.append({**dict(zip(CURVE_FIELDS, key, strict=True)), "value": group[0].sweep.value,
                           **_merge(group)})
        points.sort(key=lambda p: value_key(p["value"]))
        best = max((p["tokens_per_s"] for p in points if p["tokens_per_s"] is not None), default=None)
        the_knee = knee([(p["value"], p["tokens_per_s"]) for p in points], tolerance)
        previous = None
        for p in points:
            p["vs_best"] = p["tokens_per_s"] / best if best and p["tokens_per_s"] is not None else None
            p["is_best"] = best is not None and p["tokens_per_s"] == best
            p["is_knee"] = the_knee is not None and p["value"] == the_knee and p["tokens_per_s"] is not None
            kernel = p["lm_head_kernel"]
            p["kernel_changed"] = previous not in (None, MISSING) and kernel != MISSING and kernel != previous
            if kernel != MISSING:
                previous = kernel
            p["mark"] = ", ".join(m for m, on in (("best", p["is_best"]), ("knee", p["is_knee"]),
                                                  ("kernel changed", p["kernel_changed"])) if on)
            rows.append(p)
    return rows


def sweep_curves(records, tolerance: float = KNEE_TOLERANCE) -> list[dict]:
    """One dict per curve, for plots: label, CURVE_FIELDS, values, tokens_per_s,
    peak_memory_bytes, statuses, lm_head_kernels (lists aligned with values; None where unknown), knee, and run_ids
    (every run of the curve, in the order given: what a sentence about the curve rests on)."""
    curves = _by_curve(records)
    out: list[dict] = []
    for row in _rows(curves, tolerance):
        key = tuple(row[k] for k in CURVE_FIELDS)
        if not out or out[-1]["_key"] != key:
            out.append({"_key": key, "label": f"{row['sweep']} ({row['field']}): {row['rung']}, {row['env']}, {row['device']}",
                        **{k: row[k] for k in CURVE_FIELDS},
                        "values": [], "tokens_per_s": [], "peak_memory_bytes": [], "statuses": [], "lm_head_kernels": [],
                        "knee": None, "run_ids": [r.run_id for r in curves[key]]})
        c = out[-1]
        c["values"].append(row["value"])
        c["tokens_per_s"].append(row["tokens_per_s"])
        c["peak_memory_bytes"].append(row["peak_memory_bytes"])
        c["statuses"].append(row["status"])
        c["lm_head_kernels"].append(None if row["lm_head_kernel"] == MISSING else row["lm_head_kernel"])
        if row["is_knee"]:
            c["knee"] = row["value"]
    for c in out:
        del c["_key"]
    return out


def sweep_notes(tolerance: float = KNEE_TOLERANCE) -> list[str]:
    """What the knee, the memory column and the lm_head kernel column of a sweep table mean."""
    return [knee_definition(tolerance),
            MEMORY_DEFINITION,
            ("lm_head kernel: the lm_head forward GEMM from the kernel capture ('-' where none); "
            "'kernel changed' = differs from the previous value's")]
