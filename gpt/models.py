"""The model a workload trains (WorkloadConfig.model): this project's GPT (gpt/model.py, "ours"), Hugging Face's
GPT2LMHeadModel ("transformers"), or a user's own ("package.module:function").

Whatever it is, the trainer sees one interface, as gpt.model.GPT has it:

  forward(idx, targets) -> (logits or None, loss)   loss: mean cross-entropy of the next token, targets = idx shifted
  num_params()                                      N of MFU's 6N (nanoGPT's: without the position embedding)
  flops_per_token()                                 the FLOPs one trained token costs
  flops_exact                                       False where flops_per_token is an estimate from N and the shape

The user's contract (docs/quickstart.md): `function(config)` gets the WorkloadConfig and returns a torch.nn.Module
whose forward(idx [B, T] int64) returns logits [B, T, vocab] (a tensor, or an object with .logits), or a pair
(module, loss) where loss(logits, targets) returns the mean loss. Precision, autocast, the SDPA backend flags,
torch.compile, the optimizer, clipping and the timing are the harness's, as for ours.
"""

from __future__ import annotations

import importlib

from torch import nn
from torch.nn import functional as F

from gpt import torch_compat
from gpt.config import OURS, TRANSFORMERS, WorkloadConfig, user_model_digest, user_model_parts
from gpt.model import GPT


def build_model(config: WorkloadConfig) -> nn.Module:
    """The configured model, on the CPU, initialised from the current torch seed."""
    if config.model == OURS:
        return GPT(config.n_layer, config.n_head, config.n_embd, config.vocab_size, config.seq_len, config.attention,
                   config.lm_head_loss)
    if config.model == TRANSFORMERS:
        return TransformersGPT2(config)
    return UserModel(config)


def unsupported(config: WorkloadConfig) -> str | None:
    """Why this model cannot run this config here, or None (a knob it has no switch for is unsupported, never faked)."""
    if config.model == OURS:
        return None
    if config.model == TRANSFORMERS:
        return torch_compat.transformers_unsupported(config.attention, config.compile != "off")
    knobs = [f"{name}={getattr(config, name)}" for name, ours in (("attention", "naive"), ("lm_head_loss", "plain"))
             if getattr(config, name) != ours]
    if knobs:
        return (f"{', '.join(knobs)}: a user's model (model={config.model}) computes its own attention and loss; "
                "leave attention and lm_head_loss at their defaults")
    return None


def _attention_flops(config: WorkloadConfig) -> int:
    """nanoGPT's attention term of the FLOPs per token (PaLM appendix B): 12 * L * H * Q * T."""
    return 12 * config.n_layer * config.n_head * (config.n_embd // config.n_head) * config.seq_len


class TransformersGPT2(nn.Module):
    """Hugging Face's GPT2LMHeadModel from a GPT2Config with the preset's shape, random init (no hub download),
    dropout 0 as ours, and the library's defaults otherwise (its GELU "gelu_new", Conv1D layers). attention naive ->
    attn_implementation "eager", sdpa -> "sdpa" (F.scaled_dot_product_attention, is_causal: the frozen SDPA backend
    flags choose its kernel). The loss is ours, from its logits (or, with a fused lm_head_loss, from its final hidden
    states and its tied lm_head weight), so the two models train on one definition of the loss."""

    flops_exact = True  # GPT-2's shapes, as ours: the same FLOPs per token

    def __init__(self, config: WorkloadConfig):
        super().__init__()
        self.config_ = config
        self.hf = torch_compat.transformers_gpt2(
            n_layer=config.n_layer, n_head=config.n_head, n_embd=config.n_embd, n_positions=config.seq_len,
            vocab_size=config.vocab_size, eager=config.attention == "naive")
        self.fused_loss = (None if config.lm_head_loss == "plain"
                           else torch_compat.linear_cross_entropy(config.lm_head_loss))

    def forward(self, idx, targets=None):
        if targets is not None and self.fused_loss is not None:
            hidden = self.hf.transformer(input_ids=idx).last_hidden_state
            return None, self.fused_loss(hidden.reshape(-1, hidden.size(-1)), self.hf.lm_head.weight, targets.reshape(-1))
        logits = self.hf(input_ids=idx).logits
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def num_params(self) -> int:
        """All parameters (the tied wte / lm_head once) without the position embedding, as ours."""
        return sum(p.numel() for p in self.parameters()) - self.hf.transformer.wpe.weight.numel()

    def flops_per_token(self) -> int:
        return 6 * self.num_params() + _attention_flops(self.config_)


class UserModel(nn.Module):
    """A user's model from `package.module:function` (the contract in this module's docstring)."""

    flops_exact = False  # 6N + the attention term of the configured shape: the model's own shapes are not known

    def __init__(self, config: WorkloadConfig):
        super().__init__()
        self.config_ = config
        module_name, function_name, digest = user_model_parts(config.model)
        if digest is not None and digest != user_model_digest(module_name):  # edited between the request and now
            raise ValueError(f"model={config.model}: {module_name}'s source changed after the run was requested")
        made = getattr(importlib.import_module(module_name), function_name)(config)
        self.net, self.loss_fn = made if isinstance(made, tuple) else (made, None)
        if not isinstance(self.net, nn.Module):
            raise TypeError(f"model={config.model}: {function_name}(config) returned {type(self.net).__name__}, "
                            "not a torch.nn.Module (or a (module, loss) pair)")

    def forward(self, idx, targets=None):
        out = self.net(idx)
        logits = getattr(out, "logits", out)
        if targets is None:
            return logits, None
        if self.loss_fn is not None:
            return logits, self.loss_fn(logits, targets)
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self) -> int:
        return 6 * self.num_params() + _attention_flops(self.config_)

