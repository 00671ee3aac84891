"""Loading records into comparable groups: Filters, load, Dataset, and the one comparability rule (RecordView.set_key).

Records are comparable when they have the same workload_hash and the same flags hash (harness.record.view.RecordView.set_key, the rule every
table and the report use); within that, each (env, GPU) cell is one Group, and its repeats are merged (timed steps
pooled). Runs that are not comparable are never mixed: what is left out is listed with why. The user's transcribed
logs (kind "reference") and peers' numbers (kind "peer") never join a measured group.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from harness.analysis import stats
from harness.analysis.devices import aliases, device_alias
from harness.analysis.group import Group
from harness.record.io import BadFile, iter_records, read_record, record_files
from harness.record.view import RecordView


def torch_version_key(version: str | None) -> tuple:
    """Order torch versions: 2.1.2 < 2.3.0 < 2.6.0.dev20241203 < 2.6.0; unknown last."""
    if not version:
        return (1, ())
    m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(dev|a|b|rc)(\d+))?", str(version))
    if not m:
        return (1, (str(version),))
    major, minor, patch, pre, pre_n = m.groups()
    rank = {"dev": 0, "a": 1, "b": 2, "rc": 3}.get(pre, 4)
    return (0, (int(major), int(minor), int(patch or 0), rank, int(pre_n or 0)))


def short_gpu(label: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'H100 80GB HBM3' (for narrow places: charts, effect lists)."""
    return re.sub(r"^(NVIDIA|AMD)\s+(GeForce\s+)?", "", label)


def _gpu_sort_key(record: RecordView, label: str) -> tuple:
    """GPUs by compute capability (unknown last among GPUs), then CPUs."""
    if record.is_cuda and record.intended_device:
        return (0, record.gpu_capability or 99.0, label)
    return (1, 0.0, label)


