"""One environment's spec (envs/<name>/env.yaml): the EnvSpec, reading it with PyYAML, and validating it.

Each spec is the single source of truth for one environment: torch version, CUDA variant, index URL, Python
version, extra pins and Docker base image. Everything else (noxfile.py, the Dockerfiles, .ci/run) reads specs
through here, so no pin is written twice.
"""

from __future__ import annotations

import os
import re
import sys
import urllib.parse
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVS_DIR_VAR = "HARNESS_ENVS_DIR"  # where the specs live (tests point it at a copy)
NIGHTLY = "nightly"

FIELDS = ("name", "description", "torch", "cuda", "index_url", "pre", "python", "extra_pins", "base_image",
          "base_image_digest")
CUDA = re.compile(r"^\d+\.\d+\Z")
PYTHON = re.compile(r"^3\.\d+\Z")
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[A-Za-z0-9,._-]+\])?\s*(===|==|!=|~=|<=|>=|<|>)\s*([A-Za-z0-9.*+!_-]+)\Z")
IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/-]*(:\d+)?[a-z0-9._/-]*:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\Z")
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}\Z")
ENV_NAME = re.compile(r"[a-z][a-z0-9]*")  # it becomes bench-<name>, envs/<name> and part of record file names


def parse_version(text):
    """`text` as a packaging.version.Version (PEP 440, the one parser of every version string here), None where it
    is not one. packaging is imported here, not at module load: `missing-deps` runs in an interpreter that may
    lack it."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(text))
    except InvalidVersion:
        return None


# What exact_version accepts where packaging is not installed (the env images' bootstrap runs the base image's bare
# python3 to install the pinned build): the same MAJOR.MINOR.PATCH forms, anchored at the true end of the text.
EXACT_VERSION = re.compile(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?(\+[A-Za-z0-9.]+)?\Z")


def exact_version(text) -> bool:
    """An exact version a spec or an index names: MAJOR.MINOR.PATCH, with a pre-, post-, dev- or local part."""
    text = str(text)
    if any(c.isspace() for c in text):  # packaging strips surrounding whitespace: a trailing newline would parse
        return False
    try:
        version = parse_version(text)
    except ImportError:
        return EXACT_VERSION.match(text) is not None
    return version is not None and len(version.release) == 3 and not version.epoch and text[:1].isdigit()


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


# --------------------------------------------------------------------------- reading


def parse_spec(text: str, source: str = "<spec>") -> dict:
    """The mapping in a spec file, read by PyYAML; SpecError with the file and line for anything it cannot read,
    and for a key given twice (YAML would keep the last one silently; bump-nightly rewrites the first)."""
    try:
        import yaml  # here, not at import: `missing-deps` must run in an interpreter that lacks PyYAML
    except ImportError:
        raise SpecError(f"{source}: reading a spec needs PyYAML, which {sys.executable} lacks "
                        "(pip install pyyaml; nox installs it for its noxfile itself)") from None

    from harness.console.yamlfile import YamlRefused, load_yaml

    try:
        data = load_yaml(text)  # bounded: no alias expansion without end, no nesting that overflows the stack
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except YamlRefused as exc:
        raise SpecError(f"{source}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected `key: value` lines, got a YAML {type(data).__name__}")
    seen = set()
    for key, _ in node.value:
        if key.value in seen:
            raise SpecError(f"{source}:{key.start_mark.line + 1}: {key.value} given twice")
        seen.add(key.value)
    return data


def envs_dir() -> Path:
    return Path(os.environ.get(ENVS_DIR_VAR) or ROOT / "envs")


def spec_names(directory: Path | None = None) -> list[str]:
    directory = directory or envs_dir()
    return sorted(p.parent.name for p in directory.glob("*/env.yaml"))


def _read_spec_text(path: Path) -> str:
    """A spec file's text, its size checked before it is read, UTF-8 (SpecError otherwise)."""
    from harness.console.yamlfile import YamlRefused, read_yaml_text

    try:
        return read_yaml_text(path)
    except YamlRefused as exc:
        raise SpecError(f"{path}: refused: {exc}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read it: {exc.strerror or exc}") from None


