"""The per-env Dockerfiles (envs/<name>/Dockerfile and its .dockerignore): rendered from the spec, parsed, and
checked statically. Needs neither a Docker engine nor the docker SDK; harness.docker builds and runs them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from harness.envs.spec import ROOT, EnvSpec, SpecError, envs_dir, load_all
from harness.record.files import write_atomic
from harness.textsafe import ScriptValueError, script_value

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


# --------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, ...
    flags: dict  # --from=..., --platform=...
    value: str  # the rest, continuation lines joined
    line: int  # 1-based line the instruction starts on

    def exec_form(self) -> list[str] | None:
        """The JSON array of an exec-form ENTRYPOINT/CMD/RUN/VOLUME, or None for shell form."""
        text = self.value.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except ValueError:
            return None
        return value if isinstance(value, list) and all(isinstance(v, str) for v in value) else None


KEYWORDS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME",
            "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions of a Dockerfile (backslash continuations, comments, parser directives).

    Raises ValueError on an unknown instruction, a dangling continuation or a file without FROM.
    Heredocs are not supported (none of ours uses them)."""
    out: list[Instruction] = []
    buf, start = "", 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and buf):
            continue  # comments (and directives) may sit between continuation lines
        if not stripped:
            continue
        if not buf:
            start = lineno
        if stripped.endswith("\\"):
            buf += stripped[:-1].rstrip() + " "
            continue
        buf += stripped
        keyword, _, rest = buf.partition(" ")
        keyword = keyword.upper()
        if keyword not in KEYWORDS:
            raise ValueError(f"line {start}: unknown instruction {keyword!r}")
        flags = {}
        rest = rest.strip()
        while rest.startswith("--"):
            token, _, rest = rest.partition(" ")
            key, _, val = token[2:].partition("=")
            flags[key] = val
            rest = rest.strip()
        if "<<" in rest and keyword in ("RUN", "COPY", "ADD") and re.search(r"<<-?\s*['\"]?[A-Z]+", rest):
            raise ValueError(f"line {start}: heredocs are not supported by this parser")
        out.append(Instruction(keyword, flags, rest, start))
        buf = ""
    if buf:
        raise ValueError("the file ends inside a continued line")
    if not out or out[0].keyword not in ("FROM", "ARG"):
        raise ValueError("a Dockerfile must start with FROM (or ARG before FROM)")
    if not any(i.keyword == "FROM" for i in out):
        raise ValueError("no FROM instruction")
    return out


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


def global_args(instructions: list[Instruction]) -> dict[str, str | None]:
    """{name: default} of the ARGs before the first FROM: the only variables a FROM line can use."""
    out = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            name, sep, default = ins.value.partition("=")
            out[name.strip()] = default.strip().strip('"') if sep else None
    return out


def resolve_image(ref: str, args: dict[str, str | None]) -> str:
    """An image reference with ${VAR} / $VAR replaced by the ARG defaults; ValueError names a variable
    that has no default (the build would need --build-arg to mean anything)."""
    def value(match: re.Match) -> str:
        name = match.group(1) or match.group(2)
        if args.get(name) is None:
            raise ValueError(f"${name} has no ARG default before the first FROM")
        return args[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, ref)


def image_references(instructions: list[Instruction], resolve: bool = True) -> list[tuple[int, str]]:
    """(line, image) for every image a build pulls: FROM images and COPY --from=<image>, not stage names.
    With resolve (default), ${ARG}s take their defaults: the images a plain `docker build` pulls."""
    stages, refs = set(), []
    args = global_args(instructions)
    for ins in instructions:
        if ins.keyword == "FROM":
            parts = ins.value.split()
            refs.append((ins.line, parts[0]))
            if len(parts) >= 3 and parts[1].lower() == "as":
                stages.add(parts[2])
        elif ins.keyword in ("COPY", "ADD") and "from" in ins.flags:
            source = ins.flags["from"]
            if source not in stages and not source.isdigit():
                refs.append((ins.line, source))
    if resolve:
        refs = [(line, resolve_image(ref, args)) for line, ref in refs]
    return refs


