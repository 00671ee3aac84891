"""Installing an env: the index it installs from (mirror variables), the pip/uv arguments, the reachability
probe, and `install` (a venv with the spec's Python, torch, the extra pins and the project: Docker builds).

Standard library (and PyYAML, through the spec): the Docker bootstrap runs it with the base image's python3
and python3-yaml.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from harness.envs.spec import EnvSpec, SpecError
from harness.record.files import write_atomic

INDEX_VAR = "HARNESS_TORCH_INDEX_URL"  # mirror for every spec that names a PyTorch index
PROBE_TIMEOUT_S = 5.0
# in a venv installed from a wheel folder: which wheel its torch is (file, sha256) and where its dependencies came
# from; harness.provenance.envinfo records it (environment.torch_source)
TORCH_SOURCE_FILE = "harness-torch-source.json"



def index_vars(spec: EnvSpec) -> list[str]:
    """Environment variables that point this spec at a mirror, most specific first."""
    own = f"{INDEX_VAR}_{spec.name.upper()}"
    return [own, INDEX_VAR] if spec.index_url else [own]


def effective_index(spec: EnvSpec, environ=None) -> str | None:
    """The index torch is installed from: HARNESS_TORCH_INDEX_URL_<NAME>, else HARNESS_TORCH_INDEX_URL
    (only for specs that name a PyTorch index), else the spec's index_url (None = the default index)."""
    environ = os.environ if environ is None else environ
    for var in index_vars(spec):
        if environ.get(var):
            return environ[var]
    return spec.index_url


def install_args(spec: EnvSpec, environ=None) -> list[str]:
    """Arguments to `pip install` / `uv pip install` that install exactly the spec's torch build."""
    if not spec.installs:
        return []
    args = [spec.torch_requirement, *spec.extra_pins]
    index = effective_index(spec, environ)
    if index:
        args += ["--index-url", index]
    if spec.pre:
        args.append("--pre")
    return args


