"""Spend a time budget on runs in order of value: start no run that would not finish within it.

The clock and the runner are passed in, so the same loop serves the real call (time.monotonic, worker processes),
the dry run (a simulated clock advanced by each estimate) and the tests (a fake clock and fake runner).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from harness.gpu_check.estimate import Estimator
from harness.gpu_check.plan import Run, Tier

SKIPPED = "not started"
FAILED = ("error", "timeout")  # a run that left no measurement: its tier is not complete


@dataclass
class Outcome:
    """What became of one planned run."""

    run: Run
    estimate_s: float
    basis: str
    status: str = SKIPPED  # a record's status (ok, oom, unsupported, error...) or SKIPPED
    seconds: float | None = None  # the run's time in this call; None when not started
    records: list[str] = field(default_factory=list)  # run ids
    note: str = ""  # why it was not started, or how it ended
    tokens_s: float | None = None  # the record's, to show; compare and report read the records themselves
    memory: str | None = None  # MiB, NVML's device used: "48,571" (another metric named: "47,380 (peak reserved)")

    @property
    def started(self) -> bool:
        return self.status != SKIPPED

    def to_dict(self) -> dict:
        return {"key": self.run.key, "tier": self.run.tier, "plan": self.run.plan, "rung": self.run.rung,
                "batch_size": self.run.batch_size, "grad_accum": self.run.grad_accum, "steps": self.run.steps, "warmup_steps": self.run.warmup_steps,
                "capture": self.run.capture, "estimate_s": round(self.estimate_s, 1),
                "basis": self.basis, "status": self.status, "tokens_s": self.tokens_s, "memory": self.memory,
                "seconds": None if self.seconds is None else round(self.seconds, 1), "records": self.records,
                "note": self.note}


@dataclass
class Result:
    """A runner's answer for one run: the status of its record(s), their run ids, a note."""

    status: str
    records: list[str] = field(default_factory=list)
    note: str = ""
    tokens_s: float | None = None
    memory: str | None = None


class Runner(Protocol):
    def __call__(self, run: Run, timeout_s: float) -> Result: ...


Decide = Callable[[Tier], list[tuple[Run, str | None]]]
RAN_EARLIER = "ran earlier in this call"


def as_planned(tier: Tier) -> list[tuple[Run, str | None]]:
    """Every run as the plan has it (no run left to the call): harness.gpu_check.choose.Chooser decides the others."""
    return [(r, None) for r in tier.runs]


def spend(tiers: list[Tier], runner: Runner, clock: Callable[[], float], deadline: float, estimator: Estimator,
          on_done: Callable[[Outcome], None] = lambda o: None, say: Callable[[str], None] = print,
          decide: Decide = as_planned) -> list[Outcome]:
    """Run the tiers in order while their estimates fit before `deadline` (a clock reading: the budget less the
    closing reserve). When a tier's turn comes, `decide` settles the runs the plan left to the call (the best stack,
    the largest B) from the runs done so far, or says why one is not to start. A run starts only when its estimate
    fits in the time left; an atomic tier only when all its runs do; a tier only when the tiers it needs ran
    completely. What does not fit is skipped and later, cheaper tiers may still run. Each run gets the time left as
    its timeout, so a wrong estimate cannot eat the reserve. `on_done` sees every outcome as it is decided (the
    caller packs what it has after each run)."""
    outcomes: list[Outcome] = []
    complete: set[str] = set()
    done: set[str] = set()  # keys of the runs this call made that left a measurement
    total = sum(len(t.runs) for t in tiers)

    def skip(run: Run, note: str) -> None:
        est = estimator.estimate(run) if run.decided else None
        outcome = Outcome(run, est.seconds if est else 0.0, est.basis if est else "decided in the call", note=note)
        say(f"gpu_check: [{len(outcomes) + 1}/{total}] {run.key}: not started ({note})")
        outcomes.append(outcome)
        on_done(outcome)

    for tier in tiers:
        decided = [(r, why or (RAN_EARLIER if r.key in done and not tier.repeats else None)) for r, why in decide(tier)]
        missing = [n for n in tier.needs if n not in complete]
        if missing:
            for run, _why in decided:
                skip(run, f"needs tier {', '.join(missing)} complete in this call")
            continue
        left = deadline - clock()
        whole = sum(estimator.estimate(r).seconds for r, why in decided if why is None)
        if tier.atomic and whole > left:
            for run, why in decided:
                skip(run, why or f"tier {tier.name} needs ~{whole:.0f} s, {max(left, 0):.0f} s left")
            continue
        ran = 0
        for run, why in decided:
            if why is not None:
                skip(run, why)
                ran += why == RAN_EARLIER  # the measurement the tier needs is there
                continue
            est = estimator.estimate(run)
            left = deadline - clock()
            if est.seconds > left:
                skip(run, f"needs ~{est.seconds:.0f} s, {max(left, 0):.0f} s left")
                continue
            say(f"gpu_check: [{len(outcomes) + 1}/{total}] {run.key} ({tier.name}): ~{est.seconds:.0f} s of "
                f"{left:.0f} s left")
            outcome = Outcome(run, est.seconds, est.basis)
            t0 = clock()
            result = runner(run, left)
            outcome.seconds = clock() - t0
            outcome.status, outcome.records, outcome.note = result.status, result.records, result.note
            outcome.tokens_s, outcome.memory = result.tokens_s, result.memory
            estimator.observe(run, outcome.seconds, outcome.status)
            ran += outcome.status not in FAILED
            if outcome.status not in FAILED:
                done.add(run.key)
            outcomes.append(outcome)
            on_done(outcome)
        if ran == len(tier.runs):
            complete.add(tier.name)
    return outcomes


class SimulatedClock:
    """A clock that moves only when told (the dry run and the tests)."""

    def __init__(self, start: float = 0.0):
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def simulated_runner(clock: SimulatedClock, estimator: Estimator) -> Runner:
    """Each run takes exactly its prior estimate (the dry run: what the budget starts if the records hold)."""
    def run(r: Run, timeout_s: float) -> Result:
        clock.advance(min(estimator.prior(r).seconds, timeout_s))
        return Result("ok", note="dry run")
    return run
