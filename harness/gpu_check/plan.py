"""What one budgeted GPU call runs, in order of value: tiers of single runs, each a `python -m harness.run` of one rung.

A run is one worker process (one record), so the budget can be checked between any two of them. The default order
(issue 52) measures what is not known yet: the call's baseline (the seed ladder's best rung) and cuDNN attention with
kernel capture, knobs stacked (harness.runner.plan: "a+b"), the best stack at the largest B that fits, interleaved
repeats that give the call its own run-to-run spread, then a long compile if time is left. The questions the earlier
calls answered (the compiler's padding A/B, single knobs) run only when asked for by name (--tiers).

Two things a run can leave to the call (harness.gpu_check.choose decides them from the runs already done, or in the
dry run from the committed records): the rung BEST_STACK (the fastest run at B=64 whose loss matches the baseline's)
and the batch size LARGEST_B (the largest its memory line says fits). No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness.runner.plan import STACK

PRESET = "gpt2-124m"
# Steps per run (docs/gpu-check.md "Steps per run", from the committed H100/H200 runs: scripts/gpu_steps_evidence.py):
# the padding A/B's effects (6-8% in speed, GiB in memory) stay beyond noise with 5 warm-up + 25 timed steps; the
# knobs' (cuDNN attention: +3% on the H200) need the committed 10 + 40 to stay clearly beyond.
SHORT = (30, 5)  # (steps, warm-up): padding tiers, B=16
FULL = (50, 10)  # beyond-ladder tiers, B=64 and 96 (what every committed GPU record ran)
CAPTURE_STEPS = 3  # kernel capture after the timed steps (the preset's default); 0 where no explanation is asked
BASELINE = "best-of-ladder"  # plan beyond-ladder's defaults: the seed ladder's last rung, every knob's partner
BEST_STACK = "best-stack"  # chosen in the call: the fastest equivalent run at B=64 so far (choose.best_stack)
PLANNED_STACK = "sdpa-cudnn+lm-head-cce"  # what the dry run assumes BEST_STACK will be: the two best knobs alone
LARGEST_B = None  # chosen in the call: the largest B the run's memory line says fits (choose.largest_b)


@dataclass(frozen=True)
class Run:
    """One rung of one plan at one B: one worker, one record in OUT/<folder>/. The rung may name BEST_STACK (alone or
    stacked: "best-stack+compile-max-autotune-no-cudagraphs") and batch_size may be LARGEST_B: the call decides them
    before the run (harness.gpu_check.choose), and only a decided run is estimated or started."""

    tier: str
    plan: str
    rung: str
    batch_size: int | None
    capture: bool  # kernel capture: only where the explanation (which kernels, what split) is asked for
    folder: str
    steps: int = SHORT[0]
    warmup_steps: int = SHORT[1]
    grad_accum: int = 1  # micro-batches per optimizer step: the baseline at B=96x2 trains on what a stack at 192 does

    @property
    def decided(self) -> bool:
        return self.batch_size is not LARGEST_B and BEST_STACK not in self.rung.split(STACK)

    @property
    def b_text(self) -> str:
        if self.batch_size is LARGEST_B:
            return "largest"
        return f"{self.batch_size}x{self.grad_accum}" if self.grad_accum > 1 else str(self.batch_size)

    @property
    def workload_sets(self) -> tuple[str, ...]:
        """The --set values that change what is measured (the workload hash): the accumulation, where there is one."""
        return (f"grad_accum={self.grad_accum}",) if self.grad_accum > 1 else ()

    @property
    def sets(self) -> tuple[str, ...]:
        """harness.run's --set values: the kernel capture's steps (not in the workload hash), then workload_sets."""
        return (f"profile_steps={CAPTURE_STEPS if self.capture else 0}", *self.workload_sets)

    @property
    def key(self) -> str:
        return f"{self.plan}/{self.rung}@B{self.b_text}"

    @property
    def steps_text(self) -> str:
        return f"{self.warmup_steps}+{self.steps - self.warmup_steps}"

    def argv(self) -> list[str]:
        """harness.run's arguments, less --out and --timeout (the caller adds those)."""
        if not self.decided:
            raise ValueError(f"{self.key}: not decided yet (harness.gpu_check.choose decides it in the call)")
        return ["--env", "local", "--plan", self.plan, "--preset", PRESET, "--rungs", self.rung,
                "--batch-size", str(self.batch_size), "--device", "cuda", "--steps", str(self.steps),
                "--warmup-steps", str(self.warmup_steps), *(a for v in self.sets for a in ("--set", v))]


@dataclass(frozen=True)
class Tier:
    """Runs that answer one question together. An atomic tier starts only when all its runs fit (a pair with one side
    missing answers nothing); a tier that needs others starts only when those ran completely (knobs need their
    baseline in the same call)."""

    name: str
    answers: str  # what these runs answer, one line for the dry run and the summary
    runs: tuple[Run, ...]
    atomic: bool = True
    needs: tuple[str, ...] = ()
    repeats: bool = False  # its runs repeat earlier ones on purpose (the call's own spread); else a run done is not redone


def _padding(tier: str, *rungs: tuple[str, bool]) -> tuple[Run, ...]:
    return tuple(Run(tier, "padding", rung, 16, capture, "padding", *SHORT) for rung, capture in rungs)


def _beyond(tier: str, batch_size: int | None, *rungs: tuple[str, bool]) -> tuple[Run, ...]:
    return tuple(Run(tier, "beyond-ladder", rung, batch_size, capture, "beyond", *FULL) for rung, capture in rungs)


