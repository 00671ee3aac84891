"""Compare run records: `python -m harness.compare results/ [--format text|markdown|csv|json]`.

Grouping: records are comparable when they have the same workload_hash and the same flags hash
(set_key_of, the one rule every table and the report use); within that, each (env, GPU) cell is one
group, and its repeats are merged (timed steps pooled). Runs that are not comparable are never mixed:
each table says what it left out and why. The user's transcribed logs
(kind "reference") never join a measured group; they have their own table.

Significance: harness.stats (one rule, printed in the footer). No torch import: this runs on a laptop
that has only the results.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import io
import json
import math
import re
import sys
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations, pairwise
from pathlib import Path

import numpy as np
from tabulate import tabulate

from harness import contention, stats
from harness import sweep as sweepmod
from harness.record.io import iter_records
from harness.record.model import (
    ADDED_FIELD_DEFAULTS,
    NOT_IN_WORKLOAD_HASH,
    canonical_hash,
    measured_workload,
    workload_hash,
)
from harness.record.view import device_label, isa_tag

DEFAULT_LOSS_TOL = 0.01  # relative
TABLES = ("ladder", "versions", "gpus", "knobs", "factors", "underneath", "libraries", "loss", "reference", "sweeps",
          "fastest", "left-out")
FORMATS = ("text", "markdown", "csv", "json")
# Natural "before -> after" order of knob values (anything else: numbers ascending, then text).
VALUE_ORDER = {
    "precision": ("fp32", "tf32", "bf16", "fp16"),
    "attention": ("naive", "sdpa"),
    "sdpa_backend": ("auto", "math", "efficient", "flash", "cudnn"),
    "compile": ("off", "default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"),
    "optimizer": ("foreach", "fused"),
    "lm_head_loss": ("plain", "cce-torch-compile", "cce", "liger"),
    "matmul_precision": ("highest", "high", "medium"),
}
# Environment keys worth comparing between two envs (dotted paths, prefix match) and between two GPUs.
ENV_KEYS = ("torch.version", "torch.git", "torch.cuda", "torch.cudnn", "torch.nccl", "triton", "driver.",
            "python.version", "container.", "cpu.torch_capability")
GPU_KEYS = ("gpu.", "driver.", "cpu.", "machine.", "threads.torch")
CONTENDED_NOTE = ("'contended': measured while other work ran on the machine (record.contention: other processes' "
                  "CPU time on the worker's CPUs, steal, other GPU processes); its times are slower than the machine "
                  "can do, and a delta against it says so much about the load as about the change")
TOP_UNDERNEATH = 5  # "what changed underneath": ranked rows shown per pair besides lm_head GEMM and attention (--all: every row)
STATUS_TEXT = {"oom": "ran out of memory", "unsupported": "was unsupported", "error": "failed", "invalid": "was invalid"}
COMPARABLE_RULE = ("Comparable = same workload_hash (the workload less where and how long it ran) and same flags hash "
                   "(the frozen global flags): such runs differ only in env and GPU, and no table or finding puts any "
                   "other runs side by side.")


# ---------------------------------------------------------------- loading and grouping

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


def _gpu_sort_key(environment: dict | None, label: str) -> tuple:
    gpu = (environment or {}).get("gpu")
    if isinstance(gpu, dict) and gpu.get("name"):
        try:
            cap = float(gpu.get("capability") or 99)
        except (TypeError, ValueError):
            cap = 99.0
        return (0, cap, label)
    return (1, 0.0, label)


def _has_nonfinite(obj) -> bool:
    if isinstance(obj, float):
        return not math.isfinite(obj)
    if isinstance(obj, dict):
        return any(_has_nonfinite(v) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_nonfinite(v) for v in obj)
    return False


def timed_ms(record: dict) -> list[float]:
    """The timed step times: warm-up excluded (step 0 = compile is always excluded)."""
    ms = (record.get("steps") or {}).get("ms") or []
    if record.get("kind") == "reference":
        return [x for x in ms[1:] if x is not None]
    warmup = (record.get("workload") or {}).get("warmup_steps")
    if not isinstance(warmup, int):
        timed = (record.get("summary") or {}).get("timed_steps")
        warmup = len(ms) - timed if isinstance(timed, int) and 0 < timed <= len(ms) else 1
    return [x for x in ms[max(1, warmup) if len(ms) > 1 else 0:] if x is not None]


def tokens_per_step(record: dict) -> int | None:
    tps = (record.get("summary") or {}).get("tokens_per_step")
    if tps:
        return tps
    w = record.get("workload") or {}
    if w.get("batch_size") and w.get("seq_len"):
        return w["batch_size"] * w["seq_len"] * (w.get("grad_accum") or 1)
    return None


def memory_of(record: dict) -> tuple[str, int | None]:
    """(metric, bytes): reference logs have nvidia-smi's device memory; CUDA runs the allocator peak; CPU the RSS."""
    s = record.get("summary") or {}
    if record.get("kind") == "reference":
        return "device used", s.get("device_used_bytes")
    if (record.get("environment") or {}).get("device") == "cuda" or s.get("peak_allocated_bytes") is not None:
        return "peak alloc", s.get("peak_allocated_bytes")
    return "peak RSS", s.get("peak_rss_bytes")


def knob_fields(workload: dict) -> dict:
    return measured_workload(workload)


def set_key_of(record: dict) -> tuple[str, str]:
    """What must be equal for two runs to be comparable: (workload_hash, flags hash). The one rule of every
    table. A record harness.run wrote for a worker that died has empty hashes; they are computed here the
    way the worker computes them (from its workload and requested flags)."""
    flags = record.get("flags") or {}
    return (record.get("workload_hash") or workload_hash(record.get("workload") or {}),
            flags.get("hash") or canonical_hash(flags.get("requested") or {}))


def intended_device(record: dict) -> str | None:
    """The device label of the GPU or CPU a run was on (or, for a worker that died early, meant for), when the
    record says which: environment.gpu.name or environment.cpu.model. None when it does not (an early failure
    record that has only env_name, or only `device`): such a run is listed under "left out" and nowhere else."""
    env = record.get("environment") or {}
    gpu, cpu = env.get("gpu"), env.get("cpu")
    if (isinstance(gpu, dict) and gpu.get("name")) or (isinstance(cpu, dict) and cpu.get("model")):
        return device_label(env)
    return None


def run_origin(record: dict) -> str:
    """Which job a run came from, as far as the record says: its plan and repeat, or the sweep it is a point of."""
    sweep = record.get("sweep")
    if sweep:
        return f"sweep {sweep.get('name')} {sweep.get('field')}={sweep.get('value')}"
    return f"plan {record.get('plan')} repeat {record.get('repeat')}"


@dataclass
class Group:
    """One comparable cell: same workload and flags hash, one env, one GPU; its repeats merged."""

    kind: str
    workload_hash: str
    flags_hash: str
    env: str  # env label (env name, or name@torch-version where one name has several versions)
    gpu: str
    records: list = field(default_factory=list)
    paths: list = field(default_factory=list)
    n_boot: int = stats.N_BOOT

    @property
    def key(self) -> tuple:
        return (self.workload_hash, self.flags_hash, self.env, self.gpu)

    @property
    def set_key(self) -> tuple:
        """What must be equal for two groups to be compared across env or GPU."""
        return (self.workload_hash, self.flags_hash)

    @property
    def first(self) -> dict:
        return self.records[0]

    @property
    def workload(self) -> dict:
        return self.first.get("workload") or {}

    @property
    def flags(self) -> dict:
        return (self.first.get("flags") or {}).get("requested") or {}

    @property
    def environment(self) -> dict:
        return self.first.get("environment") or {}

    @property
    def sweep(self) -> dict | None:
        """The sweep this group is a point of (a plain rung run of the same workload may be merged in)."""
        return next((r["sweep"] for r in self.records if r.get("sweep")), None)

    @property
    def in_ladder(self) -> bool:
        """Has at least one run made as a plan rung rather than as a sweep point."""
        return any(not r.get("sweep") for r in self.records)

    @property
    def rungs(self) -> list[tuple[str, str, int | None]]:
        return sorted({(r.get("plan"), r.get("rung"), r.get("rung_index")) for r in self.records},
                      key=lambda t: (str(t[0]), t[2] if t[2] is not None else 1 << 30, str(t[1])))

    @property
    def label(self) -> str:
        names = sorted({r.get("rung") for r in self.records}, key=str)
        text = "+".join(str(n) for n in names)
        if self.sweep and not self.in_ladder:
            text += f" [{self.sweep.get('field')}={self.sweep.get('value')}]"
        return text

    @property
    def batch(self) -> str:
        w = self.workload
        return f"B={w.get('batch_size')}, T={w.get('seq_len')}"

    @property
    def torch_version(self) -> str | None:
        return (self.environment.get("torch") or {}).get("version")

    @property
    def samples(self) -> list[list[float]]:
        return [timed_ms(r) for r in self.records]

    @property
    def n_text(self) -> str:
        counts = [len(s) for s in self.samples]
        text = f"{len(counts)}x{counts[0]}" if len(set(counts)) == 1 else "+".join(str(c) for c in counts)
        busy = len(self.contended)
        mark = "" if not busy else " contended" if busy == len(self.records) else f" ({busy} contended)"
        return text + (" pooled" if self.pooled else "") + mark

    @property
    def contended(self) -> list[dict]:
        """Its runs measured under contention (record.contention; older records do not say, and are not flagged)."""
        return [r for r in self.records if (r.get("contention") or {}).get("contended")]

    @property
    def contended_notes(self) -> list[str]:
        return [f"contended: {self.label} ({self.batch}) on {self.gpu} / {self.env}, {r['run_id']}: "
                f"{contention.describe(r.get('contention'))}" for r in self.contended]

    @property
    def pooled(self) -> bool:
        """Its runs are not the repeats of one invocation: repeat numbers recur, or plans or sweeps differ.
        They are still merged (same workload and flags); the tables say so and pooled_note lists them."""
        repeats = [r.get("repeat") for r in self.records]
        origins = {(r.get("plan"), json.dumps(r.get("sweep"), sort_keys=True)) for r in self.records}
        return len(self.records) > 1 and (len(set(repeats)) < len(repeats) or len(origins) > 1)

    @property
    def pooled_note(self) -> str | None:
        if not self.pooled:
            return None
        return (f"{self.label} ({self.batch}): {len(self.records)} runs from separate invocations pooled (same workload "
                f"and flags): " + "; ".join(f"{r['run_id']} ({run_origin(r)})" for r in self.records))

    @cached_property
    def throughput(self) -> stats.Estimate:
        return stats.throughput(self.samples, tokens_per_step(self.first), key=repr(self.key), n_boot=self.n_boot)

    @property
    def ms_median(self) -> float | None:
        pooled = [x for s in self.samples for x in s]
        return float(np.median(pooled)) if pooled else None

    @property
    def memory(self) -> tuple[str, list]:
        metric = memory_of(self.first)[0]
        return metric, [memory_of(r)[1] for r in self.records if memory_of(r)[1] is not None]

    @property
    def memory_bytes(self) -> float | None:
        values = self.memory[1]
        return float(np.median(values)) if values else None

    def summary_median(self, name: str) -> float | None:
        values = [(r.get("summary") or {}).get(name) for r in self.records]
        values = [v for v in values if isinstance(v, (int, float))]
        return float(np.median(values)) if values else None

    @property
    def explain(self) -> dict:
        for r in self.records:
            if isinstance(r.get("explain"), dict):
                return r["explain"]
        return {}

    def losses(self, upto: int | None = None, start: int | None = None) -> tuple[float | None, float | None]:
        """(loss at step upto-1, mean over steps start..upto-1) averaged over repeats; defaults: all steps, own warm-up."""
        finals, means = [], []
        for r in self.records:
            loss = (r.get("steps") or {}).get("loss") or []
            if loss:
                n = min(len(loss), upto or len(loss))
                warm = (r.get("workload") or {}).get("warmup_steps") or 0 if start is None else start
                timed = [x for x in loss[min(warm, n - 1):n] if x is not None]
                if loss[n - 1] is not None:
                    finals.append(loss[n - 1])
                if timed:
                    means.append(sum(timed) / len(timed))
            else:
                s = r.get("summary") or {}
                if s.get("final_loss") is not None:
                    finals.append(s["final_loss"])
                if s.get("mean_loss") is not None:
                    means.append(s["mean_loss"])
        avg = lambda xs: sum(xs) / len(xs) if xs else None
        return avg(finals), avg(means)

    @property
    def loss_steps(self) -> int | None:
        lengths = [len((r.get("steps") or {}).get("loss") or []) for r in self.records]
        return min(lengths) if lengths and min(lengths) else None


