"""The record's schema checked against its model (harness.record.sections, harness.record.model.new_record): every
section the worker writes is a type whose fields are the schema's properties of that section, no section is a free
object, and every committed record's sections read into their types and back with nothing lost or left unnamed."""

from __future__ import annotations

from pathlib import Path

import pytest
from shipped import RESULTS

from harness.record.io import iter_records
from harness.record.model import KIND_BLOCKS, new_record
from harness.record.parts import Gemm, Gpu, KernelRow, Kernels, KernelTime, MemorySplit, Part
from harness.record.sections import SECTIONS, Contention, Environment, Explain, Summary
from harness.record.validator import schema
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


def assert_within(stored, written, where: str):
    """Every value stored is at its place in `written`; a key the record lacked may only be there as None."""
    if isinstance(stored, dict):
        assert isinstance(written, dict), where
        for key, value in written.items():
            if key in stored:
                assert_within(stored[key], value, f"{where}.{key}")
            else:
                assert value is None, f"{where}.{key}: {value!r} written where the record has nothing"
    elif isinstance(stored, list):
        assert isinstance(written, list) and len(written) == len(stored), where
        for i, (x, y) in enumerate(zip(stored, written, strict=True)):
            assert_within(x, y, f"{where}[{i}]")
    else:
        assert written == stored and type(written) is type(stored), where


def committed_records():
    return list(iter_records([RESULTS, ROOT / "tests" / "data"], warn=lambda line: None))


def test_every_committed_record_reads_into_its_section_types_and_back():
    count = 0
    for _path, record in committed_records():
        count += 1
        for key, cls in SECTIONS.items():
            value = record.get(key)
            section = cls.of(value)
            for part in section.parts():  # no key the model lacks, at any depth
                assert part.extra == {}, (record["run_id"], key, type(part).__name__, sorted(part.extra))
            if isinstance(value, dict):
                assert section.to_json() == value, (record["run_id"], key)  # key for key, explicit nulls kept
                assert_within(value, section.to_dict(), f"{record['run_id']}: {key}")  # every field named
                assert cls.of(section.to_json()) == section
            else:  # null, or "not recorded": read as such, written back as such
                assert not section.recorded and section.to_json() == value
    assert count >= 160


def test_a_part_read_is_the_part_its_constructor_makes():
    """Part.of builds a part without the dataclass constructor (harness.record.parts._made, for speed): every part of
    every committed record, and of an object with keys the model lacks, is what the constructor makes of its fields,
    those compare=False too (state, extra, keys)."""
    values = [(key, cls, record.get(key)) for _path, record in committed_records() for key, cls in SECTIONS.items()]
    values.append(("environment", SECTIONS["environment"], {"gpu": {"name": "X", "newer": 1}, "later": [1]}))
    for key, cls, value in values:
        for part in cls.of(value).parts():
            assert vars(type(part)(**vars(part))) == vars(part), (key, type(part).__name__)


def nested_schema(spec: dict, part: type[Part], where: str):
    """(where, the schema's properties of an object, the Part type the model reads it as), at every depth."""
    properties = object_properties(spec)
    if properties:
        yield where, properties, part
    for name, kind in part.NESTED.items():
        inner = properties.get(name, {})
        if isinstance(kind, tuple):
            kind, inner = kind[0], inner.get("items", {})
        elif isinstance(kind, dict):
            kind, inner = next(iter(kind.values())), inner.get("additionalProperties", {})
        yield from nested_schema(inner, kind, f"{where}.{name}")


def test_every_object_the_schema_names_is_a_type_that_names_its_fields():
    """The schema names no field of a nested object (environment.gpu, explain.kernels.top[], ...) that its type lacks,
    and every object of environment and explain that the schema types is read as a Part, not a dict."""
    seen = 0
    for key in ("environment", "explain"):
        for where, properties, part in nested_schema(schema()["properties"][key], SECTIONS[key], key):
            assert set(properties) <= set(part.names()), (where, sorted(set(properties) - set(part.names())))
            seen += 1
        for name, spec in object_properties(schema()["properties"][key]).items():
            if object_properties(spec) and name not in ("python", "os", "packages", "torch_source"):
                assert name in SECTIONS[key].NESTED, f"{key}.{name}: an object read as a dict"
    assert seen >= 15


