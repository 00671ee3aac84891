"""Environment specs (envs/<name>/env.yaml): load, validate, install, check, bump.

Each spec is the single source of truth for one environment: torch version, CUDA variant, index URL,
Python version, extra pins and Docker base image. noxfile.py, the Dockerfiles and .ci/run read specs
only through this module, so no pin is written twice.

Deliberately free of torch and of third-party imports (runs under nox's interpreter, a bare Python in a
Docker build stage, Python 3.10+): the spec files use a small YAML subset read by `parse_spec_yaml`.

Command line (python -m harness.envs ...):
  list                          the specs, one line each
  show NAME                     one spec as JSON
  get NAME FIELD                one field (e.g. python), printed bare
  install-args NAME             the pip/uv arguments that install the env's torch (one per line)
  pins NAME                     the extra pins (one per line)
  probe NAME                    is the env's index reachable? (exit 1 with one line if not)
  install NAME --venv DIR       create DIR with the spec's Python, install torch + the project (Docker uses it)
  check NAME                    inside the env: does the imported torch match the spec? (one-line error if not)
  missing-deps                  the project's dependencies this interpreter lacks (one per line)
  bump-nightly [--date YYYYMMDD]  rewrite envs/nightly/env.yaml to a build on the nightly index
  verify-matrix DIR NAME...     records in DIR exist for each NAME with the spec's torch version and CUDA
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.record import io as record  # stdlib only at import, like this module

ROOT = Path(__file__).resolve().parent.parent
ENVS_DIR_VAR = "HARNESS_ENVS_DIR"  # where the specs live (tests point it at a copy)
INDEX_VAR = "HARNESS_TORCH_INDEX_URL"  # mirror for every spec that names a PyTorch index
PROBE_TIMEOUT_S = 5.0
NIGHTLY = "nightly"

FIELDS = ("name", "description", "torch", "cuda", "index_url", "pre", "python", "extra_pins", "base_image",
          "base_image_digest")
_VERSION = re.compile(r"^\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?$")
_CUDA = re.compile(r"^\d+\.\d+$")
_PYTHON = re.compile(r"^3\.\d+$")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?\s*(===|==|!=|~=|<=|>=|<|>)\s*([A-Za-z0-9.*+!_-]+)$")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:\d+)?[a-z0-9._/-]*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
ENV_NAME = re.compile(r"[a-z][a-z0-9]*")  # it becomes bench-<name>, envs/<name> and part of record file names


class SpecError(ValueError):
    """A spec that cannot be used as written, or an environment that does not match its spec."""


@dataclass(frozen=True)
class EnvSpec:
    name: str
    description: str
    torch: str | None  # exact version; None = the interpreter's own torch (local)
    cuda: str | None  # expected torch.version.cuda; None with a torch pin = a CPU build
    index_url: str | None  # None = the default index (PyPI, or whatever pip/uv are configured with)
    pre: bool
    python: str | None  # None = the interpreter nox runs with
    extra_pins: tuple[str, ...] = field(default_factory=tuple)
    base_image: str | None = None  # nvidia/cuda:<tag>; None = no Docker image for this env
    base_image_digest: str | None = None
    path: Path | None = None

    @property
    def installs(self) -> bool:
        return self.torch is not None

    @property
    def torch_requirement(self) -> str:
        return f"torch=={self.torch}"

    @property
    def image_ref(self) -> str | None:
        """FROM reference for the Dockerfile: tag, plus @digest when the spec knows it."""
        if not self.base_image:
            return None
        return f"{self.base_image}@{self.base_image_digest}" if self.base_image_digest else self.base_image

    def to_dict(self) -> dict:
        d = asdict(self)
        d["extra_pins"] = list(self.extra_pins)
        d["path"] = str(self.path) if self.path else None
        return d


# --------------------------------------------------------------------------- spec files


def _scalar(text: str, where: str):
    text = text.strip()
    if text in ("null", "~", ""):
        return None
    if text in ("true", "false"):
        return text == "true"
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        body = text[1:-1]
        if ('"' in body and text[0] == '"') or ("'" in body and text[0] == "'") or "\\" in body:
            raise SpecError(f"{where}: escapes inside quoted strings are not supported")
        return body
    if re.fullmatch(r"-?\d+", text):
        raise SpecError(f"{where}: write numbers as quoted strings (a version like 2.10 would be read as 2.1)")
    if re.fullmatch(r"-?\d+\.\d*", text):
        raise SpecError(f"{where}: write {text} as a quoted string (YAML would read it as a float)")
    if text[0] in "[]{}&*!|>%@`,#" or ": " in text:
        raise SpecError(f"{where}: unsupported YAML {text!r}")
    return text


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i].rstrip()
    return line.rstrip()


def parse_spec_yaml(text: str, source: str = "<spec>") -> dict:
    """The YAML subset the specs use: `key: scalar` and `key: [a, b]` lines, `#` comments.

    Anything else is an error rather than a guess (tests check the result equals yaml.safe_load)."""
    data: dict = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw)
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        if line[0] in " \t-":
            raise SpecError(f"{where}: only top-level `key: value` lines are supported")
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*):(?:\s+(.*))?", line)
        if not m:
            raise SpecError(f"{where}: expected `key: value`, got {raw.strip()!r}")
        key, value = m.group(1), (m.group(2) or "").strip()
        if key in data:
            raise SpecError(f"{where}: {key} given twice")
        if value.startswith("["):
            if not value.endswith("]"):
                raise SpecError(f"{where}: a list must open and close on one line")
            inner = value[1:-1].strip()
            items = [] if not inner else [_scalar(v, where) for v in _split_flow(inner, where)]
            if any(not isinstance(v, str) for v in items):
                raise SpecError(f"{where}: list items must be strings")
            data[key] = items
        else:
            data[key] = _scalar(value, where)
    return data


def _split_flow(inner: str, where: str) -> list[str]:
    items, buf, quote = [], "", None
    for ch in inner:
        if quote:
            buf += ch
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
            buf += ch
        elif ch == ",":
            items.append(buf)
            buf = ""
        else:
            buf += ch
    if quote:
        raise SpecError(f"{where}: unclosed quote")
    items.append(buf)
    if any(not item.strip() for item in items):
        raise SpecError(f"{where}: empty list item")
    return items


def envs_dir() -> Path:
    return Path(os.environ.get(ENVS_DIR_VAR) or ROOT / "envs")


def spec_names(directory: Path | None = None) -> list[str]:
    directory = directory or envs_dir()
    return sorted(p.parent.name for p in directory.glob("*/env.yaml"))


def validate_spec(data: dict, dirname: str | None = None, source: str = "<spec>") -> EnvSpec:
    unknown = set(data) - set(FIELDS)
    missing = set(FIELDS) - set(data)
    if unknown:
        raise SpecError(f"{source}: unknown field(s) {', '.join(sorted(unknown))}; known: {', '.join(FIELDS)}")
    if missing:
        raise SpecError(f"{source}: missing field(s) {', '.join(sorted(missing))}")

    def fail(msg):
        raise SpecError(f"{source}: {msg}")

    name = data["name"]
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        fail(f"name={name!r}: lowercase letters and digits only (it becomes bench-<name> and envs/<name>)")
    if dirname is not None and name != dirname:
        fail(f"name={name!r} differs from its folder envs/{dirname}")
    for key in ("description", "torch", "cuda", "index_url", "python", "base_image", "base_image_digest"):
        if data[key] is not None and not isinstance(data[key], str):
            fail(f"{key} must be a string or null")
    if not isinstance(data["pre"], bool):
        fail("pre must be true or false")
    pins = data["extra_pins"]
    if not isinstance(pins, list):
        fail("extra_pins must be a list")
    torch, cuda, index, python = data["torch"], data["cuda"], data["index_url"], data["python"]
    pinned = [k for k in ("cuda", "index_url", "python", "base_image", "base_image_digest") if data[k]]
    if torch is None and (pinned or pins or data["pre"]):  # local: nothing to install, nothing pinned
        fail(f"torch is null (the interpreter's own), so {', '.join(pinned) or 'extra_pins/pre'} cannot be set")
    if torch is not None:
        if not _VERSION.match(torch):
            fail(f"torch={torch!r} is not an exact version (MAJOR.MINOR.PATCH, or MAJOR.MINOR.PATCH.devYYYYMMDD)")
        if ".dev" in torch and not data["pre"]:
            fail(f"torch={torch} is a dev build: set pre: true")
        if python is None or not _PYTHON.match(python):
            fail(f"python={python!r}: expected \"3.N\"")
    if cuda is not None and not _CUDA.match(cuda):
        fail(f"cuda={cuda!r}: expected \"MAJOR.MINOR\" as torch.version.cuda prints it, or null for a CPU build")
    if index is not None and urllib.parse.urlparse(index).scheme not in ("http", "https", "file"):
        fail(f"index_url={index!r}: expected an http(s):// or file:// URL, or null for the default index")
    for pin in pins:
        m = _PIN.match(pin)
        if not m:
            fail(f"extra pin {pin!r}: expected NAME<op>VERSION, e.g. \"pkg<3\"")
        if m.group(1).lower() == "torch":
            fail("torch belongs in the torch field, not extra_pins")
    image, digest = data["base_image"], data["base_image_digest"]
    if image is not None:
        if not _IMAGE.match(image):
            fail(f"base_image={image!r}: expected repo:tag with an explicit tag")
        if image.rsplit(":", 1)[1] == "latest":
            fail(f"base_image={image!r}: 'latest' floats; pin a versioned tag")
    if digest is not None and (image is None or not _DIGEST.match(digest)):
        fail(f"base_image_digest={digest!r}: expected sha256:<64 hex> next to a base_image")
    return EnvSpec(name=name, description=data["description"] or "", torch=torch, cuda=cuda, index_url=index,
                   pre=data["pre"], python=python, extra_pins=tuple(pins), base_image=image,
                   base_image_digest=digest)


def load_spec(name: str, directory: Path | None = None) -> EnvSpec:
    directory = directory or envs_dir()
    path = directory / name / "env.yaml"
    if not path.is_file():
        known = ", ".join(spec_names(directory)) or "none"
        raise SpecError(f"no environment {name!r} (no {path}); known: {known}")
    spec = validate_spec(parse_spec_yaml(path.read_text(), str(path)), name, str(path))
    return EnvSpec(**{**spec.__dict__, "path": path})


def load_specs(directory: Path | None = None) -> tuple[dict[str, EnvSpec], dict[str, str]]:
    """Every spec under envs/: (the ones that load, by name; {name: error} for the ones that do not). One bad
    spec must not hide the good ones: nox still lists and runs them, and names the bad one with its error."""
    directory = directory or envs_dir()
    specs, errors = {}, {}
    for name in spec_names(directory):
        try:
            specs[name] = load_spec(name, directory)
        except (SpecError, OSError, UnicodeDecodeError) as exc:
            errors[name] = str(exc) if isinstance(exc, SpecError) else f"{directory / name / 'env.yaml'}: unreadable: {exc}"
    return specs, errors


def load_all(directory: Path | None = None) -> dict[str, EnvSpec]:
    """Every spec; SpecError if any does not load (where all of them are needed: tests, Dockerfiles)."""
    specs, errors = load_specs(directory)
    if errors:
        raise SpecError("; ".join(errors.values()))
    return specs


def check_env_name(name: str) -> str:
    """An env name as records and `bench-<name>` use it: a spec name (`local` is one). Checked before a run,
    so `--env a/b` is refused instead of failing when its first record is written."""
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise SpecError(f"--env {name!r}: an env name is lowercase letters and digits, like the folders in envs/")
    return name


# --------------------------------------------------------------------------- installing


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


def _describe_error(exc: BaseException) -> str:
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
            result.append(_describe_error(exc))

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


def install(spec: EnvSpec, venv: Path, project: Path, editable: bool = False) -> None:
    """Create `venv` with the spec's Python and install torch, the extra pins and the project (Docker builds)."""
    if not spec.installs:
        raise SpecError(f"{spec.name}: installs nothing (the interpreter's own torch)")
    error = probe_index(spec)
    if error:
        raise SpecError(error)
    uv = find_uv()
    target = ["-e", str(project)] if editable else [str(project)]
    if uv:
        steps = [[uv, "venv", "--python", spec.python, str(venv)],
                 [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *install_args(spec)],
                 [uv, "pip", "install", "--python", str(venv / "bin" / "python"), *target, *spec.extra_pins]]
    else:
        python = shutil.which(f"python{spec.python}")
        if not python:
            raise SpecError(f"{spec.name}: needs Python {spec.python} (or uv to fetch it); neither found")
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install"]
        steps = [[python, "-m", "venv", str(venv)], [*pip, *install_args(spec)], [*pip, *target, *spec.extra_pins]]
    for cmd in steps:
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