def check_dockerfile(text: str, spec: EnvSpec) -> list[str]:
    """Problems with an env's Dockerfile, checked statically (empty list = fine)."""
    try:
        instructions = parse_dockerfile(text)
    except ValueError as exc:
        return [f"does not parse: {exc}"]
    problems = []
    args = global_args(instructions)
    base = [i for i in instructions if i.keyword == "FROM"][-1].value.split()[0]  # the final stage's
    if base != "${BASE_IMAGE}":
        problems.append(f"the final FROM is {base}, not ${{BASE_IMAGE}}: a local base would need a retag")
    for name in IMAGE_ARGS:
        if name not in args:
            problems.append(f"no ARG {name} before the first FROM (build arguments choose the images)")
    try:
        base = resolve_image(base, args)
        refs = image_references(instructions)
    except ValueError as exc:
        return problems + [f"an image is computed from a variable: {exc}; give the ARG the pinned image as default"]
    if base != spec.image_ref:
        problems.append(f"FROM {base} differs from the spec's base image {spec.image_ref}")
    for line, ref in refs:
        _, tag, digest = split_image_ref(ref)
        if tag is None and digest is None:
            problems.append(f"line {line}: image {ref} has no tag (floats to :latest)")
        elif tag is not None and tag.startswith(("latest", "nightly", "main", "master", "edge")) and digest is None:
            problems.append(f"line {line}: image {ref} uses the floating tag :{tag}")
    # Nothing the spec pins may be written here: the install comes from the spec.
    pinned = [spec.torch, *spec.extra_pins, spec.index_url] if spec.installs else []
    body = "\n".join(i.value for i in instructions if i.keyword != "FROM")
    for value in filter(None, pinned):
        if value in text.replace(spec.image_ref or "\0", ""):
            problems.append(f"the spec's pin {value!r} is written in the Dockerfile; install from the spec instead")
    if re.search(r"\btorch\s*(==|>=|<=|~=|<|>|!=)", body) or re.search(r"\btorch-\d", body):
        problems.append("a torch version is written in the Dockerfile; install it through harness.envs")
    if "download.pytorch.org" in body:
        problems.append("an index URL is written in the Dockerfile; it belongs in the spec")
    installs = [i for i in instructions if i.keyword == "RUN" and re.search(r"-m harness\.envs install\b", i.value)]
    if not installs:
        problems.append("no RUN ... -m harness.envs install: the torch install must come from the spec")
    elif not any(re.search(r"-m harness\.envs check\b", i.value) for i in instructions if i.keyword == "RUN"):
        problems.append("no RUN ... -m harness.envs check after the install")
    else:  # harness.envs reads the spec with PyYAML, which a base image's python3 lacks
        yaml_first = [i for i in instructions if i.keyword == "RUN" and i.line < installs[0].line
                      and re.search(r"\bpython3-yaml\b|\bpyyaml\b", i.value, re.IGNORECASE)]
        if not yaml_first:
            problems.append("nothing installs PyYAML (python3-yaml) before RUN ... -m harness.envs install")
    args = {i.value.split("=", 1)[0]: i.value.split("=", 1)[1] if "=" in i.value else None
            for i in instructions if i.keyword == "ARG" and i.value.startswith("HARNESS_")}
    if args.get("HARNESS_ENV") != spec.name:
        problems.append(f"ARG HARNESS_ENV default is {args.get('HARNESS_ENV')!r}, expected {spec.name!r}")
    env_text = " ".join(i.value for i in instructions if i.keyword == "ENV")
    for var in ("HARNESS_ENV", "HARNESS_IMAGE"):
        if not re.search(rf"(^|\s){var}=\S", env_text):
            problems.append(f"ENV {var} is not set (the records' env / image identity)")
    entrypoints = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    if not entrypoints:
        problems.append("no ENTRYPOINT")
    else:
        argv = entrypoints[-1].exec_form()
        if argv is None:
            problems.append("ENTRYPOINT is not in exec form (signals and extra arguments would be lost)")
        else:
            joined = " ".join(argv)
            if not re.match(r"^(\S*/)?python3? -m harness\.image_entry\b", joined):
                problems.append(f"ENTRYPOINT {argv} does not run python -m harness.image_entry (harness.run behind "
                                f"the check that the records land in a mounted folder)")
            if f"--out {RESULTS_IN_IMAGE}" not in joined:
                problems.append(f"ENTRYPOINT {argv} does not write to --out {RESULTS_IN_IMAGE}")
            if "--plan" not in argv:
                problems.append(f"ENTRYPOINT {argv} names no --plan (the default plan)")
    volumes = []
    for ins in instructions:
        if ins.keyword == "VOLUME":
            volumes += ins.exec_form() or ins.value.split()
    if RESULTS_IN_IMAGE in volumes:
        problems.append(f"VOLUME {RESULTS_IN_IMAGE}: a run without -v would write its records into an anonymous "
                        f"volume nobody finds; leave it out (harness.image_entry asks for the mount)")
    return problems


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
        problems = check_dockerfile(path.read_text(), spec)
        if path.read_text() != render_dockerfile(spec):
            problems.append(f"{path} differs from its rendering; run python -m harness.docker render {name}")
        for ignore in (path.with_name("Dockerfile.dockerignore"), root_dockerignore()):
            if not ignore.is_file() or ignore.read_text() != DOCKERIGNORE:
                problems.append(f"{ignore} is missing or stale; run python -m harness.docker render {name}")
        out[name] = problems
    return out
