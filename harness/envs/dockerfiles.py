"""The per-env Dockerfiles (envs/<name>/Dockerfile and its .dockerignore): rendered from the spec, and checked:
byte for byte against their rendering, and the images they pull pinned. Needs neither a Docker engine nor the docker SDK; harness.docker builds and runs them.
"""

from __future__ import annotations

from pathlib import Path

from harness.console.textsafe import ScriptValueError, script_value
from harness.envs.spec import ROOT, EnvSpec, SpecError, envs_dir, load_all
from harness.record.files import write_atomic

RESULTS_IN_IMAGE = "/results"
UV_VERSION = "0.13.9"
UV_IMAGE = f"ghcr.io/astral-sh/uv:{UV_VERSION}"  # the uv binary copied into every image (pinned tag)
# PyPI's uv wheel of the same version (manylinux x86_64): where the registry is unreachable (CI), .ci/docker builds
# a stand-in for UV_IMAGE from it and checks it against this hash (pypi.org/simple/uv/).
UV_WHEEL = f"uv-{UV_VERSION}-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
UV_WHEEL_SHA256 = "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19"
# The build arguments that choose the two images a build pulls; their defaults are the pinned ones, so a plain
# `docker build` uses them, and `--build-arg BASE_IMAGE=...` a local stand-in without retagging it.
IMAGE_ARGS = ("BASE_IMAGE", "UV_IMAGE")

TEMPLATE = """\
# The {name} environment as an image. Every version comes from envs/{name}/env.yaml: this file installs
# from it (harness.envs install) and repeats none of it. It is rendered from the spec by
# `python -m harness.docker render {name}`; tests/test_dockerfiles.py fails when the two drift apart.
# {digest_note}
#
# Build (from the repository root):  docker build -f envs/{name}/Dockerfile -t envs/{name} .
#                               or:  python -m harness.docker build {name}
# Run (default plan, records into ./results/runs; the host's machine id, so records say which machine ran them):
#   docker run --gpus all -v "$PWD/results/runs:/results" -v /etc/machine-id:/etc/machine-id:ro envs/{name}
#   extra arguments go to python -m harness.run, e.g. ... envs/{name} --preset tiny
#   without a folder mounted at {results} it refuses to start (records would vanish with the container).
# Another base or uv image (a mirror, a local stand-in): --build-arg BASE_IMAGE=... --build-arg UV_IMAGE=...
ARG BASE_IMAGE={image}
ARG UV_IMAGE={uv_image}
FROM ${{UV_IMAGE}} AS uv

FROM ${{BASE_IMAGE}}
ARG BASE_IMAGE
ARG HARNESS_ENV={name}
ARG HARNESS_GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="envs/{name}" \\
      org.opencontainers.image.revision="${{HARNESS_GIT_COMMIT}}" \\
      org.opencontainers.image.source="envs/{name}/env.yaml" \\
      org.opencontainers.image.base.name="${{BASE_IMAGE}}"
ENV DEBIAN_FRONTEND=noninteractive \\
    PYTHONUNBUFFERED=1 \\
    HARNESS_ENV=${{HARNESS_ENV}} \\
    HARNESS_IMAGE=envs/${{HARNESS_ENV}} \\
    HARNESS_IMAGE_REVISION=${{HARNESS_GIT_COMMIT}} \\
    HARNESS_BASE_IMAGE=${{BASE_IMAGE}} \\
    UV_PYTHON_INSTALL_DIR=/opt/python \\
    UV_LINK_MODE=copy \\
    UV_NO_CACHE=1 \\
    TIKTOKEN_CACHE_DIR=/opt/tiktoken \\
    PATH=/opt/venv/bin:${{PATH}}

# python3 only runs harness.envs install, which reads the spec with PyYAML (python3-yaml); the env's own
# Python comes from uv, as the spec says. The devel base brings gcc/g++, which torch.compile needs.
RUN apt-get update \\
 && apt-get install -y --no-install-recommends python3 python3-yaml ca-certificates \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=uv /uv /uvx /usr/local/bin/

# Only pyproject.toml, gpt/, harness/ and envs/ are in the context (.dockerignore; BuildKit: envs/{name}/Dockerfile.dockerignore).
COPY . /opt/harness
WORKDIR /opt/harness
RUN python3 -m harness.envs install "${{HARNESS_ENV}}" --venv /opt/venv --project /opt/harness \\
 && python -m harness.envs check "${{HARNESS_ENV}}"
# Offline runs need tiktoken's gpt2 encoding (text data); bake it when the build has network.
RUN python -c "import tiktoken; tiktoken.get_encoding('gpt2')" \\
 || echo "warning: tiktoken gpt2 encoding not baked (no network); synthetic and tokens: data still work"

# No VOLUME: an anonymous volume would keep the records where nobody finds them. harness.image_entry refuses
# to start unless --out lies in a mounted folder, then runs python -m harness.run with these arguments.
ENTRYPOINT ["python", "-m", "harness.image_entry", "--plan", "seed-ladder", "--out", "{results}"]
CMD []
"""