# --------------------------------------------------------------------------- checking an environment


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def _release(version: str) -> tuple:
    parts = []
    for piece in _public(version).split("."):
        m = re.match(r"\d+", piece)
        if not m:
            break
        parts.append(int(m.group()))
        if m.group() != piece:
            break
    return tuple(parts)


def pin_satisfied(pin: str, installed: str) -> bool:
    """Does `installed` satisfy `pin` (NAME<op>VERSION)? Release numbers only, which is what pins here use."""
    m = _PIN.match(pin)
    if not m:
        raise SpecError(f"extra pin {pin!r}: expected NAME<op>VERSION")
    op, want = m.group(3), m.group(4)
    if op in ("==", "===", "!=") and want.endswith(".*"):
        prefix = _release(want[:-2])
        equal = _release(installed)[: len(prefix)] == prefix
        return equal if op != "!=" else not equal
    if op in ("==", "===", "!="):
        have, need = _release(installed), _release(want)
        width = max(len(have), len(need))
        equal = have + (0,) * (width - len(have)) == need + (0,) * (width - len(need))
        return equal if op != "!=" else not equal
    have, need = _release(installed), _release(want)
    width = max(len(have), len(need))
    have, need = have + (0,) * (width - len(have)), need + (0,) * (width - len(need))
    if op == "~=":
        return have >= need and have[: len(_release(want)) - 1] == _release(want)[:-1]
    return {"<": have < need, "<=": have <= need, ">": have > need, ">=": have >= need}[op]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_torch(spec: EnvSpec, version: str, cuda: str | None, location: str = "",
                installed: dict[str, str | None] | None = None) -> str | None:
    """None if an imported torch `version` / `cuda` (and, when `installed` {package: version} is given, the
    extra pins) match the spec, else one line naming both sides."""
    if not spec.installs:
        return None
    where = f" from {location}" if location else ""
    if _public(version) != _public(spec.torch) or (cuda or None) != spec.cuda:
        return (f"{spec.name}: spec pins torch {spec.torch} (CUDA {spec.cuda or 'none: CPU build'}) but this env "
                f"imports torch {version} (CUDA {cuda or 'none: CPU build'}){where}")
    for pin in spec.extra_pins if installed is not None else ():
        name = _PIN.match(pin).group(1)
        have = installed.get(name, installed.get(_norm(name)))
        if have is None:
            return f"{spec.name}: spec pins {pin} but {name} is not installed in this env"
        if not pin_satisfied(pin, have):
            return f"{spec.name}: spec pins {pin} but this env has {name} {have}"
    return None