@dataclass
class Filters:
    """--env, --gpu, --plan, --rung. The user's logged numbers (kind=reference) and a peer's (kind=peer) are not an
    env: --env selects measured runs and leaves them in, to stand beside those runs (`--env reference` alone: the
    references only). --gpu, --plan and --rung select them by their own GPU class, plan and rung."""

    envs: list = field(default_factory=list)
    gpus: list = field(default_factory=list)
    plans: list = field(default_factory=list)
    rungs: list = field(default_factory=list)

    def keep(self, record: dict) -> bool:
        if self.envs and record.get("env") not in self.envs and record.get("kind") not in ("reference", "peer"):
            return False
        gpu = device_label(record.get("environment")).lower()
        if self.gpus and not any(g.lower() in gpu for g in self.gpus):
            return False
        if self.plans and record.get("plan") not in self.plans:
            return False
        return not (self.rungs and record.get("rung") not in self.rungs)


@dataclass
class Dataset:
    groups: list  # measured, status ok, comparable cells
    references: list  # kind=reference, one group per record (never merged)
    failed: list  # (path, record): measured runs whose status is not ok
    left_out: list  # (what, why)
    notes: list
    valid_records: int = 0
    filtered: int = 0
    env_order: dict = field(default_factory=dict)  # env label -> rank (oldest torch first)
    gpu_order: dict = field(default_factory=dict)  # gpu label -> rank
    env_versions: dict = field(default_factory=dict)  # env label -> torch version
    kept_envs: set = field(default_factory=set)  # the `env` of every record the filters kept ("reference" included)
    env_of: dict = field(default_factory=dict)  # run_id -> env label, for every measured record (failed ones included)
    peers: list = field(default_factory=list)  # kind=peer, one group per record (never merged, never compared as runs)

    def envs(self) -> list[str]:
        return sorted(self.env_order, key=self.env_order.get)

    def gpus(self) -> list[str]:
        return sorted(self.gpu_order, key=self.gpu_order.get)


