"""Loading records into comparable groups: Filters, load, Dataset, and the one comparability rule (RecordView.set_key).

Records are comparable when they have the same workload_hash and the same flags hash (harness.record.view.RecordView.set_key, the rule every
table and the report use); within that, each (env, GPU) cell is one Group, and its repeats are merged (timed steps
pooled). Runs that are not comparable are never mixed: what is left out is listed with why. The user's transcribed
logs (kind "reference") and peers' numbers (kind "peer") never join a measured group.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from harness.analysis import noise
from harness.analysis.devices import aliases, device_alias
from harness.analysis.group import Group
from harness.console.textsafe import one_line
from harness.envs.spec import parse_version
from harness.record.files import TEMP_PREFIX
from harness.record.io import BadFile, iter_records, json_entries, read_record, record_files
from harness.record.view import RecordView


def torch_version_key(version: str | None) -> tuple:
    """Order torch versions (packaging.version, PEP 440; the local label such as +cu121 left out): 2.1.2 < 2.3.0 <
    2.6.0.dev20241203 < 2.6.0; unknown or not a version last."""
    parsed = parse_version(version) if version else None
    if parsed is None:
        return (1, (str(version),) if version else ())
    return (0, parse_version(parsed.public))


def _gpu_sort_key(record: RecordView) -> tuple:
    """GPUs by compute capability (unknown last among GPUs), then CPUs; among equals, the first measured comes first
    (_Sorting.dataset adds it: never a name, which a rename would change)."""
    if record.is_cuda and record.intended_device:
        return (0, record.gpu_capability or 99.0)
    return (1, 0.0)


def _data_key(r: RecordView) -> tuple:
    """An order of records from what they measured, never their names (run id, env, device, file): when a run
    started, else (a transcribed log line) where its line is; then rung, repeat and what it ran."""
    at = r.started_at if isinstance(r.started_at, str) else ""
    line = r.reference or r.peer
    where = (str(line.source or ""), line.line if isinstance(line.line, int) else 0) if line else ("", 0)
    return (at, where, str(r.kind), str(r.plan), r.rung_index if isinstance(r.rung_index, int) else -1,
            r.repeat if isinstance(r.repeat, int) else -1, str(r.workload_hash), str(r.flags_hash))


def _first(started: dict, key, r: RecordView) -> None:
    """started[key]: the earliest start of a run (a time recorded, before none)."""
    at = r.started_at if isinstance(r.started_at, str) else None
    old = started.get(key)
    if key not in started or (at is not None and (old is None or at < old)):
        started[key] = at


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
        if self.gpus and not any(g.lower() in record.device_label.lower() for g in self.gpus):
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
    calibration: list = field(default_factory=list)  # (RecordView, invocation) of harness.calibrate's runs (noise only)
    noise: dict = field(default_factory=dict)  # device label -> harness.analysis.noise.DeviceNoise
    identities: dict = field(default_factory=dict)  # device label -> RecordView.device_identity, of measured runs
    sources: dict = field(default_factory=dict)  # each path given (as given) -> {device label: set of envs} of its
    # measured runs: which folder brought which device and builds (harness.analysis.devices.apart)

    def name(self, label: str) -> str:
        """The short name rows, titles and charts give a device (the legend line gives its full label)."""
        return self.names.get(label) or device_alias(label)

    def envs(self) -> list[str]:
        return sorted(self.env_order, key=self.env_order.get)

    def gpus(self) -> list[str]:
        return sorted(self.gpu_order, key=self.gpu_order.get)


class _Reading:
    """load's first half: every record under the paths read once, what was left out and why (one warning line and
    one LeftOut each), and the records the filters keep."""

    def __init__(self, warn):
        self.warn, self.left_out, self.seen, self.kept = warn, [], {}, []
        self.valid = self.filtered = 0

    def leave_out(self, what, why: str, kind: str, skipped: bool = True) -> None:
        """One warning line and one "left out" entry, both from (what, why), each on one line (a file name or a
        record's text with a newline forges no second 'warning:' line)."""
        what, why = one_line(what), one_line(why)
        self.warn(f"warning: {what}: {'skipped: ' if skipped else ''}{why}")
        self.left_out.append(LeftOut(what, why, kind))

    def unreadable(self, bad: BadFile) -> None:
        if bad.path is None:  # the one line for the bad files past those iter_records names
            self.warn(bad)
            self.left_out.append(LeftOut(bad.what, bad.why, "unreadable", bad.count))
        else:
            self.leave_out(bad.path, bad.why, "unreadable", bad.skipped)

    def read(self, paths, filters: Filters, read=read_record, files=record_files) -> _Reading:
        for root in map(Path, paths):
            # the reader's own walk (harness.record.io), stopped at the first *.json that is not a writer's temp file
            if root.is_dir() and not any(not e.name.startswith(TEMP_PREFIX) for e in json_entries(root)):
                self.leave_out(root, "no *.json records in this directory", "empty", skipped=False)
        for path, raw in iter_records(paths, self.unreadable, read, files):
            path = os.fspath(path)  # a Path, or a string of an index's listing: kept as the string either way
            self.valid += 1
            r = RecordView(raw)
            if r.run_id in self.seen:
                self.leave_out(path, f"run_id {r.run_id} already read from {self.seen[r.run_id]}", "duplicate")
                continue
            self.seen[r.run_id] = path
            if filters.keep(r):
                self.kept.append((path, r))
            else:
                self.filtered += 1
        self.kept.sort(key=lambda item: _data_key(item[1]))  # what follows sees them in an order no name makes
        return self


def _env_labels(kept) -> Callable[[RecordView], str]:
    """The env label of a measured run: the env, with its torch version where the env ran several, and the image
    where it ran in one (a run inside envs/latest is a cell beside the same env's nox runs, never pooled)."""
    versions: dict[str, set] = {}
    for _path, r in kept:
        if r.kind == "measured":
            versions.setdefault(r.env, set())
            if r.torch_version:
                versions[r.env].add(r.torch_version)

    def env_label(r: RecordView) -> str:
        label = r.env if len(versions.get(r.env, ())) <= 1 else f"{r.env}@{r.torch_version or '?'}"
        return f"{label} in {r.container_image}" if r.container_image else label
    return env_label


def invocation(path: str, r: RecordView) -> object:
    """Which invocation (one harness process) a run came from: what its record says (RecordView.invocation); a
    record older than that field: its folder, env and plan (runs written into one folder by one plan in one env, as
    one invocation does; two invocations into one folder are then taken as one). Compared, never ordered or shown:
    a renamed folder or env changes nothing."""
    return r.invocation or ("folder", os.path.dirname(os.path.abspath(path)), r.env, r.plan)


@dataclass
class _Sorting:
    """load's second half: each kept record into its place: a transcription beside the measurements, a failed or
    contended run left out (listed), an ok run into its comparable group (the one rule: RecordView.set_key)."""

    names: dict
    left_out: list
    include_contended: bool
    groups: dict = field(default_factory=dict)
    references: list = field(default_factory=list)
    peers: list = field(default_factory=list)
    failed: list = field(default_factory=list)
    contended: list = field(default_factory=list)
    env_versions: dict = field(default_factory=dict)
    gpu_keys: dict = field(default_factory=dict)
    first_started: dict = field(default_factory=dict)  # ("env", label) or ("gpu", label) -> its earliest run's start
    env_of: dict = field(default_factory=dict)
    calibration: list = field(default_factory=list)

    def add(self, path: str, r: RecordView, env_label: Callable[[RecordView], str]) -> None:
        gpu = r.device_label
        if r.kind in ("reference", "peer"):  # beside the measurements, never one of them
            g = Group(r.kind, *r.set_key, r.env, gpu, [r], [path], [invocation(path, r)])
            (self.references if r.kind == "reference" else self.peers).append(g)
            return
        label = self.env_of[r.run_id] = env_label(r)
        if self.env_versions.get(label) is None:  # a failed run may not know its torch version; an ok run does
            self.env_versions[label] = r.torch_version
        _first(self.first_started, ("env", label), r)
        if not r.ok:
            self._failed(path, r)
        elif not r.timed_ms:
            self.left_out.append(LeftOut(self._where(path, r), "no timed step times", "no steps"))
        elif r.contended and not self.include_contended:
            self.contended.append((path, r))
            why = f"contended ({r.contention_reason}): left out of every delta; rerun: {r.rerun_command or 'not recorded'}"
            self.left_out.append(LeftOut(self._where(path, r), why, "contended"))
        elif r.plan == noise.CALIBRATION_PLAN:  # an A/A measurement of the machine: its spread, never a cell
            self.calibration.append((r, invocation(path, r)))
        else:
            if gpu not in self.gpu_keys:  # one key per device, from its first run (not made for every run)
                self.gpu_keys[gpu] = _gpu_sort_key(r)
            _first(self.first_started, ("gpu", gpu), r)
            key = (*r.set_key, label, gpu)
            group = self.groups.get(key)
            if group is None:  # made once per cell, not once per run (a setdefault's default is made every time)
                group = self.groups[key] = Group("measured", *key)
            group.records.append(r)
            group.paths.append(path)
            group.invocations.append(invocation(path, r))

    def _started(self, key) -> tuple:
        at = self.first_started.get(key)
        return (at is None, at or "")

    def _where(self, path: str, r: RecordView) -> str:
        """How a run left out is named in the list of what was left out."""
        return f"{os.path.basename(path)} ({r.plan}/{r.rung}, {r.env}, {self.names[r.device_label]})"

    def _failed(self, path: str, r: RecordView) -> None:
        self.failed.append((path, r))
        where = self._where(path, r)
        why = f"status {r.status}: {r.reason or 'no reason given'}"
        if r.intended_device is None:  # an early death: its environment was never captured
            where = f"{os.path.basename(path)} ({r.plan}/{r.rung}, {r.env}, device not recorded)"
            why += "; listed here only: the record does not say which device it was meant for"
        self.left_out.append(LeftOut(where, why, "not ok"))

    def dataset(self, reading: _Reading) -> Dataset:
        for g in self.groups.values():  # its runs in the order they ran: names never order them
            runs = sorted(zip(g.records, g.paths, g.invocations, strict=True),
                          key=lambda t: (t[0].repeat is None, t[0].repeat or 0, str(t[0].started_at), t[0].run_id))
            g.records, g.paths, g.invocations = (list(x) for x in zip(*runs, strict=True))
        # oldest torch first; one version under two names (an A/A pair, a build in two images): the env measured
        # first, so a rename never turns a baseline around (the name only where the records cannot tell)
        env_rank = sorted(self.env_versions, key=lambda e: (torch_version_key(self.env_versions[e]),
                                                            self._started(("env", e)), e))
        env_order = {e: i for i, e in enumerate(env_rank)}
        gpu_order = {gname: i for i, gname in enumerate(sorted(self.gpu_keys, key=lambda g: (
            self.gpu_keys[g], self._started(("gpu", g)), g)))}
        return Dataset(
            groups=sorted(self.groups.values(), key=lambda g: (gpu_order[g.gpu], env_order.get(g.env, 1 << 30),
                                                               g.rungs[0][0] or "", g.rungs[0][2] or 0, g.label,
                                                               g.workload.batch_size or 0, g.workload.seq_len or 0)),
            references=sorted(self.references, key=lambda g: (g.first.rung_index or 0, g.workload.batch_size or 0,
                                                              _data_key(g.first))),
            failed=self.failed, left_out=self.left_out, notes=[], valid_records=reading.valid,
            filtered=reading.filtered, env_order=env_order, gpu_order=gpu_order,
            env_versions=self.env_versions, kept_envs={r.env for _path, r in reading.kept}, env_of=self.env_of,
            peers=sorted(self.peers, key=lambda g: _data_key(g.first)),
            contended=self.contended, include_contended=self.include_contended, names=self.names,
            calibration=self.calibration,
        )


def load(paths, warn=print, filters: Filters | None = None,
         include_contended: bool = False, read=read_record, files=record_files) -> Dataset:
    """Read every record under the paths; one warning per bad file; group what is comparable. A run measured under
    contention is left out of every group (listed with its reason and rerun command) unless include_contended.
    read, files: how one file is read and a folder listed (harness.store.index.RecordIndex's read and files: the same
    outcome, from the index)."""
    reading = _Reading(warn).read(paths, filters or Filters(), read, files)
    env_label = _env_labels(reading.kept)
    sorting = _Sorting(aliases(r.device_label for _path, r in reading.kept), reading.left_out, include_contended)
    for path, r in reading.kept:
        sorting.add(path, r, env_label)
    ds = sorting.dataset(reading)
    ds.noise = noise.by_device(ds.groups, ds.calibration)
    ds.identities, ds.sources = _devices_by_source(paths, reading.kept)
    _note_variants(ds)
    return ds


def _devices_by_source(paths, kept) -> tuple[dict, dict]:
    """The identity of each device the measured runs ran on, and each given path's devices with their envs (a file
    under two given paths counts for the innermost)."""
    roots = [(str(p), Path(p).parts) for p in paths]
    identities: dict = {}
    sources: dict = {root: {} for root, _parts in roots}
    for path, r in kept:
        if r.kind != "measured" or r.intended_device is None:
            continue
        identities.setdefault(r.device_label, r.device_identity)
        parts = Path(path).parts
        under = [(len(p), root) for root, p in roots if parts[:len(p)] == p]
        if under:
            sources[max(under)[1]].setdefault(r.device_label, set()).add(r.env)
    return identities, sources


def _note_variants(ds: Dataset) -> None:
    """Say where one (plan, rung, B, T) ran with different workload or flags: those are never compared."""
    variants: dict[tuple, dict] = {}
    for g in ds.groups:
        for plan, rung, _i in g.rungs:
            k = (plan, rung, g.workload.batch_size, g.workload.seq_len, json.dumps(g.sweep and g.sweep.to_dict(), sort_keys=True))
            variants.setdefault(k, {}).setdefault(g.set_key, []).append((g.gpu, g.env))
    rank = lambda cell: (ds.gpu_order.get(cell[0], 1 << 30), ds.env_order.get(cell[1], 1 << 30))  # never by name
    for (plan, rung, b, t, _s), sets in sorted(variants.items(), key=lambda kv: str(kv[0])):
        if len(sets) > 1:
            parts = [f"workload {w[:8]} flags {f[:8]}: {', '.join(f'{gpu}/{env}' for gpu, env in sorted(cells, key=rank))}"
                     for (w, f), cells in sets.items()]
            ds.notes.append(f"{plan}/{rung} (B={b}, T={t}) ran with {len(sets)} different workload/flags hashes; "
                            f"compared only within each: " + "; ".join(parts))
