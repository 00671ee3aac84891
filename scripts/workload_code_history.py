"""Give the committed records made before records carried a workload_code the identity their code had, from git
history: writes harness/record/workload_code_history.json, which harness.record.migrate reads (v1 -> v2).

For each record file (schema version 1) under the folders named (default: results/ and tests/data/), the commit whose
code measured it is, in this order:
  1. the commit whose gpt/ and harness/ sources hash to the record's environment.harness.source_sha256 (the hash
     harness.provenance.envinfo.code_identity recorded; it holds for a copy of the code outside a checkout too);
  2. else the commit the record names (environment.harness.commit) when it says the checkout was clean;
  3. else none: the record keeps "unknown".
Its identity is harness.provenance.workload_code.identity_of over that commit's files.

    python scripts/workload_code_history.py [FOLDER ...]      (from the repository root; needs git, no torch)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.provenance.envinfo import CODE_DIRS, CODE_SUFFIXES
from harness.provenance.workload_code import identity_of
from harness.record.model import HISTORY_PATH, source_digest
from harness.record.view import RecordView


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout


class Blobs:
    """git cat-file --batch, one process for every blob read (thousands of reads)."""

    def __init__(self):
        self.proc = subprocess.Popen(["git", "-C", str(ROOT), "cat-file", "--batch"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)

    @cache  # noqa: B019 -- one instance for the script's life
    def read(self, sha: str) -> bytes:
        self.proc.stdin.write(sha.encode() + b"\n")
        self.proc.stdin.flush()
        size = int(self.proc.stdout.readline().split()[2])
        data = self.proc.stdout.read(size + 1)[:-1]
        return data


def tree(commit: str) -> dict[str, str]:
    """path -> blob sha of every file in the commit."""
    out = {}
    for line in git("ls-tree", "-r", commit).splitlines():
        meta, path = line.split("\t", 1)
        out[path] = meta.split()[2]
    return out


def source_sha256(files: dict[str, str], blobs: Blobs) -> str:
    """harness.provenance.envinfo.code_identity's source_sha256 over a commit's files (its order: pathlib's, part by part)."""
    code = [p for p in files if p.split("/")[0] in CODE_DIRS and p.endswith(CODE_SUFFIXES) and "__pycache__" not in p]
    return source_digest((path, blobs.read(files[path])) for path in sorted(code, key=lambda p: tuple(p.split("/")))).hexdigest()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="*", default=["results", "tests/data"],
                        help="folders of record files (default: results tests/data)")
    folders = parser.parse_args(argv).folders
    missing = [f for f in folders if not (ROOT / f).is_dir()]
    if missing:  # before anything is written: an empty history would turn every committed record's identity unknown
        parser.error(f"{', '.join(missing)}: no such folder under {ROOT}")
    blobs = Blobs()
    commits = git("rev-list", "HEAD").split()
    trees = {c: tree(c) for c in commits}
    by_source = {}
    for c in reversed(commits):  # the oldest commit with those sources
        by_source.setdefault(source_sha256(trees[c], blobs), c)
    records, how = {}, {}
    for path in sorted(p for folder in folders for p in (ROOT / folder).rglob("*.json")):
        try:
            raw = json.loads(path.read_text())
        except ValueError:
            continue
        if not isinstance(raw, dict) or raw.get("schema_version") != 1 or raw.get("kind") != "measured":
            continue
        made = RecordView(raw).environment.harness  # the code that made it (harness.provenance.envinfo.code_identity)
        commit, why = by_source.get(made.source_sha256), "its recorded source_sha256"
        if commit is None and made.commit in trees and made.dirty is False:
            commit, why = made.commit, "the clean commit it recorded"
        if commit is None:
            continue
        files = trees[commit]
        identity = identity_of(files, lambda p, files=files: blobs.read(files[p]).decode("utf-8"))
        if records.get(raw["run_id"], identity) != identity:
            raise SystemExit(f"{path}: run id {raw['run_id']} already given another identity")
        records[raw["run_id"]] = identity
        how[raw["run_id"]] = f"{commit[:12]} ({why})"
    HISTORY_PATH.write_text(json.dumps({"made_by": "scripts/workload_code_history.py", "records": records,
                                        "commit": how}, indent=1, sort_keys=True) + "\n")
    print(f"{HISTORY_PATH.relative_to(ROOT)}: {len(records)} records given the identity of their commit")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
