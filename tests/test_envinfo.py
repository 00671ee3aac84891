"""The environment capture's env-var filter: behaviour-changing variables in, secrets out."""

import pytest

from harness.provenance import envinfo


@pytest.mark.parametrize("name, kept", [
    ("TIKTOKEN_CACHE_DIR", True),  # on the allow-list by exact name, "TOKEN" or not
    ("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", True),  # turns TF32 on without touching the Python flags
    ("NVIDIA_TF32_OVERRIDE", True),
    ("TORCHINDUCTOR_MAX_AUTOTUNE", True),  # allowed prefix
    ("TRITON_CACHE_DIR", True),
    ("TORCHINDUCTOR_REDIS_PASSWD", False),  # allowed prefix, but the name says it is a secret
    ("TRITON_AUTH", False),
    ("TORCHINDUCTOR_API_KEY", False),
    ("TRITON_HF_TOKEN", False),
    ("TORCH_COMPILE_SECRET", False),
    ("TORCHDYNAMO_CREDENTIALS", False),
    ("AWS_SECRET_ACCESS_KEY", False),  # not allowed at all
    ("HOME", False),
])
def test_env_vars_allow_behaviour_and_deny_secrets(monkeypatch, name, kept):
    monkeypatch.setenv(name, "x")
    assert (name in envinfo.env_vars()) is kept
