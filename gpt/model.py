"""GPT-2 in one readable file, after nanoGPT's model.py.

lm_head is tied to the token embedding; weights use GPT-2's init (normal 0.02, residual projections
scaled by 1/sqrt(2 * n_layer)). Attention is either the naive masked softmax or
F.scaled_dot_product_attention; which SDPA backend runs is a global flag the harness freezes.
The loss is either lm_head then F.cross_entropy (lm_head_loss="plain") or a fused linear + cross-entropy
from a library (gpt/torch_compat.py), fed the final hidden states and the tied lm_head weight.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from gpt import torch_compat


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, seq_len: int, attention: str):
        super().__init__()
        self.n_head = n_head
        self.attention = attention
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.c_proj.residual_scale_init = True
        if attention == "naive":
            mask = torch.tril(torch.ones(seq_len, seq_len)).view(1, 1, seq_len, seq_len)
            self.register_buffer("bias", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        if self.attention == "sdpa":
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.c_proj.residual_scale_init = True

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, seq_len: int, attention: str):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, seq_len, attention)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer: int, n_head: int, n_embd: int, vocab_size: int, seq_len: int, attention: str,
                 lm_head_loss: str = "plain"):
        super().__init__()
        self.n_layer, self.n_head, self.n_embd, self.seq_len = n_layer, n_head, n_embd, seq_len
        self.transformer = nn.ModuleDict(
            {
                "wte": nn.Embedding(vocab_size, n_embd),
                "wpe": nn.Embedding(seq_len, n_embd),
                "h": nn.ModuleList(Block(n_embd, n_head, seq_len, attention) for _ in range(n_layer)),
                "ln_f": nn.LayerNorm(n_embd),
            }
        )
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying, as in GPT-2
        # None: logits, then F.cross_entropy. Else (hidden [N, C], weight [V, C], targets [N]) -> mean loss.
        self.fused_loss = None if lm_head_loss == "plain" else torch_compat.linear_cross_entropy(lm_head_loss)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = 0.02
            if getattr(module, "residual_scale_init", False):
                std *= (2 * self.n_layer) ** -0.5
            torch.nn.init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        T = idx.size(1)
        if T > self.seq_len:
            raise ValueError(f"sequence of length {T} exceeds the model's seq_len {self.seq_len}")
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None and self.fused_loss is not None:
            # the (B*T x vocab) logits are never materialised: the library fuses lm_head and the cross-entropy
            return None, self.fused_loss(x.reshape(-1, x.size(-1)), self.lm_head.weight, targets.reshape(-1))
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def num_params(self, non_embedding: bool = True) -> int:
        """Parameter count; by default without the position embedding (nanoGPT's N for MFU).

        The token embedding is tied to lm_head, so it counts once, as lm_head's weight."""
        n = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n -= self.transformer.wpe.weight.numel()
        return n

    def flops_per_token(self) -> int:
        """nanoGPT's estimate (PaLM appendix B): 6N + 12*L*H*Q*T, N without the position embedding."""
        L, H, Q, T = self.n_layer, self.n_head, self.n_embd // self.n_head, self.seq_len
        return 6 * self.num_params() + 12 * L * H * Q * T
