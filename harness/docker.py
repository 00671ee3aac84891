"""The per-env Docker images (envs/<name>/Dockerfile): render, check statically, build and run.

    python -m harness.docker build NAME [--tag T] [--no-cache] [--build-arg BASE_IMAGE=...]   # docker build -f envs/NAME/Dockerfile -t envs/NAME .
    python -m harness.docker run NAME [--results DIR] [--no-gpus] [-- runner args...]   # everything after -- goes to harness.run
    python -m harness.docker check [NAME...]      # static: parses, FROM == spec, no pins, entrypoint, volume
    python -m harness.docker render [NAME...]     # rewrite the Dockerfiles from their specs (after a base bump)

build/run talk to the engine through the docker SDK and exit 2 with one line when none is reachable; an engine
that cannot hand GPUs to containers (no NVIDIA Container Toolkit) gets one line too (exit 1).
Rendering, parsing and checking live in harness.envs.dockerfiles and need neither an engine nor the SDK.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

from harness.argtypes import path_arg
from harness.envs.dockerfiles import RESULTS_IN_IMAGE, check_all, dockerfile_path, ignore_patterns, render
from harness.envs.spec import ROOT, SpecError, load_spec

ENGINE_UNREACHABLE_EXIT = 2
# What dockerd answers to --gpus when no GPU runtime (the NVIDIA Container Toolkit) is registered with it.
NO_GPU_RUNTIME = 'could not select device driver "" with capabilities: [[gpu]]'

class DockerError(RuntimeError):
    """No engine, no SDK, or a failed build/run."""


# --------------------------------------------------------------------------- engine (docker SDK)


def client():
    """A docker SDK client whose engine answers, else DockerError with one line."""
    try:
        import docker
    except ImportError:
        raise DockerError("the docker SDK is not installed (pip install docker)") from None
    try:
        c = docker.from_env(timeout=10)
        c.ping()
        return c
    except Exception as exc:  # noqa: BLE001 - DockerException, requests errors, FileNotFoundError
        import os

        host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DockerError(f"no Docker engine reachable at {host} ({reason[:160]}); start one or set DOCKER_HOST. "
                          f"Without an engine: python -m harness.docker check") from None


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build_context(name: str) -> io.BytesIO:
    """The repository as a tar, filtered by envs/<name>/Dockerfile.dockerignore (what BuildKit would send)."""
    from docker.utils import build as docker_build

    ignore = dockerfile_path(name).with_name("Dockerfile.dockerignore")
    return docker_build.tar(str(ROOT), exclude=ignore_patterns(ignore.read_text()), gzip=False)


def parse_build_args(pairs: list[str]) -> dict[str, str]:
    """{KEY: VALUE} from --build-arg KEY=VALUE strings; ValueError names a malformed one."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key or not key.replace("_", "").isalnum():
            raise ValueError(f"--build-arg {pair!r}: expected KEY=VALUE (e.g. BASE_IMAGE=my/base:1)")
        out[key] = value
    return out


def api_error_line(exc: Exception) -> str:
    """One line for an engine's APIError: what is missing where we know it, else the engine's own words."""
    text = getattr(exc, "explanation", None) or str(exc)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = " ".join(str(text).split())
    if NO_GPU_RUNTIME in text:
        return ("the Docker engine cannot give GPUs to containers: the NVIDIA Container Toolkit is not installed or "
                "not registered with dockerd (install nvidia-container-toolkit, run nvidia-ctk runtime configure "
                "--runtime=docker, restart dockerd); on CPU: --no-gpus")
    return f"the Docker engine refused: {text[:300]}"


def build(name: str, tag: str | None = None, no_cache: bool = False, build_args: dict[str, str] | None = None) -> str:
    spec = load_spec(name)
    problems = check_all([name]).get(name) or []
    if problems:
        raise DockerError(f"{dockerfile_path(name)}: {problems[0]}")
    c = client()
    tag = tag or f"envs/{name}"
    context = build_context(name)
    image_id = None
    import docker

    buildargs = {"HARNESS_ENV": spec.name, "HARNESS_GIT_COMMIT": _git_commit(), **(build_args or {})}
    try:
        stream = c.api.build(fileobj=context, custom_context=True, dockerfile=f"envs/{name}/Dockerfile", tag=tag,
                             buildargs=buildargs, nocache=no_cache, rm=True, decode=True)
        for chunk in stream:
            if "stream" in chunk:
                sys.stdout.write(chunk["stream"])
            if "error" in chunk:
                raise DockerError(f"build of {tag} failed: {chunk['error'].strip()}")
            if "aux" in chunk and "ID" in chunk["aux"]:
                image_id = chunk["aux"]["ID"]
        return image_id or c.images.get(tag).id
    except docker.errors.APIError as exc:
        raise DockerError(f"build of {tag}: {api_error_line(exc)}") from None