def check_current(spec: EnvSpec) -> tuple[str | None, str]:
    """Import torch here and check it against the spec: (error or None, summary line)."""
    from importlib import metadata

    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the answer
        hint = "" if spec.installs else "; point HARNESS_LOCAL_PYTHON at an interpreter that has torch"
        return f"{spec.name}: cannot import torch in {sys.executable} ({type(exc).__name__}: {exc}){hint}", ""
    installed = {}
    for pin in spec.extra_pins:
        name = _PIN.match(pin).group(1)
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed[name] = None
    location = str(Path(torch.__file__).parent)
    error = check_torch(spec, torch.__version__, torch.version.cuda, location, installed)
    summary = (f"{spec.name}: torch {torch.__version__} (CUDA {torch.version.cuda or 'none'}) "
               f"python {sys.version.split()[0]} from {location}")
    return error, summary


# --------------------------------------------------------------------------- the local env's light deps


def project_dependencies(pyproject: Path | None = None) -> list[str]:
    text = (pyproject or ROOT / "pyproject.toml").read_text()
    try:
        import tomllib

        return list(tomllib.loads(text)["project"]["dependencies"])
    except ImportError:  # Python 3.10: read the one array this needs
        m = re.search(r"^dependencies\s*=\s*\[(.*?)^\]", text, re.DOTALL | re.MULTILINE)
        return re.findall(r"\"([^\"]+)\"", m.group(1)) if m else []


