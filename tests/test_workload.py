"""gpt/: config validation, presets, data sources, the model's shape and FLOPs."""

import re

import numpy as np
import pytest
import torch

from gpt.config import ConfigError, make_config
from gpt.data import LLMC_MAGIC, Batches, DataError, load_corpus, synthetic_tokens
from gpt.model import GPT


def test_presets_and_overrides():
    c = make_config("gpt2-124m")
    assert (c.n_layer, c.n_head, c.n_embd, c.seq_len, c.vocab_size) == (12, 12, 768, 1024, 50257)
    c = make_config("tiny", batch_size="8", grad_clip="1.0", precision="bf16")
    assert c.batch_size == 8 and c.grad_clip == 1.0 and c.tokens_per_step == 8 * c.seq_len


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"precision": "fp8"}, "precision='fp8': expected one of"),
        ({"batch_size": "0"}, "batch_size=0: must be at least 1"),
        ({"n_embd": "65"}, "not divisible by n_head"),
        ({"warmup_steps": "20", "steps": "20"}, "warmup_steps=20"),
        ({"data": "http://x"}, "expected synthetic, text:PATH or tokens:PATH"),
        ({"sdpa_backend": "flash"}, "sdpa_backend applies only to attention=sdpa"),
        ({"bogus": "1"}, "unknown workload field 'bogus'"),
        ({"steps": "many"}, "steps='many': expected an integer"),
        ({"grad_clip": "lots"}, "grad_clip='lots': expected a number"),
        ({"n_layer": None}, "n_layer=None: expected an integer, got null"),
        ({"batch_size": [1, 2]}, "batch_size=[1, 2]: expected an integer, got a list"),
        ({"batch_size": 2.5}, "batch_size=2.5: expected an integer, got a non-integer number"),
        ({"steps": True}, "steps=True: expected an integer, got true/false"),
        ({"precision": 16}, "precision=16: expected a string, got an integer"),
        ({"memory_budget_gib": "half"}, "memory_budget_gib='half': expected a number"),
    ],
)
def test_bad_config_is_one_clear_error(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        make_config("tiny", **overrides)


def test_gpt2_124m_has_gpt2s_parameter_count():
    model = GPT(12, 12, 768, 50257, 1024, "sdpa")
    assert sum(p.numel() for p in model.parameters()) == 124_439_808  # GPT-2 small, lm_head tied to wte
    assert model.lm_head.weight is model.transformer.wte.weight
    # nanoGPT's MFU numerator: 6N + 12*L*H*Q*T with N excluding the position embedding.
    assert model.flops_per_token() == 6 * (124_439_808 - 1024 * 768) + 12 * 12 * 12 * 64 * 1024


def test_gpt2_init_scales_residual_projections():
    torch.manual_seed(0)
    model = GPT(12, 12, 768, 50257, 256, "naive")
    std_attn_proj = model.transformer.h[0].attn.c_proj.weight.std().item()
    std_fc = model.transformer.h[0].mlp.c_fc.weight.std().item()
    assert std_fc == pytest.approx(0.02, rel=0.05)
    assert std_attn_proj == pytest.approx(0.02 / (24 ** 0.5), rel=0.05)


def test_naive_and_sdpa_attention_agree():
    torch.manual_seed(0)
    naive = GPT(2, 2, 32, 100, 16, "naive")
    sdpa = GPT(2, 2, 32, 100, 16, "sdpa")
    sdpa.load_state_dict(naive.state_dict())
    idx = torch.randint(0, 100, (3, 16))
    torch.testing.assert_close(naive(idx)[0], sdpa(idx)[0], rtol=1e-4, atol=1e-5)


def test_synthetic_corpus_is_deterministic_and_learnable():
    a, b, c = synthetic_tokens(1, 50257), synthetic_tokens(1, 50257), synthetic_tokens(2, 50257)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.max() < 50257 and len(np.unique(a)) <= 1024  # a small alphabet of phrases: learnable
    corpus = load_corpus("synthetic", 1, 50257)
    assert corpus.source == "synthetic" and len(corpus.sha256) == 64


def test_token_files_raw_npy_and_llmc(tmp_path):
    ids = np.arange(1000, dtype=np.uint16)
    (tmp_path / "raw.bin").write_bytes(ids.tobytes())
    np.save(tmp_path / "ids.npy", ids)
    header = np.zeros(256, dtype=np.int32)
    header[0], header[1], header[2] = LLMC_MAGIC, 1, len(ids)
    (tmp_path / "llmc.bin").write_bytes(header.tobytes() + ids.tobytes())
    for name in ("raw.bin", "ids.npy", "llmc.bin"):
        corpus = load_corpus(f"tokens:{tmp_path / name}", 0, 50257)
        assert np.array_equal(corpus.tokens, ids.astype(np.int64)), name
        assert corpus.source == f"tokens:{tmp_path / name}"
    assert load_corpus(f"tokens:{tmp_path / 'raw.bin'}", 0, 50257).sha256 != load_corpus(f"tokens:{tmp_path / 'llmc.bin'}", 0, 50257).sha256


def test_token_file_errors(tmp_path):
    with pytest.raises(DataError, match="data file not found"):
        load_corpus(f"tokens:{tmp_path / 'missing.bin'}", 0, 50257)
    (tmp_path / "odd.bin").write_bytes(b"abc")
    with pytest.raises(DataError, match="odd byte count"):
        load_corpus(f"tokens:{tmp_path / 'odd.bin'}", 0, 50257)
    (tmp_path / "big.bin").write_bytes(np.array([60000], dtype=np.uint16).tobytes())
    with pytest.raises(DataError, match="outside vocab_size"):
        load_corpus(f"tokens:{tmp_path / 'big.bin'}", 0, 50257)


def test_text_file_is_tokenised_with_the_gpt2_encoding(tmp_path, monkeypatch):
    import tiktoken

    # The real gpt2 encoding needs a download this machine cannot make; a byte-level BPE with
    # the same Encoding API stands in, so the text path itself (read, encode, hash) is exercised.
    byte_level = tiktoken.Encoding("bytes", pat_str=r"\S+|\s+", mergeable_ranks={bytes([i]): i for i in range(256)}, special_tokens={})
    monkeypatch.setattr("gpt.data.gpt2_encoding", lambda: byte_level)
    (tmp_path / "t.txt").write_text("hello world")
    corpus = load_corpus(f"text:{tmp_path / 't.txt'}", 0, 50257)
    assert corpus.tokens.tolist() == list(b"hello world")


def test_text_file_without_cached_encoding_fails_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    (tmp_path / "t.txt").write_text("hello")
    try:
        corpus = load_corpus(f"text:{tmp_path / 't.txt'}", 0, 50257)
    except DataError as exc:
        assert "TIKTOKEN_CACHE_DIR" in str(exc) and str(tmp_path / "empty-cache") in str(exc)
    else:  # a machine with network fetched it: then the tokens must be gpt2's
        assert corpus.tokens.tolist() == [31373]


def test_batches_are_sequential_slices_that_wrap():
    corpus = load_corpus("synthetic", 3, 50257)
    batches = Batches(corpus, 2, 8, torch.device("cpu"))
    x, y = batches.next()
    assert x.shape == (2, 8) and torch.equal(x.flatten()[1:], y.flatten()[:-1])
    assert torch.equal(x.flatten(), torch.from_numpy(corpus.tokens[:16]))
    batches.pos = len(corpus.tokens) - 5
    x, _ = batches.next()
    assert torch.equal(x.flatten(), torch.from_numpy(corpus.tokens[:16]))  # wrapped to the start
