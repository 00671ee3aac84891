"""Workload configuration: every knob the user turned by hand is a field here, not a code edit."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import re
from dataclasses import dataclass, fields

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
ATTENTIONS = ("naive", "sdpa")
SDPA_BACKENDS = ("auto", "flash", "efficient", "cudnn", "math")
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTIMIZERS = ("foreach", "fused")
# plain: logits = lm_head(x), then F.cross_entropy. The others compute the loss from the final hidden states and
# the lm_head weight without materialising the (B*T x vocab) logits: liger = Liger-Kernel's fused linear
# cross-entropy (Triton), cce = Apple's Cut Cross-Entropy kernel (Triton), cce-torch-compile = CCE's own
# torch.compile implementation (runs wherever torch.compile does, CPU included; Inductor decides what it keeps).
LM_HEAD_LOSSES = ("plain", "liger", "cce", "cce-torch-compile")
DEVICES = ("auto", "cpu", "cuda")
# The model trained (gpt/models.py): ours (gpt/model.py), Hugging Face's GPT2LMHeadModel, or a user's own as
# "package.module:function", to which make_config adds "@" and the digest of the module's source, so a changed
# model is another workload (never pooled with the old one) and a rerun of an old record refuses a changed file.
OURS, TRANSFORMERS = "ours", "transformers"
USER_MODEL = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):(?P<function>[A-Za-z_]\w*)(?:@(?P<digest>[0-9a-f]{16}))?")

# Model shapes. gpt2-124m is the seeds' model; the small ones train in seconds on a CPU.
PRESETS: dict[str, dict] = {
    "gpt2-124m": {"n_layer": 12, "n_head": 12, "n_embd": 768, "seq_len": 1024, "batch_size": 16, "steps": 50, "warmup_steps": 10},
    "small": {"n_layer": 4, "n_head": 4, "n_embd": 256, "seq_len": 256, "batch_size": 8},
    "tiny": {"n_layer": 2, "n_head": 2, "n_embd": 64, "seq_len": 64, "batch_size": 4},
}


# Every size a user sets, with its bound, checked before anything is allocated or any worker starts: far above what
# any run here uses (gpt2-124m: T=1024, B=16, 50 steps), far below what would fill memory before the first step.
# vocab_size 1 would train to a loss of exactly 0 (one possible token), which measures nothing.
SIZE_BOUNDS: dict[str, tuple[int, int]] = {
    "n_layer": (1, 1024), "n_head": (1, 1024), "n_embd": (1, 65_536), "vocab_size": (2, 1_048_576),
    "seq_len": (1, 65_536), "batch_size": (1, 65_536), "grad_accum": (1, 65_536), "steps": (1, 100_000),
    "profile_steps": (0, 1_000),
}
MAX_MICRO_BATCH_TOKENS = 2**24  # batch_size x seq_len: the tensors of one micro-step (gpt2-124m at B=64: 65,536)


class ConfigError(ValueError):
    """A workload configuration that cannot be run as written."""


@dataclass
class WorkloadConfig:
    preset: str = "tiny"
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 64
    vocab_size: int = 50257
    seq_len: int = 64  # T; the model's block size equals it
    batch_size: int = 4  # B, per micro-step
    grad_accum: int = 1
    precision: str = "fp32"
    attention: str = "naive"
    sdpa_backend: str = "auto"
    lm_head_loss: str = "plain"  # LM_HEAD_LOSSES; the libraries are optional (gpt/torch_compat.py says where they run)
    model: str = OURS  # OURS, TRANSFORMERS or "package.module:function" (gpt/models.py)
    compile: str = "off"
    optimizer: str = "foreach"
    grad_clip: float = 0.0  # 0 turns clipping off
    lr: float = 6e-4
    weight_decay: float = 0.1
    steps: int = 20
    warmup_steps: int = 5  # excluded from the summary, and step 0 (compile) always is: timed_part
    seed: int = 1337
    data: str = "synthetic"  # synthetic | text:PATH | tokens:PATH
    device: str = "auto"
    # Caps usable memory, to emulate a smaller card (CUDA: per-process fraction; CPU: peak RSS check).
    memory_budget_gib: float | None = None
    profile_steps: int = 3  # profiled after the timed steps, never during them; 0 turns it off

    @property
    def tokens_per_step(self) -> int:
        return self.batch_size * self.seq_len * self.grad_accum

    def validate(self) -> WorkloadConfig:
        def one_of(name, allowed):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(f"{name}={value!r}: expected one of {', '.join(allowed)}")

        one_of("precision", PRECISIONS)
        one_of("attention", ATTENTIONS)
        one_of("sdpa_backend", SDPA_BACKENDS)
        one_of("compile", COMPILE_MODES)
        one_of("optimizer", OPTIMIZERS)
        one_of("lm_head_loss", LM_HEAD_LOSSES)
        one_of("device", DEVICES)
        if self.model not in (OURS, TRANSFORMERS) and not USER_MODEL.fullmatch(self.model):
            raise ConfigError(f"model={self.model!r}: expected {OURS}, {TRANSFORMERS} or package.module:function")
        for name, (low, high) in SIZE_BOUNDS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                raise ConfigError(f"{name}={value}: must be at {'least' if value < low else 'most'} "
                                  f"{low if value < low else high:,}")
        if self.batch_size * self.seq_len > MAX_MICRO_BATCH_TOKENS:
            raise ConfigError(f"batch_size x seq_len = {self.batch_size * self.seq_len:,}: must be at most "
                              f"{MAX_MICRO_BATCH_TOKENS:,} tokens per micro-step")
        if self.n_embd % self.n_head:
            raise ConfigError(f"n_embd={self.n_embd} is not divisible by n_head={self.n_head}")
        if not 0 <= self.warmup_steps < self.steps:
            raise ConfigError(f"warmup_steps={self.warmup_steps} must be >= 0 and below steps={self.steps}")
        if self.grad_clip < 0:
            raise ConfigError(f"grad_clip={self.grad_clip}: must be >= 0 (0 turns clipping off)")
        if self.attention == "naive" and self.sdpa_backend != "auto":
            raise ConfigError("sdpa_backend applies only to attention=sdpa")
        kind = self.data.split(":", 1)[0]
        if kind not in ("synthetic", "text", "tokens") or (kind != "synthetic" and ":" not in self.data):
            raise ConfigError(f"data={self.data!r}: expected synthetic, text:PATH or tokens:PATH")
        if self.memory_budget_gib is not None and self.memory_budget_gib <= 0:
            raise ConfigError("memory_budget_gib must be positive")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def timed_part(per_step: list, warmup_steps: int) -> list:
    """The part of a run's per-step values (times, losses) its summary is made of: the steps after the warm-up, and
    never step 0, which torch.compile works during (kept apart as first_step_ms). A one-step run has only that one.
    The one rule for it: the worker's summary and the record's reader (harness.record.view) both call this."""
    return per_step[max(1, warmup_steps):] if len(per_step) > 1 else per_step[:]


FIELD_TYPES = {f.name: f.type for f in fields(WorkloadConfig)}


def coerce(name: str, value):
    """A value for workload field `name` (from the command line, a plan or a sweep) as that field's type.

    Strings are parsed (`--set batch_size=8`); anything else must already have the field's type (YAML's
    `batch_size: 8`). The one type check for every source: null, a list, a bool or 2.5 where an int is
    expected is a ConfigError naming the field, not a failure inside the worker."""
    if name not in FIELD_TYPES:
        raise ConfigError(f"unknown workload field {name!r}; known: {', '.join(sorted(FIELD_TYPES))}")
    kinds = [k.strip() for k in FIELD_TYPES[name].split("|")]  # e.g. ["float", "None"]
    kind = kinds[0]
    if isinstance(value, str) and kind != "str":
        text = value.strip()
        if "None" in kinds and text.lower() in ("none", "null", ""):
            return None
        try:
            return int(text) if kind == "int" else float(text)
        except ValueError:
            raise ConfigError(f"{name}={value!r}: expected {_KIND_WORDS[kind]}") from None
    if value is None and "None" in kinds:
        return None
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "float" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind == "str" and isinstance(value, str):
        return value
    expected = _KIND_WORDS[kind] + (" or null" if "None" in kinds else "")
    raise ConfigError(f"{name}={value!r}: expected {expected}, got {_json_type(value)}")


_KIND_WORDS = {"int": "an integer", "float": "a number", "str": "a string"}


def _json_type(value) -> str:
    """What a YAML/JSON value is, in the words a plan's author would use."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    return {int: "an integer", float: "a non-integer number", str: "a string", list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def user_model_parts(model: str) -> tuple[str, str, str | None]:
    """(module, function, source digest or None) of a user's model "package.module:function[@digest]"."""
    m = USER_MODEL.fullmatch(model)
    if m is None:
        raise ConfigError(f"model={model!r} is not package.module:function")
    return m["module"], m["function"], m["digest"]