def missing_dependencies(requirements: list[str]) -> list[str]:
    """Requirements not installed in this interpreter (or installed at a version outside a simple pin)."""
    from importlib import metadata

    missing = []
    for req in requirements:
        req = req.split(";", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)", req)
        try:
            have = metadata.version(m.group(1))
        except metadata.PackageNotFoundError:
            missing.append(req)
            continue
        if _PIN.match(req) and not pin_satisfied(req, have):
            missing.append(req)
    return missing


# --------------------------------------------------------------------------- nightly bump


def nightly_builds(html: str, cuda: str | None, python: str) -> dict[str, str]:
    """{YYYYMMDD: version} for the Linux x86_64 torch dev wheels for `python` and CUDA variant `cuda`."""
    variant = "cu" + cuda.replace(".", "") if cuda else "cpu"
    tag = "cp" + python.replace(".", "")
    pattern = re.compile(
        r"torch-(\d+\.\d+\.\d+\.dev(\d{8}))(?:%2B|\+)" + re.escape(variant)
        + r"-" + tag + r"-" + tag + r"-(?:manylinux|linux)[A-Za-z0-9_.]*x86_64\.whl")
    builds: dict[str, str] = {}
    for version, date in pattern.findall(html):  # hrefs carry %2B, link texts +
        if version > builds.get(date, ""):
            builds[date] = version
    return builds


