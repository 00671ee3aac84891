"""The README states only what is so now: its Quick start is the two commands CI runs (.ci/quickstart.py reads them
from the README), the compare output it shows is what compare prints on the shipped records today, the number of
fast tests it gives is the suite's, and its table of pages names every page under docs/. (Its GPU section:
tests/test_readme_gpu.py.)"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shipped import SHIPPED_ROOT

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _quickstart():
    spec = importlib.util.spec_from_file_location("quickstart", ROOT / ".ci" / "quickstart.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_quick_start_is_two_commands_and_ci_runs_them_from_the_readme():
    assert _quickstart().commands(README) == ["pip install nox uv && nox -s bench-latest", "nox -s tests"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert '"$PY" .ci/quickstart.py README.md' in ci
    # in order, before anything else CI does
    assert ci.index(".ci/quickstart.py") < ci.index("step \"tools: nox and uv\"") < ci.index("-m slow")


def test_a_readme_without_its_quick_start_block_is_one_clear_line():
    qs = _quickstart()
    for text in ("# x\n", "## Quick start\n\nno block\n\n## Next\n```\nx\n```\n"):
        try:
            qs.commands(text)
        except SystemExit as exc:
            assert str(exc).startswith("quickstart: no ")
        else:
            raise AssertionError(text)


def _shown_compare_blocks(text: str) -> list[tuple[str, list[str]]]:
    """(command, output lines) of each fenced block that opens with `$ python -m harness.compare` over shipped folders."""
    return [(m.group(1), m.group(2).splitlines()) for m in
            re.finditer(r"```\n\$ (python -m harness\.compare (?:results/[\w.-]+ ?)+)\n(.*?)```", text, re.DOTALL)]


@pytest.mark.parametrize("page", ["README.md", "results/cpu-amd-epyc-2core/README.md",
                                  "results/cpu-amd-epyc-2core-models/README.md"])
def test_the_compare_output_a_page_shows_is_what_compare_prints_today(page):
    blocks = _shown_compare_blocks((ROOT / page).read_text(encoding="utf-8"))
    assert blocks, f"{page} shows no compare output"
    env = {**os.environ, "COLUMNS": "120", "PYTHONPATH": str(ROOT)}
    for command, shown in blocks:
        proc = subprocess.run([sys.executable, *command.split()[1:]], cwd=SHIPPED_ROOT, capture_output=True, text=True,
                              env=env, check=True)
        assert proc.stdout.splitlines() == shown, f"{page}'s `{command}` block is stale: paste its output again"


def test_the_number_of_fast_tests_the_readme_gives_is_the_suites():
    """'about N fast tests': N is the count pytest collects, to the nearest 50."""
    stated = int(re.search(r"about ([\d,]+) fast tests", README).group(1).replace(",", ""))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not slow", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    collected = int(re.search(r"(\d+)(?:/\d+)? tests? (?:collected|selected)", proc.stdout).group(1))
    assert stated == round(collected / 50) * 50, f"README says about {stated} fast tests; pytest collects {collected}"


def test_the_readme_names_every_page_under_docs():
    pages = {p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md")}
    more = README[README.index("## More"):]
    named = set(re.findall(r"docs/[\w.-]+\.md", more))
    assert named == pages, f"missing: {sorted(pages - named)}; gone: {sorted(named - pages)}"
