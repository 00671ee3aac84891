"""The model a workload trains (gpt/models.py, workload field model): ours, Hugging Face's GPT-2, a user's own.
Built and trained for real on the CPU (transformers as the tests' env pins it, envs/latest/env.yaml), and compared as
a dimension: two models are never pooled, and the models table sets them side by side."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
import torch
from records_factory import make_record, write

from gpt import models, torch_compat
from gpt.config import OURS, ConfigError, WorkloadConfig, make_config, user_model_parts
from gpt.train import build
from harness.analysis.options import CompareOptions, analyse
from harness.analysis.tables.ladder import ladders
from harness.analysis.tables.models import model_pairs, models_table
from harness.record import model as record_model
from harness.record.model import workload_hash
from harness.record.sections import Workload

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers is pinned in the env specs, not here")


def _steps(config: WorkloadConfig, n: int = 2) -> tuple[object, list[float]]:
    torch.manual_seed(config.seed)
    trainer = build(config)
    return trainer, [float(trainer.step()[0]) for _ in range(n)]


# ---------------------------------------------------------------- the choice and its identity

def test_the_harness_and_the_workload_name_our_model_alike():
    assert record_model.OURS == OURS == WorkloadConfig().model


@pytest.mark.parametrize("bad", ["", "gpt2", "transformer", "a.b", "a:b:c", "1mod:build", "mod:", "mod:build@xyz"])
def test_a_model_that_is_none_of_the_three_kinds_is_refused(bad):
    with pytest.raises(ConfigError, match="model="):
        make_config("tiny", model=bad)


def _user_module(tmp_path, monkeypatch, source: str, name: str = "my_user_model"):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return tmp_path / f"{name}.py"


TINY_LM = """
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self, vocab, dim):
            super().__init__()
            self.emb, self.out = nn.Embedding(vocab, dim), nn.Linear(dim, vocab)
        def forward(self, idx):
            return self.out(self.emb(idx))

    def build(config):
        return Net(config.vocab_size, config.n_embd)

    def with_loss(config):
        net = Net(config.vocab_size, config.n_embd)
        return net, lambda logits, targets: torch.zeros((), requires_grad=True) + 7.0

    def not_a_module(config):
        return "a model"
