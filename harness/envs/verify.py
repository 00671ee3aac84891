"""verify-matrix: after a matrix run, the records in a folder show each named env with its spec's torch build.

Records are read through harness.record's reader, schema-validated like harness.compare reads them: a file
that is not a valid record gets one warning and is skipped.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.envs.pins import check_torch, normalize
from harness.envs.spec import load_spec
from harness.record import io as record
from harness.record.view import RecordView


def _record_packages(rec: RecordView) -> dict[str, str] | None:
    """{normalised name: version} from a record's environment.packages ("name==version" lines), if any."""
    packages = rec.packages.get("packages")
    if not isinstance(packages, list):
        return None
    found = {}
    for line in packages:
        name, sep, version = str(line).partition("==")
        if sep:
            found[normalize(name.strip())] = version.strip()
    return found


IMAGE_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def container_problem(name: str, rec: RecordView) -> str | None:
    """Why a record does not show it was made inside the image envs/NAME with its digest (None: it does)."""
    image, digest = rec.environment.container.image, rec.environment.container.digest
    if image != f"envs/{name}":
        return f"environment.container.image is {image!r}, not 'envs/{name}'"
    if not isinstance(digest, str) or not IMAGE_DIGEST.fullmatch(digest):
        return f"environment.container.digest is {digest!r}, not the image's sha256:... id"
    return None


def verify_matrix(directory: Path, names: list[str], warn=print, container: bool = False) -> tuple[list[str], list[str]]:
    """(problems, summary lines): each named env has records in `directory`, at least one with status ok,
    and every one captured the spec's torch version and CUDA variant (with container: and was made inside the
    image envs/NAME, whose digest it names). Invalid files: one warning each."""
    problems, lines = [], []
    by_env: dict[str, list] = {}
    for path, raw in record.iter_records([directory], warn=warn):
        rec = RecordView(raw)
        by_env.setdefault(rec.env, []).append((path, rec))
    for name in names:
        spec = load_spec(name)
        recs = by_env.get(name, [])
        if not recs:
            problems.append(f"{name}: no records in {directory} (envs present: {', '.join(sorted(map(str, by_env))) or 'none'})")
            continue
        versions, ok, images = set(), 0, set()
        for path, rec in recs:
            if container:
                error = container_problem(name, rec)
                if error:
                    problems.append(f"{name}: {path.name}: {error}")
                else:
                    images.add(f"{rec.environment.container.image}@{rec.environment.container.digest[:19]}")
            version, cuda = rec.torch_version, rec.versions["cuda"]
            versions.add(f"{version} (CUDA {cuda or 'none'})")
            ok += rec.ok
            if not isinstance(version, str):
                problems.append(f"{name}: {path.name} has no environment.torch.version")
            elif spec.installs:
                error = check_torch(spec, version, cuda, installed=_record_packages(rec))
                if error:
                    problems.append(f"{path.name}: {error}")
        if not ok:
            problems.append(f"{name}: none of its {len(recs)} records has status ok")
        made_in = f", made in {', '.join(sorted(images))}" if images else ""
        lines.append(f"{name}: {len(recs)} records ({ok} ok), torch {', '.join(sorted(versions))}{made_in}")
    return problems, lines
