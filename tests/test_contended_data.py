"""Real runs with one contended rung (issue 21): tests/data/contended-cpu/ holds `nox -s bench-torch212 bench-latest`
runs on this project's CPU machine, tiny preset, one rung timed while a CPU hog held a core, and that rung's clean
rerun (README.md beside them says when and how). The contended run's number reaches no table, finding, chart, 2x2
split or verdict; the clean rerun stands in its place; --include-contended puts it back, marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.analysis import findings
from harness.analysis.options import CompareOptions, analyse
from harness.analysis.tables import knobs, registry
from harness.analysis.verdict import verdict
from harness.console.csv_json import render_json
from harness.record.io import iter_records
from harness.record.view import RecordView

DATA = Path(__file__).resolve().parent / "data" / "contended-cpu"
pytestmark = pytest.mark.skipif(not any(DATA.glob("*.json")), reason="tests/data/contended-cpu/ has no records")


def _records() -> list[RecordView]:
    return [RecordView(r) for _p, r in iter_records([DATA])]


def _the_contended_and_its_rerun() -> tuple[RecordView, RecordView]:
    records = _records()
    (busy,) = [r for r in records if r.contended]
    (clean,) = [r for r in records if not r.contended and (r.env, r.rung) == (busy.env, busy.rung)]
    return busy, clean


def test_the_data_is_what_it_says():
    busy, clean = _the_contended_and_its_rerun()
    assert busy.ok and clean.ok and busy.set_key == clean.set_key and busy.device_label == clean.device_label
    assert {r.env for r in _records()} == {"torch212", "latest"}


def test_the_contended_number_reaches_nothing_and_the_rerun_stands_in():
    busy, clean = _the_contended_and_its_rerun()
    ds, cx = analyse(CompareOptions((DATA,)), lambda line: None)
    # groups (what every table, chart and finding reads) hold the clean rerun alone
    (cell,) = [g for g in ds.groups if (g.env, g.label) == (clean.env, clean.rung)]
    assert [r.run_id for r in cell.records] == [clean.run_id]
    assert all(busy.run_id not in {r.run_id for r in g.records} for g in ds.groups)
    # no table row but the left-out list rests on it, and none shows its tokens/s
    tables = registry.build(cx)
    for t in tables:
        for row in t.rows:
            if t.name != "left-out":
                assert busy.run_id not in row.get("run_ids", []), (t.title, row)
    doc = json.loads(render_json(tables, ds, cx.footer(), [], verdict(cx)))
    numbers = [v for t in doc["tables"] if t["name"] != "left-out" for row in t["rows"] for v in row.values()
               if isinstance(v, float)]
    assert numbers and not any(abs(v - busy.tokens_per_s) < 1e-6 * busy.tokens_per_s for v in numbers)
    assert any(abs(v - clean.tokens_per_s) < 0.5 for v in numbers)  # the clean rerun's tokens/s is what is shown
    left = [x for x in ds.left_out if x.kind == "contended"]
    assert len(left) == 1 and busy.rerun_command in left[0].why
    # findings, 2x2 splits and the verdict cite the rerun, never the contended run
    for f in findings.compute(cx):
        assert busy.run_id not in f.records and f"{busy.tokens_per_s:,.0f}" not in f.text
    assert all(busy.run_id not in s.run_ids for s in knobs.splits(cx).rows)
    v = verdict(cx)
    cited = {r for p in v.pairs for row in p.rows for r in row.run_ids}
    assert clean.run_id in cited and busy.run_id not in cited
    assert [r.run_id for r in v.contended] == [busy.run_id]


def test_include_contended_puts_it_back_marked():
    busy, _clean = _the_contended_and_its_rerun()
    ds, _cx = analyse(CompareOptions((DATA,), include_contended=True), lambda line: None)
    (cell,) = [g for g in ds.groups if busy.run_id in {r.run_id for r in g.records}]
    assert "contended" in cell.n_text and not ds.contended
