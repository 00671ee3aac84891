"""The report's charts, drawn in worker processes while its text is written.

Drawing is most of a report's own time: about two dozen PNGs at 0.1-0.5 s each on this project's 2-core machine, whether
there are 200 records or 100,000, and none of the text needs them. So the workers, one per CPU besides the one the text
is written on, are forked first, before the records are read (a forked worker copies each page of the report's memory it
touches: forked after a cold read of 100,000 records, one grew by 1 GB), and each imports the drawing code while the
records are read (`preload`); the outline computes what each chart shows (the analysis, over the runs, in the report's
own process) and hands it over with the function that draws it (`add(key, draw, *data)`: a module's function and the
chart's data, pickled: kilobytes), and takes each chart where it goes (`take`) while it writes the text. A chart no
worker has started when it is taken is drawn here, and while it waits for one that a worker draws, it draws the last
ones no worker has started (once the text is done, it draws beside the workers rather than wait for them). Where fork is
not the way processes start (macOS, Windows) or there is one CPU, each chart is drawn in this process when it is taken:
the same bytes, later. Given a ChartCache (harness.report.chart_cache), a job whose charts an earlier report kept is not
drawn at all, and each chart drawn is kept for the next.
"""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from typing import Self

from harness.console.signals import STOP_SIGNALS, held
from harness.provenance.envinfo import usable_cpus
from harness.report.chart_cache import ChartCache

# One flag per job, shared with the workers by inheritance (set before they are forked): whoever sets a job's flag first
# draws it, a worker or, rather than wait for one, the report's own process (Future.cancel would leave the pool's
# manager thread a cancelled future to fail on when the workers are ended by a stop signal: Python 3.11)
MAX_CLAIMED_JOBS = 256  # more charts than a report has; past it a job is left to the workers alone
_claims = None


def _claim(claims, index: int) -> bool:
    """Take job `index` for this process: False where another already took it (or holds the lock past a second: a
    worker killed while holding it; its job is then drawn here when the pool says the worker died)."""
    lock = claims.get_lock()
    if not lock.acquire(timeout=1.0):
        return False
    try:
        if claims[index]:
            return False
        claims[index] = 1
        return True
    finally:
        lock.release()


def _draw_if_unclaimed(index: int, draw: Callable[..., list], *data) -> list | None:
    """In a worker: draw the job unless the report's own process took it (None, then)."""
    return draw(*data) if _claim(_claims, index) else None


def _import(modules: tuple[str, ...]) -> None:
    for module in modules:
        importlib.import_module(module)


def _quiet_worker() -> None:
    # Ctrl-C (or a closed terminal) reaches the whole process group: the report says so in one line
    # (harness.console.output.run_main), and a worker just ends, printing no traceback of its own. Where CPUs are few, the text
    # goes first (the report waits for it; the charts are usually done before it is): a worker yields (nice 10).
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held since the fork (Drawings._start)
    os.nice(10)
    gc.enable()  # off in the report's own process (harness.console.output.run_process); a chart's figure is made of cycles


@dataclass(frozen=True)
class Draw:
    """A chart function by its module's and its own name: what a job hands to a worker (pickled, the two names) and
    what names it among the kept charts. Its module, and matplotlib with it, is imported where a chart is drawn: the
    report's own process, where every chart was kept, imports neither (half a second); its workers import them while
    the records are read (Drawings' preload)."""

    module: str
    name: str

    def __call__(self, *data) -> list:
        return getattr(importlib.import_module(self.module), self.name)(*data)


def _workers() -> int:
    """One per CPU but the one the report's own process writes the text on; none but on Linux (fork)."""
    return usable_cpus() - 1 if sys.platform.startswith("linux") else 0


