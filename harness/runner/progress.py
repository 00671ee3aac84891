"""What the runner prints: a worker's live progress (one line per event, a "still ..." line when it is quiet),
one line per finished run, the summary table at the end, the contention warning, and what finished before a stop."""

from __future__ import annotations

import time
from pathlib import Path

from tabulate import tabulate

from harness.provenance import contention
from harness.record.view import RecordView
from harness.runner.request import Point

QUIET_S = 10.0  # the longest the runner stays silent while a worker runs (a compile takes a minute on a small CPU)
STEP_LINE_S = 3.0  # step progress is printed at most this often (and for the last step)

PHASES = {"calibrating": "measuring the GEMM peak (for MFU)", "building": "building the model and optimizer"}


class Progress:
    """The worker's progress, relayed as it comes, one line each, prefixed with the run's place in the plan:
    started, compiling, the first step's time (the compile), step i/N with its ms (at most every STEP_LINE_S),
    profiling; and a "still ..." line whenever the worker has said nothing for QUIET_S."""

    def __init__(self, prefix: str, write=None):
        self.prefix = prefix
        self.write = write or (lambda line: print(line, flush=True))
        self.phase = "starting (importing torch)"
        self.started = self.phase_since = self.last = time.monotonic()

    def say(self, text: str) -> None:
        self.write(f"{self.prefix}: {text}")
        self.last = time.monotonic()

    def enter(self, phase: str, text: str | None = None) -> None:
        self.phase, self.phase_since = phase, time.monotonic()
        if text:
            self.say(text)

    def event(self, event: dict) -> None:
        kind = event.get("progress")
        if kind == "started":
            self.enter("setting up", f"started: torch {event.get('torch')}, {event.get('device')}, "
                                     f"{event.get('threads')} thread(s)")
        elif kind in PHASES:  # said only if it lasts (tick)
            self.enter(PHASES[kind])
        elif kind in ("compiling", "first step"):
            text = "compiling (torch.compile works during the first step) ..." if kind == "compiling" else "first step ..."
            self.enter(kind, text)
        elif kind == "step":
            i, n, ms = event.get("step"), event.get("steps"), event.get("ms")  # not a record: a worker progress event
            if event.get("first_step_s") is not None:
                self.say(f"first step done in {event['first_step_s']:.1f} s" + (" (compile included)" if self.phase == "compiling" else ""))
            elif i == n or time.monotonic() - self.last >= STEP_LINE_S:
                self.say(f"step {i}/{n}" + (f", {ms:,.1f} ms" if isinstance(ms, (int, float)) else ""))
            self.phase = f"running steps ({i}/{n} done)"
        elif kind == "profiling" and event.get("steps"):  # not a record: a worker progress event
            steps = event.get("steps")  # not a record: a worker progress event
            self.enter("profiling", f"profiling {steps} more step(s) for the evidence (explain) ...")
        elif kind == "profiling":
            self.enter("gathering the evidence (explain)")

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last >= QUIET_S:
            if now - self.phase_since >= QUIET_S:
                self.say(f"still {self.phase} ({now - self.phase_since:.0f} s)")
            else:  # a phase that began since the last line
                self.say(f"{self.phase} ({now - self.started:.0f} s since the worker started)")



def fmt(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value / scale, spec)


def progress_line(i: int, n: int, point: Point, record: dict, seconds: float) -> str:
    r = RecordView(record)
    label = point_label(point)
    if not r.ok:
        return f"[{i}/{n}] {label:<24} {r.status:<11} {r.reason or ''} ({seconds:.0f} s)"
    busy = " CONTENDED" if r.contended else ""
    return (f"[{i}/{n}] {label:<24} ok          {fmt(r.summary_number('step_ms_median'), '.1f')} ms/step  "
            f"{fmt(r.tokens_per_s, ',.0f')} tok/s  peak {fmt(r.peak_memory()[0], ',.0f', 2**20)} MiB  "
            f"loss {fmt(r.summary_number('final_loss'), '.3f')}  ({seconds:.0f} s){busy}")


def point_label(point: Point) -> str:
    return point.rung + (f" {point.sweep['field']}={point.sweep['value']}" if point.sweep else "") + (f" #{point.repeat}" if point.repeat else "")


def _label(r: RecordView) -> str:
    return r.rung + (f" {r.sweep_point}" if r.sweep else "")


def contention_warning(records: list[dict]) -> str | None:
    """One line for the end of a run when any of its runs was measured on a busy machine, with the numbers."""
    busy = [(r, contention.describe(r.contention.to_dict())) for r in map(RecordView, records)]
    busy = [(r, line) for r, line in busy if line]
    if not busy:
        return None
    return (f"warning: {len(busy)} of {len(records)} run(s) measured under contention, their times include other "
            f"work: " + "; ".join(f"{r.rung} #{r.repeat}: {line}" for r, line in busy))


def summary_table(records: list[dict]) -> str:
    rows = []
    for r in map(RecordView, records):
        rows.append([
            _label(r), r.repeat, r.status, fmt(r.summary_number("step_ms_median"), ".2f"),
            fmt(r.summary_number("step_ms_iqr"), ".2f"), fmt(r.tokens_per_s, ",.0f"), fmt(r.peak_memory()[0], ",.0f", 2**20),
            fmt(r.first_step_ms, ",.0f"), fmt(r.summary_number("final_loss"), ".4f"),
        ])
    headers = ["rung", "rep", "status", "ms/step (median)", "IQR ms", "tokens/s", "peak MiB", "first step ms", "final loss"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def finished_lines(records: list[dict], total: int, out) -> list[str]:
    """For an interrupted run: which runs finished, and where their records are."""
    return [f"finished before the stop: {len(records)} of {total} run(s)"] + [
        f"  {_label(r)} #{r.repeat}: {r.status} -> {Path(out) / (r.run_id + '.json')}" for r in map(RecordView, records)]
