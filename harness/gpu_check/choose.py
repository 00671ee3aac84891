"""What a call decides from what it has measured: the best stack so far and the largest batch size that fits.

  best stack  the fastest run of plan beyond-ladder at B=64 in this call whose loss is within tolerance of the call's
              baseline at that B (harness.analysis.fastest's rule, the one the report applies); none yet: the planned
              stack (plan.PLANNED_STACK), said so
  largest B   the largest of CANDIDATE_B at which the stack's predicted peak memory + the batch search's headroom fits
              the device; the baseline there in the fewest micro-batches that fit (micro_batches: B=96x2 trains on the
              sequences B=192 does, so the stack's loss is checked at its own B). Peaks:
              peak(B) = fixed + per_sample * B, a line through the records (this call's and the committed ones of the
              same GPU): `fixed` (weights, optimizer state, CUDA context: what does not grow with B) from the baseline
              configuration's runs at two or more B, `per_sample` from the configuration's own runs; a stack no run has
              adds its parts' per-sample differences to the baseline's. A prediction to choose a run, never a result:
              the run measures, and a run that does not fit is recorded oom.

The dry run decides the same way from the committed records alone. No torch.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace
from pathlib import Path

from harness.analysis import fit
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.fastest import beyond_candidates
from harness.gpu_check import plan
from harness.gpu_check.estimate import load_gpu_records, planned_point
from harness.gpu_check.plan import BASELINE, BEST_STACK, LARGEST_B, PLANNED_STACK, Run, Tier
from harness.record.model import measured_workload
from harness.record.view import RecordView
from harness.runner.flags import own_flags
from harness.runner.plan import STACK, PlanError, load_plan

CANDIDATE_B = tuple(range(96, 257, 32))  # 96 ... 256: the B a call tries beyond 64 (the records have 16 to 104)
STACK_B = 64  # the B the stacks are judged at (the fastest tier's)
MAX_ACCUM = 8  # the most micro-batches the baseline is split into to train on a stack's B
GIB = 2**30


def config_key(workload: dict, flags: dict) -> tuple:
    """A configuration less its batch size and accumulation (a peak grows with the micro-batch B alone): the
    workload's measured fields and its own flags."""
    w = {k: v for k, v in measured_workload(workload).items() if k not in ("batch_size", "grad_accum")}
    return tuple(sorted((k, str(v)) for k, v in w.items())), tuple(sorted(own_flags(workload, flags).items()))


def run_config(rung: str, batch_size: int = STACK_B) -> tuple:
    point = planned_point(Run("", "beyond-ladder", rung, batch_size, False, "beyond", *plan.FULL))
    return config_key(point.workload, point.flags)


@dataclass(frozen=True)
class Prediction:
    batch_size: int | None  # None: no candidate fits, or the memory line is unknown
    peak_gib: float | None  # at batch_size (or at the smallest candidate where none fits)
    usable_gib: float | None
    basis: str


