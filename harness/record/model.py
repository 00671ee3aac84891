"""The record: what one measurement's JSON holds, and the one constructor every writer uses.

A record is a plain dict (it is JSON on disk; harness/record/schema.json says what each field means).
new_record builds it in one shape, whoever writes it: the worker for a measured run (harness.worker) and the
runner for a worker that died without writing one (harness.runner.launcher.failure_record), both from the worker's
spec (harness.runner.worker_spec.WorkerSpec.new_record); the transcriptions of the user's logs
(results/reference/transcribe.py) and of a peer program's numbers (results/transcribe_peers.py).
The version field and the derived fields (workload hash, file name) are made here and nowhere else.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

SCHEMA_VERSION = 3  # the version new records are written with (harness.record.migrate reads the older ones)
NOT_RECORDED = "not recorded"  # a field the harness that made a record did not record yet (null: not measured)
UNKNOWN_CODE = "unknown"  # workload_code of a record whose measuring code is not known (a transcription, history)
KINDS = ("measured", "reference", "peer")
STATUSES = ("ok", "invalid", "oom", "unsupported", "error")
# Workload fields that do not change what is measured, only how long or where it ran (or what it is called).
NOT_IN_WORKLOAD_HASH = ("device", "steps", "warmup_steps", "profile_steps", "preset")
# Workload fields added after records existed, with the value every earlier record ran with: at that value they are
# left out of the hash (and of knob comparisons), so earlier records stay comparable with runs that leave them alone.
OURS = "ours"  # workload.model of this project's own GPT (gpt.config.OURS), what every run before the field ran
ADDED_FIELD_DEFAULTS = {"lm_head_loss": "plain", "model": OURS}
FILLED_BY_V2 = ("lm_head_loss",)  # the added fields version 2 made required (migrate.v1_to_v2 fills them)
KIND_BLOCKS = ("reference", "peer")  # the per-kind object a transcribed record carries after the common fields


class RecordError(ValueError):
    """A file that is not a valid record of a schema version this code reads."""


def model_name(model) -> str:
    """A workload's model as it is named: ours, transformers, or a user's package.module:function without the digest
    of its source (which the workload hash holds): 'examples.tiny_lm:build@1af2...' -> 'examples.tiny_lm:build'."""
    return str(model).split("@", 1)[0]


def public_version(version) -> str:
    """A version without its local label, the one rule for it: '2.1.2+cu121' -> '2.1.2' (records carry
    torch.__version__ with its label; a spec pins the public version; pip ignores the label when it compares)."""
    return str(version).split("+", 1)[0]


def source_digest(files, digest=None):
    """The one way a set of source files is hashed: each file's path (as git names it, '/'-separated) and bytes, in
    the order given, each followed by a NUL, into `digest` (a fresh sha256 by default), returned. `files`: (path,
    bytes) pairs. The harness's source digest (provenance.envinfo, and scripts/workload_code_history.py over a commit)
    and the index's code identity are this."""
    digest = digest or hashlib.sha256()
    for path, data in files:
        digest.update(path.encode() + b"\0" + data + b"\0")
    return digest


