"""harness.report.drawing: the report's charts drawn in forked worker processes are the charts drawn here, byte for
byte; a chart's error is raised as itself; a worker that dies leaves its chart to this process."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness.analysis import answers
from harness.analysis.options import CompareOptions, analyse
from harness.report import answer_charts, drawing, outline

RESULTS = Path(__file__).resolve().parent.parent / "results"
PARENT = os.getpid()
needs_fork = pytest.mark.skipif(drawing._processes() < 2, reason="one CPU or no fork here: nothing is drawn apart")


@needs_fork
def test_charts_drawn_by_workers_are_the_charts_drawn_here():
    options = CompareOptions(paths=(RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"), use_index=False)
    _ds, cmp = analyse(options, warn=lambda line: None)
    jobs, answered = outline.chart_jobs(cmp), answers.compute(cmp)
    drawn = {}
    for processes in (1, 2):
        with drawing.Drawings(jobs, processes=processes) as drawings:
            for a in answered:  # sent to a worker with their data, not inherited
                drawings.add(f"answer-{a.key}", answer_charts.charts_of, a.key, a.chart)
            assert drawings.processes == processes and bool(drawings._workers) == (processes > 1)
            drawn[processes] = {key: drawings.take(key) for key in reversed(drawings.jobs)}
    mine, theirs = drawn[1], drawn[2]
    # two ladders, three answers, cross-GPU, kernel mix, memory split, a sweep: each with its PNG (and a narrow one)
    assert sum(len(charts) for charts in mine.values()) == 9
    assert theirs == mine


def _fails():
    raise ValueError("a chart that cannot be drawn")


def _dies_in_a_worker():
    if os.getpid() != PARENT:
        os.kill(os.getpid(), signal.SIGKILL)
    return [("drawn-here.png", b"png", "drawn by the report's own process")]


@needs_fork
def test_a_charts_error_is_raised_as_itself_and_a_dead_worker_leaves_its_chart_here():
    with drawing.Drawings({"fails": _fails, "dies": _dies_in_a_worker}, processes=2) as drawn:
        with pytest.raises(ValueError, match="cannot be drawn"):
            drawn.take("fails")
        assert drawn.take("dies") == [("drawn-here.png", b"png", "drawn by the report's own process")]