def load(paths, warn=print, filters: Filters | None = None, n_boot: int = stats.N_BOOT) -> Dataset:
    """Read every record under the paths; one warning per bad file; group what is comparable."""
    filters = filters or Filters()
    left_out, seen, kept = [], {}, []
    outer_warn = warn

    def warn(line: str) -> None:
        outer_warn(line)
        m = re.match(r"warning: (.*?): (?:skipped: )?(.*)$", line)
        left_out.append((m.group(1), m.group(2)) if m else (line, ""))

    for root in map(Path, paths):
        if root.is_dir() and not any(p for p in root.rglob("*.json") if not p.name.startswith(".tmp-")):
            warn(f"warning: {root}: no *.json records in this directory")
    valid = filtered = 0
    for path, record in iter_records(paths, warn):
        if _has_nonfinite(record):
            warn(f"warning: {path}: skipped: contains NaN or infinity (the harness writes null for those)")
            continue
        valid += 1
        if record["run_id"] in seen:
            warn(f"warning: {path}: skipped: run_id {record['run_id']} already read from {seen[record['run_id']]}")
            continue
        seen[record["run_id"]] = path
        if not filters.keep(record):
            filtered += 1
            continue
        kept.append((path, record))

    versions: dict[str, set] = {}
    for _path, r in kept:
        if r.get("kind") == "measured":
            v = ((r.get("environment") or {}).get("torch") or {}).get("version")
            versions.setdefault(r["env"], set())
            if v:
                versions[r["env"]].add(v)

    def env_label(r: dict) -> str:
        v = ((r.get("environment") or {}).get("torch") or {}).get("version")
        return r["env"] if len(versions.get(r["env"], ())) <= 1 else f"{r['env']}@{v or '?'}"

    groups: dict[tuple, Group] = {}
    references, peers, failed, env_versions, gpu_keys, env_of = [], [], [], {}, {}, {}
    for path, r in kept:
        gpu = device_label(r.get("environment"))
        where = f"{path.name} ({r.get('plan')}/{r.get('rung')}, {r['env']}, {gpu})"
        if r.get("kind") in ("reference", "peer"):  # beside the measurements, never one of them
            g = Group(r["kind"], r["workload_hash"], r["flags"]["hash"], r["env"], gpu, [r], [path], n_boot)
            (references if r["kind"] == "reference" else peers).append(g)
            continue
        label = env_of[r["run_id"]] = env_label(r)
        if env_versions.get(label) is None:  # a failed run may not know its torch version; an ok run of the env does
            env_versions[label] = ((r.get("environment") or {}).get("torch") or {}).get("version")
        if r["status"] != "ok":
            failed.append((path, r))
            why = f"status {r['status']}: {r.get('reason') or 'no reason given'}"
            if intended_device(r) is None:  # an early death: its environment was never captured
                where = f"{path.name} ({r.get('plan')}/{r.get('rung')}, {r['env']}, device not recorded)"
                why += "; listed here only: the record does not say which device it was meant for"
            left_out.append((where, why))
            continue
        if not timed_ms(r):
            left_out.append((where, "no timed step times"))
            continue
        gpu_keys.setdefault(gpu, _gpu_sort_key(r.get("environment"), gpu))
        key = (r["workload_hash"], r["flags"]["hash"], label, gpu)
        if key not in groups:
            groups[key] = Group("measured", *key, n_boot=n_boot)
        groups[key].records.append(r)
        groups[key].paths.append(path)

    for g in groups.values():
        g.records.sort(key=lambda r: (r.get("repeat") is None, r.get("repeat") or 0, r["run_id"]))
    env_rank = sorted(env_versions, key=lambda e: (torch_version_key(env_versions[e]), e))
    ds = Dataset(
        groups=sorted(groups.values(), key=lambda g: (g.gpu, g.env, g.rungs[0][0] or "", g.rungs[0][2] or 0, g.label)),
        references=sorted(references, key=lambda g: (g.first.get("rung_index") or 0, g.workload.get("batch_size") or 0, g.first["run_id"])),
        failed=failed, left_out=left_out, notes=[], valid_records=valid, filtered=filtered,
        env_order={e: i for i, e in enumerate(env_rank)},
        gpu_order={gname: i for i, gname in enumerate(sorted(gpu_keys, key=gpu_keys.get))},
        env_versions=env_versions, kept_envs={r["env"] for _path, r in kept}, env_of=env_of,
        peers=sorted(peers, key=lambda g: (g.gpu, g.first["run_id"])),
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


# ---------------------------------------------------------------- tables

@dataclass
class Cell:
    """A delta to render: style pct (relative %), ratio (x), pp (difference of effects)."""

    delta: stats.Delta
    style: str = "pct"

    def brief(self) -> str:
        """Value and verdict, no interval."""
        d = self.delta
        if d.value is None:
            return "n/a"
        text = Cell(stats.Delta(d.value, verdict=stats.NA), self.style).text()
        return text + {stats.BEYOND: "", stats.WITHIN: " (within noise)", stats.SINGLE: " (single sample)",
                       stats.FEW: " (too few samples)", stats.ONE_RUN: " (one run)"}.get(d.verdict, "")

    def _fmt(self, x: float, digits: int) -> str:
        return f"{1 + x:.{digits}f}" if self.style == "ratio" else f"{x * 100:+.{digits}f}"

    def text(self) -> str:
        d = self.delta
        if d.value is None:
            return "n/a" if d.verdict == stats.NA else f"n/a ({d.verdict})"
        unit = {"pct": "%", "pp": " pp", "ratio": "x"}[self.style]
        digits = 2 if self.style == "ratio" else 1
        if d.verdict in (stats.BEYOND, stats.WITHIN):
            # an interval narrower than the last digit gets more digits (up to 3 more) rather than vanishing
            while digits < 5 and d.low != d.high and self._fmt(d.low, digits) == self._fmt(d.high, digits):
                digits += 1
        head = self._fmt(d.value, digits) + unit
        if d.verdict in (stats.BEYOND, stats.WITHIN):
            low, high = self._fmt(d.low, digits), self._fmt(d.high, digits)
            # memory deltas carry the range over repeats, not a confidence interval: written differently
            bounds = f"(range {low}..{high})" if d.bounds == "range" else f"[{low},{high}]"
            return f"{head} {bounds} {'beyond' if d.beyond else 'within noise'}"
        if d.verdict == stats.SINGLE:
            return f"{head} (single sample)"
        if d.verdict == stats.FEW:
            return f"{head} (too few samples)"
        if d.verdict == stats.ONE_RUN:
            return f"{head} (one run, no noise estimate)"
        return head


@dataclass
class Mfu:
    """An MFU to render. Above 100% the peak it divides by is below the rate the run achieved, so that peak is
    wrong (a calibration slowed by other load, or a datasheet entry for another variant): never shown bare."""

    value: float

    @property
    def suspect(self) -> bool:
        return self.value > 1.0

    def text(self) -> str:
        return fmt_pct(self.value) + (" (peak suspect)" if self.suspect else "")


MFU_SUSPECT_NOTE = ("MFU above 100% is marked 'peak suspect': the GEMM peak it divides by is below the FLOP rate the run "
                    "achieved, so that peak is wrong (a measured calibration slowed by other load, or a datasheet entry "
                    "for another variant of the device); the run's tokens/s are not affected")


@dataclass
class Table:
    name: str
    title: str
    columns: list  # (key, header)
    rows: list = field(default_factory=list)
    notes: list = field(default_factory=list)


def fmt_ms(x):
    return None if x is None else (f"{x:.3f}" if x < 10 else f"{x:.2f}" if x < 1000 else f"{x:,.0f}")


def fmt_int(x):
    return None if x is None else f"{x:,.0f}"


def fmt_mib(x):
    return None if x is None else f"{x / 2**20:,.0f}"


def fmt_pct(x):
    return None if x is None else f"{x * 100:.1f}%"


def _mem_header(groups) -> str:
    metrics = {g.memory[0] for g in groups}
    return (metrics.pop() if len(metrics) == 1 else "memory") + " MiB"


def _mfu_header(groups) -> str:
    """summary.mfu is against the datasheet peak where the GPU is in the table, else the measured GEMM peak
    (harness/explain.py summary_mfu): the header says which basis the column's numbers use."""
    bases = set()
    for g in groups:
        part = (g.explain or {}).get("mfu") or {}
        if part.get("mfu_datasheet") is not None:
            bases.add("datasheet peak")
        elif part.get("mfu_measured") is not None:
            bases.add("measured GEMM peak")
    if len(bases) == 1:
        return f"MFU ({bases.pop()})"
    return "MFU (datasheet, else measured peak)" if bases else "MFU"


class Compare:
    """All tables of one dataset, with the chosen baselines."""

    def __init__(self, ds: Dataset, baseline_env: str | None = None, baseline_gpu: str | None = None,
                 noise_floor: float = stats.NOISE_FLOOR, loss_tol: float = DEFAULT_LOSS_TOL, show_all: bool = False):
        self.ds = ds
        self.floor = noise_floor
        self.loss_tol = loss_tol
        self.show_all = show_all  # every row of "what changed underneath", not the top few per pair
        self.baseline_env = baseline_env
        self.baseline_gpu = baseline_gpu
        envs = ds.envs()
        if baseline_env:
            envs = [e for e in envs if e == baseline_env] + [e for e in envs if e != baseline_env]
        gpus = ds.gpus()
        if baseline_gpu:
            gpus = [g for g in gpus if g == baseline_gpu] + [g for g in gpus if g != baseline_gpu]
        self.env_rank = {e: i for i, e in enumerate(envs)}
        self.gpu_rank = {g: i for i, g in enumerate(gpus)}

    # --- helpers
    def delta(self, a: Group, b: Group) -> stats.Delta:
        return stats.ratio(a.throughput, b.throughput, self.floor)[0]

    def mem_delta(self, a: Group, b: Group) -> stats.Delta:
        if a.memory[0] != b.memory[0]:
            return stats.Delta(None, verdict=f"{a.memory[0]} vs {b.memory[0]}")
        return stats.counter(a.memory[1], b.memory[1], self.floor)

    def sets(self) -> dict[tuple, list[Group]]:
        """Comparison sets: groups by set_key (set_key_of), the one comparability rule."""
        out: dict[tuple, list[Group]] = {}
        for g in self.ds.groups:
            out.setdefault(g.set_key, []).append(g)
        return out

    def failed_runs(self) -> list[tuple[dict, str, str]]:
        """(record, device label, env label) of every run not ok whose record says which device it was meant
        for; the others are only in "left out"."""
        out = []
        for _path, r in self.ds.failed:
            gpu = intended_device(r)
            if gpu is not None:
                out.append((r, gpu, self.ds.env_of.get(r["run_id"], r["env"])))
        return out

    def cells(self) -> dict[tuple, list[Group]]:
        out: dict[tuple, list[Group]] = {}
        for g in self.ds.groups:
            out.setdefault((g.gpu, g.env), []).append(g)
        return dict(sorted(out.items(), key=lambda kv: (self.gpu_rank[kv[0][0]], self.env_rank[kv[0][1]])))

    # --- ladder
    def ladders(self) -> list[tuple[tuple, list]]:
        """[(plan, gpu, env, B, T), rows]: rows are groups (or failed records) in rung order."""
        out: dict[tuple, list] = {}
        for g in self.ds.groups:
            if not g.in_ladder:
                continue
            for plan, rung, idx in g.rungs:
                k = (plan, g.gpu, g.env, g.workload.get("batch_size"), g.workload.get("seq_len"))
                out.setdefault(k, []).append((idx, rung, g))
        for r, gpu, env in self.failed_runs():
            if r.get("sweep"):
                continue
            k = (r.get("plan"), gpu, env, (r.get("workload") or {}).get("batch_size"), (r.get("workload") or {}).get("seq_len"))
            out.setdefault(k, []).append((r.get("rung_index"), r.get("rung"), r))
        result = []
        for k, rows in out.items():
            rows.sort(key=lambda t: (t[0] if t[0] is not None else 1 << 30, str(t[1]), isinstance(t[2], dict)))
            result.append((k, rows))
        result.sort(key=lambda kr: (str(kr[0][0]), self.gpu_rank.get(kr[0][1], 99), self.env_rank.get(kr[0][2], 99),
                                    kr[0][3] or 0, kr[0][4] or 0))
        return result

    def ladder_tables(self) -> list[Table]:
        tables = []
        for (plan, gpu, env, b, t), rows in self.ladders():
            groups = [g for _i, _r, g in rows if isinstance(g, Group)]
            table = Table("ladder", f"Ladder: plan {plan} on {gpu} / {env} (B={b}, T={t})", [
                ("rung", "rung"), ("runs", "runs"), ("ms", "ms/step"), ("tokens_s", "tokens/s"),
                ("memory", _mem_header(groups) if groups else "memory MiB"), ("mfu", _mfu_header(groups)),
                ("vs_previous", "vs previous rung"), ("vs_first", "vs first rung")])
            first = previous = None
            rung_of = {}  # rung name -> its first ok group in this table; "previous" is the previous rung's
            for _idx, rung, g in rows:
                if not isinstance(g, Group):
                    table.rows.append({"rung": rung, "runs": g["status"], "run_ids": [g["run_id"]]})
                    table.notes.append(f"{rung}: {g['status']}: {_brief_reason(g.get('reason'))}")
                    continue
                if rung_of and rung not in rung_of:
                    previous = rung_of[list(rung_of)[-1]]
                rung_of.setdefault(rung, g)
                mfu = g.summary_median("mfu")
                row = {"rung": rung if rung == g.label else f"{rung} (= {g.label})", "runs": g.n_text,
                       "ms": g.ms_median, "tokens_s": g.throughput.point, "memory": g.memory_bytes,
                       "mfu": None if mfu is None else Mfu(mfu),
                       "vs_previous": Cell(self.delta(previous, g), "ratio") if previous else None,
                       "vs_first": Cell(self.delta(first, g), "ratio") if first else None, "run_ids": run_ids(g)}
                table.rows.append(row)
                first = first or g
                if g.pooled_note and g.pooled_note not in table.notes:
                    table.notes.append(g.pooled_note)
                table.notes += [n for n in g.contended_notes if n not in table.notes]
            if any(isinstance(r.get("mfu"), Mfu) and r["mfu"].suspect for r in table.rows):
                table.notes.append(MFU_SUSPECT_NOTE)
            if any(g.contended for g in groups):
                table.notes.append(CONTENDED_NOTE)
            tables.append(table)
        return tables

    # --- across envs / GPUs
    def _cross(self, name: str, across: str) -> Table:
        """Same comparison set, same GPU (across=env) or same env (across=gpu): each against the baseline.
        A cell whose run failed (the baseline GPU ran out of memory where the other GPU did not) is a row
        that says so: the other cell's numbers are shown, without a delta."""
        other = "gpu" if across == "env" else "env"
        rank = self.env_rank if across == "env" else self.gpu_rank
        other_rank = self.gpu_rank if across == "env" else self.env_rank
        what, same = ("env", "GPU") if across == "env" else ("GPU", "env")
        table = Table(name, f"Cross-{'version' if across == 'env' else 'GPU'}: same {same} and rung; each {what} vs the baseline {what}", [
            (other, same), ("rung", "rung"), ("batch", "B, T"), (across, what), ("runs", "runs"),
            ("baseline", "baseline cell (GPU / env, B, T)"), ("tokens_s", "tokens/s"), ("d_tokens_s", "delta tokens/s"),
            ("memory", "memory MiB"), ("d_memory", "delta memory")])
        cells: dict[tuple, dict[str, dict]] = {}  # set_key -> other value -> across value -> Group or (record, gpu, env)
        for g in self.ds.groups:
            cells.setdefault(g.set_key, {}).setdefault(getattr(g, other), {})[getattr(g, across)] = g
        for r, gpu, env in self.failed_runs():
            row_cells = cells.get(set_key_of(r), {}).get(gpu if other == "gpu" else env)
            if row_cells is not None:  # beside an ok run of the same set only: a failure alone compares nothing
                row_cells.setdefault(env if across == "env" else gpu, (r, gpu, env))
        wanted = self.baseline_env if across == "env" else self.baseline_gpu
        rows, failed_base, contended, isa_notes = [], 0, [], {}
        for by_other in cells.values():
            for o, row_cells in by_other.items():
                if len(row_cells) < 2:
                    continue
                g0 = next(c for c in row_cells.values() if isinstance(c, Group))
                order = sorted(row_cells, key=lambda v: (rank.get(v, len(rank)), v))
                if wanted and order[0] != wanted:
                    table.notes.append(f"{o} {g0.label} ({g0.batch}): no run on baseline {what} {wanted}; not compared")
                    continue
                base = row_cells[order[0]]
                base_gpu, base_env = (base.gpu, base.env) if isinstance(base, Group) else base[1:]
                failed_base += not isinstance(base, Group)
                for v in order:
                    c = row_cells[v]
                    row = {other: o, "rung": g0.label, "batch": g0.batch, across: v,
                           "baseline": "(baseline)" if v == order[0] else f"{short_gpu(base_gpu)} / {base_env}, {g0.batch}",
                           "base_gpu": base_gpu, "base_env": base_env,  # (not columns: for charts and findings)
                           "base_status": "ok" if isinstance(base, Group) else base[0]["status"], "is_baseline": v == order[0],
                           "batch_size": g0.workload.get("batch_size")}
                    if isinstance(c, Group):
                        row.update(runs=c.n_text, tokens_s=c.throughput.point, memory=c.memory_bytes)
                        contended += [n for n in c.contended_notes if n not in contended]
                    else:
                        row["runs"] = c[0]["status"]
                    if across == "gpu" and v != order[0]:
                        isa = isa_difference(base_env_of(base), base_env_of(c))
                        if isa:
                            row["isa"] = isa
                            isa_notes.setdefault(f"{short_gpu(base_gpu)} vs {short_gpu(v)}: {isa}", None)
                    row["run_ids"] = [i for cell in ((c,) if v == order[0] else (base, c))
                                      for i in (run_ids(cell) if isinstance(cell, Group) else [cell[0]["run_id"]])]
                    if v != order[0]:
                        row.update(self._cross_deltas(base, c))
                    key = (other_rank.get(o, len(other_rank)), g0.rungs[0][2] if g0.rungs[0][2] is not None else 1 << 30,
                           g0.label, g0.workload.get("batch_size") or 0, g0.workload.get("seq_len") or 0, rank.get(v, len(rank)), v)
                    rows.append((key, row))
        rows.sort(key=lambda kr: kr[0])
        table.rows = [r for _k, r in rows]
        if failed_base:
            table.notes.append(f"{failed_base} baseline cell(s) did not run ok (their status is under 'runs'): the other "
                               f"{what}'s runs of that rung and B are shown without a delta")
        table.notes += list(isa_notes)
        if contended:
            table.notes += contended + [CONTENDED_NOTE]
        refused = self.refused_pairs(across)
        table.notes += refused[:5] + ([f"... and {len(refused) - 5} more such pairs"] if len(refused) > 5 else [])
        if not table.rows:
            table.notes.append(self._why_no_rows(across, bool(refused)))
        return table

    def _cross_deltas(self, base, c) -> dict:
        """Delta cells of one row against its baseline cell; a failed side gives a delta that says why it has none."""
        if isinstance(base, Group) and isinstance(c, Group):
            return {"d_tokens_s": Cell(self.delta(base, c)), "d_memory": Cell(self.mem_delta(base, c))}
        failed = base if not isinstance(base, Group) else c
        status = failed[0]["status"]
        why = f"the baseline {STATUS_TEXT.get(status, status)}" if failed is base else f"this run {STATUS_TEXT.get(status, status)}"
        none = Cell(stats.Delta(None, verdict=why))
        return {"d_tokens_s": none, "d_memory": none}

    def refused_pairs(self, across: str) -> list[str]:
        """Runs of one plan rung and (B, T) on the same GPU (across=env) or env (across=gpu) under two envs or GPUs
        that the comparability rule keeps apart, with what differs: the reason their row is missing."""
        other = "gpu" if across == "env" else "env"
        rank = self.env_rank if across == "env" else self.gpu_rank
        slots: dict[tuple, list[Group]] = {}
        for g in sorted(self.ds.groups, key=lambda g: rank[getattr(g, across)]):
            for plan, rung, _i in g.rungs:
                slots.setdefault((getattr(g, other), plan, rung, g.workload.get("batch_size"), g.workload.get("seq_len")), []).append(g)
        out = []
        for (o, plan, rung, b, t), gs in slots.items():
            for a, c in combinations(gs, 2):
                if getattr(a, across) != getattr(c, across) and a.set_key != c.set_key:
                    out.append(f"not compared: {o}, {plan}/{rung} (B={b}, T={t}) under {getattr(a, across)} and "
                               f"{getattr(c, across)}: the runs differ in {_differences(a, c)}")
        return sorted(set(out))

    def _why_no_rows(self, across: str, refused: bool) -> str:
        other = "gpu" if across == "env" else "env"
        what, same = ("env", "GPU") if across == "env" else ("GPU", "env")
        where: dict[str, set] = {}
        for g in self.ds.groups:
            where.setdefault(getattr(g, across), set()).add(getattr(g, other))
        if len(where) < 2:
            return f"only one {what} in these records ({', '.join(where) or 'none'}): nothing to compare across {what}s"
        if refused:
            return f"no rung ran under two {what}s with the same workload and flags on one {same} (the pairs above differ)"
        return (f"no rung ran under two {what}s on the same {same}: " +
                "; ".join(f"{k} on {', '.join(sorted(v))}" for k, v in sorted(where.items(), key=lambda kv: str(kv[0]))))

    def versions_table(self) -> Table:
        return self._cross("versions", "env")

    def gpus_table(self) -> Table:
        return self._cross("gpus", "gpu")

    # --- knobs
    def _knob_order(self, a: Group, b: Group) -> tuple[Group, Group]:
        plans_a = {p: i for p, _r, i in a.rungs if i is not None}
        for p, _r, i in b.rungs:
            if p in plans_a and i is not None and plans_a[p] != i:
                return (a, b) if plans_a[p] < i else (b, a)
        diff = _diff(a, b)
        if diff:
            name, va, vb = diff[0]
            if _value_key(name, va) > _value_key(name, vb):
                return b, a
        return a, b

    def knob_effects(self) -> dict[tuple, dict]:
        """{(knob, context): {(gpu, env): (a, b, Delta, boot)}} for pairs that differ in one knob,
        and for adjacent rungs of a ladder (whatever they change)."""
        pairs: set[tuple] = set()
        for (_plan, _gpu, _env, _b, _t), rows in self.ladders():
            groups = [g for _i, _r, g in rows if isinstance(g, Group)]
            for a, b in pairwise(groups):
                if a is not b:
                    pairs.add((a.key, b.key))
        for groups in self.cells().values():
            plain = [g for g in groups if g.in_ladder]
            for a, b in combinations(plain, 2):
                wdiff = [d for d in _diff(a, b) if not d[0].startswith("flag:")]
                if len(wdiff) == 1 or (not wdiff and a.flags_hash != b.flags_hash):
                    a2, b2 = self._knob_order(a, b)
                    pairs.add((a2.key, b2.key))
        by_key = {g.key: g for g in self.ds.groups}
        out: dict[tuple, dict] = {}
        for ka, kb in pairs:
            a, b = by_key[ka], by_key[kb]
            diff = _diff(a, b)
            knob = ", ".join(f"{n} {_show(va)} -> {_show(vb)}" for n, va, vb in diff if not n.startswith("flag:"))
            flag_diff = [(n.removeprefix("flag:"), va, vb) for n, va, vb in diff if n.startswith("flag:")]
            if knob and flag_diff:  # flags that follow from the workload change: named, not spelled out
                knob += f" (flags: {', '.join(n for n, _va, _vb in flag_diff)})"
            elif flag_diff:
                knob = "flags: " + ", ".join(f"{n} {_show(va)} -> {_show(vb)}" for n, va, vb in flag_diff)
            # One knob effect across cells only where every "before" run is one comparison set and every "after"
            # run another (the comparability rule): a cell whose runs differ in a flag or hash is its own entry.
            context = (a.set_key, b.set_key)
            delta, boot = stats.ratio(a.throughput, b.throughput, self.floor)
            entry = out.setdefault((knob, context), {"at": f"{a.label} ({a.batch})", "cells": {}})
            entry["cells"][(a.gpu, a.env)] = (a, b, delta, boot)
        variants: dict[tuple, list[dict]] = {}
        for (knob, _ctx), entry in out.items():
            entry["at_plain"] = entry["at"]
            variants.setdefault((knob, entry["at"]), []).append(entry)
        for entries in variants.values():  # the same knob at the same rung, kept apart: say what differs
            if len(entries) > 1:
                befores = [next(iter(e["cells"].values()))[0] for e in entries]
                afters = [next(iter(e["cells"].values()))[1] for e in entries]
                labels = _variant_labels(befores)
                if len(set(labels)) < len(labels):
                    labels = _variant_labels(afters)
                for e, label in zip(entries, labels, strict=True):
                    e["variant"] = label
                    e["at"] = f"{e['at_plain']} [{label}]"
        return dict(sorted(out.items(), key=lambda kv: (min(g.rungs[0][2] or 0 for g, *_ in kv[1]["cells"].values()), kv[1]["at"], kv[0][0])))

    def knobs_table(self, effects=None) -> Table:
        effects = self.knob_effects() if effects is None else effects
        table = Table("knobs", "Knob effects: one change, in every (GPU, env) cell where both sides ran", [
            ("knob", "knob"), ("at", "at"), ("gpu", "GPU"), ("env", "env"), ("tokens_s", "tokens/s before -> after"),
            ("d_tokens_s", "effect on tokens/s"), ("d_memory", "effect on memory")])
        for (knob, _ctx), entry in effects.items():
            for (gpu, env), (a, b, delta, _boot) in sorted(entry["cells"].items(), key=lambda kv: (self.gpu_rank[kv[0][0]], self.env_rank[kv[0][1]])):
                table.rows.append({"knob": knob, "at": entry["at"], "gpu": gpu, "env": env,
                                   "tokens_s": f"{fmt_int(a.throughput.point)} -> {fmt_int(b.throughput.point)}",
                                   "d_tokens_s": Cell(delta), "d_memory": Cell(self.mem_delta(a, b)), "run_ids": run_ids(a, b)})
        if not table.rows:
            table.notes.append("no two runs in one (GPU, env) cell differ in exactly one knob")
        return table

    def factors_table(self, effects=None) -> Table:
        """Where a knob's effect exists on 2 GPUs x 2 envs: split it into a GPU and a version factor."""
        effects = self.knob_effects() if effects is None else effects
        table = Table("factors", "Is it the GPU or the torch version? A knob's effect split over a 2x2 of GPUs x envs", [
            ("knob", "knob"), ("at", "at"), ("gpus", "GPU A -> B"), ("envs", "env 1 -> 2"), ("effects", "effect per cell"),
            ("gpu_factor", "GPU factor (B - A)"), ("version_factor", "version factor (2 - 1)"), ("interaction", "interaction")])
        for (knob, _ctx), entry in effects.items():
            cells = {k: (d, boot) for k, (_a, _b, d, boot) in entry["cells"].items()}
            gpus = sorted({g for g, _e in cells}, key=self.gpu_rank.get)
            envs = sorted({e for _g, e in cells}, key=self.env_rank.get)
            for g1, g2 in combinations(gpus, 2):
                for v1, v2 in combinations(envs, 2):
                    quad = [(g1, v1), (g1, v2), (g2, v1), (g2, v2)]
                    if not all(q in cells for q in quad):
                        continue
                    e11, e12, e21, e22 = (cells[q] for q in quad)
                    gpu_f = stats.combine([(0.5, e21), (-0.5, e11), (0.5, e22), (-0.5, e12)], self.floor)
                    ver_f = stats.combine([(0.5, e12), (-0.5, e11), (0.5, e22), (-0.5, e21)], self.floor)
                    inter = stats.combine([(1, e22), (-1, e21), (-1, e12), (1, e11)], self.floor)
                    values = {q: cells[q][0].value for q in quad}
                    # the cell furthest from the mean of the other three: where an interaction comes from
                    standout = None if None in values.values() else max(
                        quad, key=lambda q: abs(values[q] - sum(values[o] for o in quad if o != q) / 3))
                    table.rows.append({
                        "knob": knob, "at": entry["at"], "gpus": f"{g1} -> {g2}", "envs": f"{v1} -> {v2}",
                        "effects": "; ".join(f"{short_gpu(g)}/{v} {Cell(cells[(g, v)][0]).brief()}" for g, v in quad),
                        "gpu_factor": Cell(gpu_f, "pp"), "version_factor": Cell(ver_f, "pp"), "interaction": Cell(inter, "pp"),
                        "cells": {q: cells[q][0] for q in quad}, "standout": standout,  # for findings and charts
                        "run_ids": run_ids(*(g for q in quad for g in entry["cells"][q][:2]))})
        table.notes += self._unsplit_notes(effects)
        if not table.rows:
            envs, gpus = sorted({g.env for g in self.ds.groups}), sorted({g.gpu for g in self.ds.groups})
            if len(envs) < 2 or len(gpus) < 2:
                what, names = ("env", envs) if len(envs) < 2 else ("GPU", gpus)
                table.notes.append(f"only one {what} in these records ({', '.join(names) or 'none'}): a knob's effect needs "
                                   f"2 GPUs x 2 envs to be split")
            else:
                table.notes.append("no knob was measured on 2 GPUs x 2 envs with comparable runs; run the same plan on both "
                                   "GPUs under both envs to split its effect")
        table.notes.append("effects in %; factors in percentage points: GPU factor = effect on GPU B minus on GPU A, averaged "
                           "over the two envs; version factor = effect under env 2 minus env 1, averaged over the two GPUs; "
                           "interaction = how much the version change differs between the GPUs")
        return table

    def _unsplit_notes(self, effects: dict) -> list[str]:
        """A 2x2 that exists only by mixing runs the comparability rule keeps apart is not split: say why."""
        notes = []
        by_at: dict[tuple, list[dict]] = {}
        for (knob, _ctx), entry in effects.items():
            by_at.setdefault((knob, entry["at_plain"]), []).append(entry)
        for (knob, at), entries in by_at.items():
            if len(entries) < 2:
                continue
            split = [set(e["cells"]) for e in entries]
            cells = set().union(*split)
            gpus, envs = {g for g, _e in cells}, {e for _g, e in cells}
            quads = [{(g1, v1), (g1, v2), (g2, v1), (g2, v2)} for g1, g2 in combinations(gpus, 2) for v1, v2 in combinations(envs, 2)]
            if any(q <= cells and not any(q <= part for part in split) for q in quads):
                notes.append(f"not split: {knob} at {at}: its cells are not comparable with one another: " + "; ".join(
                    f"{', '.join(f'{short_gpu(g)}/{v}' for g, v in sorted(e['cells']))} ran with {e['variant']}" for e in entries)
                    + " (the same rule keeps them out of the cross-version and loss tables)")
        return notes

    # --- what changed underneath
    def pairs(self) -> list[tuple[str, Group, Group]]:
        """(kind, baseline group, other group) for every env pair on one GPU and GPU pair on one env."""
        out = []
        for groups in self.sets().values():
            for across, rank in (("env", self.env_rank), ("gpu", self.gpu_rank)):
                other = "gpu" if across == "env" else "env"
                by_other: dict[str, list[Group]] = {}
                for g in groups:
                    by_other.setdefault(getattr(g, other), []).append(g)
                for gs in by_other.values():
                    gs.sort(key=lambda g: rank[getattr(g, across)])
                    out += [(across, gs[0], g) for g in gs[1:]]
        return sorted(out, key=lambda t: (t[0], self.gpu_rank[t[1].gpu], self.env_rank[t[1].env],
                                          t[1].rungs[0][2] if t[1].rungs[0][2] is not None else 1 << 30, t[1].label,
                                          t[1].workload.get("batch_size") or 0, t[1].workload.get("seq_len") or 0,
                                          self.gpu_rank[t[2].gpu], self.env_rank[t[2].env]))

    def underneath_table(self) -> Table:
        table = Table("underneath", "What changed underneath: kernels of the same rung, baseline vs other (lm_head GEMM and "
                      "attention first, then the largest changes in time per step)", [
            ("pair", "A -> B"), ("rung", "rung"), ("what", "what"), ("a", "A"), ("b", "B"), ("impact", "B - A us/step")])
        hidden = 0
        for across, a, b in self.pairs():
            pair = f"{a.gpu}: {a.env} -> {b.env}" if across == "env" else f"{a.env}: {a.gpu} -> {b.gpu}"
            result = kernel_diff(a.explain, b.explain, top=None if self.show_all else TOP_UNDERNEATH)
            if result is None:
                continue
            rows, more = result
            hidden += more
            for what, va, vb, impact in rows:
                table.rows.append({"pair": pair, "rung": f"{a.label} ({a.batch})", "what": what, "a": va, "b": vb, "impact": impact})
        if hidden:
            table.notes.append(f"per pair: the lm_head GEMM, the attention kernels and the {TOP_UNDERNEATH} changes with the largest "
                               f"|B - A| time per step; {hidden} smaller changes not shown (--all shows every row)")
        if not table.rows:
            table.notes.append("no pair of comparable runs has kernel profiles on both sides (explain.kernels)")
        return table

    def libraries_table(self) -> Table:
        table = Table("libraries", "Library and driver versions that differ between paired envs (same GPU) or GPUs (same env)", [
            ("pair", "A -> B"), ("what", "what"), ("a", "A"), ("b", "B")])
        done = set()
        for across, a, b in self.pairs():
            pair = f"{a.gpu}: {a.env} -> {b.env}" if across == "env" else f"{a.env}: {a.gpu} -> {b.gpu}"
            if pair in done:
                continue
            done.add(pair)
            fa, fb = _env_facts(a, across), _env_facts(b, across)
            for k in sorted(set(fa) | set(fb)):
                if fa.get(k) != fb.get(k):
                    table.rows.append({"pair": pair, "what": k, "a": fa.get(k), "b": fb.get(k)})
        if not table.rows:
            table.notes.append("no paired envs or GPUs, or no library version differs between them")
        return table

    # --- loss parity
    def pair_parity(self, base: Group, other: Group) -> dict:
        """The loss rule of loss_table for two groups (a knob's run against its starting point): over their common
        steps, from the longer warm-up of the two."""
        upto = min((g.loss_steps for g in (base, other) if g.loss_steps), default=None)
        start = max(((r.get("workload") or {}).get("warmup_steps") or 0 for g in (base, other) for r in g.records), default=0)
        return loss_parity(base, other, upto, start, self.loss_tol)

    def loss_table(self) -> Table:
        tol = self.loss_tol
        table = Table("loss", f"Loss parity: same workload, flags and steps across cells; flagged when final or mean loss differs from the baseline cell by more than {tol:.1%} (relative)", [
            ("rung", "rung"), ("batch", "B, T"), ("gpu", "GPU"), ("env", "env"), ("steps", "steps"), ("final", "final loss"),
            ("mean", "mean loss"), ("d_final", "delta final"), ("d_mean", "delta mean"), ("parity", "parity")])
        for groups in self.sets().values():
            if len(groups) < 2:
                continue
            groups = sorted(groups, key=lambda g: (self.gpu_rank[g.gpu], self.env_rank[g.env]))
            upto = min((g.loss_steps for g in groups if g.loss_steps), default=None)
            start = max(((r.get("workload") or {}).get("warmup_steps") or 0 for g in groups for r in g.records), default=0)
            base = groups[0]
            for g in groups:
                p = loss_parity(base, g, upto, start, tol)
                table.rows.append({"rung": g.label, "batch": g.batch, "gpu": g.gpu, "env": g.env, "steps": upto,
                                   "final": _round(p["final"]), "mean": _round(p["mean"]),
                                   "d_final": None if g is base else fmt_signed_pct(p["d_final"]),
                                   "d_mean": None if g is base else fmt_signed_pct(p["d_mean"]), "parity": p["parity"],
                                   "run_ids": run_ids(g) if g is base else run_ids(base, g)})
        if not table.rows:
            table.notes.append("no comparison set ran in more than one (GPU, env) cell")
        table.notes.append(f"tolerance: {tol:.1%} relative, on the loss at the last common step and on the mean from the "
                           f"longest warm-up of the set to that step; repeats averaged. Same seed and data on both sides.")
        return table

    # --- the user's reference numbers
    @staticmethod
    def ref_estimate(ref: Group) -> stats.Estimate:
        """The logged tokens/s (one sample), else the one derived from the logged step time."""
        logged = (ref.first.get("summary") or {}).get("tokens_per_s")
        est = ref.throughput
        return stats.Estimate(logged if logged is not None else est.point, None, est.n, est.repeats)

    def reference_ladder_tables(self) -> list[Table]:
        """The user's log as ladders (per B, T and compile mode): their own table, rebuilt from the records."""
        ladders: dict[tuple, list[Group]] = {}
        for ref in self.ds.references:
            w = ref.workload
            ladders.setdefault((ref.first.get("plan"), w.get("batch_size"), w.get("seq_len"), w.get("compile")), []).append(ref)
        tables = []
        for (plan, b, t, comp), refs in sorted(ladders.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][3] == "off"), kv[0][1] or 0)):
            table = Table("reference", f"Reference ladder (the user's log, {refs[0].gpu}): plan {plan}, B={b}, T={t}, compile {comp}", [
                ("rung", "rung"), ("line", "log line"), ("torch", "torch"), ("ms", "ms/step"), ("tokens_s", "tokens/s (logged)"),
                ("memory", "nvidia-smi MiB"), ("first", "first step ms"), ("watts", "W"),
                ("vs_previous", "vs previous rung"), ("vs_first", "vs first rung")])
            first = previous = None
            rung_of = {}
            for ref in sorted(refs, key=lambda g: (g.first.get("rung_index") or 0, (g.first.get("reference") or {}).get("line") or 0)):
                info = ref.first.get("reference") or {}
                row = {"rung": ref.label, "line": info.get("line"), "torch": info.get("torch") or "unknown"}
                if ref.first["status"] != "ok":
                    table.rows.append({**row, "ms": ref.first["status"]})
                    continue
                rung = ref.first.get("rung")
                if rung_of and rung not in rung_of:
                    previous = rung_of[list(rung_of)[-1]]
                rung_of.setdefault(rung, ref)
                est = self.ref_estimate(ref)
                row.update(ms=ref.ms_median, tokens_s=est.point, memory=ref.memory_bytes,
                           first=(ref.first.get("summary") or {}).get("first_step_ms"), watts=info.get("watts"),
                           vs_previous=Cell(stats.ratio(self.ref_estimate(previous), est)[0], "ratio") if previous else None,
                           vs_first=Cell(stats.ratio(self.ref_estimate(first), est)[0], "ratio") if first else None)
                table.rows.append(row)
                first = first or ref
            tables.append(table)
        return tables

    def reference_table(self) -> Table:
        table = Table("reference", "Reference: the user's own logged numbers (kind=reference, one sample each) beside measured runs of the same rung, B and T", [
            ("rung", "rung"), ("batch", "B, T"), ("source", "source"), ("torch", "ref torch"), ("ref_ms", "ref ms"),
            ("ref_tokens_s", "ref tokens/s"), ("ref_mem", "ref MiB (nvidia-smi)"), ("measured", "measured on"),
            ("ms", "ms/step"), ("tokens_s", "tokens/s"), ("mem", "device used MiB"), ("d_tokens_s", "measured vs ref tokens/s"),
            ("differs", "conditions that differ")])
        for ref in self.ds.references:
            r = ref.first
            info = r.get("reference") or {}
            base = {"rung": r.get("rung"), "batch": ref.batch, "source": f"{info.get('source', '?')}:{info.get('line', '?')}",
                    "torch": info.get("torch") or "unknown"}
            if r["status"] != "ok":
                table.rows.append({**base, "ref_ms": r["status"]})
                continue
            ref_est = self.ref_estimate(ref)
            base.update(ref_ms=ref.ms_median, ref_tokens_s=ref_est.point, ref_mem=ref.memory_bytes)
            matches = [g for g in self.ds.groups
                       if r.get("rung") in {rung for _p, rung, _i in g.rungs}
                       and g.workload.get("batch_size") == ref.workload.get("batch_size")
                       and g.workload.get("seq_len") == ref.workload.get("seq_len")]
            if not matches:
                table.rows.append({**base, "measured": "(none)"})
            for g in matches:
                table.rows.append({**base, "measured": f"{g.gpu} / {g.env}", "ms": g.ms_median, "tokens_s": g.throughput.point,
                                   "mem": g.summary_median("device_used_bytes"),
                                   "d_tokens_s": Cell(stats.ratio(ref_est, g.throughput, self.floor)[0]),
                                   "differs": _ref_differences(ref, g)})
        if not self.ds.references:
            table.notes.append("no reference records read (they live in results/reference/)")
        else:
            table.notes.append("reference timings are the log's single 'Step 49' line: no noise estimate; "
                               "memory is nvidia-smi's (whole device), compared with the measured NVML device-used value")
        return table

    # --- sweeps
    def sweep_records(self) -> list[dict]:
        """Every measured record that belongs to a sweep, ok or not (the filters applied); a failed one that does
        not say its device is under "left out" only, as everywhere."""
        records = [r for g in self.ds.groups for r in g.records] + [r for r, _gpu, _env in self.failed_runs()]
        return [r for r in records if r.get("sweep")]

    def sweeps_table(self) -> Table:
        """One row per swept value of each curve (harness.sweep: a sweep of one rung in one env on one device),
        with the knee and the lm_head GEMM kernel, so a size change that switched kernels shows."""
        table = Table("sweeps", "Sweeps: throughput and memory against the swept value", [
            ("sweep", "sweep"), ("rung", "rung"), ("gpu", "GPU"), ("env", "env"), ("value", "value"), ("status", "status"),
            ("runs", "runs"), ("tokens_s", "tokens/s"), ("vs_best", "vs best"), ("memory", "peak MiB"),
            ("memory_source", "memory"), ("lm_head", "lm_head kernel"), ("mark", "note")])
        for row in sweepmod.sweep_rows(self.sweep_records()):
            table.rows.append({"sweep": f"{row['sweep']} ({row['field']})", "rung": row["rung"], "gpu": row["device"],
                               "env": row["env"], "value": row["value"], "status": row["status"], "runs": row["runs"],
                               "tokens_s": row["tokens_per_s"], "vs_best": fmt_pct(row["vs_best"]),
                               "memory": row["peak_memory_bytes"], "memory_source": row["memory_source"],
                               "lm_head": _short(row["lm_head_kernel"], 60), "mark": row["mark"]})
        if table.rows:
            table.notes += sweepmod.sweep_notes()
        else:
            table.notes.append("no sweep records")
        return table

    # --- the fastest found (harness.fastest builds on this module, hence imported here)
    def fastest_tables(self) -> list[Table]:
        from harness import fastest

        return fastest.overview(self) + [fastest.search_table(self, s) for s in fastest.searches(self)]

    def left_out_table(self) -> Table:
        table = Table("left-out", "Left out, and why", [("what", "record"), ("why", "why")])
        table.rows = [{"what": w, "why": y} for w, y in self.ds.left_out]
        table.notes = list(self.ds.notes)
        return table

    def tables(self, names=TABLES) -> list[Table]:
        effects = self.knob_effects() if {"knobs", "factors"} & set(names) else None
        makers = {
            "ladder": self.ladder_tables, "versions": self.versions_table, "gpus": self.gpus_table,
            "knobs": lambda: self.knobs_table(effects), "factors": lambda: self.factors_table(effects),
            "underneath": self.underneath_table, "libraries": self.libraries_table, "loss": self.loss_table,
            "reference": lambda: [self.reference_table(), *self.reference_ladder_tables()], "sweeps": self.sweeps_table,
            "fastest": self.fastest_tables, "left-out": self.left_out_table,
        }
        out = []
        for name in names:
            made = makers[name]()
            out += made if isinstance(made, list) else [made]
        return out

    def footer(self) -> list[str]:
        return [stats.rule_text(self.floor, self.ds.groups[0].n_boot if self.ds.groups else stats.N_BOOT),
                f"Loss parity tolerance: {self.loss_tol:.1%} relative.",
                ("Baselines: env = oldest torch in each comparison (--baseline-env to choose); GPU = lowest compute "
                 "capability (--baseline-gpu). " + COMPARABLE_RULE)]