class MemoryModel:
    """peak(B) = fixed + per_sample * B per configuration, from records of one GPU (ok runs, the widest peak)."""

    def __init__(self, records: list[RecordView], others: MemoryModel | None = None):
        self.others = others  # another GPU's model: where this one has no run of a knob, its per-sample difference
        self.points: dict[tuple, list[tuple[int, float]]] = {}
        usable = []
        for r in records:
            peak, _metric = r.peak_memory(widest=True)
            if r.ok and peak is not None and r.workload.batch_size:
                key = config_key(r.workload.to_dict(), r.flags)
                self.points.setdefault(key, []).append((r.workload.batch_size, peak / GIB))
            if r.usable_memory_bytes:
                usable.append(r.usable_memory_bytes / GIB)
        self.usable_gib = min(usable) if usable else None  # the budget a run is judged by (fit.judge's usable)
        self.fixed = self._fixed()

    def _fixed(self) -> float | None:
        """The baseline's intercept: a least-squares line through its peaks at two or more B."""
        pts = self.points.get(run_config(BASELINE), [])
        if len({b for b, _ in pts}) < 2:
            return None
        return statistics.linear_regression([b for b, _ in pts], [p for _, p in pts]).intercept

    def per_sample(self, rung: str) -> tuple[float | None, str]:
        """GiB per sample of a rung (a stack: from its own runs, else the baseline's plus each part's difference)."""
        if self.fixed is None:
            return None, "no line: the baseline has runs at fewer than two B on this GPU"
        own = self.points.get(run_config(rung), [])
        if own:
            return statistics.fmean((p - self.fixed) / b for b, p in own), f"{len(own)} run(s)"
        if STACK not in rung:
            theirs, their_base = (self.others.per_sample(rung)[0], self.others.per_sample(BASELINE)[0]) if self.others \
                else (None, None)
            base = self.per_sample(BASELINE)[0] if rung != BASELINE else None
            if None in (theirs, their_base, base):
                return None, f"no run of {rung} on this GPU"
            return base + theirs - their_base, "its difference to the baseline on another GPU (assumed the same per sample)"
        base, _ = self.per_sample(BASELINE)
        parts = [(part, *self.per_sample(part)) for part in rung.split(STACK)]
        missing = [part for part, s, _why in parts if s is None]
        if base is None or missing:
            return None, f"no run of {', '.join(missing) or BASELINE} on this GPU"
        return base + sum(s - base for _p, s, _why in parts), (
            f"its parts, assumed additive ({'; '.join(f'{p}: {why}' for p, _s, why in parts)})")

    def peak(self, rung: str, batch_size: int) -> float | None:
        """Predicted peak GiB of a rung at a B (None where its line is unknown)."""
        slope, _basis = self.per_sample(rung)
        return None if slope is None else self.fixed + slope * batch_size

    def fits(self, rung: str, batch_size: int, headroom_gib: float = fit.GPU_HEADROOM_GIB) -> bool:
        """Whether a rung's predicted peak at a micro-batch B + headroom is within usable memory (False: unknown)."""
        peak = self.peak(rung, batch_size)
        return peak is not None and self.usable_gib is not None and peak + headroom_gib <= self.usable_gib

    def largest_b(self, rung: str, headroom_gib: float = fit.GPU_HEADROOM_GIB) -> Prediction:
        slope, basis = self.per_sample(rung)
        if slope is None or self.usable_gib is None:
            return Prediction(None, None, self.usable_gib, basis if slope is None else "usable memory unknown")
        fitting = [b for b in CANDIDATE_B if self.fixed + slope * b + headroom_gib <= self.usable_gib]
        b = max(fitting, default=None)
        peak = self.fixed + slope * (b or CANDIDATE_B[0])
        return Prediction(b, peak, self.usable_gib, f"{self.fixed:.1f} GiB + {slope:.3f} GiB x B; {rung}: {basis}")


def best_stack(call_dir: Path | None) -> tuple[str, str]:
    """(rung, why): the fastest equivalent run of plan beyond-ladder at B=64 in this call, else the planned stack. A
    choice of what to run next, not a result: runs timed under contention count here too."""
    if call_dir is not None and call_dir.is_dir():
        cmp = Compare(load([call_dir], warn=lambda line: None, include_contended=True))
        found = [c for gpu in cmp.ds.gpus() for c in beyond_candidates(cmp, gpu)
                 if c.shape[0] == STACK_B and c.partner is not None and c.equivalent]
        if found:
            c = max(found, key=lambda c: (c.tokens_per_s, c.group.first.rung))
            return c.group.first.rung, f"the fastest equivalent run at B={STACK_B} in this call ({c.tokens_per_s:,.0f} tokens/s)"
    return PLANNED_STACK, f"no equivalent run at B={STACK_B} in this call yet: the planned {PLANNED_STACK}"


def with_stack(rung: str, stack: str) -> str:
    """A planned rung with BEST_STACK replaced by the stack's knobs (each once)."""
    parts = [q for p in rung.split(STACK) for q in (stack.split(STACK) if p == BEST_STACK else [p])]
    return STACK.join(dict.fromkeys(parts))