def user_model_digest(module: str) -> str:
    """The first 16 hex digits of the sha256 of the module's source file, found where `import module` would find it
    (from the current directory too, as `python -m` imports), without importing it. Its parent packages are imported
    by the lookup, as Python's import system does."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise ConfigError(f"model: cannot find module {module!r}: {exc}") from None
    if spec is None or not spec.origin or not spec.has_location:
        raise ConfigError(f"model: no module {module!r} importable from here (run from the folder that holds it, "
                          "or put it on PYTHONPATH)")
    with open(spec.origin, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _pin_user_model(model: str) -> str:
    """A user's model with its source digest: added where it has none, checked where it has one (a rerun)."""
    if model in (OURS, TRANSFORMERS):
        return model
    module, function, digest = user_model_parts(model)
    now = user_model_digest(module)
    if digest is not None and digest != now:
        raise ConfigError(f"model={model}: {module}'s source has changed since (its digest is now {now}); a changed "
                          f"model is another workload: ask for model={module}:{function}")
    return f"{module}:{function}@{now}"


def make_config(preset: str = "tiny", **overrides) -> WorkloadConfig:
    """A validated config: preset shapes first, then overrides (already typed or strings); a user's model carries
    its source digest."""
    if preset not in PRESETS:
        raise ConfigError(f"unknown preset {preset!r}; known: {', '.join(PRESETS)}")
    values = dict(PRESETS[preset], preset=preset)
    for name, value in overrides.items():
        values[name] = coerce(name, value)
    config = WorkloadConfig(**values).validate()
    config.model = _pin_user_model(config.model)
    return config
