"""What a comparison is asked for (CompareOptions: the options harness.compare and harness.report share, as keyword
arguments) and the one function that loads records and builds the comparison from them (analyse). No argparse here:
the command lines turn their arguments into CompareOptions and a UsageError back into their own usage error.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field

from harness import argtypes
from harness.analysis import stats
from harness.analysis.context import DEFAULT_LOSS_TOL, Compare
from harness.analysis.dataset import Dataset, Filters, load
from harness.store.index import RecordIndex


class UsageError(ValueError):
    """An option that cannot be used as given (the command line exits 2 with it)."""


class NothingToCompare(Exception):
    """No valid record, or none that the filters keep (the command line exits 1 with it)."""


@dataclass(frozen=True)
class CompareOptions:
    paths: tuple
    baseline_env: str | None = None
    baseline_gpu: str | None = None
    envs: tuple = ()
    gpus: tuple = ()
    plans: tuple = ()
    rungs: tuple = ()
    noise_floor: float = stats.NOISE_FLOOR
    loss_tol: float = DEFAULT_LOSS_TOL
    show_all: bool = False  # what changed underneath: every kernel change
    include_contended: bool = False  # runs timed under contention back in the deltas, marked
    use_index: bool = True  # read through the record index (harness.store.index); False: every file parsed directly
    index: str | None = None  # where the indexes are kept (default: FOLDER/.harness-index/ beside each folder's records)
    filters: Filters = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "filters", Filters(list(self.envs), list(self.gpus), list(self.plans), list(self.rungs)))

    def check(self) -> None:
        for flag, value, kind in (("--noise-floor", self.noise_floor, argtypes.fraction),
                                  ("--loss-tol", self.loss_tol, argtypes.tolerance)):
            if not kind.accepts(value):  # the command line's own rule (NaN is no fraction)
                raise UsageError(f"{flag} {value!r}: expected {kind.expected}")
        if self.index is not None and not self.use_index:
            raise UsageError("--index and --no-index: choose one")


def resolve_baselines(options: CompareOptions, ds: Dataset) -> tuple[str | None, str | None]:
    """The env and device labels --baseline-env / --baseline-gpu name (exact, else a unique match)."""
    env = gpu = None
    if options.baseline_env:
        envs = ds.envs()
        matches = [e for e in envs if e == options.baseline_env] or [e for e in envs if e.split("@")[0] == options.baseline_env]
        if len(matches) != 1:
            raise UsageError(f"--baseline-env {options.baseline_env}: {'ambiguous' if matches else 'no such env'} "
                             f"(envs here: {', '.join(envs) or 'none'})")
        env = matches[0]
    if options.baseline_gpu:
        gpus = ds.gpus()
        wanted = options.baseline_gpu.lower()
        matches = ([g for g in gpus if wanted in (g.lower(), ds.name(g))] or
                   [g for g in gpus if wanted in g.lower() or wanted in ds.name(g)])
        if len(matches) != 1:
            found = ", ".join(map(ds.name, matches))
            raise UsageError(f"--baseline-gpu {options.baseline_gpu}: {'matches ' + found if matches else 'no such device'} "
                             f"(devices here: {', '.join(map(ds.name, gpus)) or 'none'})")
        gpu = matches[0]
    return env, gpu


@contextmanager
def _no_cyclic_gc():
    """Python's cyclic collector kept off the records: paused while they load, and the objects they made frozen after
    (gc.freeze: left out of its passes; refcounting still frees them), until the next load unfreezes them. Loading
    makes millions of objects that all live until the comparison is done, none in a cycle: the collector's passes
    over them found nothing and were 5 s of a warm compare's 18 at 100,000 records (one pass at the end, 1.5 s)."""
    gc.unfreeze()  # an earlier comparison's objects back under the collector
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.freeze()
            gc.enable()


def analyse(options: CompareOptions, warn, notice=None) -> tuple[Dataset, Compare]:
    """Load the records under options.paths (one warning line to `warn` per file left out) and build the comparison.
    The record index's own lines (rebuilt, not written) go to `notice` (default: warn), never into the results.
    Raises UsageError for an option that cannot be used, NothingToCompare when nothing is left to compare."""
    options.check()
    with _no_cyclic_gc():
        index = RecordIndex.open(options.paths, options.index, notice or warn) if options.use_index else None
        ds = load(options.paths, warn, options.filters, include_contended=options.include_contended,
                  **({"read": index.read, "files": index.files} if index else {}))
    if not ds.valid_records:
        raise NothingToCompare(f"no valid record found under {', '.join(map(str, options.paths))}")
    # References pass --env (Filters): an --env that matches no record still leaves nothing to compare.
    if not (ds.groups or ds.references or ds.peers or ds.failed or ds.left_out) or \
            (options.envs and not ds.kept_envs & set(options.envs)):
        raise NothingToCompare(f"{ds.valid_records} valid record(s), but none matches the filters")
    env, gpu = resolve_baselines(options, ds)
    return ds, Compare(ds, env, gpu, options.noise_floor, options.loss_tol, show_all=options.show_all)
