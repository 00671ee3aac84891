"""envs/*/Dockerfile, checked statically (no Docker engine needed), and harness.docker without an engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import docker as hdocker
from harness import dockerfiles
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
def test_dockerfile_passes_the_static_checks(name):
    assert dockerfiles.check_dockerfile(dockerfile(name), load_spec(name)) == []


@pytest.mark.parametrize("name", IMAGE_SPECS)
def test_dockerfile_parses_into_the_expected_shape(name):
    spec = load_spec(name)
    instructions = dockerfiles.parse_dockerfile(dockerfile(name))
    # the two images a build pulls are build arguments whose defaults are the pinned ones
    assert dockerfiles.global_args(instructions) == {"BASE_IMAGE": spec.image_ref, "UV_IMAGE": dockerfiles.UV_IMAGE}
    froms = [i.value for i in instructions if i.keyword == "FROM"]
    assert froms == ["${UV_IMAGE} AS uv", "${BASE_IMAGE}"]
    pulled = [ref for _, ref in dockerfiles.image_references(instructions)]
    assert pulled == [dockerfiles.UV_IMAGE, spec.image_ref]  # the uv stage, then the base (the final stage)
    repo, tag, digest = dockerfiles.split_image_ref(spec.image_ref)
    assert repo == "nvidia/cuda" and "devel" in tag  # torch.compile needs the compiler of a devel image
    assert digest == spec.base_image_digest  # None while unknown: tag-only pin, allowed
    entry = [i for i in instructions if i.keyword == "ENTRYPOINT"][-1].exec_form()
    assert entry[:3] == ["python", "-m", "harness.image_entry"]  # harness.run, once /results is a mount
    assert entry[entry.index("--out") + 1] == "/results"
    assert entry[entry.index("--plan") + 1] == "seed-ladder"
    assert not [i for i in instructions if i.keyword == "VOLUME"]  # an anonymous volume would hide the records
    for line, ref in dockerfiles.image_references(instructions):
        _, tag, digest = dockerfiles.split_image_ref(ref)
        assert (tag and tag != "latest") or digest, f"line {line}: {ref} floats"


@pytest.mark.parametrize("name", IMAGE_SPECS)
def test_spec_and_dockerfile_cannot_drift(name):
    """The file is exactly what the spec renders to, and none of the spec's pins is written in it."""
    spec = load_spec(name)
    text = dockerfile(name)
    assert text == dockerfiles.render_dockerfile(spec), f"run: python -m harness.docker render {name}"
    for value in filter(None, [spec.torch, spec.index_url, *spec.extra_pins]):
        assert value not in text
    assert "torch==" not in text and "download.pytorch.org" not in text


def test_changing_the_spec_base_image_is_caught(tmp_path, monkeypatch):
    target = tmp_path / "envs"
    import shutil

    shutil.copytree(ROOT / "envs", target)
    monkeypatch.setenv(ENVS_DIR_VAR, str(target))
    spec_path = target / "torch23" / "env.yaml"
    old = load_spec("torch23").base_image
    spec_path.write_text(spec_path.read_text().replace(old, old.replace("12.1.1", "12.1.0")))
    problems = dockerfiles.check_all(["torch23"])["torch23"]
    assert any("differs from the spec's base image" in p for p in problems)
    assert any("differs from its rendering" in p for p in problems)
    dockerfiles.render(["torch23"])
    assert dockerfiles.check_all(["torch23"])["torch23"] == []


def _spec():
    return load_spec("nightly")


def _mutate(old: str, new: str) -> list[str]:
    text = dockerfile("nightly")
    assert old in text, old
    return dockerfiles.check_dockerfile(text.replace(old, new, 1), _spec())


