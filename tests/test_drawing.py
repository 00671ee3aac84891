"""harness.report.drawing: the report's charts drawn in forked worker processes, from their data sent there, are the
charts drawn here, byte for byte; a chart's error is raised as itself; a worker that dies leaves its chart to this
process; a stop signal ends the workers with the report."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from shipped import RESULTS

from harness.analysis import answers
from harness.analysis.options import CompareOptions, analyse
from harness.report import answer_charts, drawing, outline

PARENT = os.getpid()
needs_fork = pytest.mark.skipif(drawing._workers() < 1, reason="one CPU or no fork here: nothing is drawn apart")


@needs_fork
def test_charts_drawn_by_workers_are_the_charts_drawn_here():
    options = CompareOptions(paths=(RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"), use_index=False)
    _ds, cmp = analyse(options, warn=lambda line: None)
    jobs, answered = dict(outline.chart_jobs(cmp)), answers.compute(cmp)
    drawn = {}
    for workers in (0, 2):
        with drawing.Drawings(workers=workers) as drawings:
            assert drawings.workers == workers and len(drawings._workers) == workers
            for key, (draw, *data) in jobs.items():
                drawings.add(key, draw, *data)
            for a in answered:
                drawings.add(f"answer-{a.key}", answer_charts.charts_of, a.key, a.chart)
            drawn[workers] = {key: drawings.take(key) for key in reversed(drawings.jobs)}
    mine, theirs = drawn[0], drawn[2]
    # two ladders, three answers, cross-GPU, kernel mix, memory split, a sweep: each with its PNG (and a narrow one)
    assert sum(len(charts) for charts in mine.values()) == 9
    assert theirs == mine


def _collecting() -> list:
    import gc

    return [gc.isenabled()]


@needs_fork
def test_a_chart_worker_collects_cycles_where_the_report_itself_does_not():
    """The report's own process runs with the cyclic collector off (harness.console.output.run_process); its chart workers,
    whose figures are made of cycles, turn it back on."""
    import gc

    gc.disable()
    try:
        with drawing.Drawings(workers=1) as drawn:
            drawn.add("gc", _collecting)
            _index, worker = drawn._pending["gc"]
            assert worker.result(timeout=60) == [True]  # not taken here (that would draw it here): the worker's
    finally:
        gc.enable()


def _imported(module: str) -> list:
    import sys

    return [module in sys.modules]


@needs_fork
def test_a_chart_worker_imports_the_drawing_code_before_its_first_chart(tmp_path, monkeypatch):
    """The workers are forked before the records are read and have nothing to draw until they are: each imports the
    modules it is given then (matplotlib with the chart modules), not when its first chart arrives. The module here is
    made for the test, so only the worker's preload can have imported it."""
    (tmp_path / "preload_probe.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))  # before the fork: the workers inherit it
    for given, imported in ((("preload_probe",), [True]), ((), [False])):
        with drawing.Drawings(workers=1, preload=given) as drawn:
            drawn.add("probe", _imported, "preload_probe")
            _index, worker = drawn._pending["probe"]
            assert worker.result(timeout=60) == imported


class _Recorder:
    """Stands in for Drawings in outline.build: notes the module of each job's Draw, draws nothing."""

    def __init__(self):
        self.modules: set[str] = set()

    def add(self, key: str, draw, *data) -> None:
        self.modules |= {part.module for part in (draw, *data) if isinstance(part, drawing.Draw)}

    def take(self, key: str) -> list:
        return []


def test_the_report_preloads_every_module_its_charts_are_drawn_from():
    """outline.CHART_MODULES names each module a job of the report draws with, the answers' included: a module left
    out would be imported at its first chart, as before, and the report would pay for it on the way to its end."""
    options = CompareOptions(paths=(RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"), use_index=False)
    _ds, cmp = analyse(options, warn=lambda line: None)
    recorded = _Recorder()
    outline.build(cmp, options.paths, "python -m harness.report", recorded)
    assert recorded.modules == set(outline.CHART_MODULES)


def _slow_pid(seconds: float, n: int, log: Path) -> list:
    time.sleep(seconds)
    with log.open("a") as f:
        f.write(f"{n}\n")
    return [os.getpid(), n]


@needs_fork
def test_a_chart_no_worker_has_started_is_drawn_here_rather_than_waited_for(tmp_path):
    """One worker, six half-second charts taken at once (the text already done): rather than wait for the worker, the
    report's own process draws the charts no worker has started, the last first; each take is still its own chart,
    each drawn once."""
    with drawing.Drawings(workers=1) as drawn:
        for n in range(6):
            drawn.add(f"c{n}", _slow_pid, 0.5, n, tmp_path / "drawn")
        for _ in range(100):  # until the worker has taken the first (the executor hands jobs over from a thread)
            if drawn._claims[0]:
                break
            time.sleep(0.05)
        taken = [drawn.take(f"c{n}") for n in range(6)]
    assert [n for _pid, n in taken] == list(range(6))
    pids = [pid for pid, _n in taken]
    assert pids[0] != PARENT and pids[-1] == PARENT and set(pids) == {PARENT, pids[0]}
    assert sorted(map(int, (tmp_path / "drawn").read_text().split())) == list(range(6))  # each drawn once


@needs_fork
def test_jobs_past_the_claim_flags_are_left_to_the_workers(tmp_path, monkeypatch):
    """More jobs than claim flags (a bound no report reaches): those past it are drawn by the workers, once each."""
    monkeypatch.setattr(drawing, "MAX_CLAIMED_JOBS", 2)
    with drawing.Drawings(workers=1) as drawn:
        for n in range(4):
            drawn.add(f"c{n}", _slow_pid, 0.1, n, tmp_path / "drawn")
        taken = [drawn.take(f"c{n}") for n in range(4)]
    assert [n for _pid, n in taken] == list(range(4)) and all(pid != PARENT for pid, _n in taken[2:])
    assert sorted(map(int, (tmp_path / "drawn").read_text().split())) == list(range(4))


def _fails():
    raise ValueError("a chart that cannot be drawn")


def _dies_in_a_worker():
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return [("drawn-here.png", b"png", "drawn by the report's own process")]


@needs_fork
def test_a_charts_error_is_raised_as_itself_and_a_dead_worker_leaves_its_chart_here():
    with drawing.Drawings(workers=2) as drawn:
        drawn.add("fails", _fails)
        drawn.add("dies", _dies_in_a_worker)
        with pytest.raises(ValueError, match="cannot be drawn"):
            drawn.take("fails")
        assert drawn.take("dies") == [("drawn-here.png", b"png", "drawn by the report's own process")]


@pytest.mark.parametrize("error", [OSError(38, "Function not implemented"), NotImplementedError("no sem_open")])
def test_without_worker_processes_the_charts_are_drawn_here(monkeypatch, error):
    """Where no pool can start (no /dev/shm for its semaphores, no process left to fork), every chart is drawn by the
    report's own process, as where fork is not the way processes start."""
    def refused(*_args, **_kwargs):
        raise error

    monkeypatch.setattr(drawing, "ProcessPoolExecutor", refused)
    with drawing.Drawings(workers=2) as drawn:
        drawn.add("here", _dies_in_a_worker)
        drawn.add("added", _dies_in_a_worker)
        assert drawn.workers == 0 and drawn._pool is None
        here = [("drawn-here.png", b"png", "drawn by the report's own process")]
        assert drawn.take("here") == drawn.take("added") == here


@needs_fork
@pytest.mark.parametrize("signum, group", [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_a_stop_signal_ends_the_report_and_its_workers(tmp_path, signum, group):
    """Ctrl-C (to the whole process group, as a terminal sends it) or SIGTERM to the report alone, while a worker
    draws: one line, exit 128 + the signal, no traceback, no file, and no worker left behind."""
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parent.parent
    report = subprocess.Popen([sys.executable, "-m", "harness.report", str(RESULTS), "-o", str(tmp_path / "out"),
                               "--no-index"], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True, env={**os.environ, "PYTHONPATH": str(root)})
    deadline = time.monotonic() + 120
    while not any(_cpu_ticks(pid) > 10 for pid in _children(report.pid)):  # a worker drawing (forked idle, early)
        assert report.poll() is None and time.monotonic() < deadline, report.communicate()
        time.sleep(0.02)
    os.killpg(report.pid, signum) if group else os.kill(report.pid, signum)
    stopped = time.monotonic()
    _out, err = report.communicate(timeout=60)
    assert report.returncode == 128 + signum and "Traceback" not in err, err
    # at once: not after the charts being drawn are finished (which took 4 s here when SIGTERM reached the report alone)
    assert time.monotonic() - stopped < 3.0
    assert err.strip().splitlines()[-1] == (f"python -m harness.report: stopped by {signal.Signals(signum).name}; "
                                            "no output file is left half-written")
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # nothing of its process group is left
        os.killpg(report.pid, 0)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def _cpu_ticks(pid: str) -> int:
    """user + system CPU time of a process, in clock ticks (/proc/N/stat's 14th and 15th fields); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0
    return int(fields[11]) + int(fields[12])


def _children(pid: int) -> list[str]:
    """The pids whose parent is pid (/proc/N/stat: the parent's pid is the second field after the name)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # gone meanwhile
            continue
        if fields[1] == str(pid):
            kids.append(stat.parent.name)
    return kids