class Chooser:
    """Decides a tier's open runs (plan.BEST_STACK, plan.LARGEST_B) when the tier starts; budget.spend calls it."""

    def __init__(self, committed: list[RecordView], gpu: str, call_dir: Path | None = None):
        self.committed = [r for r in committed if r.environment.gpu.name == gpu]
        self.others = MemoryModel([r for r in committed if r.environment.gpu.name != gpu])
        self.gpu, self.call_dir = gpu, call_dir
        self.choices: list[str] = []  # "tier: what was decided and why", for the summary

    def _records(self) -> list[RecordView]:
        mine = load_gpu_records([self.call_dir]) if self.call_dir is not None and self.call_dir.is_dir() else []
        return mine + self.committed

    def __call__(self, tier: Tier) -> list[tuple[Run, str | None]]:
        """Each run of the tier decided, with a note where it is not to start (then it is skipped with that note)."""
        runs, refused = list(tier.runs), {}
        if any(BEST_STACK in r.rung.split(STACK) for r in runs):
            stack, why = best_stack(self.call_dir / "beyond" if self.call_dir else None)
            self.choices.append(f"{tier.name}: best stack = {stack} ({why})")
            runs = [replace(r, rung=with_stack(r.rung, stack)) for r in runs]
            for r in (r for r in runs if STACK in r.rung):  # a knob added to the best stack may set a field it sets
                try:
                    load_plan(r.plan).stack(r.rung)
                except PlanError as exc:
                    refused[r.key] = f"the best stack does not take it: {exc}"
        if not any(r.batch_size is LARGEST_B for r in runs) or refused:
            return [(r, refused.get(r.key)) for r in runs]
        # the largest B the stack fits; the baseline at as many sequences per step, in micro-batches where it does
        # not fit whole (B=96x2 trains on what B=192 does: the loss is checked at the stack's own B)
        memory = MemoryModel(self._records(), self.others)
        open_ = list(dict.fromkeys(r.rung for r in runs if r.batch_size is LARGEST_B and r.rung != BASELINE))
        predictions = {rung: memory.largest_b(rung) for rung in open_}
        unknown = [f"{rung}: " + (f"its memory line is unknown ({p.basis})" if p.peak_gib is None else
                                  f"{p.peak_gib:.1f} GiB predicted at B={CANDIDATE_B[0]} + {fit.GPU_HEADROOM_GIB:.0f} GiB "
                                  f"headroom > {p.usable_gib:.1f} GiB usable ({p.basis})")
                   for rung, p in predictions.items() if p.batch_size is None]
        if unknown or not predictions:
            note = f"no B from {CANDIDATE_B[0]} up is known to fit: {'; '.join(unknown) or 'no stack in the tier'}"
            self.choices.append(f"{tier.name}: {note}")
            return [(r, note) for r in runs]
        b = min(p.batch_size for p in predictions.values())
        said = [f"{rung} {memory.peak(rung, b):.1f} of {p.usable_gib:.1f} GiB at B={b} ({p.basis})"
                for rung, p in predictions.items()]
        out = []
        for r in runs:
            if r.batch_size is not LARGEST_B:
                out.append((r, None))
            elif r.rung != BASELINE:
                out.append((replace(r, batch_size=b), None))
            else:
                accum = micro_batches(memory, b)
                note = None if accum else f"the baseline fits at no micro-batch of B={b} (B/1 .. B/{MAX_ACCUM})"
                out.append((replace(r, batch_size=b // accum, grad_accum=accum) if accum else replace(r, batch_size=b),
                            note))
                said.append(note or f"{BASELINE} {memory.peak(BASELINE, b // accum):.1f} GiB at B={b // accum}" +
                            (f"x{accum}" if accum > 1 else ""))
        fit_ = "fits" if len(open_) == 1 else "fit"
        self.choices.append(f"{tier.name}: B={b}, the largest at which {' and '.join(open_)} {fit_}: {'; '.join(said)}")
        return out


def micro_batches(memory: MemoryModel, b: int) -> int | None:
    """The fewest micro-batches (grad_accum) in which the baseline trains on b sequences a step and fits; None when
    even B/MAX_ACCUM does not (or its line is unknown)."""
    return next((k for k in range(1, MAX_ACCUM + 1) if b % k == 0 and memory.fits(BASELINE, b // k)), None)
