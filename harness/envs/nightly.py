"""The nightly env's bump: scrape the PyTorch nightly index for dated dev wheels and rewrite the one
`torch:` line of envs/nightly/env.yaml (its comments and other fields kept)."""

from __future__ import annotations

import re
import urllib.parse
import urllib.request
from pathlib import Path

from harness.envs.install import describe_error, effective_index, probe_index
from harness.envs.spec import NIGHTLY, SpecError, load_spec, parse_spec, validate_spec
from harness.record.files import write_atomic


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
        raise SpecError(f"{NIGHTLY}: cannot read {index}/torch/ ({describe_error(exc)})") from None
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
    validate_spec(parse_spec(new_text, str(spec.path)), NIGHTLY, str(spec.path))
    write_atomic(spec.path, new_text)
    return spec.torch, chosen
