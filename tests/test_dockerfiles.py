"""envs/*/Dockerfile, checked statically (no Docker engine needed), and harness.docker without an engine."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness import docker as hdocker
from harness.envs import dockerfiles
from harness.envs.spec import ENVS_DIR_VAR, load_all, load_spec

ROOT = Path(__file__).resolve().parent.parent
IMAGE_SPECS = [name for name, spec in load_all().items() if spec.base_image]


def dockerfile(name: str) -> str:
    return (ROOT / "envs" / name / "Dockerfile").read_text()


def test_every_env_with_an_image_has_a_dockerfile():
    assert {"torch212", "torch23", "latest", "nightly"} <= set(IMAGE_SPECS)
    for name, spec in load_all().items():
        assert (ROOT / "envs" / name / "Dockerfile").is_file() == bool(spec.base_image), name


@pytest.mark.parametrize("name", IMAGE_SPECS)
def test_dockerfile_passes_the_checks(name):
    assert dockerfiles.check_all([name]) == {name: []}


@pytest.mark.parametrize("name", IMAGE_SPECS)
def test_the_rendering_has_the_shape_every_image_relies_on(name):
    """What the template says, proved once on each rendering (check_all then requires the file byte for byte)."""
    spec = load_spec(name)
    text = dockerfiles.render_dockerfile(spec)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    # the two images a build pulls are build arguments whose defaults are the pinned ones
    assert f"ARG BASE_IMAGE={spec.image_ref}" in lines and f"ARG UV_IMAGE={dockerfiles.UV_IMAGE}" in lines
    assert [line for line in lines if line.startswith("FROM ")] == ["FROM ${UV_IMAGE} AS uv", "FROM ${BASE_IMAGE}"]
    assert lines.index(f"ARG BASE_IMAGE={spec.image_ref}") < lines.index("FROM ${UV_IMAGE} AS uv")  # global ARGs
    repo, tag, digest = dockerfiles.split_image_ref(spec.image_ref)
    assert repo == "nvidia/cuda" and "devel" in tag  # torch.compile needs the compiler of a devel image
    assert digest == spec.base_image_digest  # None while unknown: tag-only pin, allowed
    assert f"ARG HARNESS_ENV={name}" in lines and re.search(r"HARNESS_ENV=\S", text) and "HARNESS_IMAGE=envs/" in text
    install = next(i for i, line in enumerate(lines) if "-m harness.envs install" in line)
    assert any("python3-yaml" in line for line in lines[:install])  # harness.envs reads the spec with PyYAML
    assert any("-m harness.envs check" in line for line in lines[install:])
    (entry,) = [line for line in lines if line.startswith("ENTRYPOINT ")]
    argv = json.loads(entry.removeprefix("ENTRYPOINT "))  # exec form: signals and extra arguments reach it
    assert argv[:3] == ["python", "-m", "harness.image_entry"]  # harness.run, once /results is a mount
    assert argv[argv.index("--out") + 1] == "/results" and argv[argv.index("--plan") + 1] == "seed-ladder"
    assert not [line for line in lines if line.startswith("VOLUME")]  # an anonymous volume would hide the records
    assert "COPY --from=uv " in text  # the uv stage, not an image pulled by COPY --from
    for value in filter(None, [spec.torch, spec.index_url, *spec.extra_pins]):  # installed from the spec only
        assert value not in text.replace(spec.image_ref, "")
    assert not re.search(r"\btorch\s*(==|>=|<=|~=|<|>|!=)", text) and "download.pytorch.org" not in text


@pytest.mark.parametrize("name", IMAGE_SPECS)
def test_spec_and_dockerfile_cannot_drift(name):
    """The file is exactly what the spec renders to: any edit of it is caught."""
    spec = load_spec(name)
    assert dockerfile(name) == dockerfiles.render_dockerfile(spec), f"run: python -m harness.docker render {name}"


def test_changing_the_spec_base_image_or_the_file_is_caught(tmp_path, monkeypatch):
    target = tmp_path / "envs"
    import shutil

    shutil.copytree(ROOT / "envs", target)
    monkeypatch.setenv(ENVS_DIR_VAR, str(target))
    spec_path = target / "torch23" / "env.yaml"
    old = load_spec("torch23").base_image
    spec_path.write_text(spec_path.read_text().replace(old, old.replace("12.1.1", "12.1.0")))
    problems = dockerfiles.check_all(["torch23"])["torch23"]
    assert any("differs from its rendering" in p for p in problems)
    dockerfiles.render(["torch23"])
    assert dockerfiles.check_all(["torch23"])["torch23"] == []
    path = target / "torch23" / "Dockerfile"
    path.write_text(path.read_text().replace('"--out", "/results"]', '"--out", "/tmp/out"]'))
    assert any("differs from its rendering" in p for p in dockerfiles.check_all(["torch23"])["torch23"])


def test_an_image_that_floats_is_caught():
    assert dockerfiles.floating("ghcr.io/astral-sh/uv:latest") == "image ghcr.io/astral-sh/uv:latest uses the floating tag :latest"
    assert "no tag" in dockerfiles.floating("ghcr.io/astral-sh/uv")
    assert dockerfiles.floating("nvidia/cuda:latest@sha256:ab") is None and dockerfiles.floating(dockerfiles.UV_IMAGE) is None
    assert dockerfiles.split_image_ref("localhost:5000/a/b:1@sha256:ab") == ("localhost:5000/a/b", "1", "sha256:ab")
    assert dockerfiles.split_image_ref("localhost:5000/a") == ("localhost:5000/a", None, None)


def test_dockerignore_keeps_results_and_venvs_out():
    for name in IMAGE_SPECS:
        lines = (ROOT / "envs" / name / "Dockerfile.dockerignore").read_text().splitlines()
        assert lines[lines.index("*")] == "*"  # allow-list: nothing is sent unless named
        assert {"!pyproject.toml", "!gpt", "!harness", "!envs"} <= set(lines)


def test_root_dockerignore_keeps_nox_venv_runs_and_git_out_for_the_legacy_builder(tmp_path):
    """`docker build -f envs/nightly/Dockerfile .` without BuildKit reads only the context's root .dockerignore.
    The context is computed by the docker SDK's own matcher (docker.utils.build.exclude_paths) on a checkout after
    the Quick start: what the Dockerfiles COPY is in, .nox/.venv/results/.git are out."""
    pytest.importorskip("docker")
    from docker.utils.build import exclude_paths

    assert (ROOT / ".dockerignore").read_text() == dockerfiles.DOCKERIGNORE
    tree = tmp_path / "checkout"
    for rel in ("pyproject.toml", "gpt/model.py", "harness/run.py", "harness/plans/seed-ladder.yaml",
                "envs/nightly/env.yaml", "envs/nightly/Dockerfile", "README.md", ".nox/bench-latest/lib/torch.so",
                ".venv/bin/python", "results/runs/r.json", "results/cpu-amd-epyc-2core/r.json", ".git/HEAD",
                "tests/test_x.py", "harness/__pycache__/run.cpython-311.pyc"):
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text("x")
    (tree / ".dockerignore").write_text((ROOT / ".dockerignore").read_text())
    sent = exclude_paths(str(tree), dockerfiles.ignore_patterns((tree / ".dockerignore").read_text()),
                         dockerfile="envs/nightly/Dockerfile")
    copied = [line for line in (ROOT / "envs/nightly/Dockerfile").read_text().splitlines() if line.startswith("COPY ")]
    assert copied == ["COPY --from=uv /uv /uvx /usr/local/bin/", "COPY . /opt/harness"]
    # COPY . takes the whole context: it must hold what harness.envs install and the worker read
    assert {"pyproject.toml", "gpt/model.py", "harness/run.py", "harness/plans/seed-ladder.yaml",
            "envs/nightly/env.yaml", "envs/nightly/Dockerfile"} <= sent
    assert not [p for p in sent if p.split("/")[0] in (".nox", ".venv", "results", ".git", "tests")], sorted(sent)
    assert not [p for p in sent if "__pycache__" in p]


def test_render_and_check_keep_the_root_dockerignore(tmp_path, monkeypatch):
    monkeypatch.setattr(dockerfiles, "root_dockerignore", lambda: tmp_path / ".dockerignore")
    assert any("is missing or stale" in p for p in dockerfiles.check_all(["nightly"])["nightly"])
    (tmp_path / ".dockerignore").write_text(dockerfiles.DOCKERIGNORE)
    assert dockerfiles.check_all(["nightly"])["nightly"] == []


def test_build_context_holds_only_the_project():
    pytest.importorskip("docker")
    import tarfile

    with tarfile.open(fileobj=hdocker.build_context("nightly")) as tar:
        names = tar.getnames()
    assert "pyproject.toml" in names and "harness/envs/install.py" in names and "envs/nightly/Dockerfile" in names
    assert not [n for n in names if n.startswith(("results/", ".nox/", ".git/", "tests/"))]


def test_cli_without_engine_is_one_line_and_exit_2(tmp_path):
    """DOCKER_HOST pointing at nothing: build and run stop with one line and exit code 2."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"}
    for args in (["build", "nightly"], ["run", "nightly", "--results", str(tmp_path / "r")]):
        out = subprocess.run([sys.executable, "-m", "harness.docker", *args], check=False, cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2, out
        assert out.stderr.count("\n") == 1 and out.stderr.startswith("no Docker engine reachable"), out.stderr
        assert "DOCKER_HOST" in out.stderr


def test_cli_check_passes():
    out = subprocess.run([sys.executable, "-m", "harness.docker", "check"], check=False, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


def test_dockerfile_values_are_one_line():
    from dataclasses import replace

    from harness.envs.dockerfiles import render_dockerfile
    from harness.envs.spec import SpecError, load_spec

    spec = load_spec("latest")
    assert "FROM" in render_dockerfile(spec)
    with pytest.raises(SpecError, match="control character"):
        render_dockerfile(replace(spec, base_image="nvidia/cuda:12\nRUN touch /tmp/pwned"))

