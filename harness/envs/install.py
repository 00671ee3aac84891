"""Installing an env: the index it installs from (mirror variables), the pip/uv arguments, the reachability
probe, and `install` (a venv with the spec's Python, torch, the extra pins and the project: Docker builds).

Standard library (and PyYAML, through the spec): the Docker bootstrap runs it with the base image's python3
and python3-yaml.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from harness.envs.spec import EnvSpec, SpecError

INDEX_VAR = "HARNESS_TORCH_INDEX_URL"  # mirror for every spec that names a PyTorch index
PROBE_TIMEOUT_S = 5.0



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
    harness.bisect). `find_links`: a folder of wheels searched beside the index (a local wheel folder); `log`: a
    file the commands' output goes to (default: this process's stdout/stderr)."""
    if not spec.installs:
        raise SpecError(f"{spec.name}: installs nothing (the interpreter's own torch)")
    error = probe_index(spec)
    if error:
        raise SpecError(error)
    uv = find_uv()
    target = ["-e", str(project)] if editable else [str(project)]
    links = ["--find-links", str(find_links)] if find_links else []
    if uv:
        steps = [[uv, "venv", "--python", spec.python, str(venv)],
                 [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *install_args(spec), *links],
                 [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *target, *spec.extra_pins]]
    else:
        python = shutil.which(f"python{spec.python}")
        if not python:
            raise SpecError(f"{spec.name}: needs Python {spec.python} (or uv to fetch it); neither found")
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
        steps = [[python, "-m", "venv", str(venv)], [*pip, *install_args(spec), *links], [*pip, *target, *spec.extra_pins]]
    for cmd in steps:
        print("+", " ".join(cmd), file=log, flush=True)
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT if log else None)