def test_a_gpu_records_nested_values_read_as_types():
    r = next(RecordView(rec) for _p, rec in iter_records([RESULTS / "gpu-h100-80gb-hbm3"], warn=print)
             if rec["status"] == "ok" and (rec.get("explain") or {}).get("kernels", {}).get("available"))
    gpu, kernels = r.environment.gpu, r.explain.kernels
    assert isinstance(gpu, Gpu) and gpu.name == r.raw["environment"]["gpu"]["name"] and "H100" in gpu.name
    assert r.gpu_capability == 9.0 and r.usable_memory_bytes == gpu.memory_bytes > 0
    assert isinstance(kernels, Kernels) and kernels.device == "cuda" and kernels is r.explain.kernels  # read once
    assert kernels.top and all(isinstance(row, KernelRow) for row in kernels.top)
    assert kernels.by_category and all(isinstance(t, KernelTime) for t in kernels.by_category.values())
    assert isinstance(kernels.lm_head_gemm, Gemm) and kernels.lm_head_gemm.name == r.lm_head_kernel
    assert [g.role for g in r.vocab_gemms] == [g["role"] for g in r.raw["explain"]["kernels"]["vocab_gemms"]]
    assert isinstance(r.memory_split, MemorySplit) and r.memory_split.available
    assert r.mfu("mfu_datasheet") == r.raw["explain"]["mfu"]["mfu_datasheet"]


def test_an_older_cpu_records_missing_objects_read_as_absent_never_a_crash():
    """A v1 CPU record made before environment.threads and explain existed: its objects read as false Parts whose
    fields are None (threads says "not recorded", as the v1 -> v2 upgrade wrote it)."""
    r = next(RecordView(rec) for _p, rec in iter_records([RESULTS / "cpu-amd-epyc-2core"], warn=print)
             if rec.get("explain") is None and rec["environment"].get("threads") == "not recorded")
    env = r.environment
    assert not env.gpu and env.gpu.name is None and env.gpu.state is None and not r.is_cuda
    assert not env.threads and env.threads.state == "not recorded" and env.threads.torch is None
    assert env.to_json()["threads"] == "not recorded" and env.to_json()["gpu"] is None
    assert not r.explain.kernels and r.explain.kernels.top is None and r.kernels_reason == "not profiled"
    assert r.kernel_categories == {} and r.vocab_gemms == () and r.lm_head_kernel is None
    assert r.device_label.startswith("cpu: ")


@pytest.mark.parametrize("value", [None, "not recorded", [], "text", 3])
def test_a_nested_object_of_the_wrong_shape_reads_as_absent(value):
    env = Environment.of({"gpu": value, "cpu": {"model": "X", "isa": "not recorded"}})
    assert not env.gpu and env.gpu.name is None and env.cpu.model == "X" and env.cpu.isa == "not recorded"
    kernels = Kernels.of({"available": True, "top": value, "by_category": value, "lm_head_gemm": value})
    assert kernels.top == (() if value == [] else None)  # an empty list is a list of no rows
    assert kernels.by_category is None and kernels.lm_head_gemm.name is None and not kernels.lm_head_gemm


def test_a_part_made_in_code_writes_every_field_and_one_read_writes_the_keys_it_had():
    made = Summary(tokens_per_s=1.0).to_json()
    assert made == {**dict.fromkeys(Summary.names()), "tokens_per_s": 1.0}
    read = Summary.of({"tokens_per_s": 1.0, "mean_loss": None})
    assert read.to_json() == {"tokens_per_s": 1.0, "mean_loss": None}
    assert read.but(mfu=None).to_json() == {"tokens_per_s": 1.0, "mean_loss": None, "mfu": None}  # set, so written
    assert read.but(final_loss=2.0).to_json()["final_loss"] == 2.0 and read.but(final_loss=2.0) != read


def test_what_a_worker_writes_is_refused_where_the_model_does_not_name_it():
    env = {"device": "cuda", "gpu": {"name": "H100", "clock_mhz": 1980}, "threads": {"torch": 2}}
    with pytest.raises(ValueError, match=r"Environment: not in the record model .*Gpu\.clock_mhz"):
        Environment.named(env)
    with pytest.raises(ValueError, match=r"KernelRow\.shape"):
        Explain.named({"kernels": {"available": True, "top": [{"name": "k", "shape": [1]}]}})
    del env["gpu"]["clock_mhz"]
    assert Environment.named(env).gpu.name == "H100"


