"""Run records: one JSON file per measurement. Written atomically, never overwritten; validated on read.

No torch import here: records are read where only results are.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from functools import lru_cache
from pathlib import Path

import jsonschema

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("record.schema.json")
STATUSES = ("ok", "invalid", "oom", "unsupported", "error")
# Workload fields that do not change what is measured, only how long or where it ran (or what it is called).
NOT_IN_WORKLOAD_HASH = ("device", "steps", "warmup_steps", "profile_steps", "preset")
# Workload fields added after records existed, with the value every earlier record ran with: at that value they are
# left out of the hash (and of knob comparisons), so earlier records stay comparable with runs that leave them alone.
ADDED_FIELD_DEFAULTS = {"lm_head_loss": "plain"}


class RecordError(ValueError):
    """A file that is not a valid record of a schema version this code reads."""


@lru_cache(maxsize=1)
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@lru_cache(maxsize=1)
def _validator():
    """The schema checked and its validator (the draft the schema declares) built once; jsonschema.validate
    would redo both on every call, which was most of the cost of reading a record."""
    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def canonical_hash(obj) -> str:
    """sha256 of the canonical JSON form (sorted keys, no whitespace)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def measured_workload(workload: dict) -> dict:
    """The fields that say what a run measures: the workload less NOT_IN_WORKLOAD_HASH and less the added fields
    left at their ADDED_FIELD_DEFAULTS value."""
    return {k: v for k, v in (workload or {}).items()
            if k not in NOT_IN_WORKLOAD_HASH and not (k in ADDED_FIELD_DEFAULTS and v == ADDED_FIELD_DEFAULTS[k])}


def workload_hash(workload: dict) -> str:
    """What a run measures (measured_workload). Runs with equal hashes are comparable."""
    return canonical_hash(measured_workload(workload))


def device_label(environment: dict | None) -> str:
    """Where a record ran, from its `environment`: the GPU's name, else `cpu: <model>`, else 'unknown device'."""
    env = environment or {}
    gpu = env.get("gpu")
    if isinstance(gpu, dict) and gpu.get("name"):
        return str(gpu["name"])
    cpu = env.get("cpu")
    if env.get("device") == "cpu" or isinstance(cpu, dict):
        model = cpu.get("model") if isinstance(cpu, dict) else None
        return f"cpu: {model or 'unknown model'}"
    return "unknown device"


def _json_safe(obj):
    """NaN/inf are not JSON: store them as null (a NaN loss is still visible as a missing value)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def validate(record: dict) -> dict:
    if not isinstance(record, dict):
        raise RecordError("not a JSON object")
    version = record.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RecordError(f"schema_version {version!r}; this harness reads version {SCHEMA_VERSION}")
    exc = jsonschema.exceptions.best_match(_validator().iter_errors(record))  # the error jsonschema.validate raises
    if exc is not None:
        where = "/".join(str(p) for p in exc.absolute_path) or "<top>"
        raise RecordError(f"{where}: {exc.message}") from None
    return record


def record_filename(record: dict) -> str:
    return f"{record['run_id']}.json"


def write_record(record: dict, out_dir: str | os.PathLike) -> Path:
    """Validate and write `record` into out_dir as <run_id>.json. Never replaces an existing file."""
    record = validate(_json_safe(record))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    final = out / record_filename(record)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=out)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=1, sort_keys=False, allow_nan=False)
            f.flush()
            os.fsync(f.fileno())
        os.link(tmp, final)  # atomic, and fails if `final` exists: a completed result is never overwritten
    except FileExistsError:
        raise RecordError(f"{final} exists; records are never overwritten") from None
    finally:
        os.unlink(tmp)
    return final


def read_record(path: str | os.PathLike) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecordError(f"unreadable: {exc}") from None
    try:
        record = json.loads(text, parse_constant=lambda c: float(c))
    except json.JSONDecodeError as exc:
        raise RecordError(f"not JSON (truncated?): {exc.msg} at line {exc.lineno}") from None
    return validate(record)


def iter_records(paths, warn=print):
    """(path, record) for every valid *.json under the paths (recursively); one warning per bad file."""
    for root in map(Path, paths):
        if not root.exists():
            warn(f"warning: {root}: no such file or directory")
            continue
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*.json") if not p.name.startswith(".tmp-"))
        for path in files:
            try:
                yield path, read_record(path)
            except RecordError as exc:
                warn(f"warning: {path}: skipped: {exc}")
