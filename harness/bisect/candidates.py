"""The torch builds a bisect can install: the released versions the package index offers for the env's Python and
this platform, listed by pip's own `pip index versions` (not scraped), then the dated nightlies of a configured
nightly index; the range between the two ends; the spec each candidate is installed from.

No torch import. Every error is one line (CandidateError).
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.analysis.dataset import torch_version_key
from harness.envs.install import INDEX_VAR, probe_url
from harness.envs.spec import ENV_NAME, EnvSpec, SpecError, exact_version, load_spec, parse_version, spec_names
from harness.record.model import public_version

DEFAULT_INDEX = "https://pypi.org/simple"
LIST_TIMEOUT_S = 120


class CandidateError(ValueError):
    """Bad ends, an empty range, an unreachable index: one line for the user."""


@dataclass(frozen=True)
class Candidate:
    """One torch build to measure: its version and where it installs from."""

    version: str  # public version, e.g. 2.5.1 or 2.16.0.dev20261120
    index_url: str | None = None  # None: the default index (pip/uv's own configuration)
    base: EnvSpec | None = None  # an envs/<name> spec this end was named by (its pins are used as written)

    @property
    def pre(self) -> bool:
        version = parse_version(self.version)
        return bool(version and version.is_prerelease)  # a, b, rc or dev

    @property
    def env_name(self) -> str:
        return self.base.name if self.base else env_name_for(self.version)

    @property
    def key(self) -> tuple:
        return torch_version_key(self.version)


def env_name_for(version: str) -> str:
    """An env name for a torch version (lowercase letters and digits, sortable, unambiguous): 2.1.2 -> torch20102,
    2.10.0 -> torch21000, 2.16.0.dev20261120 -> torch21600dev20261120."""
    v = parse_version(public_version(version)) if exact_version(public_version(version)) else None
    if v is None or v.post is not None or (v.pre and v.dev is not None):
        raise CandidateError(f"torch {version!r}: not a MAJOR.MINOR.PATCH version")
    major, minor, patch = v.release
    pre = f"dev{v.dev}" if v.dev is not None else "".join(map(str, v.pre or ()))
    name = f"torch{major}{minor:02d}{patch:02d}{pre}"
    assert ENV_NAME.fullmatch(name)
    return name


def needs_beside_torch(version: str) -> list[str]:
    """What a bare venv needs beside a torch build for the workload to compile and run (its spec's extra pins).
    Measured here (docs/bisect.md): builds before 2.4 are built against NumPy 1.x and their cpp_extension imports
    pkg_resources.packaging, gone in setuptools 70 (envs/torch212 and torch23 pin the same); several later builds
    (2.3.1, 2.5.1, 2.9.1 seen) import setuptools from Inductor without declaring it, so every candidate gets it,
    below 81 (pkg_resources removed)."""
    if torch_version_key(version) < torch_version_key("2.4.0"):
        return ["numpy<2", "setuptools<70"]
    return ["setuptools<81"]


# --------------------------------------------------------------------------- listing


def index_in_use(index_url: str | None) -> str:
    """The index pip lists from: the given one, else pip's configured PIP_INDEX_URL, else PyPI."""
    return index_url or os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX


def pip_index_command(python: str, index_url: str | None = None, find_links: Path | None = None,
                      pre: bool = False) -> list[str]:
    """`pip index versions torch` for the env's Python and this platform, binary wheels only. A --find-links folder
    is listed alone (--isolated --no-index: no configured index or folder mixes in)."""
    cmd = [sys.executable, "-m", "pip", "index", "versions", "torch", "--python-version", python,
           "--only-binary=:all:", "--disable-pip-version-check", "--retries", "1", "--timeout", "20"]
    if find_links is not None:
        cmd[3:3] = ["--isolated"]
        cmd += ["--no-index", "--find-links", str(find_links)]
    elif index_url:
        cmd += ["--index-url", index_url]
    if pre:
        cmd.append("--pre")
    return cmd


def parse_versions(output: str) -> list[str]:
    """The versions on pip index's `Available versions: a, b, ...` line, public only (a local build such as
    2.13.0+cpu from a configured wheel folder is not what the index installs), oldest first."""
    for line in output.splitlines():
        if line.strip().startswith("Available versions:"):
            found = {v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()}
            return sorted({v for v in found if "+" not in v and exact_version(v)}, key=torch_version_key)
    return []


def has_pip() -> bool:
    """Whether this interpreter has pip, read from its installed metadata. Not importlib.util.find_spec("pip"):
    setuptools' distutils hack takes a find_spec for pip as pip starting up and switches itself off for the rest
    of the process, after which Inductor's import of setuptools fails (AssertionError in _distutils_hack)."""
    try:
        importlib.metadata.version("pip")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def list_versions(python: str, index_url: str | None = None, find_links: Path | None = None,
                  pre: bool = False, run=subprocess.run) -> list[str]:
    """The torch versions on the index (or in the folder) for `python` on this platform, oldest first."""
    if find_links is not None:
        if not Path(find_links).is_dir():
            raise CandidateError(f"--find-links {find_links}: no such folder")
        where = f"folder {find_links}"
    else:
        where = f"index {index_in_use(index_url)}"
        reason = probe_url(index_in_use(index_url).rstrip("/") + "/torch/")
        if reason is not None:
            raise CandidateError(f"{where} is unreachable ({reason}); point --index-url at a mirror, or list a "
                                 f"wheel folder with --find-links DIR")
    cmd = pip_index_command(python, index_url, find_links, pre)
    if not has_pip():
        raise CandidateError(f"listing torch builds needs pip in {sys.executable} (a uv venv has none): "
                             f"{sys.executable} -m ensurepip, or pip install -e . (pip is a dependency)")
    try:
        out = run(cmd, capture_output=True, text=True, timeout=LIST_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CandidateError(f"{where}: pip index versions gave no answer within {LIST_TIMEOUT_S} s") from None
    versions = parse_versions(out.stdout)
    if not versions:
        tail = (out.stderr or out.stdout).strip().splitlines()
        raise CandidateError(f"{where} offers no torch wheel for Python {python} on this platform "
                             f"({tail[-1] if tail else 'pip printed nothing'})")
    return versions


def nightly_index() -> str | None:
    """The nightly env's mirror variable (or the one for every PyTorch index), where one is configured."""
    return os.environ.get(f"{INDEX_VAR}_NIGHTLY") or os.environ.get(INDEX_VAR) or None


# --------------------------------------------------------------------------- the range


def resolve_end(text: str, what: str) -> tuple[str, EnvSpec | None]:
    """--good/--bad: an env name (envs/<name>/env.yaml: its torch and pins) or a torch version."""
    if text in spec_names():
        try:
            spec = load_spec(text)
        except SpecError as exc:
            raise CandidateError(str(exc)) from None
        if not spec.installs:
            raise CandidateError(f"--{what} {text}: the env installs no torch of its own (the interpreter's); "
                                 "name an env with a torch pin, or a torch version")
        return public_version(spec.torch), spec
    if not exact_version(text):
        raise CandidateError(f"--{what} {text!r}: neither an env name ({', '.join(spec_names())}) nor a torch "
                             "version like 2.5.1")
    return public_version(text), None


def candidates_between(good: str, bad: str, python: str, index_url: str | None = None,
                       find_links: Path | None = None, run=subprocess.run) -> list[Candidate]:
    """Every torch build from the good end to the bad end (both included), oldest to newest when good is older:
    the releases on the index, then nightlies of a configured nightly index (or when an end is a nightly)."""
    (va, spec_a), (vb, spec_b) = resolve_end(good, "good"), resolve_end(bad, "bad")
    if torch_version_key(va) == torch_version_key(vb):
        raise CandidateError(f"--good and --bad are the same torch ({va}): nothing to bisect")
    low, high = sorted((va, vb), key=torch_version_key)
    dev_end = any(".dev" in v for v in (va, vb))
    nightly = nightly_index() if find_links is None else None
    releases = list_versions(python, index_url, find_links, pre=False, run=run)
    found = {v: index_url for v in releases}
    if nightly:
        found.update({v: nightly for v in list_versions(python, nightly, None, pre=True, run=run) if ".dev" in v})
    elif dev_end and find_links is None:
        raise CandidateError(f"a nightly end ({va if '.dev' in va else vb}) needs a nightly index: set "
                             f"{INDEX_VAR}_NIGHTLY=<url> (the nightly env's mirror variable)")
    elif dev_end:
        found.update({v: None for v in list_versions(python, None, find_links, pre=True, run=run) if ".dev" in v})
    for version, spec, what in ((va, spec_a, "good"), (vb, spec_b, "bad")):
        if version not in found:
            near = ", ".join(sorted(found, key=torch_version_key)[-6:])
            where = f"folder {find_links}" if find_links else f"index {index_in_use(index_url)}"
            raise CandidateError(f"--{what} torch {version} is not on the {where} for Python {python} "
                                 f"(newest there: {near})")
    inside = sorted((v for v in found if torch_version_key(low) <= torch_version_key(v) <= torch_version_key(high)),
                    key=torch_version_key)
    by_version = {va: spec_a, vb: spec_b}
    cands = [Candidate(v, (by_version[v].index_url if by_version.get(v) else found[v]), by_version.get(v))
             for v in inside]
    return cands if torch_version_key(va) < torch_version_key(vb) else cands[::-1]


def candidate_at(text: str, python: str, index_url: str | None = None, find_links: Path | None = None,
                 run=subprocess.run) -> Candidate:
    """--at: one build (an env name or a torch version), checked to be on the index or in the folder."""
    version, spec = resolve_end(text, "at")
    if spec is not None:
        return Candidate(version, spec.index_url, spec)
    nightly = ".dev" in version and find_links is None
    url = nightly_index() if nightly else index_url
    if nightly and not url:
        raise CandidateError(f"--at {version}: a nightly needs a nightly index: set {INDEX_VAR}_NIGHTLY=<url>")
    found = list_versions(python, url, find_links, pre=".dev" in version, run=run)
    if version not in found:
        where = f"folder {find_links}" if find_links else f"index {index_in_use(url)}"
        raise CandidateError(f"--at torch {version} is not on the {where} for Python {python} "
                             f"(newest there: {', '.join(sorted(found, key=torch_version_key)[-6:])})")
    return Candidate(version, url)


def newest_patches(cands: list[Candidate]) -> list[Candidate]:
    """The newest patch of every minor release (every nightly stays), and both ends, in the given order."""
    newest: dict[tuple, Candidate] = {}
    for c in cands:
        version = parse_version(c.version)
        k = version.release[:2] if version and version.dev is None else (c.version,)  # MAJOR.MINOR; a nightly its own
        if k not in newest or c.key > newest[k].key:
            newest[k] = c
    chosen = {*newest.values(), cands[0], cands[-1]}
    return [c for c in cands if c in chosen]


# --------------------------------------------------------------------------- the spec a candidate is installed from


def candidate_spec(c: Candidate, python: str) -> EnvSpec:
    """The spec of one candidate, made the way envs/*/env.yaml make theirs: an end named by an env keeps its own
    spec; any other build gets its exact torch, where it comes from and what it needs beside torch."""
    if c.base is not None:
        return c.base
    return EnvSpec(name=c.env_name, description=f"torch {c.version} (harness.bisect candidate)", torch=c.version,
                   cuda=None, index_url=c.index_url, pre=c.pre, python=python,
                   extra_pins=tuple(needs_beside_torch(c.version)))


def spec_yaml(spec: EnvSpec, note: str = "") -> str:
    """The spec as envs/<name>/env.yaml writes it (quoted strings: 2.10 must not read as a number)."""
    q = lambda v: "null" if v is None else '"' + str(v).replace('"', '\\"') + '"'
    pins = "[" + ", ".join(q(p) for p in spec.extra_pins) + "]"
    lines = [f"# Written by harness.bisect: one candidate torch build.{(' ' + note) if note else ''}",
             "# cuda: what the installed wheel reported (PyPI's Linux wheels are CUDA builds; null until installed)",
             f"name: {spec.name}", f"description: {q(spec.description)}", f"torch: {q(spec.torch)}",
             f"cuda: {q(spec.cuda)}", f"index_url: {q(spec.index_url)}", f"pre: {'true' if spec.pre else 'false'}",
             f"python: {q(spec.python)}", f"extra_pins: {pins}", f"base_image: {q(spec.base_image)}",
             f"base_image_digest: {q(spec.base_image_digest)}"]
    return "\n".join(lines) + "\n"
