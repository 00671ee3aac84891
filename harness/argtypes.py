"""The types of every command's options (argparse `type=`), in one place: a bad value is argparse's one-line usage
error (exit 2) saying what is expected, never a traceback or a silent surprise further on.

A number is finite (NaN passes every bound written `x <= 0`, and inf every `x > 0`: neither is accepted here) and
within the range what it measures can take; a whole number is written as one (no '1e3', no 4,301 digits); a path
is never empty ('' is not the current folder: `-o ''` once wrote a report into it). tests/test_argtypes.py feeds
every command's options NaN, inf, 0, -1, '' and huge values.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path

from gpt.config import SIZE_BOUNDS

AUTO = "auto"  # --repeats auto (harness.runner.request.AUTO)
MAX_REPEATS = 1_000  # repeats of one point: a plan's repeats, --repeats, --runs (harness.runner.plan reads it here)
WEEK_S = 7 * 24 * 3600.0  # the longest wait or budget any command takes, in seconds
MAX_THREADS = 65_536


def _bound_text(low, high, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return (f"above {low:g}" if low_open else f"from {low:g}") + f" to {'below ' if high_open else ''}{high:g}"
    if low is not None:
        return f"above {low:g}" if low_open else f"of at least {low:g}"
    return f"below {high:g}" if high_open else f"of at most {high:g}"


def number(low: float | None = None, high: float | None = None, *, low_open: bool = False, high_open: bool = False,
           what: str = "number"):
    """An option type for a finite number in [low, high] (an open end excludes its bound)."""
    expected = f"a finite {what} {_bound_text(low, high, low_open, high_open)}"

    def accepts(value) -> bool:
        return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
                and (low is None or (value > low if low_open else value >= low))
                and (high is None or (value < high if high_open else value <= high)))

    def parse(text: str) -> float:
        try:
            value = float(text)
        except (TypeError, ValueError):
            value = math.nan
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    # the same rule for a value that did not come from a command line (harness.analysis.options.CompareOptions)
    parse.accepts, parse.expected, parse.__name__ = accepts, expected, what
    return parse


def whole(low: int, high: int, what: str = "whole number"):
    """An option type for a whole number from low to high, written as one."""
    def parse(text: str) -> int:
        try:
            value = int(text) if re.fullmatch(r"\s*[+-]?[0-9]+\s*", text) else None
        except ValueError:  # more digits than Python converts
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a {what} from {low:,} to {high:,}")
        return value

    parse.__name__ = what
    return parse


_runs_or_auto = whole(1, MAX_REPEATS, "number of runs, or 'auto',")
_percent = number(0, 100, low_open=True, high_open=True, what="percentage")


def repeats_or_auto(text: str) -> int | str:
    """--repeats N (runs of a rung) or --repeats auto."""
    return AUTO if text.strip().lower() == AUTO else _runs_or_auto(text)


def target_percent(text: str) -> float:
    """--target 2 or 2%: a positive percentage below 100, returned as a fraction (0.02)."""
    try:
        return _percent(text.strip().removesuffix("%")) / 100
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a positive percentage below 100, like 2 or 2%") from None


def path_text(text: str) -> str:
    """A path option: an empty path is bad input, never the current folder by accident."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: an empty path; name a folder or file ('.' for this folder)")
    return text


def path_arg(text: str) -> Path:
    """path_text, as a Path."""
    return Path(path_text(text))


# The ones the commands share
seconds = number(0, WEEK_S, low_open=True, what="number of seconds")  # a timeout, a budget, a poll interval
seconds_or_none = number(0, WEEK_S, what="number of seconds")  # a reserve: 0 allowed
fraction = number(0, 1, high_open=True, what="fraction")  # a noise floor: 0 to below 1
tolerance = number(0, 1, low_open=True, what="fraction")  # a relative loss tolerance: above 0, at most 1
gib = number(0, 1e6, what="number of GiB")  # a headroom: 0 allowed
positive_gib = number(0, 1e6, low_open=True, what="number of GiB")  # a memory budget
repeats = whole(1, MAX_REPEATS, "number of runs")
max_repeats = whole(2, MAX_REPEATS, "number of runs")  # --repeats auto's cap: one run decides nothing
_STEPS, _BATCH, _SEQ = (SIZE_BOUNDS[field] for field in ("steps", "batch_size", "seq_len"))  # gpt.config's bounds
steps = whole(*_STEPS, "number of steps")
warmup_steps = whole(0, _STEPS[1] - 1, "number of steps")
batch_size = whole(*_BATCH, "batch size")
seq_len = whole(*_SEQ, "sequence length")
threads = whole(1, MAX_THREADS, "number of threads")