def project_args(spec: EnvSpec, project: str = ".", extras: str = "", editable: bool = True) -> list[str]:
    """Install the harness itself from the default index, keeping the spec's extra pins in force."""
    target = f"{project}[{extras}]" if extras else project
    return [*(["-e"] if editable else []), target, *spec.extra_pins]


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        reason = exc.reason
        return getattr(reason, "strerror", None) or str(reason)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def probe_url(url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None if `url` answers (HTTP 2xx/3xx, or an existing file:// path) within `timeout` seconds in all
    (DNS included), else a short reason."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        return None if path.exists() else f"no such path {path}"
    result: list = []

    def attempt():
        try:
            req = urllib.request.Request(url, headers={"User-Agent": "harness.envs probe"})
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                resp.read(1)
            result.append(None)
        except BaseException as exc:  # noqa: BLE001 - any failure is the answer
            result.append(describe_error(exc))

    worker = threading.Thread(target=attempt, daemon=True)  # urllib's timeout does not cover DNS lookups
    worker.start()
    worker.join(timeout)
    return result[0] if result else f"no answer within {timeout:g} s"


def probe_index(spec: EnvSpec, environ=None, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None if the env's torch index answers; else the one-line error naming it and the mirror variables.

    Specs on the default index are not probed: pip/uv may be pointed at a mirror of it by their own config."""
    index = effective_index(spec, environ)
    if not spec.installs or not index:
        return None
    reason = probe_url(index.rstrip("/") + "/torch/", timeout)
    if reason is None:
        return None
    own, *rest = index_vars(spec)
    alt = f" (or {rest[0]} for every PyTorch index)" if rest else ""
    return (f"{spec.name}: torch index {index} is unreachable ({reason}); "
            f"point it at a mirror with {own}=<url>{alt}")


def find_uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # the `uv` PyPI package ships its binary

        return find_uv_bin()
    except Exception:  # noqa: BLE001 - no usable uv package
        return None


def install(spec: EnvSpec, venv: Path, project: Path, editable: bool = False, find_links: Path | None = None,
            log=None) -> None:
    """Create `venv` with the spec's Python and install torch, the extra pins and the project (Docker builds,
    harness.bisect). `find_links`: a folder of wheels that torch is installed from alone (never an index's build of
    the same version); torch's dependencies and the extra pins come from the folder, then the index; which wheel it
    was goes into the venv's TORCH_SOURCE_FILE. `log`: a file the commands' output goes to (default: this process's
    stdout/stderr)."""
    if not spec.installs:
        raise SpecError(f"{spec.name}: installs nothing (the interpreter's own torch)")
    error = probe_index(spec)
    if error:
        raise SpecError(error)
    uv = find_uv()
    target = ["-e", str(project)] if editable else [str(project)]
    if uv:
        python = [uv, "venv", "--python", spec.python, str(venv)]
        pip = [uv, "pip", "install", "--python", str(venv / "bin" / "python")]
    else:
        found = shutil.which(f"python{spec.python}")
        if not found:
            raise SpecError(f"{spec.name}: needs Python {spec.python} (or uv to fetch it); neither found")
        python = [found, "-m", "venv", str(venv)]
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
    torch_steps = [[*pip, *install_args(spec)]] if find_links is None else folder_install_steps(spec, pip, find_links)
    for cmd in [python, *torch_steps, [*pip, *target, *spec.extra_pins]]:
        print("+", " ".join(cmd), file=log, flush=True)
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT if log else None)
    if find_links is not None:
        source = {**torch_wheel(venv, find_links), "folder": str(find_links),
                  "dependencies": f"the folder, then {effective_index(spec) or 'the default index'}"}
        write_atomic(venv / TORCH_SOURCE_FILE, json.dumps(source, indent=1) + "\n")


def folder_install_steps(spec: EnvSpec, pip: list[str], folder: Path) -> list[list[str]]:
    """torch from `folder` alone (--no-index: an index's wheel of the same version never wins), then what it needs
    and the extra pins from the folder and the index (torch is then installed, so it stays the folder's)."""
    links = ["--find-links", str(folder)]
    pre = ["--pre"] if spec.pre else []
    index = effective_index(spec)
    return [[*pip, spec.torch_requirement, "--no-index", *links, "--no-deps", *pre],
            [*pip, spec.torch_requirement, *spec.extra_pins, *links, *(["--index-url", index] if index else []), *pre]]


def torch_wheel(venv: Path, folder: Path) -> dict:
    """{"file", "sha256"} of the wheel in `folder` that the venv's torch was installed from: the one whose name
    carries the installed version and one of the installed tags (the dist-info's METADATA and WHEEL); file None
    when none matches."""
    info = next(iter(sorted(venv.glob("lib/python*/site-packages/torch-*.dist-info"))), None)
    version, tags = None, set()
    if info is not None:
        version = next((line.split(":", 1)[1].strip() for line in (info / "METADATA").read_text().splitlines()
                        if line.startswith("Version:")), None)
        tags = {line.split(":", 1)[1].strip() for line in (info / "WHEEL").read_text().splitlines()
                if line.startswith("Tag:")}
    for wheel in sorted(Path(folder).glob("torch-*.whl")):
        parts = wheel.name[:-len(".whl")].split("-")
        if len(parts) in (5, 6) and parts[1] == version and _wheel_tags(*parts[-3:]) & tags:
            digest = hashlib.sha256()
            with open(wheel, "rb") as f:
                for block in iter(lambda: f.read(2**20), b""):
                    digest.update(block)
            return {"file": wheel.name, "sha256": digest.hexdigest()}
    return {"file": None, "sha256": None}


def _wheel_tags(python: str, abi: str, platform: str) -> set[str]:
    """The tags a wheel file name stands for ('cp311-cp311-manylinux1_x86_64.manylinux_2_17_x86_64': one per
    dotted part)."""
    return {f"{p}-{a}-{pl}" for p in python.split(".") for a in abi.split(".") for pl in platform.split(".")}
