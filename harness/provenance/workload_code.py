"""The workload's code identity (record.workload_code): which code defined a measurement, as asv keys a benchmark's
results to a hash of the benchmark's own code.

It covers the code that decides what a step computes and how it is timed: every gpt/*.py (the workload) and the
worker's timed loop in harness/worker.py (StepTimer, summarize and the loop itself: `timed_steps`, or in the older
workers the `for i in range(config.steps)` loop inside `measure`). It leaves out the rest of the harness (the
runner, the tables, the evidence gathered after the timed steps), which changes often and changes no number: the
record's environment.harness.source_sha256 still covers all of it.

Runs whose identities differ were measured by different code: harness.compare and the report mark such a pair or
pool (harness.analysis.group) instead of pooling its runs as repeats of one measurement silently.
The same function computes it from the files here (identity) and from a commit's files
(scripts/workload_code_history.py, for the records made before records carried it). No torch import.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Iterable
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD_DIR = "gpt"
WORKER = "harness/worker.py"
TIMED_LOOP = ("StepTimer", "summarize", "timed_steps")  # the worker's top-level names that make the timed loop
DIGITS = 16  # hex digits kept: a label to compare by, not a security boundary


class CodeIdentityError(ValueError):
    """The worker's source has no timed loop this module can find (it was renamed: update TIMED_LOOP)."""


def _inline_loop(measure: ast.FunctionDef) -> ast.For | None:
    """The older workers' timed loop: the `for ... in range(config.steps)` statement inside measure."""
    for node in ast.walk(measure):
        if isinstance(node, ast.For) and "range(config.steps)" in ast.unparse(node.iter):
            return node
    return None


def timed_loop_source(worker_source: str) -> str:
    """The source of the worker's timed loop (TIMED_LOOP's definitions, in that order; the inline loop of an older
    worker in place of timed_steps)."""
    tree = ast.parse(worker_source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if "timed_steps" not in defs and isinstance(defs.get("measure"), ast.FunctionDef):
        loop = _inline_loop(defs["measure"])
        if loop is not None:
            defs["timed_steps"] = loop
    missing = [name for name in TIMED_LOOP if name not in defs]
    if missing:
        raise CodeIdentityError(f"{WORKER}: no {', '.join(missing)}: the timed loop is not where TIMED_LOOP says")
    return "\n".join(ast.get_source_segment(worker_source, defs[name]) or "" for name in TIMED_LOOP)


def identity_of(paths: Iterable[str], read: Callable[[str], str]) -> str:
    """The identity over the files named `paths` (repository-relative, as git names them), read by `read(path)`:
    sha256 over each gpt/*.py (path and content, in path order) and the worker's timed loop, DIGITS hex."""
    digest = hashlib.sha256()
    for path in sorted(p for p in paths if p.startswith(f"{WORKLOAD_DIR}/") and p.endswith(".py")):
        digest.update(path.encode() + b"\0" + read(path).encode() + b"\0")
    digest.update(WORKER.encode() + b"\0" + timed_loop_source(read(WORKER)).encode())
    return digest.hexdigest()[:DIGITS]


@lru_cache(maxsize=1)
def identity() -> str:
    """The identity of the code in this checkout (what a record made now carries)."""
    paths = [p.relative_to(ROOT).as_posix() for p in (ROOT / WORKLOAD_DIR).rglob("*.py") if "__pycache__" not in p.parts]
    return identity_of(paths, lambda path: (ROOT / path).read_text(encoding="utf-8"))
