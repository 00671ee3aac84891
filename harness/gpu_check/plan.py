"""What one budgeted GPU call runs, in order of value: tiers of single runs, each a `python -m harness.run` of one rung.

A run is one worker process (one record), so the budget can be checked between any two of them. The order is the
order of value (issue 30): the compiler-padding A/B at B=16 that answers the two padding questions, then the tune
candidates at B=64 with the seed ladder's best rung as the baseline in the same call, then the rest. No torch here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

PRESET = "gpt2-124m"
# Steps per run (docs/gpu-check.md "Steps per run", from the committed H100/H200 runs: scripts/gpu_steps_evidence.py):
# the padding A/B's effects (6-8% in speed, GiB in memory) stay beyond noise with 5 warm-up + 25 timed steps; the
# knobs' (cuDNN attention: +3% on the H200) need the committed 10 + 40 to stay clearly beyond.
SHORT = (30, 5)  # (steps, warm-up): padding tiers, B=16
FULL = (50, 10)  # beyond-ladder tiers, B=64 and 96 (what every committed GPU record ran)
CAPTURE_STEPS = 3  # kernel capture after the timed steps (the preset's default); 0 where no explanation is asked


@dataclass(frozen=True)
class Run:
    """One rung of one plan at one B: one worker, one record in OUT/<folder>/."""

    tier: str
    plan: str
    rung: str
    batch_size: int
    capture: bool  # kernel capture: only where the explanation (which kernels, what split) is asked for
    folder: str
    steps: int = SHORT[0]
    warmup_steps: int = SHORT[1]

    @property
    def key(self) -> str:
        return f"{self.plan}/{self.rung}@B{self.batch_size}"

    @property
    def steps_text(self) -> str:
        return f"{self.warmup_steps}+{self.steps - self.warmup_steps}"

    def argv(self) -> list[str]:
        """harness.run's arguments, less --out and --timeout (the caller adds those)."""
        return ["--env", "local", "--plan", self.plan, "--preset", PRESET, "--rungs", self.rung,
                "--batch-size", str(self.batch_size), "--device", "cuda", "--steps", str(self.steps),
                "--warmup-steps", str(self.warmup_steps), "--set", f"profile_steps={CAPTURE_STEPS if self.capture else 0}"]


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


def _padding(tier: str, *rungs: tuple[str, bool]) -> tuple[Run, ...]:
    return tuple(Run(tier, "padding", rung, 16, capture, "padding", *SHORT) for rung, capture in rungs)


def _beyond(tier: str, batch_size: int, *rungs: tuple[str, bool]) -> tuple[Run, ...]:
    return tuple(Run(tier, "beyond-ladder", rung, batch_size, capture, "beyond", *FULL) for rung, capture in rungs)


TIERS: tuple[Tier, ...] = (
    Tier("padding-tf32",
         "TF32's memory rise with Inductor's padding off; the default-padding pair (fp32, tf32 at B=16) is in the "
         "committed records of the same GPU and runs again in tier default-pair",
         _padding("padding-tf32", ("tf32-50257-no-pad", True), ("fp32-50257-no-pad", False))),
    Tier("padding-vocab",
         "the vocab 50257 -> 50304 speed-up with the compiler's padding at default and off, all four in this call "
         "(a speed delta is compared within one call only)",
         _padding("padding-vocab", ("bf16-50257", True), ("bf16-50304", False), ("bf16-50257-no-pad", True),
                  ("bf16-50304-no-pad", False))),
    Tier("fastest",
         "the fastest step at B=64: the seed ladder's best rung (the baseline, in this call) against cuDNN attention",
         _beyond("fastest", 64, ("best-of-ladder", True), ("sdpa-cudnn", True))),
    Tier("default-pair",
         "the default-padding pair of padding-tf32 (fp32 and tf32 at B=16) in this call, beside the committed one",
         _padding("default-pair", ("tf32-50257", False), ("fp32-50257", False)), needs=("padding-tf32",)),
    Tier("knobs",
         "more knobs against the baseline: SDPA left to choose, Inductor's coordinate descent tuning, CCE's "
         "torch.compile lm_head loss (each alone)",
         _beyond("knobs", 64, ("sdpa-auto", False), ("inductor-coordinate-descent", False),
                 ("lm-head-cce-torch-compile", False)), atomic=False, needs=("fastest",)),
    Tier("shape-pad",
         "which of the two paddings: shape_padding alone off, with kernel capture (the lm_head GEMM's N)",
         _padding("shape-pad", ("tf32-50257-no-shape-pad", True), ("bf16-50257-no-shape-pad", True)), atomic=False),
    Tier("batch-96",
         "the baseline and cuDNN attention at B=96, the H100's largest B that fits with 5 GiB headroom",
         _beyond("batch-96", 96, ("best-of-ladder", False), ("sdpa-cudnn", False)), needs=("fastest",)),
    Tier("long-tail",
         "knobs that need libraries the image may lack (unsupported, recorded so) or long compiles",
         _beyond("long-tail", 64, ("compile-reduce-overhead", False), ("lm-head-liger", False), ("lm-head-cce", False),
                 ("compile-max-autotune-no-cudagraphs", False)), atomic=False, needs=("fastest",)),
)


def tier_names() -> list[str]:
    return [t.name for t in TIERS]


def select(names: list[str] | None = None, steps: tuple[int, int] | None = None) -> list[Tier]:
    """The tiers to run, in the order given (default: all, in order of value), every run at (steps, warm-up) where
    given instead of its tier's. Raises ValueError on an unknown name."""
    by_name = {t.name: t for t in TIERS}
    unknown = [n for n in names or [] if n not in by_name]
    if unknown:
        raise ValueError(f"unknown tier(s) {', '.join(unknown)}; known: {', '.join(by_name)}")
    tiers = [by_name[n] for n in names] if names else list(TIERS)
    if steps is None:
        return tiers
    return [replace(t, runs=tuple(replace(r, steps=steps[0], warmup_steps=steps[1]) for r in t.runs)) for t in tiers]


def runs_of(tiers: list[Tier]) -> list[Run]:
    return [run for tier in tiers for run in tier.runs]
