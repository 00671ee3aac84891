"""Benchmark of compare and report at scale: make N records from the committed ones, then time them cold and warm.

    PYTHONPATH=. python scripts/bench_index.py --records 100000 --dir /tmp/bench100k

Makes DIR/records/ (N records: the committed record files under results/, copied round-robin with fresh run ids and
their step times and summary numbers scaled by up to 10% (another run's numbers), each file named after its run id; a
record is ~20 KB, so 100,000 of them are ~2.4 GB: put DIR on a disk with room; it is deleted afterwards unless --keep),
then runs `python -m harness.compare DIR/records` in a fresh interpreter each time: cold (no index yet: every file
parsed, validated and indexed), warm (the index is current; --warm-runs times, their median printed), after NEW_RUNS
more records were made (a night's runs: the index brings itself up to date, as a delta) and, with --no-index-too,
reading the JSON directly; then, with --report-runs, `python -m harness.report DIR/records -o DIR/report` (the index
current: the first draws every chart, the next find them kept), and once more after NEW_RUNS more records (a night's
runs: the charts whose data they change are drawn again). Prints each one's wall time, the part of it spent reading the
records (the index brought up to date, then the dataset loaded; the rest is the analysis), its CPU time (with its worker
processes': the index's, the report's chart drawers'; on a shared machine the wall time says as much about the others'
load), its peak memory (ru_maxrss of that process, and of its largest worker), and the machine's load average and speed
before and after: the best of 3 runs of a fixed piece of pure-Python work (REFERENCE: parse, sort, take medians), which
is what compare and report spend their time on, so that runs made at different hours of a shared machine can be set side
by side (a report 20% slower beside a reference 20% slower is the machine, not the code). A benchmark, not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import argtypes
from harness.record.io import iter_records, read_json

# Run one compare or report (the module named first) in this interpreter, ended as `python -m` ends it
# (harness.console.output.run_process: what it held is not freed object by object); print how long reading the records took
# (the index brought up to date, then dataset.load), the CPU time with its worker processes', its own peak RSS and its
# largest worker's (KiB on Linux: the index's when it is built, the report's chart drawers) on the last lines of stderr.
CHILD = """
import importlib, resource, sys, time
from harness.console import output
from harness.analysis import options
spent = {"read": 0.0}
def timed(fn):
    def call(*a, **k):
        start = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            spent["read"] += time.perf_counter() - start
    return call
options.load = timed(options.load)
options.RecordIndex.open = timed(options.RecordIndex.open)
def main_then_usage():
    try:
        return importlib.import_module(sys.argv[1]).main(sys.argv[2:])
    finally:
        me, pool = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        print("cpu_s", me.ru_utime + me.ru_stime + pool.ru_utime + pool.ru_stime, file=sys.stderr)
        print("read_s", spent["read"], file=sys.stderr)
        print("maxrss_kib", me.ru_maxrss, file=sys.stderr)
        print("worker_maxrss_kib", pool.ru_maxrss, file=sys.stderr)
