"""Does an environment match its spec? Version and pin comparison, the torch check (imported torch, CUDA
variant and extra pins against the spec), and the project dependencies an interpreter lacks (bench-local).

No torch import at module level: check_current imports it only when asked.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from harness.envs.spec import PIN, ROOT, EnvSpec, SpecError
from harness.record.model import public_version


def pin_satisfied(pin: str, installed: str) -> bool:
    """Does `installed` satisfy `pin` (NAME<op>VERSION)? packaging's PEP 440 specifier (a build's local label,
    +cu121, is ignored, as pip does; pre-releases count)."""
    from packaging.specifiers import InvalidSpecifier, Specifier

    m = PIN.match(pin)
    if not m:
        raise SpecError(f"extra pin {pin!r}: expected NAME<op>VERSION")
    try:
        return Specifier(f"{m.group(3)}{m.group(4)}").contains(installed, prereleases=True)
    except InvalidSpecifier:
        raise SpecError(f"extra pin {pin!r}: {m.group(3)}{m.group(4)} is not a PEP 440 version specifier") from None


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def check_torch(spec: EnvSpec, version: str, cuda: str | None, location: str = "",
                installed: dict[str, str | None] | None = None) -> str | None:
    """None if an imported torch `version` / `cuda` (and, when `installed` {package: version} is given, the
    extra pins) match the spec, else one line naming both sides."""
    if not spec.installs:
        return None
    where = f" from {location}" if location else ""
    if public_version(version) != public_version(spec.torch) or (cuda or None) != spec.cuda:
        return (f"{spec.name}: spec pins torch {spec.torch} (CUDA {spec.cuda or 'none: CPU build'}) but this env "
                f"imports torch {version} (CUDA {cuda or 'none: CPU build'}){where}")
    for pin in spec.extra_pins if installed is not None else ():
        name = PIN.match(pin).group(1)
        have = installed.get(name, installed.get(normalize(name)))
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
        name = PIN.match(pin).group(1)
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
        if PIN.match(req) and not pin_satisfied(req, have):
            missing.append(req)
    return missing