def _fetch(url: str, timeout: float) -> str:
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        path = path / "index.html" if path.is_dir() else path
        return path.read_text()
    req = urllib.request.Request(url, headers={"User-Agent": "harness.envs bump-nightly"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read().decode("utf-8", "replace")


def rewrite_torch_line(text: str, version: str) -> str:
    new, count = re.subn(r'^torch:\s*"[^"]*"', f'torch: "{version}"', text, count=1, flags=re.MULTILINE)
    if count != 1:
        raise SpecError('no `torch: "..."` line to rewrite')
    return new


def bump_nightly(date: str | None = None, timeout: float = 30.0) -> tuple[str, str]:
    """Point envs/nightly/env.yaml at the newest build on its index (or the one from `date`).

    Returns (old version, new version)."""
    spec = load_spec(NIGHTLY)
    error = probe_index(spec)
    if error:
        raise SpecError(error)
    index = effective_index(spec).rstrip("/")
    try:
        html = _fetch(index + "/torch/", timeout)
    except Exception as exc:  # noqa: BLE001 - reported as one line
        raise SpecError(f"{NIGHTLY}: cannot read {index}/torch/ ({_describe_error(exc)})") from None
    builds = nightly_builds(html, spec.cuda, spec.python)
    variant = "cu" + spec.cuda.replace(".", "") if spec.cuda else "cpu"
    if not builds:
        raise SpecError(f"{NIGHTLY}: {index}/torch/ lists no {variant} cp{spec.python.replace('.', '')} "
                        "Linux x86_64 dev wheels")
    if date is not None:
        if date not in builds:
            near = ", ".join(sorted(builds)[-5:])
            raise SpecError(f"{NIGHTLY}: no {variant} build dated {date} on {index} (newest: {near}; "
                            "nightlies are pruned after about 60 days)")
        chosen = builds[date]
    else:
        chosen = builds[max(builds)]
    text = spec.path.read_text()
    new_text = rewrite_torch_line(text, chosen)
    validate_spec(parse_spec_yaml(new_text, str(spec.path)), NIGHTLY, str(spec.path))
    spec.path.write_text(new_text)
    return spec.torch, chosen


# --------------------------------------------------------------------------- verifying a matrix run


def _records(directory: Path, warn):
    """(path, JSON) of the record-like files under `directory`, read as harness.compare reads them (size,
    depth and number limits; one warning per unreadable file), but not schema-validated: only the env and
    torch facts are checked here, and jsonschema may be absent from a bare Python."""
    for path, data in record.iter_records([directory], warn=warn, read=record.read_json):
        if isinstance(data, dict) and "schema_version" in data and "env" in data:
            yield path, data


def _record_packages(rec: dict) -> dict[str, str] | None:
    """{normalised name: version} from a record's environment.packages ("name==version" lines), if any."""
    packages = (rec.get("environment") or {}).get("packages")
    if isinstance(packages, dict):
        packages = packages.get("packages")
    if not isinstance(packages, list):
        return None
    found = {}
    for line in packages:
        name, sep, version = str(line).partition("==")
        if sep:
            found[_norm(name.strip())] = version.strip()
    return found


def verify_matrix(directory: Path, names: list[str], warn=print) -> tuple[list[str], list[str]]:
    """(problems, summary lines): each named env has records in `directory`, at least one with status ok,
    and every one captured the spec's torch version and CUDA variant. Unreadable files: one warning each."""
    problems, lines = [], []
    by_env: dict[str, list] = {}
    for path, rec in _records(directory, warn):
        by_env.setdefault(rec.get("env"), []).append((path, rec))
    for name in names:
        spec = load_spec(name)
        recs = by_env.get(name, [])
        if not recs:
            problems.append(f"{name}: no records in {directory} (envs present: {', '.join(sorted(map(str, by_env))) or 'none'})")
            continue
        versions, ok = set(), 0
        for path, rec in recs:
            torch_info = (rec.get("environment") or {}).get("torch") or {}
            version, cuda = torch_info.get("version"), torch_info.get("cuda")
            versions.add(f"{version} (CUDA {cuda or 'none'})")
            ok += rec.get("status") == "ok"
            if not isinstance(version, str):
                problems.append(f"{name}: {path.name} has no environment.torch.version")
            elif spec.installs:
                error = check_torch(spec, version, cuda, installed=_record_packages(rec))
                if error:
                    problems.append(f"{path.name}: {error}")
        if not ok:
            problems.append(f"{name}: none of its {len(recs)} records has status ok")
        lines.append(f"{name}: {len(recs)} records ({ok} ok), torch {', '.join(sorted(versions))}")
    return problems, lines


# --------------------------------------------------------------------------- command line


def _fail(message: str, code: int = 1):
    print(message, file=sys.stderr)
    sys.exit(code)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.envs", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the specs, one line each")
    for cmd in ("show", "install-args", "pins", "probe", "check"):
        sub.add_parser(cmd).add_argument("name")
    get = sub.add_parser("get", help="one field of a spec")
    get.add_argument("name")
    get.add_argument("field", choices=FIELDS)
    inst = sub.add_parser("install", help="create a venv with the spec's Python, torch and the project")
    inst.add_argument("name")
    inst.add_argument("--venv", type=Path, required=True)
    inst.add_argument("--project", type=Path, default=ROOT)
    inst.add_argument("--editable", action="store_true")
    sub.add_parser("missing-deps", help="project dependencies this interpreter lacks")
    bump = sub.add_parser("bump-nightly", help="rewrite envs/nightly/env.yaml to a build on the nightly index")
    bump.add_argument("--date", help="YYYYMMDD (default: the newest build)")
    verify = sub.add_parser("verify-matrix", help="records in DIR show each env's pinned torch")
    verify.add_argument("dir", type=Path)
    verify.add_argument("names", nargs="+")
    args = parser.parse_args(argv)

    try:
        if args.cmd == "list":
            specs, errors = load_specs()
            for name in sorted({*specs, *errors}):
                if name in errors:  # named with its error; the others are still listed
                    print(f"{name:10} invalid: {errors[name]}")
                    continue
                spec = specs[name]
                torch = f"torch {spec.torch} (CUDA {spec.cuda or 'cpu'})" if spec.installs else "interpreter's torch"
                index = effective_index(spec) or "default index"
                print(f"{spec.name:10} {torch:38} python {spec.python or '-':5} {index}")
            if errors:
                return 1
        elif args.cmd == "show":
            print(json.dumps(load_spec(args.name).to_dict(), indent=1))
        elif args.cmd == "get":
            value = getattr(load_spec(args.name), args.field)
            print(" ".join(value) if isinstance(value, tuple) else ("" if value is None else value))
        elif args.cmd == "install-args":
            print("\n".join(install_args(load_spec(args.name))))
        elif args.cmd == "pins":
            print("\n".join(load_spec(args.name).extra_pins))
        elif args.cmd == "probe":
            spec = load_spec(args.name)
            error = probe_index(spec)
            if error:
                _fail(error)
            print(f"{spec.name}: {effective_index(spec) or 'default index (not probed)'} ok")
        elif args.cmd == "install":
            install(load_spec(args.name), args.venv, args.project, args.editable)
        elif args.cmd == "check":
            spec = load_spec(args.name)
            error, summary = check_current(spec)
            if error:
                _fail(error)
            print(summary + ("" if spec.installs else " (local: not checked against a pin)"))
        elif args.cmd == "missing-deps":
            print("\n".join(missing_dependencies(project_dependencies())))
        elif args.cmd == "bump-nightly":
            if args.date and not re.fullmatch(r"\d{8}", args.date):
                _fail(f"--date {args.date!r}: expected YYYYMMDD")
            old, new = bump_nightly(args.date)
            print(f"{NIGHTLY}: torch {old} -> {new} in {load_spec(NIGHTLY).path}")
        elif args.cmd == "verify-matrix":
            problems, lines = verify_matrix(args.dir, args.names, warn=lambda line: print(line, file=sys.stderr))
            print("\n".join(lines))
            if problems:
                _fail("\n".join(problems))
    except SpecError as exc:
        _fail(str(exc))
    except subprocess.CalledProcessError as exc:
        _fail(f"command failed (exit {exc.returncode}): {' '.join(map(str, exc.cmd))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
