"""Frozen flags: derived from the workload, applied before build, hashed, and checked after the run."""

import pytest
import torch

from gpt import torch_compat
from harness.runner import flags as flagmod
from harness.runner.flags import FlagError, FrozenFlags, flags_for


def test_flags_follow_the_workload_as_in_the_seeds():
    fp32 = flags_for({"precision": "fp32", "attention": "naive"})
    assert fp32.matmul_precision == "highest" and fp32.cudnn_allow_tf32 is False and fp32.sdpa == "auto"
    tf32 = flags_for({"precision": "tf32", "attention": "naive"})
    assert tf32.matmul_precision == "high" and tf32.cudnn_allow_tf32 is True
    flash = flags_for({"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"})
    assert flash.sdpa == "flash" and flash.matmul_precision == "high"
    assert flags_for({"precision": "bf16", "attention": "naive"}, {"cudnn_benchmark": True}).cudnn_benchmark is True


def test_hash_separates_different_flags_and_is_stable():
    a, b = flags_for({"precision": "tf32"}), flags_for({"precision": "tf32"})
    assert a.hash == b.hash and len(a.hash) == 64
    assert a.hash != flags_for({"precision": "tf32"}, {"cudnn_benchmark": True}).hash
    assert a.hash != flags_for({"precision": "fp32"}).hash
    # The hash is of the requested values only: it does not depend on which torch runs it.
    assert FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True).hash == a.hash


@pytest.mark.parametrize("values, message", [
    ({"matmul_precision": "low"}, "matmul_precision='low'"),
    ({"sdpa": "fast"}, "sdpa='fast'"),
    ({"cudnn_benchmark": "yes"}, "cudnn_benchmark='yes': expected true or false"),
    ({"allow_everything": True}, "unknown flag"),
])
def test_bad_flags(values, message):
    with pytest.raises(FlagError, match=message):
        FrozenFlags.from_dict(values)


def test_apply_sets_and_reads_back_every_flag():
    try:
        applied = flagmod.apply(FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, cudnn_benchmark=True, sdpa="math"))
        assert applied["matmul_precision"] == "high" and applied["cudnn_benchmark"] is True
        assert [b for b, on in applied["sdpa_backends_enabled"].items() if on] == ["math"]
        assert applied["fp32_precision_api"] == ("fp32_precision" if torch_compat.NEW_FP32_API else "allow_tf32")
        applied = flagmod.apply(FrozenFlags())
        assert applied["matmul_precision"] == "highest" and applied["cudnn_allow_tf32"] is False
        assert applied["sdpa_backends_enabled"]["flash"] and applied["sdpa_backends_enabled"]["math"]
    finally:
        flagmod.apply(FrozenFlags())


def test_changed_names_the_flag_that_moved():
    before = {"cudnn_benchmark": False, "matmul_precision": "high"}
    assert flagmod.changed(before, dict(before)) == ""
    assert flagmod.changed(before, {**before, "cudnn_benchmark": True}) == "cudnn_benchmark: False -> True"


@pytest.mark.parametrize("precision", ["fp32", "tf32"])
def test_torch_own_legacy_readers_answer_after_the_flags_are_set(precision):
    # Inductor's max-autotune and CCE read the legacy getters; in 2.9+ they raise when only fp32_precision was
    # written (the H200's compile-max-autotune-no-cudagraphs and lm-head-cce runs failed so, 2026-11-27).
    flags = flags_for({"precision": precision, "attention": "naive"})
    tf32 = precision == "tf32"
    try:
        applied = flagmod.apply(flags)
        assert torch.get_float32_matmul_precision() == applied["matmul_precision"] == ("high" if tf32 else "highest")
        assert torch.backends.cuda.matmul.allow_tf32 is tf32
        assert torch.backends.cudnn.allow_tf32 is applied["cudnn_allow_tf32"] is tf32
        if torch_compat.NEW_FP32_API:
            assert torch.backends.cuda.matmul.fp32_precision == ("tf32" if tf32 else "ieee")
            assert (torch.backends.cudnn.conv.fp32_precision == "tf32") is tf32
            assert applied["cpu_fp32_precision"]["mkldnn.matmul"] == "none"  # the CPU's matmuls stay IEEE
            with pytest.raises(torch_compat.Unsupported, match="medium"):
                torch_compat.set_matmul_precision("medium")
    finally:
        flagmod.apply(FrozenFlags())


