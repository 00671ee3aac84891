"""The per-env Docker images (envs/<name>/Dockerfile): render, check statically, build and run.

    python -m harness.docker build NAME [--tag T] [--no-cache]   # docker build -f envs/NAME/Dockerfile -t envs/NAME .
    python -m harness.docker run NAME [--results DIR] [--no-gpus] [-- runner args...]
    python -m harness.docker check [NAME...]      # static: parses, FROM == spec, no pins, entrypoint, volume
    python -m harness.docker render [NAME...]     # rewrite the Dockerfiles from their specs (after a base bump)

build/run talk to the engine through the docker SDK and exit 2 with one line when none is reachable.
Rendering, parsing and checking live in harness.dockerfiles and need neither an engine nor the SDK.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

from harness.dockerfiles import RESULTS_IN_IMAGE, check_all, dockerfile_path, ignore_patterns, render
from harness.envs.spec import ROOT, SpecError, load_spec

ENGINE_UNREACHABLE_EXIT = 2

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


def build(name: str, tag: str | None = None, no_cache: bool = False) -> str:
    spec = load_spec(name)
    problems = check_all([name]).get(name) or []
    if problems:
        raise DockerError(f"{dockerfile_path(name)}: {problems[0]}")
    c = client()
    tag = tag or f"envs/{name}"
    context = build_context(name)
    image_id = None
    stream = c.api.build(fileobj=context, custom_context=True, dockerfile=f"envs/{name}/Dockerfile", tag=tag,
                         buildargs={"HARNESS_ENV": spec.name, "HARNESS_GIT_COMMIT": _git_commit()},
                         nocache=no_cache, rm=True, decode=True)
    for chunk in stream:
        if "stream" in chunk:
            sys.stdout.write(chunk["stream"])
        if "error" in chunk:
            raise DockerError(f"build of {tag} failed: {chunk['error'].strip()}")
        if "aux" in chunk and "ID" in chunk["aux"]:
            image_id = chunk["aux"]["ID"]
    return image_id or c.images.get(tag).id


def run(name: str, runner_args: list[str], results: Path, gpus: bool = True, tag: str | None = None) -> int:
    import docker

    c = client()
    tag = tag or f"envs/{name}"
    try:
        image = c.images.get(tag)
    except docker.errors.ImageNotFound:
        raise DockerError(f"no image {tag}; build it: python -m harness.docker build {name}") from None
    results = results.resolve()
    results.mkdir(parents=True, exist_ok=True)
    device_requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else None
    volumes = {str(results): {"bind": RESULTS_IN_IMAGE, "mode": "rw"}}
    if Path("/etc/machine-id").is_file():  # the host's: records name the machine, not the image (harness.envinfo.machine_id)
        volumes["/etc/machine-id"] = {"bind": "/etc/machine-id", "mode": "ro"}
    container = c.containers.run(
        image.id, command=runner_args, detach=True, device_requests=device_requests, volumes=volumes,
        environment={"HARNESS_IMAGE": tag, "HARNESS_IMAGE_DIGEST": image.id}, ipc_mode="host")
    try:
        for line in container.logs(stream=True, follow=True):
            sys.stdout.write(line.decode("utf-8", "replace"))
        return int(container.wait().get("StatusCode", 1))
    finally:
        container.remove(force=True)


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.docker", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build envs/NAME/Dockerfile into image envs/NAME")
    b.add_argument("name")
    b.add_argument("--tag")
    b.add_argument("--no-cache", action="store_true")
    r = sub.add_parser("run", help="run the image's default plan; records land in --results")
    r.add_argument("name")
    r.add_argument("--tag")
    r.add_argument("--results", type=Path, default=Path("results/runs"), help="where the records land (default: results/runs)")
    r.add_argument("--no-gpus", action="store_true", help="do not request GPUs (CPU run)")
    r.add_argument("runner_args", nargs=argparse.REMAINDER, help="after --: arguments for harness.run")
    c = sub.add_parser("check", help="static checks of the Dockerfiles (no engine needed)")
    c.add_argument("names", nargs="*")
    rd = sub.add_parser("render", help="rewrite Dockerfiles from their specs")
    rd.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
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
        if args.cmd == "build":
            image_id = build(args.name, args.tag, args.no_cache)
            print(f"built {args.tag or 'envs/' + args.name} {image_id}")
            return 0
        if args.cmd == "run":
            extra = args.runner_args[1:] if args.runner_args[:1] == ["--"] else args.runner_args
            return run(args.name, extra, args.results, gpus=not args.no_gpus, tag=args.tag)
    except SpecError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    except DockerError as exc:
        print(str(exc), file=sys.stderr)
        return ENGINE_UNREACHABLE_EXIT if str(exc).startswith(("no Docker engine", "the docker SDK")) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
