"""Schema versions: an older record is read as the current version (migrate, applied by harness.record.io on read).

Records on disk are evidence and are never rewritten; the upgrade happens on every read, in memory.

Versions. Every record written so far carries "schema_version": 1, which is also the current version.
Within version 1 fields were added, all optional in the schema (so an older record is still valid), and
the runner's first failure records (before the runner recorded hashes: a worker that died) have empty
workload and flags hashes and an environment with env_name only. upgrade_within_v1 computes those
hashes by the one rule of harness.record.model (workload_hash, flags_hash), as the runner computes them today, so every reader compares such a record by the one rule.
Fields added within version 1 are left absent, as measured: a reader asks harness.record.view
(RecordView.workload_value reads an added workload field at the value every earlier record ran with).
A later version N+1 adds UPGRADES[N], a function taking a version-N record to version N+1; migrate chains them.
"""

from __future__ import annotations

from harness.record.model import SCHEMA_VERSION, RecordError, flags_hash, workload_hash


def upgrade_within_v1(record: dict) -> dict:
    """A version-1 record as written at any time since version 1, with the hashes every reader compares by."""
    workload = record.get("workload")
    if isinstance(workload, dict) and record.get("workload_hash") == "":
        record["workload_hash"] = workload_hash(workload)
    flags = record.get("flags")
    if isinstance(flags, dict) and flags.get("hash") == "" and isinstance(flags.get("requested"), dict):
        record["flags"] = {**flags, "hash": flags_hash(flags["requested"])}
    return record


UPGRADES: dict = {}  # version N -> function(record of version N) -> record of version N+1; none yet


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