def canonical_hash(obj) -> str:
    """sha256 of the canonical JSON form (sorted keys, no whitespace)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def measured_workload(workload: dict) -> dict:
    """The fields that say what a run measures: the workload less NOT_IN_WORKLOAD_HASH and less the added fields
    left at their ADDED_FIELD_DEFAULTS value."""
    return {k: v for k, v in (workload or {}).items()
            if k not in NOT_IN_WORKLOAD_HASH and not (k in ADDED_FIELD_DEFAULTS and v == ADDED_FIELD_DEFAULTS[k])}


def workload_hash(workload: dict, without: tuple = ()) -> str:
    """What a run measures (measured_workload), the one workload-hash rule. `without`: fields left out as well (a
    sweep's curve: every point's workload but the swept field)."""
    return canonical_hash({k: v for k, v in measured_workload(workload).items() if k not in without})


# A requested flag at this value leaves torch's own default in place (the Inductor options, harness.runner.flags): it is not
# part of the flags hash, so a record made before such an option existed hashes as one that leaves it alone.
FLAG_LEFT_AT_DEFAULT = "default"


def flags_hash(requested: dict) -> str:
    """The flags hash of a measured run's requested flags, the one rule (harness.runner.flags, the migration, the cluster's
    manifest and the bisect all call this): flags at FLAG_LEFT_AT_DEFAULT are not part of it."""
    return canonical_hash({k: v for k, v in (requested or {}).items() if v != FLAG_LEFT_AT_DEFAULT})


def measurement_key(workload: dict, flags_requested: dict) -> tuple[str, str]:
    """What must be equal for two runs to be the same measurement (comparable, pooled as repeats): (workload hash,
    flags hash). The one rule: new_record stores both, RecordView.set_key reads them back, and whoever must know
    beforehand which records a request will make (the bisect's reuse, the cluster's manifest) calls this."""
    return workload_hash(workload), flags_hash(flags_requested)


_flags_hash = flags_hash  # new_record's parameter of that name shadows the function


HISTORY_PATH = Path(__file__).with_name("workload_code_history.json")


@lru_cache(maxsize=1)
def _history() -> dict:
    try:
        return json.loads(HISTORY_PATH.read_text())["records"]
    except (OSError, ValueError, KeyError):
        return {}


def historic_workload_code(run_id) -> str:
    """The workload code identity of a record made before records carried one: from git history
    (workload_code_history.json, made by scripts/workload_code_history.py), else UNKNOWN_CODE."""
    return _history().get(run_id, UNKNOWN_CODE) if isinstance(run_id, str) else UNKNOWN_CODE


def record_filename(record: dict) -> str:
    return f"{record['run_id']}.json"


def empty_steps() -> dict:
    return {"ms": [], "loss": [], "grad_norm": []}


def new_record(*, run_id: str, env: str, plan: str, rung: str, workload: dict, flags_requested: dict,
               flags_hash: str | None = None,
               kind: str = "measured", status: str = "error", reason: str | None = None, notes: list | None = None,
               started_at: str | None = None, rung_index: int | None = None, repeat: int | None = None,
               invocation: str | None = None,
               sweep: dict | None = None, environment: dict | None = None, steps: dict | None = None,
               summary: dict | None = None, rerun_command: str | None = None, workload_code: str = UNKNOWN_CODE,
               **blocks) -> dict:
    """A record in the one shape (keys in the order they are written). Derived here: schema_version and
    workload_hash, and a measured run's flags hash (flags_hash(flags_requested); a transcription passes its own,
    made never to equal a measured run's). A measured run starts as status
    "error" with empty steps and summary, and the worker fills them in as it goes; the flags read back
    (applied, after, changes), explain and contention stay null until measured. workload_code: the identity of the
    code that defines the measurement (harness.provenance.workload_code: a measured run's; UNKNOWN_CODE for a transcription).
    blocks: the kind's own object, `reference` and/or `peer` (transcriptions), written last."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: one of {', '.join(KINDS)}")
    if status not in STATUSES:
        raise ValueError(f"status {status!r}: one of {', '.join(STATUSES)}")
    if kind == "measured" and flags_hash not in (None, _flags_hash(flags_requested)):
        raise ValueError("new_record: a measured run's flags hash is harness.record.model.flags_hash of its flags")
    if kind != "measured" and not flags_hash:
        raise ValueError(f"new_record: a {kind} record's flags hash is its own (never a measured run's): pass it")
    unknown = set(blocks) - set(KIND_BLOCKS)
    if unknown:
        raise TypeError(f"new_record: unexpected fields {sorted(unknown)}")
    unmeasured = None if kind == "measured" else NOT_RECORDED  # a transcription never records contention or changes
    environment = {} if environment is None else environment
    if kind != "measured":
        environment = {"threads": NOT_RECORDED, "machine": NOT_RECORDED, **environment}
    return {
        "schema_version": SCHEMA_VERSION,
        "run_id": run_id,
        "kind": kind,
        "status": status,
        "reason": reason,
        "notes": list(notes or []),
        "started_at": started_at,
        "finished_at": None,
        "env": env,
        "plan": plan,
        "rung": rung,
        "rung_index": rung_index,
        "repeat": repeat,
        "invocation": invocation if kind == "measured" else NOT_RECORDED,
        "sweep": sweep,
        "workload": workload,
        "workload_hash": workload_hash(workload),
        "workload_code": workload_code,
        "flags": {"requested": flags_requested, "applied": None, "after": None, "changes": unmeasured,
                  "hash": flags_hash or _flags_hash(flags_requested)},
        "environment": environment,
        "steps": empty_steps() if steps is None else steps,
        "summary": {} if summary is None else summary,
        "explain": None,
        "contention": unmeasured,
        "rerun": None if rerun_command is None else {"command": rerun_command},
        **{k: blocks[k] for k in KIND_BLOCKS if k in blocks},
    }
