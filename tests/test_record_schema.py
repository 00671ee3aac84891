"""The record's schema checked against its model (harness.record.sections, harness.record.model.new_record): every
section the worker writes is a type whose fields are the schema's properties of that section, no section is a free
object, and every committed record's sections read into their types and back with nothing lost or left unnamed."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.record.io import iter_records, schema
from harness.record.model import KIND_BLOCKS, new_record
from harness.record.sections import SECTIONS, Contention, Summary
from harness.record.view import RecordView

ROOT = Path(__file__).resolve().parent.parent


def object_properties(spec: dict) -> dict:
    """The properties of a schema entry that is an object (directly, or as one alternative of anyOf)."""
    for alternative in [spec, *spec.get("anyOf", [])]:
        if "properties" in alternative:
            return alternative["properties"]
    return {}


@pytest.mark.parametrize("key", sorted(SECTIONS))
def test_each_section_type_is_the_schemas_section(key):
    properties = object_properties(schema()["properties"][key])
    assert properties, f"{key}: a free object in the schema"
    assert list(properties) == SECTIONS[key].names() or set(properties) == set(SECTIONS[key].names()), key


def test_the_top_level_is_the_constructors():
    made = new_record(run_id="x", env="e", plan="p", rung="r", workload={"lm_head_loss": "plain"}, flags_requested={})
    assert set(schema()["properties"]) == set(made) | set(KIND_BLOCKS)
    assert set(schema()["required"]) <= set(made)


def test_every_committed_record_reads_into_its_section_types_and_back():
    count = 0
    for _path, record in iter_records([ROOT / "results", ROOT / "tests" / "data"], warn=lambda line: None):
        count += 1
        for key, cls in SECTIONS.items():
            value = record.get(key)
            section = cls.of(value)
            assert section.extra == {}, (record["run_id"], key, sorted(section.extra))  # no key the model lacks
            if isinstance(value, dict):
                assert section.to_dict() == {**dict.fromkeys(cls.names()), **value}, (record["run_id"], key)
    assert count >= 160


def test_the_view_hands_out_typed_sections():
    r = next(RecordView(rec) for _p, rec in iter_records([ROOT / "results" / "cpu-containers"], warn=print)
             if rec["status"] == "ok" and isinstance(rec.get("contention"), dict))
    assert isinstance(r.summary, Summary) and r.summary.tokens_per_s == r.summary.get("tokens_per_s") > 0
    assert isinstance(r.contention, Contention) and r.contention.recorded and r.contended == bool(r.contention.contended)
    old = Contention.of("not recorded")
    assert not old.recorded and not old and old.get("contended") is None


def test_the_workload_type_names_the_workloads_fields():
    """RecordView.workload is typed by gpt.config.WorkloadConfig's fields (gpt/config.py imports no torch) and reads
    as the dict the record holds."""
    from dataclasses import fields as dataclass_fields

    from gpt.config import WorkloadConfig
    from harness.record.sections import Workload

    assert Workload.FIELDS == tuple(f.name for f in dataclass_fields(WorkloadConfig))
    r = next(RecordView(rec) for _p, rec in iter_records([ROOT / "results" / "gpu-h200" / "ladder"], warn=print))
    assert isinstance(r.workload, Workload) and r.workload.batch_size == r.workload["batch_size"] == r.workload.get("batch_size")
    assert dict(r.workload) == r.raw["workload"] and r.workload.tokens_per_step == r.tokens_per_step
    with pytest.raises(AttributeError):
        r.workload.batch_size = 1  # read-only