@pytest.mark.parametrize("old, new, message", [
    ("ARG BASE_IMAGE=nvidia/cuda:", "ARG BASE_IMAGE=nvidia/cuda:9", "differs from the spec"),
    ("FROM ${BASE_IMAGE}", "FROM nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04", "not ${BASE_IMAGE}"),
    ("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9", "ARG UV_IMAGE=ghcr.io/astral-sh/uv:latest", "floating tag"),
    ("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9", "ARG UV_IMAGE=ghcr.io/astral-sh/uv", "no tag"),
    ("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9", "ARG UV_IMAGE", "$UV_IMAGE has no ARG default"),
    ("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.13.9", "ARG UV=ghcr.io/astral-sh/uv:0.13.9", "no ARG UV_IMAGE"),
    ("COPY --from=uv /uv", "COPY --from=ghcr.io/astral-sh/uv /uv", "no tag"),
    ('RUN python3 -m harness.envs install "${HARNESS_ENV}"', 'RUN pip install "torch>=2" && true',
     "torch version is written"),
    ('RUN python3 -m harness.envs install "${HARNESS_ENV}"', "RUN echo", "harness.envs install"),
    (" python3 python3-yaml ca-certificates", " python3 ca-certificates", "installs PyYAML"),
    ('"--out", "/results"]', '"--out", "/tmp/out"]', "--out /results"),
    ('ENTRYPOINT ["python", "-m", "harness.image_entry",', 'ENTRYPOINT ["python", "-m", "harness.run",',
     "harness.image_entry"),
    ('ENTRYPOINT ["python", "-m", "harness.image_entry", "--plan", "seed-ladder", "--out", "/results"]',
     "ENTRYPOINT python -m harness.image_entry --plan seed-ladder --out /results", "exec form"),
    ("ENTRYPOINT [", "VOLUME /results\nENTRYPOINT [", "anonymous volume"),
    ("ARG HARNESS_ENV=nightly", "ARG HARNESS_ENV=latest", "HARNESS_ENV default"),
    ("HARNESS_IMAGE=envs/", "HARNESS_IMAGEX=envs/", "HARNESS_IMAGE"),
])
def test_static_check_catches(old, new, message):
    problems = _mutate(old, new)
    assert any(message in p for p in problems), problems


def test_static_check_catches_a_pin_written_twice():
    spec = _spec()
    problems = _mutate("RUN apt-get update", f"RUN echo {spec.torch} && apt-get update")
    assert any("is written in the Dockerfile" in p for p in problems), problems


def test_parser():
    parsed = dockerfiles.parse_dockerfile(
        "# comment\nFROM a:1 AS build\nRUN echo 1 \\\n  # inner comment\n  && echo 2\n"
        "COPY --from=build /x /y\nCOPY --from=b/c:2 --chown=1 /u /v\nENTRYPOINT [\"x\", \"y\"]\n")
    assert [i.keyword for i in parsed] == ["FROM", "RUN", "COPY", "COPY", "ENTRYPOINT"]
    assert parsed[1].value == "echo 1 && echo 2" and parsed[1].line == 3
    assert parsed[3].flags == {"from": "b/c:2", "chown": "1"}
    assert parsed[4].exec_form() == ["x", "y"]
    assert dockerfiles.image_references(parsed) == [(2, "a:1"), (7, "b/c:2")]  # the stage name is not an image
    with_args = dockerfiles.parse_dockerfile("ARG B=x/y:1\nARG U\nFROM ${B}\nFROM $B AS s\nCOPY --from=s /a /b\n")
    assert dockerfiles.global_args(with_args) == {"B": "x/y:1", "U": None}
    assert dockerfiles.image_references(with_args) == [(3, "x/y:1"), (4, "x/y:1")]
    assert dockerfiles.image_references(with_args, resolve=False) == [(3, "${B}"), (4, "$B")]
    with pytest.raises(ValueError, match=r"\$U has no ARG default"):
        dockerfiles.resolve_image("${U}", dockerfiles.global_args(with_args))
    for bad in ("RUN echo\n", "FROM a:1\nFROBNICATE x\n", "FROM a:1\nRUN x \\\n"):
        with pytest.raises(ValueError):
            dockerfiles.parse_dockerfile(bad)
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