"""


def test_a_users_model_carries_its_source_digest_and_a_changed_file_is_another_workload(tmp_path, monkeypatch):
    path = _user_module(tmp_path, monkeypatch, TINY_LM)
    first = make_config("tiny", model="my_user_model:build")
    module, function, digest = user_model_parts(first.model)
    assert (module, function) == ("my_user_model", "build") and len(digest) == 16
    assert make_config("tiny", model=first.model).model == first.model  # a rerun of the same file: accepted
    path.write_text(path.read_text() + "\n# edited\n")
    second = make_config("tiny", model="my_user_model:build")
    assert second.model != first.model
    assert workload_hash(second.to_dict()) != workload_hash(first.to_dict())  # never pooled with the old runs
    with pytest.raises(ConfigError, match="source has changed"):
        make_config("tiny", model=first.model)  # the old record's rerun command, on the edited file


def test_a_users_model_that_cannot_be_found_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="no module 'no_such_model_here' importable"):
        make_config("tiny", model="no_such_model_here:build")


def test_our_model_hashes_as_every_record_made_before_the_field():
    config = make_config("tiny")
    before = {k: v for k, v in config.to_dict().items() if k != "model"}
    assert workload_hash(config.to_dict()) == workload_hash(before)
    assert Workload(before).model == OURS


# ---------------------------------------------------------------- trained for real on the CPU

def test_a_users_model_trains_under_the_harness_with_its_own_or_our_loss(tmp_path, monkeypatch):
    _user_module(tmp_path, monkeypatch, TINY_LM)
    trainer, losses = _steps(make_config("tiny", model="my_user_model:build", device="cpu"))
    assert all(9.0 < v < 12.0 for v in losses)  # the next-token cross-entropy at about ln(50257)
    assert trainer.model.flops_exact is False and trainer.model.num_params() == sum(p.numel() for p in trainer.model.parameters())
    _t, own = _steps(make_config("tiny", model="my_user_model:with_loss", device="cpu"))
    assert own == [7.0, 7.0]
    with pytest.raises(TypeError, match="not a torch.nn.Module"):
        build(make_config("tiny", model="my_user_model:not_a_module", device="cpu"))


def test_the_example_in_the_docs_trains():
    _trainer, losses = _steps(make_config("tiny", model="examples.tiny_lm:build", device="cpu"), 3)
    assert all(10.0 < v < 11.5 for v in losses) and losses[-1] < losses[0]


def test_a_users_model_has_no_attention_or_loss_switch_for_the_harness_to_set(tmp_path, monkeypatch):
    _user_module(tmp_path, monkeypatch, TINY_LM)
    config = make_config("tiny", model="my_user_model:build", attention="sdpa")
    assert "computes its own attention and loss" in models.unsupported(config)


@needs_transformers
@pytest.mark.parametrize("attention", ["naive", "sdpa"])
def test_hugging_faces_gpt2_trains_with_our_shapes_and_flops(attention):
    config = make_config("tiny", model="transformers", attention=attention, device="cpu", precision="bf16")
    trainer, losses = _steps(config)
    ours, _ = _steps(make_config("tiny", attention=attention, device="cpu", precision="bf16"))
    assert trainer.model.hf.config._attn_implementation == ("eager" if attention == "naive" else "sdpa")
    assert trainer.model.num_params() == ours.model.num_params()  # GPT-2's shapes: the same N and FLOPs as ours
    assert trainer.model.flops_per_token() == ours.model.flops_per_token() and trainer.model.flops_exact
    assert all(10.0 < v < 11.5 for v in losses)


@needs_transformers
def test_hugging_faces_gpt2_takes_a_fused_lm_head_loss_from_its_hidden_states(monkeypatch):
    seen = {}

    def fused(kind):
        def loss(hidden, weight, targets):
            seen["shapes"] = (tuple(hidden.shape), tuple(weight.shape), tuple(targets.shape))
            return torch.nn.functional.cross_entropy(hidden @ weight.T, targets)
        return loss
    monkeypatch.setattr(torch_compat, "linear_cross_entropy", fused)
    model = models.TransformersGPT2(make_config("tiny", model="transformers", lm_head_loss="cce-torch-compile"))
    idx = torch.randint(0, 50257, (2, 8))
    logits, loss = model(idx, idx)
    assert logits is None and seen["shapes"] == ((16, 64), (50257, 64), (16,)) and loss.item() > 0


def test_without_transformers_the_rung_is_unsupported_in_one_line(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    reason = torch_compat.transformers_unsupported("sdpa", compiled=False)
    assert reason.startswith("model=transformers needs the transformers package") and "\n" not in reason


# ---------------------------------------------------------------- a dimension of the comparison

def _records(tmp_path):
    ours = [make_record(rung=r, env="local", gpu=None, workload={"precision": p}, ms=[5000.0, 150.0] + [m] * 10)
            for r, p, m in (("fp32", "fp32", 100.0), ("bf16", "bf16", 50.0))]
    hf = [make_record(rung=r, env="local", gpu=None, workload={"precision": p, "model": "transformers"},
                      ms=[5000.0, 150.0] + [m] * 10)
          for r, p, m in (("fp32", "fp32", 120.0), ("bf16", "bf16", 80.0))]
    return write(tmp_path / "runs", ours + hf)


def test_two_models_are_two_ladders_and_one_models_table(tmp_path):
    _ds, cmp = analyse(CompareOptions((str(_records(tmp_path)),), use_index=False), lambda line: None)
    assert sorted((lad.model, [s.rung for s in lad.steps]) for lad in ladders(cmp)) == [
        ("ours", ["fp32", "bf16"]), ("transformers", ["fp32", "bf16"])]
    pairs = model_pairs(cmp)
    assert [(p.a.model, p.b.model, p.a.rung_label) for p in pairs] == [("ours", "transformers", "fp32"),
                                                                       ("ours", "transformers", "bf16")]  # rung order
    assert [round(p.speed.value, 3) for p in pairs] == [round(100 / 120 - 1, 3), round(50 / 80 - 1, 3)]
    assert pairs[0].b.label == "fp32 [model=transformers]"
    (table,) = models_table(cmp)
    assert [row["models"] for row in table.rows] == ["ours -> transformers"] * 2


def test_one_model_makes_no_models_table(tmp_path):
    records = [make_record(rung="fp32", env="local", gpu=None)]
    _ds, cmp = analyse(CompareOptions((str(write(tmp_path / "runs", records)),), use_index=False), lambda line: None)
    assert models_table(cmp) == []


def test_a_users_models_rerun_command_names_the_source_it_ran(tmp_path, monkeypatch):
    from harness.runner.request import RunRequest, build_points, rerun_command

    _user_module(tmp_path, monkeypatch, TINY_LM)
    request = RunRequest(rungs="fp32", model="my_user_model:build", sets=("model=my_user_model:build",))
    _plan, points = build_points(request)
    pinned = points[0].workload["model"]
    command = rerun_command(request, points[0])
    assert "@" in pinned and command.endswith(f"--model {pinned}") and command.count("--model") == 1


def test_the_verdict_judges_each_model_apart_between_two_builds(tmp_path):
    """ours is 10% faster under the newer build, transformers 30% slower: two pairs, each named, never one mean."""
    records = []
    for env, ours_ms, hf_ms in (("torch212", 100.0, 100.0), ("torch23", 100.0 / 1.1, 100.0 / 0.7)):
        for repeat in range(3):
            records.append(make_record(rung="fp32", env=env, repeat=repeat, ms=[5000.0, 150.0] + [ours_ms] * 10))
            records.append(make_record(rung="fp32", env=env, repeat=repeat, workload={"model": "transformers"},
                                       ms=[5000.0, 150.0] + [hf_ms] * 10))
    from harness.analysis.verdict import verdict
    from harness.console.verdict_text import verdict_blocks

    _ds, cmp = analyse(CompareOptions((str(write(tmp_path / "runs", records)),), use_index=False), lambda line: None)
    pairs = [p for p in verdict(cmp).pairs if p.across == "env"]
    assert [(p.model, round(p.speed.value, 3)) for p in pairs] == [("ours", 0.1), ("transformers", -0.3)]
    heads = [head for head, _details in verdict_blocks(verdict(cmp), cmp.name, cmp.word, cmp.ds.env_versions)]
    assert sum(", model transformers: 1.43x slower" in head for head in heads) == 1 and sum("model" in h for h in heads) == 1
