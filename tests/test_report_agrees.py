"""The report and compare agree on every number they both state: made from the same records, every delta compare
prints (the verdict, and with --detail every table) is in the report, in the same words (harness.analysis.cells.Cell
words each delta once, for both). Run on the committed GPU and CPU records."""

from __future__ import annotations

import re

import pytest
from module_cli import run_module
from shipped import RESULTS

GPU = ["gpu-h100-80gb-hbm3", "gpu-h100-80gb-hbm3-20261126-call1", "gpu-h100-80gb-hbm3-20261126-call2",
       "gpu-h100-80gb-hbm3-20261126-call3", "gpu-h200", "gpu-h200-20261126-call1", "gpu-h200-20261126-call2",
       "gpu-h200-20261127-call1", "gpu-h200-20261127-call2", "reference"]
CPU = ["cpu-amd-epyc-2core", "reference"]

# A delta as Cell words it with its interval: '1.13x faster [1.09x, 1.16x] (beyond noise; noise borrowed)',
# '+7.5% [+7.2%, +8.2%] (within noise)', '1.54x [0.17x, 14.33x] (within noise)'
DELTA = re.compile(r"[+-]?[\d.,e+]+(?:%| pp|x(?: faster| slower)?) \[(?:range )?[^\[\]]+\] \([^()]+\)")


def _run(module: str, *argv: str) -> str:
    out = run_module(module, *argv)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _one_line(text: str) -> str:
    """The text with its wrapping undone (a table cell or a verdict line wrapped at 120 columns)."""
    return " ".join(text.split())


@pytest.mark.parametrize("folders", [GPU, CPU], ids=["gpu", "cpu"])
def test_every_delta_compare_states_is_in_the_report_in_the_same_words(folders, tmp_path):
    paths = [str(RESULTS / f) for f in folders]
    shown = _run("harness.compare", *paths, "--detail", "--format", "markdown", "--no-index")
    _run("harness.report", *paths, "-o", str(tmp_path), "--no-index")
    report = _one_line((tmp_path / "report.md").read_text())
    deltas = set(DELTA.findall(_one_line(shown)))
    assert len(deltas) >= 10  # the check reads real deltas (a changed wording would find none)
    missing = sorted(d for d in deltas if d not in report)
    assert not missing, f"{len(missing)} of {len(deltas)} deltas compare states are not in the report: {missing[:5]}"


@pytest.mark.parametrize("folders", [GPU, CPU], ids=["gpu", "cpu"])
def test_the_answers_and_the_findings_rest_on_the_same_runs(folders):
    """A question the report answers at its head and lists in its findings (harness.analysis.questions computes it
    once for both): the same run ids under both."""
    from harness.analysis import answers, findings
    from harness.analysis.options import CompareOptions, analyse

    _ds, cmp = analyse(CompareOptions(tuple(str(RESULTS / f) for f in folders), use_index=False), lambda line: None)
    found = findings.compute(cmp)
    topics = {"tf32": ("tf32-memory", "padding-ab"), "vocab": ("vocab", "padding-ab"), "batch": ("batch",)}
    checked = 0
    for answer in answers.compute(cmp):
        if answer.key not in topics or not answer.records:
            continue
        cited = {i for f in found if f.topic in topics[answer.key] for i in f.records}
        assert set(answer.records) <= cited, answer.key
        assert {i for f in found if f.topic == topics[answer.key][0] for i in f.records} <= set(answer.records), answer.key
        checked += 1
    assert checked >= 2
