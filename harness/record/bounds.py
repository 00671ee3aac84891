"""The bounds on every number and string a record holds: the one check a record passes before anything reads it.

A record file is someone else's input. The schema says each field's type; it does not say that a step of 5e-324 ms,
a throughput of a 401-digit integer or a kernel share of 2**64 is no measurement, and each of those once ended a
whole comparison (a division by zero, an overflow, a log of an integer numpy cannot hold). So every number in a
record, wherever it sits (fields the schema leaves open too), is finite and within the range of what its field
measures, and every string and key has a bounded length. A record that fails is left out with one line naming its
file, the field and why (harness.record.io.iter_records); the rest is compared as without it.

The range of a number comes from its field's name, read as words ("first_step_ms" is a time in milliseconds,
"peak_rss_bytes" a size, "tokens_per_s" a rate): the first rule in NUMBER_RULES that names one of its words. The
ranges are far outside anything a run can measure, so no real record is refused (the writer checks the same bounds
before it writes: harness.record.io.write_record), and far inside what the arithmetic downstream can hold (a ratio of
two values of one field, its log, its square). Standard library only; no torch.
"""

from __future__ import annotations

import math
import re
from typing import NamedTuple

from gpt.config import SIZE_BOUNDS
from harness.record.model import RecordError

FLOAT32_MAX = 3.5e38  # a loss or a gradient norm is a float32 (or bf16) value: finite ones are below this
INTEGER_LARGEST = 2**53  # the largest integer every JSON reader holds exactly (and numpy as int64): most bounds
NAME_LENGTH = 1_024  # an identity (env, rung, device, torch version...) and every object key: a name, not a text
TEXT_LENGTH = 65_536  # any other string (a note, a reason, a kernel's name, a command): 64 Ki characters
MAX_STEPS = SIZE_BOUNDS["steps"][1]  # a step series (record.steps) holds one value per step at most
MAX_ITEMS = 10_000  # any other list (the longest in a real record: ~200 installed packages); an 8M-item shape once
# took 48 s to validate


class Rule(NamedTuple):
    """What a field's number may be: low <= x <= high (what names it, for the one line that says why not)."""

    low: float
    high: float
    what: str


# (words, its rule) for a field whose name holds one of the words, the first match deciding. A word is a part of the
# name between underscores ("step_ms_median": step, ms, median); "per_s", "per_step" and "per_token" are one word.
NUMBER_RULES: tuple[tuple[frozenset, Rule], ...] = tuple((frozenset(words.split()), rule) for words, rule in (
    ("loss", Rule(-FLOAT32_MAX, FLOAT32_MAX, "a loss")),
    ("norm", Rule(0, FLOAT32_MAX, "a gradient norm")),
    ("iqr", Rule(0, 1e9, "a spread of step times in ms")),
    ("ms", Rule(1e-6, 1e9, "a time in ms")),
    ("us", Rule(0, 1e15, "a time in microseconds")),
    ("per_s", Rule(1e-3, 1e15, "a rate per second")),
    ("per_step per_token", Rule(0, 1e15, "an amount per step or token")),
    ("bytes", Rule(0, INTEGER_LARGEST, "a size in bytes")),
    ("mib", Rule(0, 2**43, "a size in MiB")),
    ("gib", Rule(0, 2**33, "a size in GiB")),
    ("share mfu", Rule(0, 10, "a share (a fraction: above 1 only where streams overlap)")),
    ("deficit", Rule(-1, 1, "a fraction")),
    ("flops", Rule(0, 1e21, "a FLOP count or rate")),
    ("w watts", Rule(0, 1e6, "a power in watts")),
    ("joules", Rule(0, 1e15, "an energy in joules")),
    ("mhz", Rule(0, 1e6, "a clock in MHz")),
    ("s seconds", Rule(0, 1e9, "a time in seconds")),
    ("loadavg cpus", Rule(0, 1e6, "a load or a count of CPUs")),
    ("capability", Rule(0, 1000, "a compute capability")),
    ("seed", Rule(-(2**63), 2**64 - 1, "a seed")),
    ("calls count samples steps step reps bursts threads repeat index params line files kernels",
     Rule(0, INTEGER_LARGEST, "a count")),
))
# the workload's sizes: gpt.config's bounds, as the workload itself accepts them
WORKLOAD_RULES = {name: Rule(low, high, f"a workload's {name} (gpt.config)") for name, (low, high) in SIZE_BOUNDS.items()}
WORKLOAD_RULES["warmup_steps"] = Rule(0, SIZE_BOUNDS["steps"][1], "a workload's warmup_steps")
NUMBER_RULE = Rule(-INTEGER_LARGEST, INTEGER_LARGEST, "a number")  # one no rule names: a learning rate, a version

# The strings that name something (and so become labels, keys and file names): NAME_LENGTH. Others: TEXT_LENGTH.
NAMES = frozenset({
    "run_id", "env", "plan", "rung", "kind", "status", "started_at", "finished_at", "invocation", "workload_hash",
    "workload_code", "env_name", "device", "model", "version", "id", "category", "precision", "op", "dtype", "gpu",
})
_WORD = re.compile(r"per_s(?=_|$)|per_step|per_token|[^_]+")


def _words(name: str) -> frozenset:
    return frozenset(_WORD.findall(name.lower()))


_RULES: dict[tuple[str, str], Rule] = {}  # (section, field name) -> its rule, decided once


