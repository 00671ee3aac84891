"""Records: schema validation on read, atomic writes that never overwrite, NaN handling."""

import json
import subprocess
import sys

import pytest

from harness.record import RecordError, iter_records, read_record, validate, write_record


def minimal_record(**changes):
    record = {
        "schema_version": 1, "run_id": "r1", "kind": "measured", "status": "ok", "env": "local", "plan": "p",
        "rung": "fp32", "workload": {"batch_size": 4}, "workload_hash": "w", "flags": {"requested": {}, "hash": "h"},
        "environment": {}, "steps": {"ms": [1.0], "loss": [2.0], "grad_norm": [None]}, "summary": {"final_loss": 2.0},
    }
    record.update(changes)
    return record


def test_write_is_atomic_and_never_overwrites(tmp_path):
    path = write_record(minimal_record(), tmp_path)
    assert path.name == "r1.json" and read_record(path)["status"] == "ok"
    with pytest.raises(RecordError, match="never overwritten"):
        write_record(minimal_record(status="error"), tmp_path)
    assert read_record(path)["status"] == "ok"  # the completed result survived
    assert [p.name for p in tmp_path.iterdir()] == ["r1.json"]  # no temp file left behind


def test_nan_is_stored_as_null(tmp_path):
    path = write_record(minimal_record(summary={"final_loss": float("nan")}, steps={"ms": [1.0], "loss": [float("inf")]}), tmp_path)
    data = json.loads(path.read_text())
    assert data["summary"]["final_loss"] is None and data["steps"]["loss"] == [None]


@pytest.mark.parametrize("change, message", [
    ({"schema_version": 2}, "schema_version 2; this harness reads version 1"),
    ({"status": "great"}, "status"),
    ({"steps": {"ms": ["fast"]}}, "steps/ms/0"),
])
def test_invalid_records_are_refused(change, message):
    with pytest.raises(RecordError, match=message):
        validate(minimal_record(**change))


def test_iter_records_warns_once_per_bad_file_and_keeps_the_rest(tmp_path):
    write_record(minimal_record(), tmp_path)
    (tmp_path / "truncated.json").write_text('{"schema_version": 1, "run_id"')
    (tmp_path / "foreign.json").write_text('{"hello": "world"}')
    (tmp_path / "sub").mkdir()
    write_record(minimal_record(run_id="r2"), tmp_path / "sub")
    warnings = []
    found = [r["run_id"] for _, r in iter_records([tmp_path], warn=warnings.append)]
    assert sorted(found) == ["r1", "r2"]
    assert len(warnings) == 2 and all("skipped" in w for w in warnings)


def test_reading_records_does_not_import_torch():
    code = "import sys, harness.record, harness.plan, harness.run; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)
