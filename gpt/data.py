"""Training data: one corpus of token ids, kept on the training device, read in order.

Sources (config.data):
  synthetic       deterministic corpus from the seed with learnable structure (no download)
  text:PATH       a text file tokenised with tiktoken's gpt2 encoding (TIKTOKEN_CACHE_DIR honoured)
  tokens:PATH     pre-tokenised uint16 ids: raw .bin, llm.c .bin (256-int32 header) or .npy

The whole corpus is moved to the device once, so a batch is a slice: no host work inside the step.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

SYNTHETIC_TOKENS = 1 << 20
LLMC_MAGIC = 20240520  # llm.c's .bin header magic


class DataError(RuntimeError):
    """The configured data cannot be loaded."""


@dataclass
class Corpus:
    tokens: np.ndarray  # uint16 or int64 ids
    source: str  # what config.data said
    sha256: str  # of the file, or of the generated ids


def synthetic_tokens(seed: int, vocab_size: int, n_tokens: int = SYNTHETIC_TOKENS) -> np.ndarray:
    """Random "phrases" (runs of 4-32 ids over a 1024-id alphabet) concatenated in random order.

    Identical for a given seed, vectorised (milliseconds), and learnable: inside a phrase the next id
    is determined by the previous ones, so the loss visibly falls."""
    rng = np.random.default_rng(seed)
    alphabet = rng.choice(min(vocab_size, 50257), size=min(1024, vocab_size), replace=False)
    lengths = rng.integers(4, 33, size=2048)
    flat = alphabet[rng.integers(0, len(alphabet), size=int(lengths.sum()))]  # all phrases, end to end
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    order = rng.integers(0, len(lengths), size=n_tokens // 4 + 1)  # enough phrases: each is >= 4 ids
    # Gather phrase after phrase without a Python loop: index = phrase start + position inside it.
    run_lengths = lengths[order]
    offsets = np.arange(run_lengths.sum()) - np.repeat(np.cumsum(run_lengths) - run_lengths, run_lengths)
    return flat[np.repeat(starts[order], run_lengths) + offsets][:n_tokens].astype(np.int64)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _read_token_file(path: Path) -> np.ndarray:
    if path.suffix == ".npy":
        return np.load(path).astype(np.int64)
    raw = path.read_bytes()
    header = np.frombuffer(raw[:1024], dtype=np.int32) if len(raw) >= 1024 else None
    if header is not None and header[0] == LLMC_MAGIC:
        return np.frombuffer(raw[1024:], dtype=np.uint16)[: int(header[2])].astype(np.int64)
    if len(raw) % 2:
        raise DataError(f"{path}: odd byte count, not a uint16 token file")
    return np.frombuffer(raw, dtype=np.uint16).astype(np.int64)


def gpt2_encoding():
    """tiktoken's gpt2 encoding, with a clear error when it can be neither found nor fetched."""
    import tiktoken

    try:
        return tiktoken.get_encoding("gpt2")
    except Exception as exc:  # noqa: BLE001 -- tiktoken raises requests/urllib errors or ValueError when offline
        cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR") or "<tmp>/data-gym-cache"
        raise DataError(
            f"tiktoken's gpt2 encoding is not cached in {cache} and could not be downloaded "
            f"({type(exc).__name__}); run once with network, or set TIKTOKEN_CACHE_DIR to a folder holding it"
        ) from None


def load_corpus(data: str, seed: int, vocab_size: int) -> Corpus:
    kind, _, arg = data.partition(":")
    if kind == "synthetic":
        ids = synthetic_tokens(seed, vocab_size)
        return Corpus(ids, "synthetic", hashlib.sha256(ids.tobytes()).hexdigest())
    path = Path(arg)
    if not path.is_file():
        raise DataError(f"data file not found: {path}")
    if kind == "text":
        ids = np.array(gpt2_encoding().encode_ordinary(path.read_text(encoding="utf-8")), dtype=np.int64)
    elif kind == "tokens":
        ids = _read_token_file(path)
    else:
        raise DataError(f"unknown data source {data!r}")
    if ids.size and int(ids.max()) >= vocab_size:
        raise DataError(f"{path}: token id {int(ids.max())} is outside vocab_size={vocab_size}")
    return Corpus(ids, data, _sha256_file(path))


class Batches:
    """Sequential (x, y) batches from a corpus held on the device, wrapping at the end."""

    def __init__(self, corpus: Corpus, batch_size: int, seq_len: int, device: torch.device):
        need = batch_size * seq_len + 1
        if len(corpus.tokens) < need:
            raise DataError(f"corpus has {len(corpus.tokens)} tokens; one batch needs {need}")
        self.tokens = torch.from_numpy(np.ascontiguousarray(corpus.tokens)).to(device)
        self.B, self.T, self.pos = batch_size, seq_len, 0

    def next(self):
        B, T = self.B, self.T
        if self.pos + B * T + 1 > len(self.tokens):
            self.pos = 0
        buf = self.tokens[self.pos : self.pos + B * T + 1]
        self.pos += B * T
        return buf[:-1].view(B, T), buf[1:].view(B, T)