def rule_for(section: str, name: str) -> Rule:
    """The rule for a number in field `name` of the record's top-level `section`."""
    found = _RULES.get((section, name))
    if found is None:
        if section == "workload" and name in WORKLOAD_RULES:
            found = WORKLOAD_RULES[name]
        else:
            words = _words(name)
            found = next((rule for names, rule in NUMBER_RULES if names & words), NUMBER_RULE)
        _RULES[section, name] = found
    return found


def schema_keywords(section: str, name: str, types) -> dict:
    """The bounds of a field named `name` in `section` as JSON Schema says them, for a field of these JSON types:
    what harness/record/schema.json states beside each number and string it lists (tests/test_record_schema.py holds
    them equal). `check` enforces the same, in one walk, also where the schema lists nothing."""
    types = set([types] if isinstance(types, str) else types)
    keywords = {}
    if types & {"number", "integer"}:
        rule = rule_for(section, name)
        keywords.update(minimum=rule.low, maximum=rule.high)
    if "string" in types:
        keywords["maxLength"] = name_length(section, name)
    return keywords


def name_length(section: str, name: str) -> int:
    """The longest a string in field `name` of `section` may be."""
    return NAME_LENGTH if name in NAMES or section == "workload" else TEXT_LENGTH


class OutOfBounds(RecordError):
    """The first value of a record outside its bounds: str() says which and why, in one line."""


def shown(value, width: int = 40) -> str:
    """A value as a warning line quotes it: its repr, cut to about `width` characters with what was cut said (a record
    may hold a 401-digit number or a string of a megabyte)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**width:
        digits = len(str(abs(value)))  # within Python's 4,300-digit limit: the reader refused longer ones
        return f"{'-' if value < 0 else ''}{str(abs(value))[:12]}... ({digits:,} digits)"
    text = repr(value)
    if len(text) <= width:
        return text
    count = f" ({len(value):,} characters)" if isinstance(value, str) else ""
    return text[:width - 4] + "..." + text[-1] + count


def field(parts) -> str:
    """Where a value sits in a record, as every reason says it: 'summary.tokens_per_s', 'steps.ms[3]' ('the record'
    for the whole); a key is cut to 60 characters."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f"{'.' if text else ''}{str(part)[:60]}"
    return text or "the record"


def check(record: dict) -> dict:
    """`record` if every number in it is finite and within its field's rule and every string and key within its
    length; OutOfBounds naming the first that is not. One walk: a value is compared with its rule's ends (NaN and
    infinity fail those too) and its path made only to say what failed; a list of numbers is checked by its smallest
    and largest (a record of 100,000 steps holds three such lists)."""
    stack = [(record, (), "")]  # (a value, its path, the top-level section it is in)
    while stack:
        node, path, section = stack.pop()
        if type(node) is dict:
            for key, value in node.items():
                kind = type(value)
                if kind is dict or kind is list:
                    stack.append((value, (*path, key), section or key))
                elif kind is str:
                    if len(value) > NAME_LENGTH:
                        _scalar(value, (*path, key), key, section or key)
                elif kind is int or kind is float:
                    rule = _RULES.get((section or key, key)) or rule_for(section or key, key)
                    if not rule.low <= value <= rule.high:
                        _scalar(value, (*path, key), key, section or key)
                if len(key) > NAME_LENGTH:
                    raise OutOfBounds(f"{field(path)}: a key of {len(key):,} characters (at most {NAME_LENGTH:,})")
        elif type(node) is list:
            limit = MAX_STEPS if section == "steps" else MAX_ITEMS
            if len(node) > limit:
                raise OutOfBounds(f"{field(path)}: {len(node):,} items; at most {limit:,}"
                                  + (" (no run records more steps)" if section == "steps" else ""))
            name = next((part for part in reversed(path) if type(part) is str), "")
            if any(type(v) is dict or type(v) is list for v in node):
                for i, value in enumerate(node):
                    if type(value) is dict or type(value) is list:
                        stack.append((value, (*path, i), section))
                    else:
                        _scalar(value, (*path, i), name, section)
            else:
                _scalars(node, path, name, section)
    return record


def _scalars(values: list, path: tuple, name: str, section: str) -> None:
    """A list of scalars (a series of step times, a list of package names): its numbers checked by their extremes, at C
    speed, its strings by the longest, and one by one only to name the first that fails."""
    numbers = [v for v in values if type(v) is int or type(v) is float]
    if numbers:
        rule = rule_for(section, name)
        finite = all(map(math.isfinite, [v for v in numbers if type(v) is float]))
        if not (finite and _within(min(numbers), rule) and _within(max(numbers), rule)):
            for i, value in enumerate(values):
                _scalar(value, (*path, i), name, section)
    if len(numbers) < len(values) and max((len(v) for v in values if type(v) is str), default=0) > NAME_LENGTH:
        for i, value in enumerate(values):
            _scalar(value, (*path, i), name, section)


def _within(value, rule: Rule) -> bool:
    return rule.low <= value <= rule.high  # False for NaN


def _scalar(value, path: tuple, name: str, section: str) -> None:
    """OutOfBounds if a string, an integer or a float at `path` is outside its bounds."""
    kind = type(value)
    if kind is str:
        limit = name_length(section, name)
        if len(value) > limit:
            raise OutOfBounds(f"{field(path)} = {shown(value)}: too long (at most {limit:,} characters)")
    elif kind is float or kind is int:
        if kind is float and not math.isfinite(value):
            raise OutOfBounds(f"{field(path)} = {shown(value)}: NaN or infinity, not a number (the harness writes "
                              "null for those)")
        rule = rule_for(section, name)
        if not _within(value, rule):
            raise OutOfBounds(f"{field(path)} = {shown(value)}: out of range for {rule.what} (from {rule.low:.6g} to "
                              f"{rule.high:.6g})")
