"""The record validator: is a record valid under the current schema version (harness/record/schema.json), every
number and string within its bounds (harness.record.bounds)? RecordError naming the field if not.

jsonschema decides, imported only when validating (harness.envs reads records with a bare Python); the shortcuts here
decide most records faster by the same rule (the per-step series by a type test, each distinct section once), and the
tests hold them to jsonschema's answer. Reading and writing (harness.record.io) both validate through validate(). No
torch import here.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache, lru_cache
from pathlib import Path

try:
    import orjson as _orjson
except ImportError:  # a bare Python (harness.envs): the standard parser alone
    _orjson = None

from harness.record import bounds
from harness.record.model import SCHEMA_VERSION, RecordError

SCHEMA_PATH = Path(__file__).parent / "schema.json"
STEP_SERIES = ("ms", "loss", "grad_norm")  # record.steps: one number (or null) per step each
MAX_REASON = 300  # characters of the schema's reason for refusing a file (a warning is one line)


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=1)
def _validator():
    """The schema checked and its validator (the draft the schema declares) built once; jsonschema.validate
    would redo both on every call, which was most of the cost of reading a record."""
    import jsonschema

    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def validate(record: dict) -> dict:
    """`record` if it is a valid record of the current schema version, every number and string within its bounds
    (harness.record.bounds); RecordError otherwise."""
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(f"schema_version {version!r}; this harness reads version {SCHEMA_VERSION}")
    bounds.check(record)  # first: the schema states the same bounds, which the shortcuts below may then pass over
    import jsonschema

    steps, rest = _check_steps(record.get("steps")), record
    if steps:  # its series are checked, in linear time; jsonschema checks the rest (2,000,000 steps took it 50 s)
        rest = {**record, "steps": {**steps, **{k: [] for k in STEP_SERIES if isinstance(steps.get(k), list)}}}
    stripped = _without_plain_arrays(rest)
    try:
        if stripped is not None and _valid_by_sections(stripped):
            return record
        exc = jsonschema.exceptions.best_match(_validator().iter_errors(rest))  # the error jsonschema.validate raises
    except RecursionError:
        raise RecordError("nested too deeply to validate") from None
    if exc is not None:
        where = bounds.field(exc.absolute_path)
        raise RecordError(f"{where}: {_said(exc)}") from None
    return record


def _said(exc) -> str:
    """jsonschema's message with the value it quotes shortened (it quotes the value whole: a string of 64 Ki
    characters, an object of megabytes), and at most MAX_REASON characters in all: the reason is one line."""
    message, value = exc.message, repr(exc.instance)
    if message.startswith(value):
        message = bounds.shown(exc.instance) + message[len(value):]
    return message if len(message) <= MAX_REASON else message[:MAX_REASON - 3] + "..."


def _check_steps(steps) -> dict | None:
    """record.steps if its series are lists of numbers or nulls (RecordError naming the first that is not), checked in
    one pass each (their length and values: harness.record.bounds); None when it is not an object (the schema names
    that)."""
    if not isinstance(steps, dict):
        return None
    for key in STEP_SERIES:
        series = steps.get(key)
        if not isinstance(series, list):
            continue  # absent or not an array: the schema says so
        for i, value in enumerate(series):
            if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise RecordError(f"steps.{key}[{i}]: {bounds.shown(value)} is not a number or null")
    return steps


_PLAIN_KEYS = {"$schema", "$id", "title", "description", "type", "required", "properties", "additionalProperties"}
# The bounds the schema states on numbers and strings: harness.record.bounds.check has enforced them when the
# shortcuts below look (validate calls it first), so a spec of a type and its bounds is still a plain type to them.
_BOUNDS = frozenset(("minimum", "maximum", "maxLength"))
_EXACT_TYPES = {"number": {int, float}, "integer": {int}, "null": {type(None)}, "string": {str}, "boolean": {bool}}


@lru_cache(maxsize=1)
def _plain_arrays() -> tuple:
    """(path, Python types) of each array the schema reaches through plain objects (no keyword but `properties` that
    could look inside them) and whose one rule is its items' type: the per-step series. jsonschema checks those
    element by element, which was most of the time a record took to read; a type test per element is the same rule."""
    found = []

    def walk(node: dict, path: tuple) -> None:
        for name, sub in (node.get("properties") or {}).items():
            items = sub.get("items") if isinstance(sub, dict) else None
            plain_array = isinstance(items, dict) and sub.get("type") == "array" and set(items) - _BOUNDS == {"type"}
            if plain_array and set(sub) <= {"type", "items", "description", "title"}:
                types = items["type"] if isinstance(items["type"], list) else [items["type"]]
                if all(t in _EXACT_TYPES for t in types):
                    found.append((path + (name,), frozenset().union(*(_EXACT_TYPES[t] for t in types))))
            elif isinstance(sub, dict) and set(sub) <= _PLAIN_KEYS:
                walk(sub, path + (name,))

    if set(schema()) <= _PLAIN_KEYS:
        walk(schema(), ())
    return tuple(found)


def _without_plain_arrays(record: dict) -> dict | None:
    """A shallow copy of `record` with each of _plain_arrays emptied when all its elements have an allowed Python type
    (bool is not a number, 1.0 not an integer: those are left to jsonschema); None when one has another type. The
    copy is valid exactly when the record is: an empty list passes those arrays' only rule."""
    copy = dict(record)
    for path, types in _plain_arrays():
        parent = copy
        for name in path[:-1]:
            if not isinstance(parent.get(name), dict):
                break
            parent[name] = parent = dict(parent[name])
        else:
            values = parent.get(path[-1])
            if isinstance(values, list):
                if not all(type(v) in types for v in values):
                    return None
                parent[path[-1]] = []
    return copy


