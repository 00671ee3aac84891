"""One comparable cell of records (Group) and the record accessors every table needs.

A Group is the runs of one workload_hash and flags hash (the comparability rule, harness.record.view.RecordView.set_key)
in one (env, GPU) cell, repeats merged: its throughput estimate (harness.analysis.stats), memory, losses and notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from harness import contention
from harness.analysis import stats
from harness.record.view import RecordView


def run_origin(record: dict) -> str:
    """Which job a run came from, as far as the record says: its plan and repeat, or the sweep it is a point of."""
    sweep = record.get("sweep")
    if sweep:
        return f"sweep {sweep.get('name')} {sweep.get('field')}={sweep.get('value')}"
    return f"plan {record.get('plan')} repeat {record.get('repeat')}"


def run_ids(*groups: Group) -> list[str]:
    """The run ids a table row rests on (rows carry them beside their columns; renderers show only columns)."""
    return [r["run_id"] for g in groups for r in g.records]


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
        """What must be equal for two groups to be compared across env or GPU: RecordView.set_key of its records."""
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
        return [RecordView(r).timed_ms for r in self.records]

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
        return stats.throughput(self.samples, RecordView(self.first).tokens_per_step, key=repr(self.key), n_boot=self.n_boot)

    @property
    def ms_median(self) -> float | None:
        pooled = [x for s in self.samples for x in s]
        return float(np.median(pooled)) if pooled else None

    @property
    def memory(self) -> tuple[str, list]:
        metric = RecordView(self.first).peak_memory()[1]
        return metric, [value for value, _m in (RecordView(r).peak_memory() for r in self.records) if value is not None]

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
