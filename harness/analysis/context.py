"""Compare: one dataset with its baselines, noise floor and loss tolerance; the context every analysis shares.

It holds what several analyses need (pairs, ladders, comparison sets, the delta rules) and a memo of their typed
results, so the tables, the findings, the verdict and the report read one computation. The analyses and their tables
live by theme in harness.analysis.tables (their registry is harness.analysis.tables.TABLES); nothing here imports them.
"""

from __future__ import annotations

from harness.analysis import stats
from harness.analysis.dataset import Dataset
from harness.analysis.devices import device_word
from harness.analysis.group import Group
from harness.record.model import OURS, model_name
from harness.record.view import RecordView

DEFAULT_LOSS_TOL = 0.01  # relative
BASELINE_DEVICE = {"GPU": "lowest compute capability", "CPU": "the first by name",
                   "device": "the GPU of lowest compute capability, CPUs after GPUs"}
COMPARABLE_RULE = ("Comparable = same workload_hash (the workload less where and how long it ran) and same flags hash "
                   "(the frozen global flags): such runs differ only in env and device, and no table or finding puts any "
                   "other runs side by side.")


class Compare:
    """One dataset with the chosen baselines, noise floor and loss tolerance: the context every analysis reads."""

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
        self._memo: dict = {}
        self.word = device_word(ds.gpus())  # "CPU", "GPU", or "device" where the records mix both

    def name(self, label: str) -> str:
        """A device's short name in rows, titles and charts (harness.analysis.devices; the legend has the label)."""
        return self.ds.name(label)

    def cached(self, name: str, make):
        """make(self), computed once per Compare: the typed result one analysis returns, read by its table, the
        findings, the verdict and the report alike. A name is one analysis's: another function asking for it is a
        mistake, said at once (it would otherwise read the first one's result as its own)."""
        maker = f"{make.__module__}.{make.__qualname__}"
        if name not in self._memo:
            self._memo[name] = (maker, make(self))
        elif self._memo[name][0] != maker:
            raise RuntimeError(f"Compare.cached: {name!r} is {self._memo[name][0]}'s, asked for by {maker}")
        return self._memo[name][1]

    # --- shared by several tables
    def delta(self, a: Group, b: Group) -> stats.Delta:
        return stats.ratio(a.throughput, b.throughput, self.floor)[0]

    def mem_delta(self, a: Group, b: Group) -> stats.Delta:
        if a.memory[0] != b.memory[0]:
            return stats.Delta(None, verdict=f"{a.memory[0]} vs {b.memory[0]}")
        return stats.counter(a.memory_estimate, b.memory_estimate, self.floor)

    def sets(self) -> dict[tuple, list[Group]]:
        """Comparison sets: groups by set_key (RecordView.set_key), the one comparability rule."""
        out: dict[tuple, list[Group]] = {}
        for g in self.ds.groups:
            out.setdefault(g.set_key, []).append(g)
        return out

    def failed_runs(self) -> list[tuple[RecordView, str, str]]:
        """(record, device label, env label) of every run not ok whose record says which device it was meant
        for (the others are only in "left out"), and of every contended run left out whose cell has no clean run:
        tables show its outcome (harness.analysis.dataset.outcome) where its number would be. Computed once (read,
        never changed, by several tables)."""
        return self.cached("failed_runs", Compare._failed_runs)

    def _failed_runs(self) -> list[tuple[RecordView, str, str]]:
        out = []
        for _path, r in self.ds.failed:
            if r.intended_device is not None:
                out.append((r, r.intended_device, self.ds.env_of.get(r.run_id, r.env)))
        clean = {g.key for g in self.ds.groups}
        for _path, r in self.ds.contended:
            env = self.ds.env_of.get(r.run_id, r.env)
            if (*r.set_key, env, r.device_label) not in clean:
                out.append((r, r.device_label, env))
        return out

    def cells(self) -> dict[tuple, list[Group]]:
        out: dict[tuple, list[Group]] = {}
        for g in self.ds.groups:
            out.setdefault((g.gpu, g.env), []).append(g)
        return dict(sorted(out.items(), key=lambda kv: (self.gpu_rank[kv[0][0]], self.env_rank[kv[0][1]])))

    def ladders(self) -> list[tuple[tuple, list]]:
        """[(plan, gpu, env, B, T, model), rows]: rows are groups (or failed records) in rung order; a model not ours
        is a ladder of its own. Found once (read, never changed, by the ladder and knob tables and the charts)."""
        return self.cached("ladder-rows", Compare._ladder_rows)

    def _ladder_rows(self) -> list[tuple[tuple, list]]:
        out: dict[tuple, list] = {}
        for g in self.ds.groups:
            if not g.in_ladder:
                continue
            for plan, rung, idx in g.rungs:
                k = (plan, g.gpu, g.env, g.workload.batch_size, g.workload.seq_len, g.model)
                out.setdefault(k, []).append((idx, rung, g))
        for r, gpu, env in self.failed_runs():
            if r.sweep:
                continue
            k = (r.plan, gpu, env, r.workload.batch_size, r.workload.seq_len, model_name(r.workload.model))
            out.setdefault(k, []).append((r.rung_index, r.rung, r))
        result = []
        for k, rows in out.items():
            rows.sort(key=lambda t: (t[0] if t[0] is not None else 1 << 30, str(t[1]), isinstance(t[2], RecordView)))
            result.append((k, rows))
        result.sort(key=lambda kr: (str(kr[0][0]), self.gpu_rank.get(kr[0][1], 99), self.env_rank.get(kr[0][2], 99),
                                    kr[0][3] or 0, kr[0][4] or 0, kr[0][5] != OURS, str(kr[0][5])))
        return result

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
                                          t[1].workload.batch_size or 0, t[1].workload.seq_len or 0,
                                          self.gpu_rank[t[2].gpu], self.env_rank[t[2].env]))

    def footer(self) -> list[str]:
        return [stats.rule_text(self.floor),
                f"Loss parity tolerance: {self.loss_tol:.1%} relative.",
                (f"Baselines: env = oldest torch in each comparison (--baseline-env to choose); {self.word} = "
                 + BASELINE_DEVICE[self.word] + " (--baseline-gpu). " + COMPARABLE_RULE)]