DOCKERIGNORE = """\
# Build context for envs/*/Dockerfile: only what the image needs, never results/, .nox/, .venv/ or .git/.
# BuildKit reads envs/<name>/Dockerfile.dockerignore, the legacy builder (no BuildKit) only this file at the
# root of the context; harness.docker build uses the former. All are written from one source by
# `python -m harness.docker render` (harness/docker.py DOCKERIGNORE) and checked by `... check`.
*
!pyproject.toml
!gpt
!harness
!envs
**/__pycache__
**/*.pyc
"""


# --------------------------------------------------------------------------- rendering


def dockerfile_path(name: str) -> Path:
    return envs_dir() / name / "Dockerfile"


def root_dockerignore() -> Path:
    """The context's own .dockerignore: the one the legacy builder reads for `docker build -f envs/<name>/Dockerfile .`."""
    return ROOT / ".dockerignore"


def ignore_patterns(text: str = DOCKERIGNORE) -> list[str]:
    return [p.strip() for p in text.splitlines() if p.strip() and not p.startswith("#")]


def render_dockerfile(spec: EnvSpec) -> str:
    if not spec.base_image:
        raise SpecError(f"{spec.name}: no base_image, so no Dockerfile")
    for what, value in (("name", spec.name), ("base image", spec.image_ref)):  # the spec's checks already refuse these
        try:
            script_value(value, f"{spec.name}: {what}")
        except ScriptValueError as exc:
            raise SpecError(str(exc)) from None
    note = ("base image pinned by tag and digest." if spec.base_image_digest else
            "base image pinned by tag only: its digest is unknown (base_image_digest: null in the spec).")
    return TEMPLATE.format(name=spec.name, image=spec.image_ref, uv_image=UV_IMAGE, results=RESULTS_IN_IMAGE,
                           digest_note=note)


def render(names: list[str] | None = None) -> list[Path]:
    written = []
    for name, spec in load_all().items():
        if names and name not in names or not spec.base_image:
            continue
        path = dockerfile_path(name)
        write_atomic(path, render_dockerfile(spec))
        write_atomic(path.with_name("Dockerfile.dockerignore"), DOCKERIGNORE)
        written.append(path)
    if written:
        write_atomic(root_dockerignore(), DOCKERIGNORE)
        written.append(root_dockerignore())
    return written


# --------------------------------------------------------------------------- checking
# The file must be exactly its rendering (check_all), so what the template says (FROM ${BASE_IMAGE}, the install
# through harness.envs, the ENTRYPOINT, no VOLUME, ...) is proved once, by tests/test_dockerfiles.py on the
# rendering; what a spec brings in is checked here: the images a build pulls are pinned, not floating.

FLOATING_TAGS = ("latest", "nightly", "main", "master", "edge")


def split_image_ref(ref: str) -> tuple[str, str | None, str | None]:
    """(repository, tag, digest) of an image reference; tag/digest None when absent."""
    digest = None
    if "@" in ref:
        ref, digest = ref.split("@", 1)
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = ref.rsplit(":", 1)
    else:
        repo, tag = ref, None
    return repo, tag, digest


def floating(ref: str) -> str | None:
    """Why an image reference floats (no tag: :latest; a moving tag without a digest), None when it is pinned."""
    _, tag, digest = split_image_ref(ref)
    if tag is None and digest is None:
        return f"image {ref} has no tag (floats to :latest)"
    if tag is not None and tag.startswith(FLOATING_TAGS) and digest is None:
        return f"image {ref} uses the floating tag :{tag}"
    return None


def check_all(names: list[str] | None = None) -> dict[str, list[str]]:
    """{env: problems} for every spec with a base image (a missing Dockerfile is a problem), and for every
    envs/*/Dockerfile without a spec image."""
    out = {}
    specs = load_all()
    for name, spec in specs.items():
        if names and name not in names:
            continue
        path = dockerfile_path(name)
        if not spec.base_image:
            out[name] = [f"{path} exists but the spec has no base_image"] if path.exists() else []
            continue
        if not path.is_file():
            out[name] = [f"{path} is missing"]
            continue
        problems = [why for why in map(floating, (spec.image_ref, UV_IMAGE)) if why]
        if path.read_text() != render_dockerfile(spec):
            problems.append(f"{path} differs from its rendering; run python -m harness.docker render {name}")
        for ignore in (path.with_name("Dockerfile.dockerignore"), root_dockerignore()):
            if not ignore.is_file() or ignore.read_text() != DOCKERIGNORE:
                problems.append(f"{ignore} is missing or stale; run python -m harness.docker render {name}")
        out[name] = problems
    return out
