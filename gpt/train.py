"""One training step of the workload, built from a WorkloadConfig.

`build()` makes the model, optimizer and data; `Trainer.step()` runs one optimizer step (with grad
accumulation, autocast, optional clipping) and returns device tensors: it never syncs with the host,
so whoever times it decides where synchronisation happens.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch

from gpt import torch_compat
from gpt.config import WorkloadConfig
from gpt.data import Batches, Corpus, load_corpus
from gpt.models import build_model
from gpt.models import unsupported as model_unsupported
from gpt.torch_compat import Unsupported

AUTOCAST_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise Unsupported("device=cuda requested but torch sees no CUDA device")
    return torch.device(name)


def check_supported(config: WorkloadConfig, device: torch.device) -> None:
    """Raise Unsupported for a knob this device or torch version cannot do, before any work."""
    reasons = []
    if config.optimizer == "fused":
        reasons.append(torch_compat.fused_adamw_unsupported(device.type))
    if config.precision in AUTOCAST_DTYPES:
        reasons.append(torch_compat.autocast_unsupported(device.type, AUTOCAST_DTYPES[config.precision]))
    if config.compile != "off":
        reasons.append(torch_compat.compile_unsupported())
    if config.precision == "fp16":
        reasons.append(torch_compat.grad_scaler_cuda_only(device.type))
    if config.attention == "sdpa" and config.sdpa_backend != "auto":
        if not torch_compat.sdpa_backend_exists(config.sdpa_backend):
            reasons.append(f"SDPA backend {config.sdpa_backend!r} does not exist in torch {torch.__version__}")
        elif device.type == "cpu" and config.sdpa_backend not in ("flash", "math"):
            reasons.append(f"SDPA backend {config.sdpa_backend!r} has no CPU kernel (CPU has flash and math)")
    reasons.append(torch_compat.lm_head_loss_unsupported(config.lm_head_loss, device.type))
    reasons.append(model_unsupported(config))
    if config.compile in ("reduce-overhead",) and device.type == "cpu":
        reasons.append("compile mode reduce-overhead uses CUDA graphs; there are none on CPU")
    reasons = [r for r in reasons if r]
    if reasons:
        raise Unsupported("; ".join(reasons))


def make_optimizer(model: torch.nn.Module, config: WorkloadConfig) -> torch.optim.AdamW:
    """nanoGPT's AdamW: weight decay on matrices only, betas (0.9, 0.95)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": config.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    impl = {"fused": True} if config.optimizer == "fused" else {"foreach": True}
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.95), eps=1e-8, **impl)


@dataclass
class Trainer:
    config: WorkloadConfig
    device: torch.device
    model: torch.nn.Module  # the plain module (parameters, FLOPs): gpt/models.py's interface
    forward: torch.nn.Module  # what runs: the compiled module, or the plain one
    optimizer: torch.optim.Optimizer
    scaler: object
    batches: Batches
    corpus: Corpus

    def autocast(self):
        dtype = AUTOCAST_DTYPES.get(self.config.precision)
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=dtype)

    def step(self):
        """One optimizer step. Returns (mean loss, grad norm or None) as device tensors."""
        accum = self.config.grad_accum
        loss_sum = torch.zeros((), device=self.device)
        for _ in range(accum):
            x, y = self.batches.next()
            with self.autocast():
                _, loss = self.forward(x, y)
            loss = loss / accum
            loss_sum += loss.detach()
            self.scaler.scale(loss).backward()
        norm = None
        if self.config.grad_clip > 0:
            self.scaler.unscale_(self.optimizer)
            norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_sum, norm


def build(config: WorkloadConfig) -> Trainer:
    """Everything for training, on the configured device. Global flags must already be frozen."""
    device = resolve_device(config.device)
    check_supported(config, device)
    if config.compile != "off" and device.type == "cpu":
        missing = torch_compat.cpp_compiler_missing()
        if missing:
            raise torch_compat.ToolMissing(missing)
    torch.manual_seed(config.seed)
    corpus = load_corpus(config.data, config.seed, config.vocab_size)
    model = build_model(config)
    model.to(device)
    forward = model
    if config.compile != "off":
        forward = torch.compile(model, mode=None if config.compile == "default" else config.compile)
    scaler = torch_compat.grad_scaler(device.type, enabled=config.precision == "fp16")
    return Trainer(
        config=config,
        device=device,
        model=model,
        forward=forward,
        optimizer=make_optimizer(model, config),
        scaler=scaler,
        batches=Batches(corpus, config.batch_size, config.seq_len, device),
        corpus=corpus,
    )