def test_inductor_padding_flags_are_hashed_only_when_asked_for():
    old_style = {"matmul_precision": "high", "cudnn_allow_tf32": True, "cudnn_benchmark": False,
                 "cudnn_deterministic": False, "sdpa": "auto", "deterministic_algorithms": False}
    default = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True)
    # records written before the Inductor options existed hash like records that leave them at default
    assert flagmod.flags_hash(old_style) == default.hash == flagmod.flags_hash(default.to_dict())
    off = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, inductor_shape_padding="off")
    on = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, inductor_shape_padding="on")
    both = FrozenFlags(matmul_precision="high", cudnn_allow_tf32=True, inductor_shape_padding="off",
                       inductor_comprehensive_padding="off")
    assert len({default.hash, off.hash, on.hash, both.hash}) == 4
    with pytest.raises(FlagError, match="inductor_shape_padding='maybe'"):
        FrozenFlags(inductor_shape_padding="maybe")


def test_inductor_padding_flags_are_applied_and_read_back():
    try:
        applied = flagmod.apply(FrozenFlags(inductor_shape_padding="off", inductor_comprehensive_padding="off"))
        assert applied["inductor_shape_padding"] is False and applied["inductor_comprehensive_padding"] is False
        import torch._inductor.config as inductor_config

        assert inductor_config.shape_padding is False and inductor_config.comprehensive_padding is False
        applied = flagmod.apply(FrozenFlags(inductor_shape_padding="on", inductor_comprehensive_padding="on"))
        assert applied["inductor_shape_padding"] is True and applied["inductor_comprehensive_padding"] is True
        # "default" leaves the config as it is and reads back what it is
        assert flagmod.apply(FrozenFlags())["inductor_shape_padding"] is True
    finally:
        flagmod.apply(FrozenFlags(inductor_shape_padding="on", inductor_comprehensive_padding="on"))
    assert flagmod.changed({"inductor_shape_padding": True}, {"inductor_shape_padding": False}) == \
        "inductor_shape_padding: True -> False"


def test_comprehensive_padding_is_unsupported_where_inductor_lacks_it(monkeypatch):
    import torch._inductor.config as inductor_config

    monkeypatch.delattr(inductor_config, "comprehensive_padding")  # as in torch 2.1.2 and 2.3.1
    assert torch_compat.get_inductor_option("comprehensive_padding") is None
    assert flagmod.read_back()["inductor_comprehensive_padding"] is None
    with pytest.raises(torch_compat.Unsupported, match=r"no config.comprehensive_padding .* arrived in 2.4"):
        flagmod.apply(FrozenFlags(inductor_comprehensive_padding="off"))


def test_changed_names_a_nested_setting_by_its_path():
    before = {"cpu_fp32_precision": {"mkldnn.matmul": "none", "mkldnn.conv": "none"}, "cudnn_benchmark": False}
    after = {"cpu_fp32_precision": {"mkldnn.matmul": "bf16", "mkldnn.conv": "none"}, "cudnn_benchmark": False}
    assert flagmod.changed(before, after) == "cpu_fp32_precision.mkldnn.matmul: 'none' -> 'bf16'"


def test_read_back_tracks_the_cpu_fp32_precision_and_the_tf32_env_overrides(monkeypatch):
    monkeypatch.delenv("NVIDIA_TF32_OVERRIDE", raising=False)
    monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
    read = flagmod.read_back()
    assert read["tf32_env_overrides"] == {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE": "1"}
    cpu = read["cpu_fp32_precision"]
    if torch_compat.NEW_FP32_API:  # 2.9+: oneDNN has its own fp32_precision settings
        assert {"generic", "mkldnn.matmul", "mkldnn.conv"} <= set(cpu)
    else:  # 2.1.2: oneDNN follows float32_matmul_precision, read back as matmul_precision
        assert cpu is None
