"""The report's charts, drawn in worker processes while its text is written.

Drawing is most of a report's own time: about two dozen PNGs at 0.1-0.5 s each on this project's 2-core machine, whether
there are 200 records or 100,000, and none of the text needs them. So the workers, one per CPU besides the one the text
is written on, are forked first, before the records are read (a forked worker copies each page of the report's memory
it touches: forked after a cold read of 100,000 records, one grew by 1 GB); the outline computes what each chart shows
(the analysis, over the runs, in the report's own process) and hands it over with the function that draws it
(`add(key, draw, *data)`: a module's function and the chart's data, pickled: kilobytes), and takes each chart where it
goes (`take`) while it writes the text. Where fork is not the way processes start (macOS, Windows) or there is one CPU,
each chart is drawn in this process when it is taken: the same bytes, later.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from typing import Self

from harness.envinfo import usable_cpus
from harness.signals import STOP_SIGNALS


def _quiet_worker() -> None:
    # Ctrl-C (or a closed terminal) reaches the whole process group: the report says so in one line
    # (harness.output.run_main), and a worker just ends, printing no traceback of its own. Where CPUs are few, the text
    # goes first (the report waits for it; the charts are usually done before it is): a worker yields (nice 10).
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held since the fork (Drawings._start)
    os.nice(10)


def _workers() -> int:
    """One per CPU but the one the report's own process writes the text on; none but on Linux (fork)."""
    return usable_cpus() - 1 if sys.platform.startswith("linux") else 0


class Drawings:
    """`with Drawings() as drawn:` forks the workers; drawn.add(key, draw, *data) starts drawing draw(*data) (a list
    of harness.report.charts.Chart); drawn.take(key) is that list."""

    def __init__(self, workers: int | None = None):
        self.workers = _workers() if workers is None else workers  # 0: drawn in this process
        self.jobs: dict[str, Callable[[], list]] = {}
        self._pool = None
        self._pending: dict = {}
        self._workers: list = []

    def __enter__(self) -> Self:
        if self.workers > 0:
            try:
                self._start()
            except (OSError, NotImplementedError, ImportError):  # no semaphores (no /dev/shm), no process left to fork
                self._end(failed=True)
                self.workers, self._pool = 0, None  # drawn here, as where fork is not the way
        return self

    def _start(self) -> None:
        # fork: every worker starts at the first submit, made here, so that they are forked now, small; a stop signal
        # waits until they are, so none arrives in a worker before _quiet_worker has set it to end it
        self._pool = ProcessPoolExecutor(self.workers, multiprocessing.get_context("fork"), initializer=_quiet_worker)
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        before = set(multiprocessing.active_children())
        try:
            started = self._pool.submit(int)
        finally:
            self._workers = [p for p in multiprocessing.active_children() if p not in before]
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        started.result()

    def add(self, key: str, draw: Callable[..., list], *data) -> None:
        """Start drawing draw(*data) (draw a module's function, data what pickle carries: a chart's, not records)."""
        if self._pool is not None:
            self._pending[key] = self._pool.submit(draw, *data)
        self.jobs[key] = partial(draw, *data)

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