_VALID_SECTIONS: dict = {}  # (property, hash of its JSON) -> True: sections already found valid (runs share most)


def _valid_by_sections(record: dict) -> bool:
    """Whether `record` is valid, deciding each top-level section once per distinct value. Under a plain root schema
    (an object's type, required, properties and additionalProperties: nothing relates one section to another) that
    is the same as validating the record whole; any other root is validated whole. False: let jsonschema say why."""
    root = schema()
    extra = root.get("additionalProperties")
    if not set(root) <= _PLAIN_KEYS or root.get("type") != "object" or isinstance(extra, dict):
        return next(_validator().iter_errors(record), None) is None
    if any(name not in record for name in root.get("required", ())):
        return False
    properties = root.get("properties") or {}
    for name, value in record.items():
        if name not in properties:
            if extra is False:
                return False
            continue
        plain = _plain_section(name)
        if plain is not None and plain(value):
            continue
        key = (name, hashlib.blake2b(_section_bytes(value), digest_size=16).digest())
        if key not in _VALID_SECTIONS:
            if next(_section_validator(name).iter_errors(value), None) is not None:
                return False
            if len(_VALID_SECTIONS) > 65536:
                _VALID_SECTIONS.clear()
            _VALID_SECTIONS[key] = True
    return True


def _section_bytes(value) -> bytes:
    """A section's JSON, telling apart every value that validation tells apart (1 and 1.0 and true; key order kept)."""
    if _orjson is not None:
        try:
            return _orjson.dumps(value)
        except (TypeError, _orjson.JSONEncodeError):  # an integer past 64 bits, a lone surrogate
            pass
    return json.dumps(value, ensure_ascii=True).encode()


_DESCRIBING = {"description", "title"} | _BOUNDS  # words a shortcut passes over (the bounds: checked before)


def _types_of(spec) -> frozenset | None:
    """The Python types a schema of only `type` (and words that describe it) surely accepts (json and orjson make
    exactly these types): a value of one of them is valid; None for any other schema.
    Integer is int alone here (jsonschema also takes 1.0: that goes to jsonschema), number is int and float (bool is
    neither, as in JSON Schema)."""
    if not isinstance(spec, dict) or not set(spec) - _DESCRIBING or not set(spec) - _DESCRIBING <= {"type"}:
        return None
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    found = [_EXACT_TYPES.get(t) or {"object": {dict}, "array": {list}}.get(t) for t in types]
    return None if None in found else frozenset().union(*found)


@cache
def _plain_section(name: str):
    """A check that says a value of the record's top-level property `name` is surely valid, for the properties whose
    schema is a type (run_id's string, the summary's numbers...), an enum of strings, a const, or an object of typed
    properties and nothing else; None for any other (the hashed cache and jsonschema decide those). A value it does
    not pass is left to them, so it can only save work, never pass what jsonschema refuses."""
    spec = schema()["properties"][name]
    rules = set(spec) - _DESCRIBING if isinstance(spec, dict) else {None}
    types = _types_of(spec)
    if types is not None:
        return lambda value: type(value) in types
    if rules == {"enum"} and all(isinstance(v, str) for v in spec["enum"]):
        allowed = frozenset(spec["enum"])
        return lambda value: type(value) is str and value in allowed
    if rules == {"const"} and type(spec["const"]) in (str, int):
        const = spec["const"]
        return lambda value: type(value) is type(const) and value == const
    if rules == {"type", "properties"}:
        outer = _types_of({"type": spec["type"]})
        inner = {key: _types_of(sub) for key, sub in spec["properties"].items()}
        if outer is not None and None not in inner.values():
            return lambda value: type(value) in outer and (
                type(value) is not dict or all(type(value[k]) in allowed for k, allowed in inner.items() if k in value))
    return None


@cache
def _section_validator(name: str):
    return _validator().evolve(schema=schema()["properties"][name])