def loss_parity(base: Group, g: Group, upto: int | None, start: int, tol: float) -> dict:
    """The loss rule: g's loss at step upto-1 and its mean over steps start..upto-1 (repeats averaged), each relative
    to base's; parity "DRIFT" when either differs by more than tol, "ok" otherwise ("baseline" for base itself,
    "no loss" when neither can be computed). Keys: final, mean, d_final, d_mean, parity, steps."""
    bf, bm = base.losses(upto, start)
    f, m = g.losses(upto, start)
    df = None if None in (f, bf) or not bf else (f - bf) / abs(bf)
    dm = None if None in (m, bm) or not bm else (m - bm) / abs(bm)
    if g is base:
        parity = "baseline"
    elif df is None and dm is None:
        parity = "no loss"
    else:
        parity = "DRIFT" if any(d is not None and abs(d) > tol for d in (df, dm)) else "ok"
    return {"final": f, "mean": m, "d_final": df, "d_mean": dm, "parity": parity, "steps": upto}


def base_env_of(cell) -> dict:
    """The environment of a cross-table cell: a Group, or a failed run's (record, device, env)."""
    return cell.environment if isinstance(cell, Group) else (cell[0].get("environment") or {})


def isa_difference(env_a: dict, env_b: dict) -> str | None:
    """'different CPU ISA: ...' when two CPU records' ISA flags (environment.cpu.isa) or torch's kernel path
    differ; None when they agree or either record does not say (an older record, a GPU)."""
    cpu_a, cpu_b = env_a.get("cpu") or {}, env_b.get("cpu") or {}
    if env_a.get("gpu") or env_b.get("gpu"):
        return None
    isa_a, isa_b = cpu_a.get("isa"), cpu_b.get("isa")
    known_a, known_b = isinstance(isa_a, dict) and bool(isa_a), isinstance(isa_b, dict) and bool(isa_b)
    if known_a != known_b:
        return (f"CPU ISA recorded for one side only ({isa_tag(isa_a if known_a else isa_b)}): the other record does "
                f"not say, so a difference in ISA can be neither named nor ruled out")
    if not known_a:
        return None
    only_a = sorted(k for k, v in isa_a.items() if v and not isa_b.get(k))
    only_b = sorted(k for k, v in isa_b.items() if v and not isa_a.get(k))
    cap_a, cap_b = cpu_a.get("torch_capability"), cpu_b.get("torch_capability")
    parts = [f"{isa_tag(isa_a)} vs {isa_tag(isa_b)}"] if isa_tag(isa_a) != isa_tag(isa_b) else []
    if only_a:
        parts.append(f"only the first has {', '.join(only_a)}")
    if only_b:
        parts.append(f"only the second has {', '.join(only_b)}")
    if cap_a and cap_b and cap_a != cap_b:
        parts.append(f"torch's CPU kernels {cap_a} vs {cap_b}")
    return "different CPU ISA: " + "; ".join(parts) if parts else None