def _has_nonfinite(obj) -> bool:
    known = getattr(obj, "has_nonfinite", None)  # a record read from the index (harness.record.index) knows
    if known is not None:
        return known
    if isinstance(obj, float):
        return not math.isfinite(obj)
    if isinstance(obj, dict):
        return any(_has_nonfinite(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_nonfinite(v) for v in obj)
    return False


class LeftOut(NamedTuple):
    """A record (or path) not compared, why, and which kind of reason: unreadable, duplicate, not ok, no steps,
    contended (left out of every delta unless --include-contended), empty."""

    what: str
    why: str
    kind: str
    count: int = 1  # how many files it stands for (iter_records' line for the bad files past the first it names)


def outcome(r: RecordView) -> str:
    """What a run that is not compared shows where its number would be: its status, or 'contended' for an ok run
    measured while other work kept the machine busy (left out of every delta by default)."""
    return "contended" if r.ok and r.contended else r.status


@dataclass
class Filters:
    """--env, --gpu, --plan, --rung. The user's logged numbers (kind=reference) and a peer's (kind=peer) are not an
    env: --env selects measured runs and leaves them in, to stand beside those runs (`--env reference` alone: the
    references only). --gpu, --plan and --rung select them by their own GPU class, plan and rung."""

    envs: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    plans: list = field(default_factory=list)
    rungs: list = field(default_factory=list)

    def keep(self, record: RecordView) -> bool:
        if self.envs and record.env not in self.envs and record.kind not in ("reference", "peer"):
            return False
        gpu = record.device_label.lower()
        if self.gpus and not any(g.lower() in gpu for g in self.gpus):
            return False
        if self.plans and record.plan not in self.plans:
            return False
        return not (self.rungs and record.rung not in self.rungs)


@dataclass
class Dataset:
    groups: list  # measured, status ok, comparable cells
    references: list  # kind=reference, one group per record (never merged)
    failed: list  # (path, RecordView): measured runs whose status is not ok
    left_out: list  # LeftOut(what, why, kind)
    notes: list
    valid_records: int = 0
    filtered: int = 0
    env_order: dict = field(default_factory=dict)  # env label -> rank (oldest torch first)
    gpu_order: dict = field(default_factory=dict)  # gpu label -> rank
    env_versions: dict = field(default_factory=dict)  # env label -> torch version
    kept_envs: set = field(default_factory=set)  # the `env` of every record the filters kept ("reference" included)
    env_of: dict = field(default_factory=dict)  # run_id -> env label, for every measured record (failed ones included)
    peers: list = field(default_factory=list)  # kind=peer, one group per record (never merged, never compared as runs)
    contended: list = field(default_factory=list)  # (path, RecordView): ok runs measured under contention, left out
    include_contended: bool = False  # True: contended runs are in their groups, marked, instead
    names: dict = field(default_factory=dict)  # device label -> its short alias (harness.analysis.devices)

    def name(self, label: str) -> str:
        """The short name rows, titles and charts give a device (the legend line gives its full label)."""
        return self.names.get(label) or device_alias(label)

    def envs(self) -> list[str]:
        return sorted(self.env_order, key=self.env_order.get)

    def gpus(self) -> list[str]:
        return sorted(self.gpu_order, key=self.gpu_order.get)


def load(paths, warn=print, filters: Filters | None = None, n_boot: int = stats.N_BOOT,
         include_contended: bool = False, read=read_record, files=record_files) -> Dataset:
    """Read every record under the paths; one warning per bad file; group what is comparable. A run measured under
    contention is left out of every group (listed with its reason and rerun command) unless include_contended.
    read, files: how one file is read and a folder listed (harness.record.index.RecordIndex's read and files: the same
    outcome, from the index)."""
    filters = filters or Filters()
    left_out, seen, kept = [], {}, []

    def leave_out(what, why: str, kind: str, skipped: bool = True) -> None:
        """One warning line and one "left out" entry, both from (what, why)."""
        warn(f"warning: {what}: {'skipped: ' if skipped else ''}{why}")
        left_out.append(LeftOut(str(what), why, kind))

    def unreadable(bad: BadFile) -> None:
        if bad.path is None:  # the one line for the bad files past those iter_records names
            warn(bad)
            left_out.append(LeftOut(bad.what, bad.why, "unreadable", bad.count))
        else:
            leave_out(bad.path, bad.why, "unreadable", bad.skipped)

    for root in map(Path, paths):
        if root.is_dir() and not any(p for p in root.rglob("*.json") if not p.name.startswith(".tmp-")):
            leave_out(root, "no *.json records in this directory", "empty", skipped=False)
    valid = filtered = 0
    for path, raw in iter_records(paths, unreadable, read, files):
        if _has_nonfinite(raw):
            leave_out(path, "contains NaN or infinity (the harness writes null for those)", "unreadable")
            continue
        valid += 1
        r = RecordView(raw)
        if r.run_id in seen:
            leave_out(path, f"run_id {r.run_id} already read from {seen[r.run_id]}", "duplicate")
            continue
        seen[r.run_id] = path
        if not filters.keep(r):
            filtered += 1
            continue
        kept.append((path, r))

    versions: dict[str, set] = {}
    for _path, r in kept:
        if r.kind == "measured":
            versions.setdefault(r.env, set())
            if r.torch_version:
                versions[r.env].add(r.torch_version)

    def env_label(r: RecordView) -> str:
        """The env, with its torch version where the env ran several, and the image where it ran in one: a run
        inside envs/latest is a cell beside the same env's nox runs (another Python, base libraries), never pooled."""
        label = r.env if len(versions.get(r.env, ())) <= 1 else f"{r.env}@{r.torch_version or '?'}"
        return f"{label} in {r.container_image}" if r.container_image else label

    names = aliases(r.device_label for _path, r in kept)
    groups: dict[tuple, Group] = {}
    references, peers, failed, contended, env_versions, gpu_keys, env_of = [], [], [], [], {}, {}, {}
    for path, r in kept:
        gpu = r.device_label
        where = f"{path.name} ({r.plan}/{r.rung}, {r.env}, {names[gpu]})"
        if r.kind in ("reference", "peer"):  # beside the measurements, never one of them
            g = Group(r.kind, *r.set_key, r.env, gpu, [r], [path], n_boot)
            (references if r.kind == "reference" else peers).append(g)
            continue
        label = env_of[r.run_id] = env_label(r)
        if env_versions.get(label) is None:  # a failed run may not know its torch version; an ok run of the env does
            env_versions[label] = r.torch_version
        if not r.ok:
            failed.append((path, r))
            why = f"status {r.status}: {r.reason or 'no reason given'}"
            if r.intended_device is None:  # an early death: its environment was never captured
                where = f"{path.name} ({r.plan}/{r.rung}, {r.env}, device not recorded)"
                why += "; listed here only: the record does not say which device it was meant for"
            left_out.append(LeftOut(where, why, "not ok"))
            continue
        if not r.timed_ms:
            left_out.append(LeftOut(where, "no timed step times", "no steps"))
            continue
        if r.contended and not include_contended:
            contended.append((path, r))
            left_out.append(LeftOut(where, f"contended ({r.contention_reason}): left out of every delta; rerun: "
                                           f"{r.rerun_command or 'not recorded'}", "contended"))
            continue
        gpu_keys.setdefault(gpu, _gpu_sort_key(r, gpu))
        key = (*r.set_key, label, gpu)
        if key not in groups:
            groups[key] = Group("measured", *key, n_boot=n_boot)
        groups[key].records.append(r)
        groups[key].paths.append(path)

    for g in groups.values():
        g.records.sort(key=lambda r: (r.repeat is None, r.repeat or 0, r.run_id))
    env_rank = sorted(env_versions, key=lambda e: (torch_version_key(env_versions[e]), e))
    ds = Dataset(
        groups=sorted(groups.values(), key=lambda g: (g.gpu, g.env, g.rungs[0][0] or "", g.rungs[0][2] or 0, g.label)),
        references=sorted(references, key=lambda g: (g.first.rung_index or 0, g.workload.get("batch_size") or 0, g.first.run_id)),
        failed=failed, left_out=left_out, notes=[], valid_records=valid, filtered=filtered,
        env_order={e: i for i, e in enumerate(env_rank)},
        gpu_order={gname: i for i, gname in enumerate(sorted(gpu_keys, key=gpu_keys.get))},
        env_versions=env_versions, kept_envs={r.env for _path, r in kept}, env_of=env_of,
        peers=sorted(peers, key=lambda g: (g.gpu, g.first.run_id)),
        contended=contended, include_contended=include_contended, names=names,
    )
    _note_variants(ds)
    return ds


def _note_variants(ds: Dataset) -> None:
    """Say where one (plan, rung, B, T) ran with different workload or flags: those are never compared."""
    variants: dict[tuple, dict] = {}
    for g in ds.groups:
        for plan, rung, _i in g.rungs:
            k = (plan, rung, g.workload.get("batch_size"), g.workload.get("seq_len"), json.dumps(g.sweep, sort_keys=True))
            variants.setdefault(k, {}).setdefault(g.set_key, []).append(f"{g.gpu}/{g.env}")
    for (plan, rung, b, t, _s), sets in sorted(variants.items(), key=lambda kv: str(kv[0])):
        if len(sets) > 1:
            parts = [f"workload {w[:8]} flags {f[:8]}: {', '.join(sorted(cells))}" for (w, f), cells in sets.items()]
            ds.notes.append(f"{plan}/{rung} (B={b}, T={t}) ran with {len(sets)} different workload/flags hashes; "
                            f"compared only within each: " + "; ".join(parts))