output.run_process(sys.argv[1], main_then_usage)
"""


def _vary(record: dict, i: int) -> dict:
    """A copy's measurements made its own (step times and summary numbers scaled by up to 10%), as another run's
    would be: runs share their environment, flags and workload, not their numbers."""
    factor = 1 + (i % 101) / 1000
    steps = dict(record.get("steps") or {})
    steps["ms"] = [x * factor if isinstance(x, (int, float)) else x for x in steps.get("ms") or []]
    summary = {k: v * factor if isinstance(v, float) else v for k, v in (record.get("summary") or {}).items()}
    return {**record, "steps": steps, "summary": summary}


NEW_RUNS = 10  # records made once the index is current, before one more compare is timed


def make_records(sources: list[Path], out: Path, n: int, start: int = 0) -> None:
    """n record files under out/, copies of the sources' raw JSON with fresh run ids (1,000 per sub-folder), numbered
    from `start`."""
    raws = [(path, raw) for path, raw in iter_records(sources, warn=lambda _line: None, read=read_json)
            if isinstance(raw, dict) and isinstance(raw.get("run_id"), str)]
    if not raws:
        sys.exit(f"no record under {', '.join(map(str, sources))}")
    for i in range(start, start + n):
        _path, raw = raws[i % len(raws)]
        copy = dict(_vary(raw, i), run_id=f"{raw['run_id']}-copy{i:06d}")
        folder = out / f"batch{i // 1000:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{copy['run_id']}.json").write_text(json.dumps(copy, indent=1))


def timed(module: str, *args: str) -> tuple[float, float, float, int, int, str]:
    """(seconds, of which reading the records, CPU seconds (its own and its workers'), its peak RSS and its largest
    worker's in bytes, the first lines of its output) of one `python -m MODULE ARGS` in a fresh interpreter."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, module, *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    seconds = time.perf_counter() - start
    last = {line.split()[0]: float(line.split()[1]) for line in done.stderr.splitlines()[-4:] if len(line.split()) == 2}
    return (seconds, last.get("read_s", 0.0), last.get("cpu_s", 0.0), int(last.get("maxrss_kib", 0)) * 1024,
            int(last.get("worker_maxrss_kib", 0)) * 1024, "\n".join(done.stdout.splitlines()[:3]))


# The machine's speed: fixed pure-Python work of the kind compare and report do (JSON parsed into dicts, runs sorted by
# their median step), timed in a fresh interpreter; about half a second here
REFERENCE = """
import json, time
text = json.dumps([{"run_id": f"r{i:06d}", "ms": [100.0 + (i * 7 + j) % 13 for j in range(20)], "env": f"e{i % 5}"}
                   for i in range(20_000)])
start = time.perf_counter()
for _ in range(3):
    runs = json.loads(text)
    runs.sort(key=lambda run: (run["env"], sorted(run["ms"])[10], run["run_id"]))
print(time.perf_counter() - start)
"""


def reference_seconds() -> float:
    """The best of 3 runs of REFERENCE (the least disturbed by the machine's other work)."""
    return min(float(subprocess.run([sys.executable, "-c", REFERENCE], check=True, capture_output=True,
                                    text=True).stdout) for _ in range(3))


def machine_line(when: str) -> str:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"machine {when}: load average {load} ({os.cpu_count()} CPUs); reference work {reference_seconds():.2f} s"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=argtypes.whole(1, 10_000_000, "number of records"), default=10_000, metavar="N", help="how many records to make (default 10,000)")
    p.add_argument("--dir", type=argtypes.path_arg, required=True, help="where to make them (DIR/records/); must not exist yet")
    p.add_argument("--from", dest="sources", type=argtypes.path_arg, action="append", default=[], metavar="PATH",
                   help="records to copy (default: results/)")
    p.add_argument("--warm-runs", type=argtypes.whole(0, 1_000, "number of runs"), default=3, metavar="N",
                   help="how many warm compares to time (default 3: this kind of machine varies by 20%% run to run)")
    p.add_argument("--no-index-too", action="store_true", help="also time compare --no-index (the JSON read directly)")
    p.add_argument("--report-runs", type=argtypes.whole(0, 1_000, "number of runs"), default=0, metavar="N",
                   help="then time `python -m harness.report` N times, the index current (the first draws every "
                        f"chart, the others find them kept), and once more after {NEW_RUNS} new records (default 0: "
                        "none)")
    p.add_argument("--keep", action="store_true", help="keep DIR afterwards (default: deleted)")
    args = p.parse_args(argv)
    if args.dir.exists():
        p.error(f"--dir {args.dir}: exists; give a new folder")
    records = args.dir / "records"
    try:
        start = time.perf_counter()
        make_records(args.sources or [ROOT / "results"], records, args.records)
        size = sum(f.stat().st_size for f in records.rglob("*.json"))
        print(f"made {args.records:,} records ({size / 1e9:.2f} GB) in {time.perf_counter() - start:.0f} s")
        print(machine_line("before"), flush=True)
        compare = ("harness.compare", str(records))
        report = ("harness.report.__main__", str(records), "-o", str(args.dir / "report"))
        # (what is timed, the kind its median is taken over, the command, whether NEW_RUNS records are made first)
        runs = [("cold (index built)", "cold", compare, False)]
        runs += [(f"warm {i + 1} (index current)", "warm", compare, False) for i in range(args.warm_runs)]
        runs += [(f"{NEW_RUNS} new records (index updated)", "new", compare, True)]
        if args.no_index_too:
            runs += [("--no-index (JSON read directly)", "json", (*compare, "--no-index"), False)]
        if args.report_runs:  # the first report of a set draws every chart; the next ones find them kept
            runs += [("report 1 (every chart drawn)", "drawn", report, False)]
            runs += [(f"report {i + 2} (charts kept)", "report, charts kept", report, False)
                     for i in range(args.report_runs - 1)]
            runs += [(f"report, {NEW_RUNS} more new records", "nightly", report, True)]  # the charts they change drawn
        times: dict[str, list[float]] = {"warm": [], "report, charts kept": []}
        heads, made = {}, args.records
        for name, kind, command, new_first in runs:
            if new_first:
                make_records(args.sources or [ROOT / "results"], records, NEW_RUNS, start=made)
                made += NEW_RUNS
            seconds, read, cpu, peak, worker, heads[command[0]] = timed(*command)
            times.get(kind, []).append(seconds)
            print(f"{name:36} {seconds:6.1f} s (reading the records {read:6.1f} s; CPU {cpu:6.1f} s)   peak RSS "
                  f"{peak / 2**30:5.2f} GiB (largest worker {worker / 2**30:4.2f} GiB)", flush=True)
        for what, seconds in times.items():
            if seconds:
                print(f"{what}: median {statistics.median(seconds):.1f} s of {len(seconds)} "
                      f"({min(seconds):.1f}-{max(seconds):.1f} s)")
        print(machine_line("after"))
        print(f"compare's first lines:\n{heads['harness.compare']}")
    finally:
        if not args.keep:
            shutil.rmtree(args.dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