def test_the_view_hands_out_typed_sections():
    r = next(RecordView(rec) for _p, rec in iter_records([RESULTS / "cpu-containers"], warn=print)
             if rec["status"] == "ok" and isinstance(rec.get("contention"), dict))
    assert isinstance(r.summary, Summary) and r.summary.tokens_per_s == r.raw["summary"]["tokens_per_s"] > 0
    assert isinstance(r.contention, Contention) and r.contention.recorded and r.contended == bool(r.contention.contended)
    old = Contention.of("not recorded")
    assert not old.recorded and not old and old.contended is None and old.to_json() == "not recorded"


def test_no_section_or_object_is_read_by_key():
    """A section and a nested object are read by attribute only: no `get`, no `[key]` (a dict's habits)."""
    for cls in [*SECTIONS.values(), *{type(p) for p in Environment.of({}).parts()},
                *{type(p) for p in Explain.of({"kernels": {"top": [{}], "by_category": {"x": {}},
                                                              "vocab_gemms": [{}], "gemms": [{}]}}).parts()}]:
        assert not hasattr(cls, "get") and not hasattr(cls, "__getitem__"), cls.__name__


def test_the_workload_type_names_the_workloads_fields():
    """RecordView.workload is typed by gpt.config.WorkloadConfig's fields (gpt/config.py imports no torch), is not a
    dict, and hands the rules that hash it exactly what the record holds."""
    from dataclasses import fields as dataclass_fields

    from gpt.config import WorkloadConfig
    from harness.record.model import workload_hash
    from harness.record.sections import Workload

    assert Workload.FIELDS == tuple(f.name for f in dataclass_fields(WorkloadConfig))
    r = next(RecordView(rec) for _p, rec in iter_records([RESULTS / "gpu-h200" / "ladder"], warn=print))
    assert isinstance(r.workload, Workload) and r.workload.batch_size == r.raw["workload"]["batch_size"] > 0
    assert r.workload.to_dict() == r.raw["workload"] and r.workload.tokens_per_step == r.tokens_per_step
    assert workload_hash(r.workload.to_dict()) == r.workload_hash
    assert not hasattr(r.workload, "get") and not hasattr(r.workload, "__getitem__") and not hasattr(r.workload, "keys")
    old = Workload({"batch_size": 4})  # a field the record lacks reads None and stays out of what it holds;
    assert old.precision is None and not old.recorded("precision") and old.to_dict() == {"batch_size": 4}
    # one added after the record was written reads as every earlier run ran (model.ADDED_FIELD_DEFAULTS)
    assert (old.lm_head_loss, old.model) == ("plain", "ours") and not old.recorded("model")
    with pytest.raises(AttributeError):
        r.workload.batch_size = 1  # read-only
    with pytest.raises(AttributeError):
        _ = r.workload.no_such_field


def test_a_transcribed_records_kind_block_reads_as_its_type():
    from harness.record.sections import Peer, Reference

    ref = next(RecordView(rec) for _p, rec in iter_records([RESULTS / "reference"], warn=print)
               if rec["kind"] == "reference")
    assert isinstance(ref.reference, Reference) and ref.reference.line == ref.raw["reference"]["line"] > 0
    assert not ref.peer and ref.peer.name is None  # not a peer record: a false Peer, never a crash
    assert isinstance(RecordView({"kind": "peer", "peer": {"name": "x", "line": 3}}).peer, Peer)


def bounded_fields(spec: dict, section: str = "", name: str = ""):
    """(spec, section, name) for every field the schema lists by name (a property, the items of a named array, an
    alternative of anyOf) whose type holds a number or a string (not an enum or a const)."""
    if not isinstance(spec, dict):
        return
    types = spec.get("type")
    types = set(types if isinstance(types, list) else [types] if types else [])
    if types & {"number", "integer", "string"} and "enum" not in spec and "const" not in spec:
        yield spec, section, name
    for key, sub in (spec.get("properties") or {}).items():
        yield from bounded_fields(sub, section or key, key)
    yield from bounded_fields(spec.get("items"), section, name)
    for alternative in spec.get("anyOf", []):
        yield from bounded_fields(alternative, section, name)


def test_the_schema_states_the_readers_bounds():
    """Every number and string the schema lists carries the bounds harness.record.bounds enforces on it (a field
    added to the schema without them fails here, with what to write)."""
    from harness.record import bounds

    fields = list(bounded_fields(schema()))
    assert len(fields) > 200
    for spec, section, name in fields:
        expected = bounds.schema_keywords(section, name, spec["type"])
        stated = {k: spec[k] for k in ("minimum", "maximum", "maxLength") if k in spec}
        assert stated == expected, f"{section}: {name}: write {expected}"
