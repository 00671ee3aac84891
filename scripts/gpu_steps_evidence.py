"""How many steps a GPU run needs, from the committed H100/H200 records (docs/gpu-check.md, "Steps per run").

  python scripts/gpu_steps_evidence.py [FOLDER ...]      # default: results/gpu-*/

Every committed run has 50 steps (10 warm-up, 40 timed). A shorter run is read off each record as its first
steps: warm-up W, then N timed. For each (W, N) it prints, with the noise rule of harness.analysis.stats (the run is
the unit of noise: each GPU's run-to-run spread pooled over its configurations with repeats, at those steps):
  - shift: how far the tokens/s of those steps lies from the full run's (steps 10-49), median and largest;
  - spread: the run-to-run sd of tokens/s at those steps, the larger of the two GPUs';
  - interval: the half-width of one run's 99% interval (that spread, borrowed by a one-run cell), median and largest;
  - A/A: every pair of repeats of one configuration on one GPU (separate processes), the largest |delta| and how
    many pairs stay within noise (they should: nothing differs);
  - known effects: pairs of rungs one knob apart on one GPU and B, the delta and its verdict (they should stay
    beyond noise where the full runs say so);
  - saved: seconds a run saves against 50 steps, at the median step of B=16 and of B=64.
numpy only, no torch. The tables are read by tests/test_gpu_check.py.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from itertools import combinations
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.analysis import cell_values, noise, noise_model, stats
from harness.record.io import iter_records
from harness.record.view import RecordView

CHOICES = [(10, 40), (5, 25), (5, 20), (3, 20), (5, 15), (3, 10)]
KNOWN = [("sdpa-flash", "vocab-50304"), ("vocab-50304", "fused-adamw-clip"), ("fused-adamw-clip", "sdpa-cudnn"),
         ("fused-adamw-clip", "sdpa-auto")]


def ok_records(paths) -> list[RecordView]:
    out = []
    for _p, rec in iter_records(paths, warn=lambda line: None):
        r = RecordView(rec)
        if r.kind == "measured" and r.ok and len(r.step_ms) == 50:
            out.append(r)
    return out


def tokens(r: RecordView, warmup: int, timed: int, device: noise_model.DeviceSpread | None = None) -> stats.Estimate:
    ms = r.step_ms[warmup:warmup + timed]
    return cell_values.throughput([ms], r.summary.tokens_per_step, device=device)


def spreads(groups: dict, warmup: int, timed: int) -> dict[str, noise_model.DeviceSpread | None]:
    """Each GPU's run-to-run spread of tokens/s at these steps, pooled over its configurations with repeats."""
    cells: dict[str, list] = defaultdict(list)
    for (dev, _w, _f), runs in groups.items():
        cells[dev].append([cell_values.run_throughput(r.step_ms[warmup:warmup + timed], r.summary.tokens_per_step)
                           for r in runs])
    return {dev: noise.fit({i: [noise_model.CellRuns.of(c)] for i, c in enumerate(cs)}) for dev, cs in cells.items()}


def gpu(r: RecordView) -> str:
    return (r.environment.gpu.name or "?").replace("NVIDIA ", "")


def rows(records: list[RecordView]) -> list[dict]:
    groups = defaultdict(list)
    for r in records:
        groups[(gpu(r), r.workload_hash, r.flags_hash)].append(r)
    by_rung = {(gpu(r), r.workload.batch_size, r.rung): r for r in sorted(records, key=lambda r: r.run_id)}
    b16 = np.median([r.summary.step_ms_median for r in records if r.workload.batch_size == 16])
    b64 = np.median([r.summary.step_ms_median for r in records if r.workload.batch_size == 64])
    out = []
    for w, n in CHOICES:
        noise = spreads(groups, w, n)
        shifts, halves = [], []
        for r in records:
            full, e = tokens(r, 10, 40), tokens(r, w, n, noise[gpu(r)])
            shifts.append(abs(e.point / full.point - 1))
            if e.half_width() is not None:  # a one-run cell its device cannot lend a spread: no interval
                halves.append(e.half_width())
        aa = [stats.ratio(tokens(a, w, n, noise[dev]), tokens(b, w, n, noise[dev]))[0]
              for (dev, _w, _f), g in groups.items() for a, b in combinations(g, 2)]
        known = []
        for (dev, batch, rung), r in sorted(by_rung.items()):
            for a_name, b_name in KNOWN:
                if rung == a_name and (dev, batch, b_name) in by_rung:
                    d = stats.ratio(tokens(r, w, n, noise[dev]), tokens(by_rung[(dev, batch, b_name)], w, n, noise[dev]))[0]
                    known.append((f"{dev} B={batch} {a_name} -> {b_name}", d))
        out.append({"warmup": w, "timed": n, "shift_median": float(np.median(shifts)), "shift_max": max(shifts),
                    "spread": max(x.sd for x in noise.values() if x is not None),
                    "half_median": float(np.median(halves)), "half_max": max(halves),
                    "aa_max": max(abs(d.value) for d in aa), "aa_within": sum(not d.beyond for d in aa), "aa_pairs": len(aa),
                    "known": known, "saved_b16": (50 - w - n) * b16 / 1000, "saved_b64": (50 - w - n) * b64 / 1000})
    return out


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])] or sorted((ROOT / "results").glob("gpu-*/"))
    records = ok_records(paths)
    print(f"{len(records)} committed GPU runs of 50 steps ({', '.join(sorted({gpu(r) for r in records}))}); "
          "a shorter run = the first W warm-up + N timed steps of each")
    print(f"{'W+N':>6}  {'shift med/max':>14}  {'spread':>7}  {'interval med/max':>17}  {'A/A max |d|':>11}  "
          f"{'A/A within':>10}  {'saved s B=16/B=64':>17}")
    table = rows(records)
    for t in table:
        print(f"{t['warmup']:>3}+{t['timed']:<2}  {t['shift_median']:6.2%} {t['shift_max']:6.2%}  {t['spread']:7.2%}  "
              f"{t['half_median']:7.2%} {t['half_max']:8.2%}  {t['aa_max']:11.2%}  "
              f"{t['aa_within']:>4} of {t['aa_pairs']:<2}  {t['saved_b16']:8.1f} {t['saved_b64']:8.1f}")
    print(f"known effects (delta [{stats.interval_name()}] verdict; one run a side, the GPU's spread borrowed where its "
          "configurations lend it):")
    for t in table:
        if (t["warmup"], t["timed"]) in ((10, 40), (5, 25)):
            for name, d in t["known"]:
                bounds = f" [{d.low:+.2%},{d.high:+.2%}]" if d.low is not None else ""
                print(f"  {t['warmup']}+{t['timed']}  {name}: {d.value:+.2%}{bounds} {d.verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