DEFAULT_TIERS: tuple[Tier, ...] = (  # what a call runs unless --tiers names others
    Tier("fastest",
         "the call's baseline (the seed ladder's best rung) and cuDNN attention at B=64, both with kernel capture: "
         "every other run of the call is judged against this baseline",
         _beyond("fastest", 64, (BASELINE, True), ("sdpa-cudnn", True))),
    Tier("stack",
         "cuDNN attention and Cut Cross-Entropy's fused lm_head loss together at B=64, with kernel capture (CCE alone, "
         "one H200 run of 2026-11-27: peak allocated 40.8 -> 22.9 GiB); unsupported where the image lacks "
         "cut-cross-entropy",
         _beyond("stack", 64, (PLANNED_STACK, True)), needs=("fastest",)),
    Tier("largest-b",
         "the best stack so far at the largest B it fits by its memory line (5 GiB headroom), and the baseline on as "
         "many sequences per step: whole where it fits, else in micro-batches (B=96x2 for 192), so the stack's loss is "
         "checked at its own B",
         _beyond("largest-b", LARGEST_B, (BEST_STACK, False), (BASELINE, False)), atomic=False, needs=("fastest",)),
    Tier("spread",
         "interleaved repeats (A B, and A B again in spread-2) of the baseline and the best stack at B=64, no capture: "
         "the call's own run-to-run spread, so its deltas do not lean on other calls",
         _beyond("spread", 64, (BASELINE, False), (BEST_STACK, False)), needs=("fastest",), repeats=True),
    Tier("batch-96",
         "cuDNN attention and the baseline at B=96 (on the H100 the baseline's largest B with 5 GiB headroom)",
         _beyond("batch-96", 96, ("sdpa-cudnn", False), (BASELINE, False)), atomic=False, needs=("fastest",)),
    Tier("spread-2", "the second A B of the interleaved repeats (a pair, or nothing)",
         _beyond("spread-2", 64, (BASELINE, False), (BEST_STACK, False)), needs=("spread",), repeats=True),
    Tier("autotune",
         "Inductor's max-autotune-no-cudagraphs on the best stack at B=64 (minutes of compile: last)",
         _beyond("autotune", 64, (f"{BEST_STACK}+compile-max-autotune-no-cudagraphs", False)), needs=("fastest",)),
)

ASKED_TIERS: tuple[Tier, ...] = (  # answered by earlier calls (docs/gpu.md): run only when named in --tiers
    Tier("padding-tf32",
         "TF32's memory rise with Inductor's padding off; the default-padding pair (fp32, tf32 at B=16) is in the "
         "committed records of the same GPU and runs again in tier default-pair",
         _padding("padding-tf32", ("tf32-50257-no-pad", True), ("fp32-50257-no-pad", False))),
    Tier("padding-vocab",
         "the vocab 50257 -> 50304 speed-up with the compiler's padding at default and off, all four in this call "
         "(a speed delta is compared within one call only)",
         _padding("padding-vocab", ("bf16-50257", True), ("bf16-50304", False), ("bf16-50257-no-pad", True),
                  ("bf16-50304-no-pad", False))),
    Tier("default-pair",
         "the default-padding pair of padding-tf32 (fp32 and tf32 at B=16) in this call, beside the committed one",
         _padding("default-pair", ("tf32-50257", False), ("fp32-50257", False)), needs=("padding-tf32",)),
    Tier("shape-pad",
         "which of the two paddings: shape_padding alone off, with kernel capture (the lm_head GEMM's N)",
         _padding("shape-pad", ("tf32-50257-no-shape-pad", True), ("bf16-50257-no-shape-pad", True)), atomic=False),
    Tier("knobs",
         "more knobs against the baseline: SDPA left to choose, Inductor's coordinate descent tuning, CCE's "
         "torch.compile lm_head loss (each alone)",
         _beyond("knobs", 64, ("sdpa-auto", False), ("inductor-coordinate-descent", False),
                 ("lm-head-cce-torch-compile", False)), atomic=False, needs=("fastest",)),
    Tier("stack-more",
         "Inductor's coordinate descent tuning on the best stack (137 s of compile on the H200 alone), and the best "
         "stack with Liger's fused lm_head loss in CCE's place",
         _beyond("stack-more", 64, (f"{BEST_STACK}+inductor-coordinate-descent", False),
                 ("sdpa-cudnn+lm-head-liger", False)), atomic=False, needs=("fastest",)),
    Tier("long-tail",
         "knobs that need libraries the image may lack (unsupported, recorded so) or long compiles",
         _beyond("long-tail", 64, ("compile-reduce-overhead", False), ("lm-head-liger", False), ("lm-head-cce", False),
                 ("compile-max-autotune-no-cudagraphs", False)), atomic=False, needs=("fastest",)),
)

TIERS: tuple[Tier, ...] = DEFAULT_TIERS + ASKED_TIERS


def tier_names() -> list[str]:
    return [t.name for t in TIERS]


def tier(name: str) -> Tier:
    """The tier called `name` (ValueError naming the known ones)."""
    return select([name])[0]


def select(names: list[str] | None = None, steps: tuple[int, int] | None = None) -> list[Tier]:
    """The tiers to run, in the order given (default: DEFAULT_TIERS, in order of value), every run at (steps,
    warm-up) where given instead of its tier's. Raises ValueError on an unknown name."""
    by_name = {t.name: t for t in TIERS}
    unknown = [n for n in names or [] if n not in by_name]
    if unknown:
        raise ValueError(f"unknown tier(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    tiers = [by_name[n] for n in names] if names else list(DEFAULT_TIERS)
    if steps is None:
        return tiers
    return [replace(t, runs=tuple(replace(r, steps=steps[0], warmup_steps=steps[1]) for r in t.runs)) for t in tiers]


def runs_of(tiers: list[Tier]) -> list[Run]:
    return [run for tier in tiers for run in tier.runs]
