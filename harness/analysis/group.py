"""One comparable cell of records (Group) and the record accessors every table needs.

A Group is the runs of one workload_hash and flags hash (the comparability rule, harness.record.view.RecordView.set_key)
in one (env, GPU) cell, repeats merged: its throughput estimate (harness.analysis.stats), memory, losses and notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property

from harness.analysis import cell_values, noise_model, stats
from harness.provenance import contention
from harness.record.model import OURS, model_name
from harness.record.parts import Gemm, Kernels, KernelTime, MemorySplit
from harness.record.sections import Environment, Sweep, Workload
from harness.record.view import RecordView

LISTED_RUNS = 10  # a note names this many runs, then counts the rest (a year of nightly repeats: hundreds a cell)


def run_origin(record: RecordView) -> str:
    """Which job a run came from, as far as the record says: its plan and repeat, or the sweep it is a point of."""
    if record.sweep:
        return f"sweep {record.sweep.name} {record.sweep_point}"
    return f"plan {record.plan} repeat {record.repeat}"


def estimate(g: Group) -> stats.Estimate:
    """A group's tokens/s: measured runs' estimate (harness.analysis.stats); a transcribed log line's or a peer's own logged
    tokens/s (one sample, no noise estimate), else the one derived from its logged step time."""
    est = g.throughput
    if g.kind == "measured":
        return est
    logged = g.first.summary_number("tokens_per_s")
    return stats.Estimate(logged if logged is not None else est.point, est.n, est.repeats)


def run_ids(*groups: Group) -> list[str]:
    """The run ids a table row rests on (rows carry them beside their columns; renderers show only columns)."""
    return [run_id for g in groups for run_id in g.ids]


@dataclass
class Group:
    """One comparable cell: same workload and flags hash, one env, one GPU; its repeats merged. Its records are
    RecordViews (harness.record.view): every per-record rule is theirs, a Group only merges."""

    kind: str
    workload_hash: str
    flags_hash: str
    env: str  # env label (env name, or name@torch-version where one name has several versions)
    gpu: str
    records: list[RecordView] = field(default_factory=list)
    paths: list = field(default_factory=list)  # its record files (path strings), in the order of records
    invocations: list = field(default_factory=list)  # each run's invocation (dataset.invocation), in that order
    noise: object = None  # its device's run-to-run spreads (harness.analysis.noise.DeviceNoise), set when loaded

    @property
    def key(self) -> tuple:
        return (self.workload_hash, self.flags_hash, self.env, self.gpu)

    @property
    def set_key(self) -> tuple:
        """What must be equal for two groups to be compared across env or GPU: RecordView.set_key of its records."""
        return (self.workload_hash, self.flags_hash)

    @property
    def first(self) -> RecordView:
        return self.records[0]

    @cached_property  # read per row of every table; a cell's runs are all in (and in order) once loaded
    def workload(self) -> Workload:
        return self.first.workload

    @property
    def flags(self) -> dict:
        return self.first.flags

    @property
    def environment(self) -> Environment:
        return self.first.environment

    @cached_property  # its records are all in once loaded; read for every run of a ladder
    def sweep(self) -> Sweep | None:
        """The sweep this group is a point of (a plain rung run of the same workload may be merged in)."""
        return next((r.sweep for r in self.records if r.sweep), None)

    @cached_property
    def in_ladder(self) -> bool:
        """Has at least one run made as a plan rung rather than as a sweep point."""
        return any(not r.sweep for r in self.records)

    @cached_property  # its records are all in once loaded (harness.analysis.dataset); read per row of every table
    def rungs(self) -> list[tuple[str, str, int | None]]:
        return sorted({(r.plan, r.rung, r.rung_index) for r in self.records},
                      key=lambda t: (str(t[0]), t[2] if t[2] is not None else 1 << 30, str(t[1])))

    @cached_property
    def rung_label(self) -> str:
        """The rung(s), and the sweep point of a group that is one."""
        names = sorted({r.rung for r in self.records}, key=str)
        text = "+".join(str(n) for n in names)
        if self.sweep and not self.in_ladder:
            text += f" [{self.sweep.field}={self.sweep.value}]"
        return text

    @cached_property
    def label(self) -> str:
        """rung_label, and the model where it is not ours (a ladder of another model names it in its title)."""
        return self.rung_label + ("" if self.model == OURS else f" [model={self.model}]")

    @property
    def model(self) -> str:
        """The model trained: ours, transformers, or a user's package.module:function (its source digest, which the
        workload hash holds, left out of the name)."""
        return model_name(self.workload.model)

    @property
    def batch(self) -> str:
        """B=64, T=1024; with gradient accumulation, the micro-batch times the accumulation steps: B=96x2."""
        w = self.workload
        accum = f"x{w.grad_accum}" if isinstance(w.grad_accum, int) and w.grad_accum > 1 else ""
        return f"B={w.batch_size}{accum}, T={w.seq_len}"

    @property
    def torch_version(self) -> str | None:
        return self.first.torch_version

    @cached_property  # its records are all in, and in order, once loaded; its throughput and median read it
    def samples(self) -> list[list[float]]:
        return [r.timed_ms for r in self.records]

    @cached_property  # read per row of several tables; a cell's runs are all in once loaded
    def n_text(self) -> str:
        counts = [len(s) for s in self.samples]
        text = f"{len(counts)}x{counts[0]}" if len(set(counts)) == 1 else "+".join(str(c) for c in counts)
        busy = len(self.contended)
        mark = "" if not busy else " contended" if busy == len(self.records) else f" ({busy} contended)"
        return text + (" pooled" if self.pooled else "") + (" mixed" if self.mixed_code else "") + mark

    @cached_property
    def workload_codes(self) -> dict[str, list[str]]:
        """The workload code identity (record.workload_code, harness.provenance.workload_code) -> the run ids made by it."""
        out: dict[str, list[str]] = {}
        for r in self.records:
            out.setdefault(r.workload_code, []).append(r.run_id)
        return out

    @property
    def mixed_code(self) -> bool:
        """Its runs were made by different workload code (or some by code not known): they are pooled as repeats of
        one measurement all the same, and marked (n_text, code_note), as asv marks a benchmark whose code changed."""
        return len(self.workload_codes) > 1

    @property
    def code_note(self) -> str | None:
        if not self.mixed_code:
            return None
        return (f"mixed: {self.label} ({self.batch}) / {self.env}: its {len(self.records)} runs were made by "
                f"{len(self.workload_codes)} versions of the workload code (gpt/ and the timed loop, harness.provenance.workload_code; "
                "unknown: neither recorded nor in git history), pooled all the same: "
                + "; ".join(f"{code}: {len(ids)} run(s)" for code, ids in self.workload_codes.items()))

    @cached_property  # read per row of several tables; a cell's runs are all in once loaded
    def ids(self) -> tuple[str, ...]:
        """Its runs' ids, in its order (what a row citing it carries: run_ids)."""
        return tuple(r.run_id for r in self.records)

    @cached_property  # read per row of several tables (n_text); a cell's runs are all in once loaded
    def contended(self) -> list[RecordView]:
        """Its runs measured under contention (record.contention; older records do not say, and are not flagged)."""
        return [r for r in self.records if r.contended]

    @property
    def contended_notes(self) -> list[str]:
        return [f"contended: {self.label} ({self.batch}) / {self.env}, {r.run_id}: "
                f"{contention.describe(r.contention.to_dict())}" for r in self.contended]

    @cached_property  # read per row of several tables; a cell's runs are all in once loaded
    def pooled(self) -> bool:
        """Its runs are not the repeats of one invocation: repeat numbers recur, or plans or sweeps differ.
        They are still merged (same workload and flags); the tables say so and pooled_note lists them."""
        repeats = [r.repeat for r in self.records]
        origins = {(r.plan, json.dumps(r.sweep.to_dict(), sort_keys=True) if r.sweep else None) for r in self.records}
        return len(self.records) > 1 and (len(set(repeats)) < len(repeats) or len(origins) > 1)

    @property
    def pooled_note(self) -> str | None:
        if not self.pooled:
            return None
        listed = "; ".join(f"{r.run_id} ({run_origin(r)})" for r in self.records[:LISTED_RUNS])
        more = len(self.records) - LISTED_RUNS
        return (f"{self.label} ({self.batch}): {len(self.records)} runs from separate invocations pooled (same workload "
                f"and flags): {listed}" + (f"; and {more} more (--export-parquet lists every run)" if more > 0 else ""))

    @cached_property
    def throughput(self) -> stats.Estimate:
        """tokens/s: the geometric mean of its runs', its interval from the run-to-run spread (harness.analysis.stats:
        its own runs' and its device's) and, where its runs came from several invocations, theirs."""
        device = self.noise.tokens if self.noise is not None else None
        return cell_values.throughput(self.samples, self.first.tokens_per_step, device=device,
                                run_medians=[r.timed_median for r in self.records], invocations=self.invocations,
                                config=self.set_key)

    @cached_property
    def memory_estimate(self) -> stats.Estimate:
        """Peak memory (the geometric mean over runs of memory[0]'s metric), with its interval by the same rule."""
        metric = self.memory[0]
        device = self.noise.memory_noise(metric) if self.noise is not None else None
        # a run without a peak is dropped with its invocation by noise_model.CellRuns.of
        return cell_values.memory([r.peak_memory()[0] for r in self.records], device=device, invocations=self.invocations,
                            config=self.set_key)

    @cached_property  # a reference table reads it once per reference it stands beside
    def ms_per_step(self) -> float | None:
        """Its step time: the geometric mean of its runs' median timed steps (the one its tokens/s is made from:
        tokens per step / this; harness.analysis.stats)."""
        medians = noise_model.CellRuns.of([r.timed_median for r in self.records])
        return medians.geometric_mean if medians.n else None

    @cached_property
    def memory(self) -> tuple[str, list]:
        metric = self.first.peak_memory()[1]
        return metric, [value for value, _m in (r.peak_memory() for r in self.records) if value is not None]

    @property
    def memory_bytes(self) -> float | None:
        return self.memory_estimate.point

    def summary_median(self, name: str) -> float | None:
        """The median over its runs of one summary number (each name computed once: a reference table asks per row)."""
        if name not in self._summary_medians:
            values = [v for v in (r.summary_number(name) for r in self.records) if v is not None]
            self._summary_medians[name] = cell_values.median(values)
        return self._summary_medians[name]

    @cached_property
    def _summary_medians(self) -> dict:
        return {}

    def _with(self, read):
        """The first of its runs for which read(run) is non-empty (the evidence of one run stands for the group)."""
        return next((read(r) for r in self.records if read(r)), read(self.first))

    @cached_property  # its records are all in once loaded; every kernel table reads it
    def profiled_run(self) -> RecordView | None:
        """The one run whose kernel profile stands for the group (None without one): its newest with a profile. Every
        kernel table, the step-time split and the answers read this run, so no two of them show different runs of one
        group, and no figure mixes two runs' profiles. Newest: the profiler has only learned to capture more
        (Inductor's kernels, dropped before the fix in gpt/torch_compat.py device_kernel_events). Which runs have a
        profile is known without reading their explain (kernels_reason comes with a record from the index)."""
        newest_first = sorted((r for r in self.records if r.kernels_reason == "available"),
                              key=lambda r: (str(r.started_at or ""), str(r.run_id)), reverse=True)
        return next((r for r in newest_first if r.kernels), None)  # a profile opened only until one is there

    @property
    def kernels(self) -> Kernels:
        """The kernel profile (explain.kernels) of profiled_run, else an absent (false) one (its first run's)."""
        return (self.profiled_run or self.first).kernels

    @property
    def kernels_reason(self) -> str:
        return "available" if self.kernels else self.first.kernels_reason

    @property
    def inductor_kernels_missed(self) -> bool:
        """profiled_run's profile left out Inductor's kernels (RecordView.inductor_kernels_missed)."""
        return bool(self.profiled_run and self.profiled_run.inductor_kernels_missed)

    @property
    def kernel_categories(self) -> dict[str, KernelTime]:
        """category -> its time in profiled_run's profile ({} without one)."""
        return self.profiled_run.kernel_categories if self.profiled_run else {}

    @property
    def vocab_gemms(self) -> tuple[Gemm, ...]:
        """The lm_head GEMMs of profiled_run's profile (explain.kernels.vocab_gemms); () without one."""
        return tuple(self.profiled_run.vocab_gemms or ()) if self.profiled_run else ()

    @property
    def mapped_libraries(self) -> dict:
        return self._with(lambda r: r.mapped_libraries)

    @property
    def memory_split(self) -> MemorySplit:
        return self._with(lambda r: r.memory_split)

    def mfu(self, key: str) -> float | None:
        """explain.mfu's key (mfu_datasheet or mfu_measured), the median over its runs (each key once: several tables
        ask per row)."""
        if key not in self._mfu:
            self._mfu[key] = cell_values.median([v for v in (r.mfu(key) for r in self.records) if v is not None])
        return self._mfu[key]

    @cached_property
    def _mfu(self) -> dict:
        return {}

    def losses(self, upto: int | None = None, start: int | None = None) -> tuple[float | None, float | None]:
        """(loss at step upto-1, mean over steps start..upto-1) averaged over repeats; defaults: all steps, own warm-up.
        Each (upto, start) computed once: a comparison set's baseline is asked once per cell of the set."""
        if (upto, start) not in self._losses:
            self._losses[upto, start] = self._losses_over(upto, start)
        return self._losses[upto, start]

    @cached_property
    def _losses(self) -> dict:
        return {}

    def _losses_over(self, upto: int | None, start: int | None) -> tuple[float | None, float | None]:
        finals, means = [], []
        for r in self.records:
            loss = r.step_losses
            if loss:
                n = min(len(loss), upto or len(loss))
                warm = r.warmup_steps if start is None else start
                timed = [x for x in loss[min(warm, n - 1):n] if x is not None]
                if loss[n - 1] is not None:
                    finals.append(loss[n - 1])
                if timed:
                    means.append(sum(timed) / len(timed))
            else:
                if r.summary_number("final_loss") is not None:
                    finals.append(r.summary_number("final_loss"))
                if r.summary_number("mean_loss") is not None:
                    means.append(r.summary_number("mean_loss"))
        avg = lambda xs: sum(xs) / len(xs) if xs else None
        return avg(finals), avg(means)

    @cached_property  # its records are all in once loaded; the loss rule asks each cell of a set, per set
    def loss_steps(self) -> int | None:
        lengths = [len(r.step_losses) for r in self.records]
        return min(lengths) if lengths and min(lengths) else None

    @cached_property
    def warmup_steps(self) -> int:
        """The longest warm-up among its runs (the loss rule starts its mean after the longer warm-up of a pair)."""
        return max(r.warmup_steps for r in self.records)