def run_ids(*groups: Group) -> list[str]:
    """The run ids a table row rests on (rows carry them beside their columns; renderers show only columns)."""
    return [r["run_id"] for g in groups for r in g.records]


def fmt_signed_pct(x):
    return None if x is None else f"{round(x * 100, 2) or 0.0:+.2f}%"  # no "-0.00%"


def _round(x):
    return None if x is None else round(x, 4)


def _show(v) -> str:
    return "null" if v is None else str(v)


def _value_key(name: str, v) -> tuple:
    order = VALUE_ORDER.get(name)
    if order and v in order:
        return (0, order.index(v), "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, (int, float)):
        return (1, v, "")
    return (2, 0, str(v))


def _diff(a: Group, b: Group) -> list[tuple[str, object, object]]:
    wa, wb = knob_fields(a.workload), knob_fields(b.workload)
    # a field added after a record was written reads as its default there (lm_head_loss: plain)
    keys = sorted(set(wa) | set(wb))
    out = [(k, wa.get(k, ADDED_FIELD_DEFAULTS.get(k)), wb.get(k, ADDED_FIELD_DEFAULTS.get(k))) for k in keys]
    out = [(k, va, vb) for k, va, vb in out if va != vb]
    if a.flags_hash != b.flags_hash:
        fa, fb = a.flags, b.flags
        out += [(f"flag:{k}", fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
    return out


def _differences(a: Group, b: Group) -> str:
    """What keeps two groups apart under the comparability rule, in words."""
    diff = _diff(a, b)
    parts = [f"{'flag ' if n.startswith('flag:') else ''}{n.removeprefix('flag:')} {_show(va)} vs {_show(vb)}" for n, va, vb in diff]
    if a.workload_hash != b.workload_hash and not any(not n.startswith("flag:") for n, _va, _vb in diff):
        parts.append(f"workload_hash ({a.workload_hash[:8]} vs {b.workload_hash[:8]}) with equal workload fields")
    if a.flags_hash != b.flags_hash and not any(n.startswith("flag:") for n, _va, _vb in diff):
        parts.append(f"flags hash ({a.flags_hash[:8]} vs {b.flags_hash[:8]}) with equal requested flags")
    return "; ".join(parts) or "nothing recorded"


def _brief_reason(reason: str | None, limit: int = 160) -> str:
    """A failure reason cut at a sentence end near `limit` characters (the full text is under "left out")."""
    if not reason:
        return "no reason given"
    if len(reason) <= limit:
        return reason
    cut = reason.rfind(". ", 0, limit)
    return reason[: cut + 1 if cut > 0 else limit] + " ... (in full under left out)"


def _variant_labels(groups: list[Group]) -> list[str]:
    """Short labels that tell apart groups of one rung which the comparability rule keeps apart."""
    names: set[str] = set()
    for a, b in combinations(groups, 2):
        names |= {n for n, _va, _vb in _diff(a, b)}
    labels = []
    for g in groups:
        values = {**knob_fields(g.workload), **{f"flag:{k}": v for k, v in g.flags.items()}}
        parts = [f"{n.removeprefix('flag:')}={_show(values.get(n))}" for n in sorted(names)]
        labels.append(", ".join(parts) or f"workload_hash {g.workload_hash[:8]}, flags hash {g.flags_hash[:8]}")
    return labels


def _flatten(obj, prefix="") -> dict:
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    elif not isinstance(obj, list):
        out[prefix[:-1]] = obj
    return out


def _env_facts(g: Group, across: str) -> dict:
    keys = ENV_KEYS if across == "env" else GPU_KEYS
    facts = {k: v for k, v in _flatten(g.environment).items() if k.startswith(keys) and v is not None}
    # the worker stores the libraries the process mapped under explain.libraries.mapped (harness/explain.py)
    for lib, info in ((g.explain.get("libraries") or {}).get("mapped") or {}).items():
        if isinstance(info, dict) and info.get("version") is not None:
            facts[f"library {lib}"] = info["version"]
    return facts


def _short(name, width=90):
    name = str(name)
    return name if len(name) <= width else name[: width - 3] + "..."


def _kernel_base(name: str) -> str:
    """A kernel's short name: no return type, namespace or template arguments ('void ns::flash_fwd_kernel<...>(...)'
    -> 'flash_fwd_kernel'), except for generic wrappers ('cutlass::Kernel2<fmha_...>' -> its first argument)."""
    text = str(name).removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    head, _sep, args = text.partition("<")
    base = re.split(r"[(]", head, maxsplit=1)[0].split("::")[-1].strip()
    if re.fullmatch(r"[Kk]ernel\d*", base) and args:
        base = re.split(r"[,<>(]", args, maxsplit=1)[0].split("::")[-1].strip() or base
    return _short(base or text, 60)


def kernel_diff(ea: dict, eb: dict, share_min: float = 0.01, change_min: float = 0.2, top: int | None = TOP_UNDERNEATH):
    """How the kernels of B differ from A: (rows, hidden), rows = (what, A, B, B - A us/step). The lm_head GEMM,
    the attention kernels and the SDPA backend come first; then category time shares that moved by 2 points or
    more, kernels that appeared or disappeared (>= share_min of kernel time) and kernels whose per-step time
    changed by change_min or more, ranked by time impact |B - A| per step: the first `top` (None: all), and
    hidden = how many were left out. None when neither side has a kernel profile."""
    ka, kb = (ea or {}).get("kernels") or {}, (eb or {}).get("kernels") or {}
    if not ka.get("available") and not kb.get("available"):
        return None
    if not ka.get("available") or not kb.get("available"):
        state = lambda k: "available" if k.get("available") else (k.get("reason") or "not profiled")
        return [("kernel profile", state(ka), state(kb), None)], 0

    def us(entry: dict | None, with_share: bool = True) -> str:
        entry = entry or {}
        if entry.get("per_step_us") is None:
            return "-"
        share = f" ({fmt_pct(entry['share'])})" if with_share and entry.get("share") is not None else ""
        return f"{entry['per_step_us']:,.0f} us/step{share}"

    def impact(a: dict | None, b: dict | None) -> float | None:
        a_us, b_us = (a or {}).get("per_step_us"), (b or {}).get("per_step_us")
        return None if a_us is None and b_us is None else (b_us or 0.0) - (a_us or 0.0)

    fixed = []
    la, lb = ka.get("lm_head_gemm") or {}, kb.get("lm_head_gemm") or {}
    name = lambda g: _short(g.get("name") or "not identified", 70)
    fixed.append(("lm_head GEMM" + (" (changed)" if la.get("name") != lb.get("name") else " (same kernel)"),
                  f"{name(la)}, {us(la, False)}", f"{name(lb)}, {us(lb, False)}", impact(la, lb)))
    att_a, att_b = ka.get("attention_kernels") or [], kb.get("attention_kernels") or []
    ca, cb = ka.get("by_category") or {}, kb.get("by_category") or {}
    same_att = set(att_a) == set(att_b)
    names = lambda ks: ", ".join(_kernel_base(k) for k in ks) or "none"
    fixed.append(("attention kernels" + (" (same)" if same_att else " (changed)") + ", time in attention",
                  f"{names(att_a)}; {us(ca.get('attention'))}",
                  f"{'same kernels' if same_att and att_b else names(att_b)}; {us(cb.get('attention'))}",
                  impact(ca.get("attention"), cb.get("attention"))))
    if ka.get("sdpa_backend") != kb.get("sdpa_backend"):
        fixed.append(("sdpa backend", ka.get("sdpa_backend"), kb.get("sdpa_backend"), None))
    ranked = []
    for cat in sorted(set(ca) | set(cb)):
        sa, sb = (ca.get(cat) or {}).get("share"), (cb.get(cat) or {}).get("share")
        if cat != "attention" and (sa is None or sb is None or abs(sa - sb) >= 0.02):
            ranked.append((f"time in category {cat}", us(ca.get(cat)), us(cb.get(cat)), impact(ca.get(cat), cb.get(cat))))
    ta = {k["name"]: k for k in ka.get("top") or [] if k.get("name")}
    tb = {k["name"]: k for k in kb.get("top") or [] if k.get("name")}
    for n in set(tb) - set(ta):
        if (tb[n].get("share") or 0) >= share_min:
            ranked.append((f"appeared [{tb[n].get('category')}]: {_short(n, 70)}", "-", us(tb[n]), impact(None, tb[n])))
    for n in set(ta) - set(tb):
        if (ta[n].get("share") or 0) >= share_min:
            ranked.append((f"disappeared [{ta[n].get('category')}]: {_short(n, 70)}", us(ta[n]), "-", impact(ta[n], None)))
    for n in set(ta) & set(tb):
        a_us, b_us = ta[n].get("per_step_us") or 0, tb[n].get("per_step_us") or 0
        if a_us and abs(b_us / a_us - 1) >= change_min and max(ta[n].get("share") or 0, tb[n].get("share") or 0) >= share_min:
            ranked.append((f"changed [{ta[n].get('category')}]: {_short(n, 70)}", us(ta[n]), us(tb[n]), impact(ta[n], tb[n])))
    ranked.sort(key=lambda r: (-abs(r[3] or 0.0), r[0]))
    shown = ranked if top is None else ranked[:top]
    return fixed + shown, len(ranked) - len(shown)


def _ref_differences(ref: Group, g: Group) -> str:
    """Known conditions of a reference record that a measured group does not share (GPU class, torch, workload)."""
    diffs = []
    classes = re.findall(r"[A-Z]\d{2,4}", ref.gpu)
    if classes and not any(c in g.gpu for c in classes):
        diffs.append(f"GPU {ref.gpu} vs {g.gpu}")
    ref_torch = (ref.first.get("reference") or {}).get("torch")
    if ref_torch and not str(g.torch_version or "").startswith(ref_torch):
        diffs.append(f"torch {ref_torch} vs {g.torch_version or 'unknown'}")
    known = {k: v for k, v in ref.workload.items() if v is not None and k not in NOT_IN_WORKLOAD_HASH}
    diffs += [f"{k} {v} vs {g.workload.get(k)}" for k, v in sorted(known.items()) if g.workload.get(k) != v]
    unknown = sorted(k for k, v in ref.workload.items()
                     if v is None and k not in NOT_IN_WORKLOAD_HASH + ("memory_budget_gib",))
    text = "; ".join(diffs) or "none of the known ones"
    if unknown:
        text += f" (unknown in the log: {', '.join(unknown)})"
    return text


# ---------------------------------------------------------------- rendering

def _display_rows(table: Table) -> list[list]:
    keys = [k for k, _h in table.columns]
    fmt = {"ms": fmt_ms, "ref_ms": fmt_ms, "first": fmt_ms,
           "tokens_s": fmt_int, "ref_tokens_s": fmt_int, "memory": fmt_mib, "ref_mem": fmt_mib, "mem": fmt_mib,
           "mfu": fmt_pct, "impact": lambda x: f"{x:+,.0f}"}
    out = []
    for row in table.rows:
        line = []
        for k in keys:
            v = row.get(k)
            if isinstance(v, (Cell, Mfu)):
                v = v.text()
            elif k in fmt and isinstance(v, (int, float)):
                v = fmt[k](v)
            line.append("" if v is None else v)
        out.append(line)
    return out


def render_text(tables: list[Table], header: list[str], footer: list[str], markdown: bool = False) -> str:
    parts = [("\n".join(header) + "\n") if header else ""]
    for t in tables:
        if markdown:
            parts.append(f"### {t.title}\n")
        else:
            parts.append(f"== {t.title}")
        if t.rows:
            parts.append(tabulate(_display_rows(t), headers=[h for _k, h in t.columns],
                                  tablefmt="github" if markdown else "simple", disable_numparse=True))
        for n in t.notes:
            parts.append(f"{'- ' if markdown else '  note: '}{n}")
        parts.append("")
    parts += [("- " if markdown else "") + f for f in footer]
    return "\n".join(parts).rstrip() + "\n"


def _csv_value(v):
    return "" if v is None else v


# CSV holds raw numbers: every column with a unit says it in its name (a delta column is a fraction, 0.12 = +12%).
CSV_NAMES = {"ms": "ms_per_step", "ref_ms": "ref_ms_per_step", "first": "first_step_ms", "tokens_s": "tokens_per_s",
             "ref_tokens_s": "ref_tokens_per_s", "memory": "memory_bytes", "ref_mem": "ref_device_used_bytes",
             "mem": "device_used_bytes", "mfu": "mfu_fraction", "mfu_ds": "mfu_datasheet_fraction",
             "mfu_meas": "mfu_measured_fraction", "watts": "watts", "impact": "impact_us_per_step"}


def _csv_columns(t: Table) -> list[tuple[str, list[str]]]:
    """(row key, CSV column names) per table column."""
    out = []
    for k, _h in t.columns:
        values = [r.get(k) for r in t.rows]
        cells = [v for v in values if isinstance(v, Cell)]
        if cells:
            bounds = "range" if all(c.delta.bounds == "range" for c in cells) else "ci"
            out.append((k, [f"{k}_fraction", f"{k}_{bounds}_low_fraction", f"{k}_{bounds}_high_fraction", f"{k}_verdict"]))
        elif any(isinstance(v, Mfu) for v in values):
            out.append((k, [CSV_NAMES.get(k, k), f"{k}_peak_suspect"]))
        else:
            out.append((k, [CSV_NAMES.get(k, k)]))
    return out


def _csv_fields(v, width: int) -> list:
    """The CSV fields of one table cell: 4 for a delta column, 2 for an MFU column, else 1."""
    if width == 4:
        d = v.delta if isinstance(v, Cell) else stats.Delta(None, verdict="")
        return [_csv_value(d.value), _csv_value(d.low), _csv_value(d.high), d.verdict]
    if width == 2:
        return [v.value, v.suspect] if isinstance(v, Mfu) else [_csv_value(v), ""]
    return [_csv_value(v)]


def render_csv(tables: list[Table]) -> str:
    buf = io.StringIO()
    for i, t in enumerate(tables):
        if len(tables) > 1:
            if i:
                buf.write("\n")
            buf.write(f"# {t.name}: {t.title}\n")
        columns = _csv_columns(t)
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([name for _k, names in columns for name in names])
        for r in t.rows:
            w.writerow([x for k, names in columns for x in _csv_fields(r.get(k), len(names))])
    return buf.getvalue()


def _json_value(v):
    if isinstance(v, Cell):
        return {**v.delta.to_dict(), "style": v.style, "text": v.text()}
    if isinstance(v, Mfu):
        return {"value": v.value, "peak_suspect": v.suspect, "text": v.text()}
    return v


def render_json(tables: list[Table], ds: Dataset, footer: list[str], warnings: list[str]) -> str:
    doc = {
        "records": ds.valid_records, "groups": len(ds.groups), "references": len(ds.references),
        "tables": [{"name": t.name, "title": t.title, "columns": [k for k, _h in t.columns], "headers": [h for _k, h in t.columns],
                    "rows": [{k: _json_value(r.get(k)) for k, _h in t.columns} for r in t.rows], "notes": t.notes} for t in tables],
        "left_out": [{"what": w, "why": y} for w, y in ds.left_out],
        "notes": ds.notes, "warnings": warnings, "footer": footer,
    }
    return json.dumps(doc, indent=1, default=str) + "\n"


def header_lines(ds: Dataset, paths) -> list[str]:
    ok = sum(len(g.records) for g in ds.groups)
    lines = [f"{ds.valid_records} valid record(s) under {', '.join(map(str, paths))}: {ok} ok measured run(s) in "
             f"{len(ds.groups)} comparable group(s), {len(ds.references)} reference(s), "
             + (f"{len(ds.peers)} peer record(s), " if ds.peers else "") + f"{len(ds.failed)} not ok"
             + (f", {ds.filtered} filtered out" if ds.filtered else "") + "."]
    if ds.env_order:
        lines.append("envs (oldest torch first): " + ", ".join(f"{e} ({ds.env_versions.get(e) or '?'})" for e in ds.envs()))
    if ds.gpu_order:
        lines.append("devices: " + ", ".join(ds.gpus()))
    return lines


# ---------------------------------------------------------------- command line

def parser() -> argparse.ArgumentParser:
    p = common_parser("python -m harness.compare", __doc__.split("\n\n")[0])
    p.add_argument("--format", choices=FORMATS, default="text")
    p.add_argument("--table", action="append", default=[], choices=TABLES, help="only this table (repeatable; default all)")
    return p


def common_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """Options shared by harness.compare and harness.report."""
    p = argparse.ArgumentParser(prog=prog, description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=stats.rule_text())
    p.add_argument("paths", nargs="+", metavar="PATH", help="record files or directories (searched recursively)")
    p.add_argument("--baseline-env", metavar="ENV", help="env every other env is compared with (default: the oldest torch)")
    p.add_argument("--baseline-gpu", metavar="GPU", help="GPU (name or unique part of it) every other GPU is compared with "
                   "(default: lowest compute capability)")
    p.add_argument("--env", action="append", default=[], metavar="ENV", help="only this env (repeatable); reference "
                   "records are kept beside it (they are not an env; --env reference for them alone)")
    p.add_argument("--gpu", action="append", default=[], metavar="GPU", help="only GPUs whose name contains this (repeatable)")
    p.add_argument("--plan", action="append", default=[], metavar="PLAN", help="only this plan (repeatable)")
    p.add_argument("--rung", action="append", default=[], metavar="RUNG", help="only this rung (repeatable)")
    p.add_argument("--noise-floor", type=float, default=stats.NOISE_FLOOR, metavar="FRACTION",
                   help=f"smallest relative delta called beyond noise (default {stats.NOISE_FLOOR})")
    p.add_argument("--loss-tol", type=float, default=DEFAULT_LOSS_TOL, metavar="FRACTION",
                   help=f"relative loss difference flagged as drift (default {DEFAULT_LOSS_TOL})")
    p.add_argument("--boot", type=int, default=stats.N_BOOT, metavar="N", help=f"bootstrap resamples (default {stats.N_BOOT})")
    p.add_argument("--all", action="store_true", help=f"what changed underneath: every kernel change, not the {TOP_UNDERNEATH} "
                   "largest per pair")
    return p


def resolve_baselines(p: argparse.ArgumentParser, args, ds: Dataset) -> tuple[str | None, str | None]:
    env = gpu = None
    if args.baseline_env:
        envs = ds.envs()
        matches = [e for e in envs if e == args.baseline_env] or [e for e in envs if e.split("@")[0] == args.baseline_env]
        if len(matches) != 1:
            p.error(f"--baseline-env {args.baseline_env}: {'ambiguous' if matches else 'no such env'} (envs here: {', '.join(envs) or 'none'})")
        env = matches[0]
    if args.baseline_gpu:
        gpus = ds.gpus()
        matches = [g for g in gpus if g == args.baseline_gpu] or [g for g in gpus if args.baseline_gpu.lower() in g.lower()]
        if len(matches) != 1:
            p.error(f"--baseline-gpu {args.baseline_gpu}: {'matches ' + ', '.join(matches) if matches else 'no such GPU'} (GPUs here: {', '.join(gpus) or 'none'})")
        gpu = matches[0]
    return env, gpu


def analyse(args, p: argparse.ArgumentParser, warn) -> tuple[Dataset, Compare]:
    """Shared by harness.compare and harness.report: load, check options, build the comparison."""
    if not 0 <= args.noise_floor < 1:
        p.error("--noise-floor must be in [0, 1)")
    if args.loss_tol <= 0:
        p.error("--loss-tol must be positive")
    if args.boot < 100:
        p.error("--boot must be at least 100")
    filters = Filters(args.env, args.gpu, args.plan, args.rung)
    ds = load(args.paths, warn, filters, n_boot=args.boot)
    if not ds.valid_records:
        print(f"error: no valid record found under {', '.join(args.paths)}", file=sys.stderr)
        sys.exit(1)
    # References pass --env (Filters): an --env that matches no record still leaves nothing to compare.
    if not (ds.groups or ds.references or ds.peers or ds.failed or ds.left_out) or (args.env and not ds.kept_envs & set(args.env)):
        print(f"error: {ds.valid_records} valid record(s), but none matches the filters", file=sys.stderr)
        sys.exit(1)
    env, gpu = resolve_baselines(p, args, ds)
    return ds, Compare(ds, env, gpu, args.noise_floor, args.loss_tol, show_all=args.all)


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    warnings: list[str] = []

    def warn(line: str) -> None:
        warnings.append(line)
        print(line, file=sys.stderr)

    ds, cmp = analyse(args, p, warn)
    tables = cmp.tables(args.table or TABLES)
    footer = cmp.footer()
    if args.format == "json":
        out = render_json(tables, ds, footer, warnings)
    elif args.format == "csv":
        out = render_csv(tables)
    else:
        out = render_text(tables, header_lines(ds, args.paths), footer, markdown=args.format == "markdown")
    sys.stdout.write(out)
    return 0


if __name__ == "__main__":
    # run as harness.compare, not __main__: harness.fastest builds its tables from this module's classes
    sys.exit(importlib.import_module("harness.compare").main())