def run(name: str, runner_args: list[str], results: Path, gpus: bool = True, tag: str | None = None) -> int:
    c = client()  # first: without the docker SDK or an engine, one line (DockerError), as for build
    import docker

    tag = tag or f"envs/{name}"
    try:
        image = c.images.get(tag)
    except docker.errors.ImageNotFound:
        raise DockerError(f"no image {tag}; build it: python -m harness.docker build {name}") from None
    results = results.resolve()
    results.mkdir(parents=True, exist_ok=True)
    device_requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None
    volumes = {str(results): {"bind": RESULTS_IN_IMAGE, "mode": "rw"}}
    if Path("/etc/machine-id").is_file():  # the host's: records name the machine, not the image (harness.provenance.envinfo.machine_id)
        volumes["/etc/machine-id"] = {"bind": "/etc/machine-id", "mode": "ro"}
    container = None
    try:
        container = c.containers.create(
            image.id, command=runner_args, device_requests=device_requests, volumes=volumes,
            environment={"HARNESS_IMAGE": tag, "HARNESS_IMAGE_DIGEST": image.id}, ipc_mode="host")
        container.start()  # where the engine cannot give GPUs, it says so here
    except docker.errors.APIError as exc:
        if container is not None:
            container.remove(force=True)
        raise DockerError(f"run of {tag}: {api_error_line(exc)}") from None
    try:
        for line in container.logs(stream=True, follow=True):
            sys.stdout.write(line.decode("utf-8", "replace"))
        return int(container.wait().get("StatusCode", 1))
    finally:
        container.remove(force=True)


# --------------------------------------------------------------------------- command line


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness.docker", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build envs/NAME/Dockerfile into image envs/NAME")
    b.add_argument("name")
    b.add_argument("--tag", help="the image's name instead of envs/NAME")
    b.add_argument("--no-cache", action="store_true", help="build every layer again (docker build --no-cache)")
    b.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="a Dockerfile ARG, as docker build's (BASE_IMAGE, UV_IMAGE: a mirror or a local stand-in)")
    r = sub.add_parser("run", help="run the image's default plan; records land in --results",
                       usage="python -m harness.docker run NAME [--tag T] [--results DIR] [--no-gpus] [-- RUNNER ARGS]")
    r.add_argument("name")
    r.add_argument("--tag", help="the image to run instead of envs/NAME")
    r.add_argument("--results", type=path_arg, default=Path("results/runs"), help="where the records land (default: results/runs)")
    r.add_argument("--no-gpus", action="store_true", help="do not request GPUs (CPU run)")
    c = sub.add_parser("check", help="static checks of the Dockerfiles (no engine needed)")
    c.add_argument("names", nargs="*")
    rd = sub.add_parser("render", help="rewrite Dockerfiles from their specs")
    rd.add_argument("names", nargs="*")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first -- goes to harness.run, everything before is ours: options may come before or
    # after NAME (a REMAINDER positional took every option after NAME as the runner's).
    runner_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    try:
        if args.cmd == "check":
            results = check_all(args.names or None)
            bad = {n: p for n, p in results.items() if p}
            for name, problems in results.items():
                print(f"{name}: " + ("ok" if not problems else "; ".join(problems)))
            return 1 if bad else 0
        if args.cmd == "render":
            for path in render(args.names or None):
                print(f"wrote {path}")
            return 0
        if runner_args and args.cmd != "run":
            parser.error("arguments after -- are for harness.run: only `run` takes them")
        if args.cmd == "build":
            try:
                build_args = parse_build_args(args.build_arg)
            except ValueError as exc:
                parser.error(str(exc))
            image_id = build(args.name, args.tag, args.no_cache, build_args)
            print(f"built {args.tag or 'envs/' + args.name} {image_id}")
            return 0
        if args.cmd == "run":
            return run(args.name, runner_args, args.results, gpus=not args.no_gpus, tag=args.tag)
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except DockerError as exc:
        print(str(exc), file=sys.stderr)
        return ENGINE_UNREACHABLE_EXIT if str(exc).startswith(("no Docker engine", "the docker SDK")) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
