"""The environment capture's env-var filter: behaviour-changing variables in, secrets out."""

import json

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


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


def test_credentials_in_recorded_values_are_stripped():
    """11. Allow-listed variables whose values hold credentials are recorded without them; TRITON_PWD not at all."""
    from harness.provenance.envinfo import env_vars

    got = env_vars({"TORCHINDUCTOR_REDIS_URL": "redis://u:pw@h", "TORCH_COMPILE_DSN": "postgres://u:pw@h/db",
                    "TRITON_PWD": "pw", "TORCHINDUCTOR_DSN": "host=h password=pw user=u",
                    "TORCHINDUCTOR_CACHE_DIR": "/tmp/a@b", "HARNESS_ENV": "latest"})
    assert got == {"TORCHINDUCTOR_REDIS_URL": "redis://***@h", "TORCH_COMPILE_DSN": "postgres://***@h/db",
                   "TORCHINDUCTOR_DSN": "host=h password=*** user=u", "TORCHINDUCTOR_CACHE_DIR": "/tmp/a@b",
                   "HARNESS_ENV": "latest"}
    assert "pw" not in json.dumps(got)

