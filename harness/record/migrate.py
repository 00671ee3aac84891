"""Schema versions: an older record is read as the current version (migrate, applied by harness.record.io on read).

Records on disk are evidence and are never rewritten; the upgrade happens on every read, in memory. (Rewriting the
committed records as version 2 would change 168 files that others read and cite by content, for nothing the
upgrade on read does not give: it is deterministic, tested on every committed record, and loses no value.)

Version 1 (2026-11-22 .. 11-25): fields were added within it, all optional, so a reader guessed by absence. Within
it, the runner's first failure records (a worker that died, before the runner recorded hashes) have empty workload
and flags hashes: upgrade_within_v1 computes them by the one rule of harness.record.model (workload_hash,
flags_hash), as the runner computes them today, so every reader compares such a record by that rule.

Version 2: every field version 1 added on the way is there, and says when it was not recorded (NOT_RECORDED: the
harness that made the record did not record it yet); null keeps its meaning of "not measured" (the run ended before
it). v1_to_v2 fills them: contention, flags.changes, environment.threads and .machine, environment.cpu.isa and
.torch_capability (where the record names its CPU), workload.lm_head_loss (model.ADDED_FIELD_DEFAULTS: the value
every earlier run ran with) and workload_code (the identity of the code that measured, model.workload_code_of: from
git history where it gives one, else "unknown").
Version 3 (2026-11-29): `invocation`, the harness process (and env) that made a run, so runs of one invocation are
told from runs of two (harness.analysis.noise). v2_to_v3 says it was not recorded (NOT_RECORDED); readers then take
a record's folder, env and plan for its invocation (harness.analysis.dataset.invocation).
A later version N+1 adds UPGRADES[N], a function taking a version-N record to version N+1; migrate chains them.
"""

from __future__ import annotations

from harness.record.model import (
    ADDED_FIELD_DEFAULTS,
    FILLED_BY_V2,
    NOT_RECORDED,
    SCHEMA_VERSION,
    RecordError,
    flags_hash,
    historic_workload_code,
    workload_hash,
)


def upgrade_within_v1(record: dict) -> dict:
    """A version-1 record as written at any time within version 1, with the hashes every reader compares by."""
    workload = record.get("workload")
    if isinstance(workload, dict) and record.get("workload_hash") == "":
        record["workload_hash"] = workload_hash(workload)
    flags = record.get("flags")
    if isinstance(flags, dict) and flags.get("hash") == "" and isinstance(flags.get("requested"), dict):
        record["flags"] = {**flags, "hash": flags_hash(flags["requested"])}
    return record


def v1_to_v2(record: dict) -> dict:
    """Version 1 -> 2: what version 1 left to absence made explicit (module docstring). Every value the record has is
    kept where it is; only absent fields are added."""
    record.setdefault("contention", NOT_RECORDED)
    record.setdefault("workload_code", historic_workload_code(record.get("run_id")))
    if isinstance(record.get("flags"), dict):
        record["flags"].setdefault("changes", NOT_RECORDED)
    if isinstance(record.get("workload"), dict):
        for key in FILLED_BY_V2:  # the fields added later (model) stay absent: a reader takes their default
            record["workload"].setdefault(key, ADDED_FIELD_DEFAULTS[key])
    environment = record.get("environment")
    if isinstance(environment, dict):
        for key in ("threads", "machine"):
            environment.setdefault(key, NOT_RECORDED)
        if isinstance(environment.get("cpu"), dict):
            for key in ("isa", "torch_capability"):
                environment["cpu"].setdefault(key, NOT_RECORDED)
    return record


def v2_to_v3(record: dict) -> dict:
    """Version 2 -> 3: the invocation a run belonged to, not recorded before version 3."""
    record.setdefault("invocation", NOT_RECORDED)
    return record


UPGRADES: dict = {1: v1_to_v2, 2: v2_to_v3}  # version N -> function(record of version N) -> record of version N+1


def migrate(raw):
    """`raw` (parsed JSON) as a record of the current version, when it is a record of this or an older version;
    anything else is returned unchanged for validation to refuse. A version newer than this code: RecordError."""
    if not isinstance(raw, dict):
        return raw
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return raw  # not a record this code ever wrote: validate names the problem
    if version > SCHEMA_VERSION:
        raise RecordError(f"schema_version {version!r}; this harness reads version {SCHEMA_VERSION}")
    if version == 1:
        raw = upgrade_within_v1(raw)
    while version < SCHEMA_VERSION:
        raw = UPGRADES[version](raw)
        version = raw["schema_version"] = version + 1
    return raw
