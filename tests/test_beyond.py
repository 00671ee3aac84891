"""Beyond the ladder: the Inductor options as frozen flags, the beyond-ladder plan's knobs, and the modules that must
run where only results are (harness.analysis.fastest, harness.tune) importing no torch."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpt import torch_compat
from harness.runner import flags as flagmod
from harness.runner.flags import FrozenFlags
from harness.runner.plan import load_plan
from harness.tune import knobs_of

ROOT = Path(__file__).resolve().parent.parent


def test_coordinate_descent_and_aggressive_fusion_are_frozen_flags():
    """The Inductor options the beyond-ladder plan and harness.tune try: set before compilation, read back, hashed only
    when asked for, unsupported where this Inductor lacks them."""
    import torch._inductor.config as inductor_config

    base = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True)
    tuned = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, inductor_coordinate_descent_tuning="on")
    fused = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, inductor_aggressive_fusion="on")
    assert len({base.hash, tuned.hash, fused.hash}) == 3
    assert flagmod.flags_hash({k: v for k, v in base.to_dict().items() if not k.startswith("inductor_")}) == base.hash
    try:
        applied = flagmod.apply(FrozenFlags(inductor_coordinate_descent_tuning="on", inductor_aggressive_fusion="on"))
        assert applied["inductor_coordinate_descent_tuning"] is True and applied["inductor_aggressive_fusion"] is True
        assert inductor_config.coordinate_descent_tuning is True and inductor_config.aggressive_fusion is True
    finally:
        flagmod.apply(FrozenFlags(inductor_coordinate_descent_tuning="off", inductor_aggressive_fusion="off"))
    assert inductor_config.coordinate_descent_tuning is False and inductor_config.aggressive_fusion is False
    assert FrozenFlags.from_dict({"inductor_coordinate_descent_tuning": True}).inductor_coordinate_descent_tuning == "on"


def test_an_inductor_option_this_torch_lacks_is_unsupported(monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.delattr(inductor_config, "coordinate_descent_tuning")
    assert flagmod.read_back()["inductor_coordinate_descent_tuning"] is None
    with pytest.raises(torch_compat.Unsupported, match="no config.coordinate_descent_tuning"):
        flagmod.apply(FrozenFlags(inductor_coordinate_descent_tuning="on"))


def test_the_beyond_ladder_rungs_are_single_knobs():
    knobs = knobs_of(load_plan("beyond-ladder"))
    assert "best-of-ladder" not in knobs  # the plan's own start changes nothing
    assert knobs["sdpa-cudnn"] == {"set": {"sdpa_backend": "cudnn"}, "flags": {}}
    assert knobs["lm-head-liger"] == {"set": {"lm_head_loss": "liger"}, "flags": {}}
    assert knobs["compile-max-autotune"] == {"set": {"compile": "max-autotune"}, "flags": {}}
    assert knobs["inductor-coordinate-descent"] == {"set": {}, "flags": {"inductor_coordinate_descent_tuning": "on"}}
    assert all(len(k["set"]) + len(k["flags"]) == 1 for k in knobs.values())
    with pytest.raises(ValueError, match="cumulative"):
        knobs_of(load_plan("seed-ladder"))
