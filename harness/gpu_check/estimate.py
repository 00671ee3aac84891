"""How long a run will take on this GPU: first from the committed records of the same GPU (results/gpu-*/), then
scaled by what the runs already done in this call took. No torch; every figure it starts from is a record's.

A committed record gives its worker's time (finished_at - started_at: compile, the steps, the kernel capture,
writing the record) and its median step; a run of this call with fewer steps takes that time less the steps it
leaves out, plus the launcher's start of the worker process (LAUNCH_S). Where the committed records have no run of
the same workload and flags, the nearest one (same model and B, fewest fields apart) stands in and the basis says
so. Only runs that trained count: an error or an oom says how long the worker took to fail, not to train.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from harness.gpu_check.plan import BASELINE, Run
from harness.record.io import iter_records
from harness.record.model import measured_workload
from harness.record.view import RecordView
from harness.runner.flags import own_flags
from harness.runner.plan import STACK
from harness.runner.request import Point, RunRequest, build_points

# The launcher's time for a run ("(54 s)" in its progress line) less the record's own finished_at - started_at:
# 6 to 8 s in the 17 lines of results/gpu-h100-80gb-hbm3/logs/{ladder-b16,ladder-b64,batch64}.log; the largest is
# taken (tests check it against the logs).
LAUNCH_S = 8.0
# Not in any record, so assumed (and then measured by the call's clock): the sanity step (nvidia-smi, torch import,
# a matmul), and compare + report + packing at the end (1 s and 4 s over the 20 H100 records on the 2-core CPU
# machine this was built on, 2026-11-25; the reserve leaves room for a slower disk and a larger report).
SANITY_S = 20.0
CLOSING_S = 20.0
# A compile mode the records lack is assumed to add this much compile time (max-autotune benchmarks GEMM and Triton
# configurations: minutes; reduce-overhead records CUDA graphs). Assumptions, said so in the plan, never results.
UNMEASURED_COMPILE_S = {"max-autotune": 300.0, "max-autotune-no-cudagraphs": 240.0, "reduce-overhead": 30.0}
UNKNOWN_RUN_S = 120.0  # a run where no committed record of any GPU stands in: about twice the slowest H100 run
SHAPE_FIELDS = ("batch_size", "seq_len", "n_layer", "n_head", "n_embd")


@dataclass(frozen=True)
class Estimate:
    seconds: float
    basis: str  # where the figure comes from, for the plan and the summary
    measured: bool = True  # False where part of it is an assumption (a compile mode no record has)


def load_gpu_records(paths: list[Path]) -> list[RecordView]:
    """Measured CUDA runs that trained (status ok), with both timestamps and a batch size: what a run of a workload
    takes. Peer records and every failure are left out (an error in the compile took 25 s where the run would have
    taken minutes)."""
    out = []
    for _path, record in iter_records(paths, warn=lambda line: None):
        r = RecordView(record)
        if r.kind == "measured" and r.ok and r.is_cuda and r.worker_seconds is not None and \
                r.workload.samples_per_step is not None:  # what a step's time is scaled by
            out.append(r)
    return out


def gpu_names(records: list[RecordView]) -> list[str]:
    return sorted({r.environment.gpu.name for r in records} - {None})


@cache
def planned_point(run: Run) -> Point:
    """The workload and flags harness.run will build for this run (the same code path, so the plan cannot drift)."""
    request = RunRequest(plan=run.plan, preset="gpt2-124m", rungs=run.rung, batch_size=run.batch_size, device="cuda",
                         steps=run.steps, sets=run.workload_sets)
    _plan, (point,) = build_points(request)
    return point


class Estimator:
    """Prior estimates from the committed records of one GPU, scaled by the call's own runs as they finish."""

    def __init__(self, records: list[RecordView], gpu: str, launch_s: float = LAUNCH_S):
        self.gpu, self.launch_s = gpu, launch_s
        same = [r for r in records if r.environment.gpu.name == gpu]
        self.fallback = not same  # no record of this GPU: the slowest of any GPU's, said in every basis
        self.records = same or records
        self.prior_sum = self.actual_sum = 0.0

    @property
    def scale(self) -> float:
        """Actual over estimated time of this call's finished runs (1 before the first)."""
        return self.actual_sum / self.prior_sum if self.prior_sum else 1.0

    def prior(self, run: Run) -> Estimate:
        point = planned_point(run)
        want, want_flags = measured_workload(point.workload), own_flags(point.workload, point.flags)
        candidates = []
        for r in self.records:
            have = measured_workload(r.workload.to_dict())
            if any(have.get(k) != want.get(k) for k in SHAPE_FIELDS if k != "batch_size"):
                continue
            # flags are not part of a workload: Inductor's coordinate descent compiles 137 s where its baseline, the
            # same workload, compiles 26 s (H200, 2026-11-27)
            # B and the accumulation together are the sequences per step, which the steps are scaled by
            apart = sorted(k for k in want.keys() | have.keys() if k not in ("batch_size", "grad_accum")
                           and want.get(k) != have.get(k))
            if own_flags(r.workload.to_dict(), r.flags) != want_flags:
                apart.append("flags")
            b, want_b = r.workload.samples_per_step, run.batch_size * run.grad_accum
            # the same sequences per step first; else the nearest (the larger of two as near), its steps scaled
            candidates.append((b != want_b, len(apart), abs(b - want_b), -b,
                               -self._seconds(r, run.steps, want_b), apart, r))
        if not candidates:  # no run of this model: the slowest run there is, or an assumption where none is
            slowest = max((self._seconds(r, run.steps) for r in self.records), default=UNKNOWN_RUN_S)
            return Estimate(slowest, f"no committed run of this model at T={want.get('seq_len')}: " + (
                "the slowest committed run" if self.records else f"{UNKNOWN_RUN_S:.0f} s assumed"), measured=False)
        other_b, _n, _db, _b, neg_seconds, apart, r = min(candidates, key=lambda c: c[:5])
        if apart and STACK in run.rung:  # no run of this stack: its parts' extra times on the base's
            return self._stack_prior(run)
        seconds, measured = -neg_seconds, not other_b
        basis = f"{r.rung} B={r.workload.batch_size}" + (
            f"x{r.workload.grad_accum}" if r.workload.samples_per_step != r.workload.batch_size else "")
        if other_b:
            basis += f", its steps scaled to B={run.b_text} (assumed: step time in proportion to the sequences per step)"
        basis += f"; other {', '.join(apart)}" if apart else ""
        mode = want.get("compile")
        if "compile" in apart and mode in UNMEASURED_COMPILE_S:
            seconds += UNMEASURED_COMPILE_S[mode]
            basis += f"; +{UNMEASURED_COMPILE_S[mode]:.0f} s assumed: no record has compile {mode}"
            measured = False
        if self.fallback:
            basis += f"; no committed record of {self.gpu}: {r.environment.gpu.name}'s"
        return Estimate(seconds, basis, measured)

    def _stack_prior(self, run: Run) -> Estimate:
        """A stack of plan beyond-ladder's knobs no record has: the baseline's time plus each part's time over it
        (compile and steps; assumed additive, said so), each at this run's B and steps."""
        base = self.prior(replace(run, rung=BASELINE))
        parts = [(part, self.prior(replace(run, rung=part))) for part in run.rung.split(STACK)]
        # a part's extra time never counts below 0: records of one workload differ by seconds between calls, and
        # the budget must not start a stack on a part that only looks faster to compile
        extras = [(part, max(p.seconds - base.seconds, 0.0)) for part, p in parts]
        extra = " ".join(f"{part} +{x:.0f} s" for part, x in extras)
        return Estimate(base.seconds + sum(x for _p, x in extras), f"{BASELINE} {base.seconds:.0f} s {extra} (a stack "
                        "no run has: its parts' extra times, assumed additive)", measured=False)

    def _seconds(self, r: RecordView, steps: int, per_step: int | None = None) -> float:
        """This record's run time at `steps`: the launcher's start, the worker, less the steps left out; at another
        number of sequences per step (B x grad_accum), its steps take time in proportion to it (compile and the rest
        of the worker stay as they were)."""
        seconds = self.launch_s + r.worker_seconds
        ran = len(r.step_ms)
        median = r.summary.step_ms_median
        if ran > steps and median:
            seconds -= (ran - steps) * median / 1000.0
        have = r.workload.samples_per_step
        if per_step and median and per_step != have:
            seconds += min(ran, steps) * median / 1000.0 * (per_step / have - 1)
        return seconds

    def estimate(self, run: Run) -> Estimate:
        p = self.prior(run)
        if abs(self.scale - 1.0) < 0.005:
            return p
        return replace(p, seconds=p.seconds * self.scale, basis=f"{p.basis}; x{self.scale:.2f} (this call's runs)")

    def observe(self, run: Run, actual_s: float, status: str) -> None:
        """A finished run of this call: only runs that trained (status ok) say how fast this machine is."""
        if status == "ok":
            self.prior_sum += self.prior(run).seconds
            self.actual_sum += actual_s
