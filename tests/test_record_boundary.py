"""The record boundary: a record dict is read by harness/record/ only (RecordView, io, migrate). Everywhere else reads
it through harness.record.view.RecordView, so each per-record rule (peak memory, tokens/s, the device label, the
torch version, the kernel profile) is written once. The code that builds records is exempt: the worker, the
launcher's failure records, the evidence collectors, the environment and contention capture, and the
transcriptions of the user's log and the peer. This test greps every other module for the two shapes such reads
take: `(x or {}).get(` chains and a record section taken by key (`["summary"]`, `.get("environment")`, ...). A line
whose key belongs to another document (a plan's rung flags, a progress event's steps) says so with MARK."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECTIONS = ("summary", "environment", "explain", "steps", "workload", "flags", "contention", "reference", "peer")
CHAIN = re.compile(r"or \{\}\)\.get\(")
SECTION = re.compile(r"""(\[|\.get\()\s*["'](""" + "|".join(SECTIONS) + r""")["']""")
BUILDERS = {  # modules that build records or their sections (their reads are of what they are writing)
    "harness/worker.py", "harness/runner/launcher.py", "harness/provenance/envinfo.py", "harness/provenance/contention.py",
    "results/reference/transcribe.py", "results/transcribe_peers.py",
    "scripts/bench_index.py",  # makes the benchmark's records: copies of the committed ones with their numbers varied
}
MARK = "# not a record:"  # a line whose matching key belongs to another document says so, and what it is


def _sources() -> list[Path]:
    files = sorted((ROOT / "harness").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py")) + \
        sorted((ROOT / "results").rglob("*.py"))
    return [p for p in files if not p.relative_to(ROOT).as_posix().startswith(("harness/record/", "harness/evidence/"))]


def raw_reads() -> list[str]:
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel in BUILDERS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if (CHAIN.search(code) or SECTION.search(code)) and MARK not in line:
                found.append(f"{rel}:{n}: {line.strip()}")
    return found


def test_no_module_outside_the_record_package_reads_a_record_dict():
    assert raw_reads() == []


def test_the_grep_finds_both_shapes(tmp_path):
    """The patterns catch what they are meant to (a test that cannot fail proves nothing)."""
    assert CHAIN.search('(record.get("summary") or {}).get("tokens_per_s")')
    assert SECTION.search('record["environment"]["gpu"]') and SECTION.search("r.get('explain')")
    assert not SECTION.search("view.environment") and not CHAIN.search("view.summary_number('x')")
