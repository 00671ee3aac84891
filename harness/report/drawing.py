"""The report's charts, drawn in worker processes while its text is written.

Drawing is most of a report's own time: about two dozen PNGs at 0.1-0.5 s each on this project's 2-core machine,
whether there are 200 records or 100,000, and none of the text needs them. So the charts are named first (a key and a
function that draws them, returning a list of harness.report.charts.Chart), a pool of worker processes is forked then,
one per CPU, which inherits those functions and the loaded records (nothing is pickled but a key and the PNG bytes),
and the outline writes the text meanwhile and takes each chart where it goes; the answers' charts, named once the
answers are computed, are sent to the workers with their data. Where fork is not the way processes start (macOS,
Windows) or there is one CPU, each chart is drawn in this process when it is taken: the same bytes, later.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Self

from harness.signals import STOP_SIGNALS

_JOBS: dict[str, Callable[[], list]] = {}  # what a forked worker draws: set before the fork, read in the workers


def _quiet_worker() -> None:
    # Ctrl-C (or a closed terminal) reaches the whole process group: the report says so in one line
    # (harness.output.run_main), and a worker just ends, printing no traceback of its own. Its GC leaves the inherited
    # objects alone (frozen), so it does not copy the pages of records it never reads. Where CPUs are few, the text
    # goes first (the report waits for it; the charts are usually done before it is): a worker yields (nice 10).
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held since the fork (Drawings.__enter__)
    gc.freeze()
    os.nice(10)


def _draw(key: str) -> list:
    return _JOBS[key]()


def _processes() -> int:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cpus if sys.platform.startswith("linux") and cpus > 1 else 1


class Drawings:
    """The charts by key: `with Drawings(jobs) as drawn:` starts drawing every job; drawn.take(key) is its charts."""

    def __init__(self, jobs: dict[str, Callable[[], list]], processes: int | None = None):
        self.jobs = dict(jobs)
        self.processes = min(_processes() if processes is None else processes, len(self.jobs))
        self._pool = None
        self._pending: dict = {}
        self._workers: list = []

    def __enter__(self) -> Self:
        if self.processes > 1:
            try:
                self._start()
            except (OSError, NotImplementedError, ImportError):  # no semaphores (no /dev/shm), no process left to fork
                self._end(failed=True)
                self.processes, self._pool, self._pending = 1, None, {}  # drawn here, as where fork is not the way
        return self

    def _start(self) -> None:
        _JOBS.clear()
        _JOBS.update(self.jobs)
        # fork: every worker starts at the first submit, so all of them inherit the jobs just set; a stop signal waits
        # until they are started, so none arrives in a worker before _quiet_worker has set it to end it
        self._pool = ProcessPoolExecutor(self.processes, multiprocessing.get_context("fork"), initializer=_quiet_worker)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        before = set(multiprocessing.active_children())
        try:
            self._pending = {key: self._pool.submit(_draw, key) for key in self.jobs}
        finally:
            self._workers = [p for p in multiprocessing.active_children() if p not in before]
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)

    def add(self, key: str, draw: Callable[..., list], *args) -> None:
        """One more job, named after the workers started: draw(*args), sent to a worker (draw a module's function,
        args what pickle carries: a chart's data, not the records)."""
        if self._pool is not None:
            self._pending[key] = self._pool.submit(draw, *args)
        self.jobs[key] = partial(draw, *args)

    def take(self, key: str) -> list:
        """The charts of one job: drawn by a worker (waited for) or, without workers, here and now. A chart's error is
        raised here as the error it was; where a worker died (killed for memory, say), the job is drawn here."""
        pending = self._pending.pop(key, None)
        if pending is not None:
            try:
                return pending.result()
            except BrokenProcessPool:
                pass
        return self.jobs[key]()

    def __exit__(self, *exc) -> None:
        self._end(failed=exc[0] is not None)

    def _end(self, failed: bool) -> None:
        if failed:  # an error or a stop signal (SIGTERM may reach this process alone): the workers end now
            for worker in self._workers:
                worker.terminate()
        if self._pool is not None:
            self._pool.shutdown(wait=not failed, cancel_futures=True)
        _JOBS.clear()
