"""What `unpack` reads of an archive's summary (gpu-check.json), checked field by field before it is used: the archive
is someone else's, and its summary names a folder and fills a README (harness.gpu_check.pack). Every failure is one
line (PackError)."""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from pathlib import Path

from harness.argtypes import WEEK_S
from harness.console.textsafe import CELL, WORD, bounded, one_line
from harness.record.bounds import NAME_LENGTH, TEXT_LENGTH  # a name, and any other text, as in a record
from harness.record.io import json_depth

SUMMARY = "gpu-check.json"  # the summary inside the results folder (and so inside the archive)
MAX_SUMMARY_DEPTH = 16  # levels its JSON nests (a real one: 3); 60,000 were a RecursionError
MAX_ITEMS = 1_000  # runs, command words and compared paths in a summary (a real one: 21 runs at most)
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)?")  # as runner writes it


class PackError(ValueError):
    """An archive that cannot be unpacked as asked (one line)."""


def named(archive) -> str:
    return one_line(archive)


def error_line(exc: BaseException) -> str:
    """An exception as one bounded line ('OSError: [Errno 36] File name too long: ...')."""
    return one_line(bounded(f"{type(exc).__name__}: {exc}", CELL, WORD))


def _text(limit: int):
    return lambda v: None if isinstance(v, str) and len(v) <= limit else f"is not a text of at most {limit:,} characters"


def _number(low: float, high: float, whole: bool = False, what: str = "number"):
    """A finite number (an int where `whole`; never a bool) from low to high."""
    def check(v):
        kinds = (int,) if whole else (int, float)
        if isinstance(v, kinds) and not isinstance(v, bool) and not (isinstance(v, float) and not math.isfinite(v)) \
                and low <= v <= high:
            return None
        return f"is not a {what} from {low:,g} to {high:,g}"
    return check


def _optional(check):
    return lambda v: None if v is None else check(v)


def _one_of(*checks):
    return lambda v: None if any(c(v) is None for c in checks) else checks[0](v)


def _kind(kind: type, what: str, limit: int | None = None):
    def check(v):
        if not isinstance(v, kind):
            return f"is not {what}"
        return None if limit is None or len(v) <= limit else f"is {what} of more than {limit:,} items"
    return check


def _time(v):
    if not isinstance(v, str) or not ISO_TIME.fullmatch(v):
        return "is no ISO time"
    try:
        datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return "is no ISO time"
    return None


def _flag(v):
    return None if isinstance(v, bool) else "is not true or false"


_NAME, _TEXT = _text(NAME_LENGTH), _text(TEXT_LENGTH)
_SECONDS = _number(0, WEEK_S, what="number of seconds")
_EXIT = _optional(_number(-255, 255, whole=True, what="whole number"))  # an exit code; a signal's is negative
_VERSION = _optional(_one_of(_NAME, _number(-2**53, 2**53, whole=True, what="whole number")))  # cuDNN's is a number
# What unpack and its README read of a summary, each field checked before it is used: field -> its check (a reason
# it fails, or None). A field a check allows to be None may also be absent.
SUMMARY_FIELDS = {"started_at": _time, "finished_at": _optional(_time),
                  "budget_s": _SECONDS, "gpu": _optional(_NAME),
                  "runs": _kind(list, "a list", MAX_ITEMS), "command": _optional(_kind(list, "a list", MAX_ITEMS)),
                  "source": _optional(_kind(dict, "an object")), "sanity": _optional(_kind(dict, "an object")),
                  "compare": _optional(_kind(dict, "an object")), "report": _optional(_kind(dict, "an object")),
                  "archive_name": _optional(_NAME), "choices": _optional(_kind(list, "a list", MAX_ITEMS))}
PART_FIELDS = {"source": {"commit": _optional(_NAME), "source_sha256": _optional(_NAME)},
               "sanity": {k: _VERSION for k in ("torch", "driver", "python", "cuda", "cudnn")},
               "compare": {"exit": _EXIT, "paths": _optional(_kind(list, "a list", MAX_ITEMS))},
               "report": {"exit": _EXIT}}
RUN_FIELDS = {"status": _NAME, "tier": _NAME, "key": _NAME, "rung": _NAME,
              "steps": _number(1, 100_000, whole=True, what="whole number"),
              "warmup_steps": _number(0, 100_000, whole=True, what="whole number"), "capture": _flag,
              "estimate_s": _number(0, 1e9, what="number of seconds"), "seconds": _optional(_SECONDS),
              "tokens_s": _optional(_number(0, 1e15, what="rate per second")), "memory": _optional(_NAME),
              "note": _optional(_TEXT)}


def _quoted(value) -> str:
    """A value as a one-line message quotes it: at most 40 characters (its nesting is bounded by then)."""
    return one_line(repr(bounded(str(value), 40)))


def check_summary(summary, archive: Path) -> None:
    """Every field unpack and its README read, of the type they read, within its bounds, the times ISO times
    (PackError, one line): the archive is someone else's, its summary names a folder and fills a README."""
    def need(where: str, value, check) -> None:
        why = check(value)
        if why:
            raise PackError(f"{named(archive)}: its {SUMMARY} is not a gpu_check summary ({where}: {_quoted(value)} "
                            f"{why})")
    if not isinstance(summary, dict):
        raise PackError(f"{named(archive)}: its {SUMMARY} is not a gpu_check summary (not an object)")
    for name, check in SUMMARY_FIELDS.items():
        need(name, summary.get(name), check)
    for part, fields in PART_FIELDS.items():
        for name, check in fields.items():
            need(f"{part}.{name}", (summary.get(part) or {}).get(name), check)  # not a record: the call's summary
    for i, word in enumerate(summary.get("command") or []):
        need(f"command[{i}]", word, _TEXT)
    for i, choice in enumerate(summary.get("choices") or []):
        need(f"choices[{i}]", choice, _TEXT)
    for i, path in enumerate((summary.get("compare") or {}).get("paths") or []):  # not a record: the call's summary
        need(f"compare.paths[{i}]", path, _TEXT)
    for i, run in enumerate(summary["runs"]):
        need(f"runs[{i}]", run, _kind(dict, "an object"))
        for name, check in RUN_FIELDS.items():
            need(f"runs[{i}].{name}", run.get(name), check)
        if run["warmup_steps"] >= run["steps"]:  # not a record: the call's summary
            need(f"runs[{i}].warmup_steps", run["warmup_steps"], lambda v: "is not below its steps")


def parse_summary(data: bytes, archive: Path) -> dict:
    """The summary in `data` (the archive's gpu-check.json), checked (check_summary); PackError, one line, otherwise."""
    deep = PackError(f"{named(archive)}: its {SUMMARY} is not a gpu_check summary (nested deeper than "
                     f"{MAX_SUMMARY_DEPTH} levels)")
    try:
        summary = json.loads(data)
    except RecursionError:
        raise deep from None
    except ValueError as exc:  # not JSON, not UTF-8, an integer of more than 4,300 digits
        raise PackError(f"{named(archive)}: not a gpu_check archive (its {SUMMARY}: {error_line(exc)})") from None
    if json_depth(summary) > MAX_SUMMARY_DEPTH:
        raise deep
    check_summary(summary, archive)
    return summary
