"""Your own model under the harness: an example of the contract in gpt/models.py.

    python -m harness.run --plan seed-ladder --rungs fp32,bf16 --set model=examples.tiny_lm:build

`build(config)` gets the WorkloadConfig (the preset's shape, vocab_size, seq_len, ...) and returns a torch.nn.Module
whose forward(idx [B, T]) returns logits [B, T, vocab]. It may instead return (module, loss) with loss(logits,
targets) -> the mean loss; without one the harness uses the next-token cross-entropy, as for its own GPT. Precision,
autocast, torch.compile, the optimizer and the timing stay the harness's; the record carries this file's digest, so
an edited model is another workload.

This one is a small decoder from torch's own nn.TransformerEncoderLayer with a causal mask: not GPT-2, on purpose.
"""

from __future__ import annotations

import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, n_embd: int, n_head: int, n_layer: int, seq_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, n_embd)
        self.positions = nn.Embedding(seq_len, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, n_head, dim_feedforward=4 * n_embd, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.tokens.weight  # tied, as GPT-2's
        for emb in (self.tokens, self.positions):  # GPT-2's scale; torch's N(0, 1) would start at a loss of ~40
            nn.init.normal_(emb.weight, std=0.02)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        T = idx.size(1)
        x = self.tokens(idx) + self.positions(torch.arange(T, device=idx.device))
        causal = nn.Transformer.generate_square_subsequent_mask(T, device=idx.device)
        x = self.blocks(x, mask=causal, is_causal=True)
        return self.head(self.norm(x))


def build(config) -> nn.Module:
    return TinyLM(config.vocab_size, config.n_embd, config.n_head, config.n_layer, config.seq_len)