def load_spec(name: str, directory: Path | None = None) -> EnvSpec:
    directory = directory or envs_dir()
    path = directory / name / "env.yaml"
    if not path.is_file():
        known = ", ".join(spec_names(directory)) or "none"
        raise SpecError(f"no environment {name!r} (no {path}); known: {known}")
    spec = validate_spec(parse_spec(_read_spec_text(path), str(path)), name, str(path))
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
    """An env name as records and `bench-<name>` use it: the name of a spec in envs/ (`local` is one). Checked
    before a run, so `--env a/b` or a typo is refused instead of failing or tagging records with a name no spec has."""
    if not isinstance(name, str) or not ENV_NAME.fullmatch(name):
        raise SpecError(f"--env {name!r}: an env name is lowercase letters and digits, like the folders in envs/")
    known = spec_names()
    if name not in known:  # a typo would tag every record with an env that does not exist
        raise SpecError(f"--env {name}: no such env (no {envs_dir() / name / 'env.yaml'}); known: {', '.join(known) or 'none'}")
    return name


# --------------------------------------------------------------------------- validating


def validate_spec(data: dict, dirname: str | None = None, source: str = "<spec>") -> EnvSpec:
    unknown = set(data) - set(FIELDS)
    missing = set(FIELDS) - set(data)
    if unknown:
        raise SpecError(f"{source}: unknown field(s) {', '.join(sorted(map(str, unknown)))}; known: {', '.join(FIELDS)}")
    if missing:
        raise SpecError(f"{source}: missing field(s) {', '.join(sorted(missing))}")

    def fail(msg):
        raise SpecError(f"{source}: {msg}")

    for key, value in data.items():  # unquoted 2.10 reaches us as the float 2.1: the quotes matter
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            fail(f"{key}: YAML read {value!r} as a number; write it as a quoted string (\"2.10\", not 2.10)")
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
    if not isinstance(pins, list) or not all(isinstance(p, str) for p in pins):
        fail("extra_pins must be a list of strings")
    torch, cuda, index, python = data["torch"], data["cuda"], data["index_url"], data["python"]
    pinned = [k for k in ("cuda", "index_url", "python", "base_image", "base_image_digest") if data[k]]
    if torch is None and (pinned or pins or data["pre"]):  # local: nothing to install, nothing pinned
        fail(f"torch is null (the interpreter's own), so {', '.join(pinned) or 'extra_pins/pre'} cannot be set")
    if torch is not None:
        if not exact_version(torch):
            fail(f"torch={torch!r} is not an exact version (MAJOR.MINOR.PATCH, or MAJOR.MINOR.PATCH.devYYYYMMDD)")
        if ".dev" in torch and not data["pre"]:
            fail(f"torch={torch} is a dev build: set pre: true")
        if python is None or not PYTHON.match(python):
            fail(f"python={python!r}: expected \"3.N\"")
    if cuda is not None and not CUDA.match(cuda):
        fail(f"cuda={cuda!r}: expected \"MAJOR.MINOR\" as torch.version.cuda prints it, or null for a CPU build")
    if index is not None and urllib.parse.urlparse(index).scheme not in ("http", "https", "file"):
        fail(f"index_url={index!r}: expected an http(s):// or file:// URL, or null for the default index")
    for pin in pins:
        m = PIN.match(pin)
        if not m:
            fail(f"extra pin {pin!r}: expected NAME<op>VERSION, e.g. \"pkg<3\"")
        if m.group(1).lower() == "torch":
            fail("torch belongs in the torch field, not extra_pins")
    image, digest = data["base_image"], data["base_image_digest"]
    if image is not None:
        if not IMAGE.match(image):
            fail(f"base_image={image!r}: expected repo:tag with an explicit tag")
        if image.rsplit(":", 1)[1] == "latest":
            fail(f"base_image={image!r}: 'latest' floats; pin a versioned tag")
    if digest is not None and (image is None or not DIGEST.match(digest)):
        fail(f"base_image_digest={digest!r}: expected sha256:<64 hex> next to a base_image")
    return EnvSpec(name=name, description=data["description"] or "", torch=torch, cuda=cuda, index_url=index,
                   pre=data["pre"], python=python, extra_pins=tuple(pins), base_image=image,
                   base_image_digest=digest)