class Drawings:
    """`with Drawings() as drawn:` forks the workers; drawn.add(key, draw, *data) starts drawing draw(*data) (a list
    of harness.report.figures.Chart); drawn.take(key) is that list. With `kept`, charts kept by an earlier report are
    taken from it and new ones put in it."""

    def __init__(self, workers: int | None = None, kept: ChartCache | None = None, preload: tuple[str, ...] = ()):
        self.workers = _workers() if workers is None else workers  # 0: drawn in this process
        self.kept = kept
        self.preload = preload  # the chart modules (and matplotlib with them), imported by each worker once forked
        self._kept_as: dict[str, str] = {}  # key -> the name its charts are kept under, once drawn
        self.jobs: dict[str, Callable[[], list]] = {}
        self._pool = None
        self._pending: dict = {}  # key -> (its claim flag's index, the worker's future), in the order added
        self._claims = None
        self._drawn_here: dict[str, list] = {}  # key -> the charts of a job this process took over
        self._workers: list = []

    def __enter__(self) -> Self:
        if self.workers > 0:
            try:
                self._start()
            except (OSError, NotImplementedError, ImportError):  # no semaphores (no /dev/shm), no process left to fork
                self._end(failed=True)
                self.workers, self._pool = 0, None  # drawn here, as where fork is not the way
            except BaseException:  # a stop signal or a broken pool as they start: no __exit__ follows, so they end now
                self._end(failed=True)
                raise
        return self

    def _start(self) -> None:
        # fork: every worker starts at the first submit, made here, so that they are forked now, small; a stop signal
        # waits until they are, so none arrives in a worker before _quiet_worker has set it to end it
        global _claims
        context = multiprocessing.get_context("fork")
        self._claims = _claims = context.Array("b", MAX_CLAIMED_JOBS)  # before the fork: the workers inherit it
        self._pool = ProcessPoolExecutor(self.workers, context, initializer=_quiet_worker)
        with held():
            before = set(multiprocessing.active_children())
            try:
                started = self._pool.submit(int)
            finally:
                self._workers = [p for p in multiprocessing.active_children() if p not in before]
        started.result()
        # nothing reaches a worker to draw until the records are read (seconds, at 100,000 records, on one CPU): each
        # imports the drawing code meanwhile (0.4 s here), not when its first chart arrives; one that takes a second
        # preload finds the modules imported. Where every chart is kept, that is 0.4 s of a CPU the reading leaves idle
        # (a report reads for longer than that even at 200 records). A failed import is not said here: the chart that
        # needs the module imports it again, and raises then.
        for _ in range(self.workers if self.preload else 0):
            self._pool.submit(_import, self.preload)

    def add(self, key: str, draw: Callable[..., list], *data) -> None:
        """Start drawing draw(*data) (draw a module's function or a Draw; data what pickle carries: a chart's, not
        records), unless an earlier report kept its charts."""
        if self.kept is not None and (name := self.kept.name(draw, data)) is not None:
            charts = self.kept.get(name)
            if charts is not None:
                self._drawn_here[key] = charts
                return
            self._kept_as[key] = name
        if self._pool is not None:
            index = len(self.jobs)
            if index < MAX_CLAIMED_JOBS:
                self._pending[key] = (index, self._pool.submit(_draw_if_unclaimed, index, draw, *data))
            else:
                self._pending[key] = (None, self._pool.submit(draw, *data))
        self.jobs[key] = partial(draw, *data)

    def take(self, key: str) -> list:
        """The charts of one job (kept, where they are new, for the next report): see _take."""
        charts = self._take(key)
        if (name := self._kept_as.pop(key, None)) is not None:
            self.kept.put(name, charts)
        return charts

    def _take(self, key: str) -> list:
        """The charts of one job: drawn by a worker (waited for) or, without workers, here and now. Where no worker has
        started it, this process draws it; while a worker draws it, this process draws the last jobs no worker has
        started (the text is written: rather than wait, it draws beside the workers). A chart's error is raised here
        as the error it was; where a worker died (killed for memory, say), the job is drawn here."""
        index, pending = self._pending.pop(key, (None, None))
        if key in self._drawn_here:
            return self._drawn_here.pop(key)
        if pending is not None and (index is None or not _claim(self._claims, index)):
            while not pending.done() and self._draw_one_here():
                pass
            try:
                return pending.result()
            except BrokenProcessPool:
                pass
        return self.jobs[key]()

    def _draw_one_here(self) -> bool:
        """Draw the last job that no worker has started; False when the workers have started every one."""
        for key, (index, _future) in reversed(self._pending.items()):
            if index is not None and _claim(self._claims, index):
                del self._pending[key]
                self._drawn_here[key] = self.jobs[key]()  # a chart's error is raised now, as itself
                return True
        return False

    def __exit__(self, *exc) -> None:
        self._end(failed=exc[0] is not None)

    def _end(self, failed: bool) -> None:
        if self.kept is not None:
            self.kept.close()
        if failed:  # an error or a stop signal (SIGTERM may reach this process alone): the workers end now
            for worker in self._workers:
                worker.terminate()
        if self._pool is not None:
            self._pool.shutdown(wait=not failed, cancel_futures=True)
