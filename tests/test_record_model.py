"""The record model: one constructor for every writer, older records read as the current version, the view's rules.

The committed records are read as they are on disk (never rewritten); the older shapes are hand-made from what
the code wrote before (the first runner's failure records, records from before lm_head_loss)."""

import hashlib
import json
from pathlib import Path

import pytest
from shipped import RESULTS

from harness.record import migrate
from harness.record.io import read_record, write_record
from harness.record.model import SCHEMA_VERSION, RecordError, canonical_hash, flags_hash, new_record, workload_hash
from harness.record.validator import validate
from harness.record.view import RecordView

ROOT = Path(__file__).resolve().parent.parent
CPU = RESULTS / "cpu-amd-epyc-2core/20261123T011151Z-torch212-seed-ladder-fp32-r0-2d048b.json"
H100_OOM = RESULTS / "gpu-h100-80gb-hbm3/ladder/20261123T081412Z-local-seed-ladder-bf16-r0-09b001.json"
H200 = RESULTS / "gpu-h200/ladder/20261123T083357Z-local-seed-ladder-fp32-r0-c7a06c.json"
REFERENCE = RESULTS / "reference/ref-000-L005-fp32-b16.json"
REFERENCE_OOM = RESULTS / "reference/ref-000-L017-tf32-b32.json"
PEER = RESULTS / "gpu-h100-80gb-hbm3/peer/peer-build-nanogpt-h100-80gb-hbm3-L010.json"
COMMITTED = (CPU, H100_OOM, H200, REFERENCE, REFERENCE_OOM, PEER)
ORDER = ["schema_version", "run_id", "kind", "status", "reason", "notes", "started_at", "finished_at", "env", "plan",
         "rung", "rung_index", "repeat", "invocation", "sweep", "workload", "workload_hash", "workload_code", "flags", "environment",
         "steps", "summary", "explain", "contention", "rerun"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_writer_gets_one_shape_with_the_version_and_hash_made_by_the_constructor(tmp_path):
    workload = {"batch_size": 4, "seq_len": 64, "device": "cpu", "steps": 3, "lm_head_loss": "plain"}
    measured = new_record(run_id="m", env="local", plan="p", rung="fp32", workload=workload, flags_requested={},
                          started_at="now", rerun_command="python -m harness.run")
    failed = new_record(run_id="f", env="local", plan="p", rung="fp32", workload=workload, flags_requested={},
                        reason="worker exited with code -9", environment={"env_name": "local"})
    ref = new_record(run_id="r", kind="reference", status="oom", env="reference", plan="p", rung="fp32",
                     workload=workload, flags_requested={}, flags_hash="h", reference={"line": 5})
    peer = new_record(run_id="q", kind="peer", status="ok", env="peer", plan="p", rung="x", workload=workload,
                      flags_requested={}, flags_hash="h", reference=None, peer={"name": "x"})
    assert list(measured) == list(failed) == ORDER
    assert list(ref) == [*ORDER, "reference"] and list(peer) == [*ORDER, "reference", "peer"]
    for r in (measured, failed, ref, peer):
        assert r["schema_version"] == SCHEMA_VERSION and validate(r) is r
        assert r["workload_hash"] == workload_hash({"batch_size": 4, "seq_len": 64})  # device, steps, plain: left out
        hashed = flags_hash({}) if r["kind"] == "measured" else "h"  # a measured run's by the one rule
        unmeasured = None if r["kind"] == "measured" else "not recorded"  # a transcription never records them
        assert r["flags"] == {"requested": {}, "applied": None, "after": None, "changes": unmeasured, "hash": hashed}
        assert r["contention"] == unmeasured and r["workload_code"] == "unknown"  # no code given
    assert measured["rerun"] == {"command": "python -m harness.run"} and failed["rerun"] is None
    assert read_record(write_record(failed, tmp_path)) == failed
    with pytest.raises(ValueError, match="status 'fine'"):
        new_record(run_id="x", env="e", plan="p", rung="r", workload={}, flags_requested={}, flags_hash="h", status="fine")
    with pytest.raises(ValueError, match="flags hash is harness.record.model.flags_hash"):
        new_record(run_id="x", env="e", plan="p", rung="r", workload={}, flags_requested={}, flags_hash="h")
    with pytest.raises(TypeError, match="unexpected fields"):
        new_record(run_id="x", env="e", plan="p", rung="r", workload={}, flags_requested={}, summry={})


def leaves(value, path=()):
    """(path, value) of every leaf of parsed JSON (an empty dict or list is a leaf too)."""
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, (*path, k))
    elif isinstance(value, list) and value:
        for i, v in enumerate(value):
            yield from leaves(v, (*path, i))
    else:
        yield path, value


def at(record, path):
    for key in path:
        record = record[key]
    return record


ALL_COMMITTED = sorted(p for folder in (RESULTS, ROOT / "tests/data") for p in folder.rglob("*.json")
                       if json.loads(p.read_text()).__class__ is dict and "schema_version" in json.loads(p.read_text()))


def test_every_committed_record_is_read_as_the_current_version_with_every_value_it_holds_where_it_was():
    """The migration on every committed record (they stay version 1 on disk: evidence, never rewritten): each value
    on disk is read back at its place, and what version 1 left to absence is there, said."""
    assert len(ALL_COMMITTED) >= 160
    codes = set()
    for path in ALL_COMMITTED:
        before = sha(path)
        on_disk = json.loads(path.read_text())
        r = read_record(path)
        assert sha(path) == before and on_disk["schema_version"] in (1, 2, 3) and r["schema_version"] == SCHEMA_VERSION == 3
        for where, value in leaves({k: v for k, v in on_disk.items() if k != "schema_version"}):
            assert at(r, where) == value, (path, where)
        added = set(r) - set(on_disk)
        if on_disk["schema_version"] == 3:  # made by today's worker (the six-invocation A/A set): as written
            assert not added and isinstance(r["invocation"], str) and r["invocation"] != "not recorded", path
            continue
        assert r["invocation"] == "not recorded"  # version 3's field: every record before it lacks it
        if on_disk["schema_version"] == 2:  # made by a worker of 2026-11-25 (a calibration, the 2-thread landscape)
            assert added == {"invocation"} and r["workload_code"] != "unknown", path
            continue
        assert added <= {"contention", "workload_code", "invocation"}, (path, added)
        assert r["workload_hash"] == workload_hash(r["workload"]) and r["workload"]["lm_head_loss"] in ("plain", "liger")
        assert r["flags"]["changes"] == on_disk["flags"].get("changes", "not recorded")
        assert r["contention"] == on_disk.get("contention", "not recorded")
        for key in ("threads", "machine"):
            assert r["environment"][key] == on_disk["environment"].get(key, "not recorded")
        codes.add(r["workload_code"])
        if r["kind"] != "measured":
            assert r["workload_code"] == "unknown"
    assert "unknown" in codes and len(codes) >= 3  # git history gives most; the code changed under them


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.parent.name + "/" + p.name[:24])
def test_each_kind_of_committed_record_is_read_as_the_current_version_and_left_as_it_is(path):
    before = sha(path)
    on_disk = json.loads(path.read_text())
    r = read_record(path)
    assert sha(path) == before  # evidence: migrated in memory, never rewritten
    assert r["schema_version"] == SCHEMA_VERSION == on_disk["schema_version"] + 2
    assert r["workload_hash"] == workload_hash(r["workload"])
    assert ("lm_head_loss" in on_disk["workload"]) == (path == PEER)  # the measured ones predate it
    assert RecordView(r).workload_value("lm_head_loss") == "plain"  # ... and read as the loss they ran with


def old_failure_record() -> dict:
    """What harness.run wrote for a dead worker before it recorded hashes and the intended device (before 11e2419)."""
    return {"schema_version": 1, "run_id": "old-fail", "kind": "measured", "status": "error", "reason": "worker exited with code -9",
            "notes": [], "started_at": None, "finished_at": None, "env": "torch212", "plan": "seed-ladder", "rung": "bf16",
            "rung_index": 2, "repeat": 0, "sweep": None,
            "workload": {"batch_size": 16, "seq_len": 1024, "precision": "bf16", "device": "cuda", "steps": 50},
            "workload_hash": "", "flags": {"requested": {"matmul_precision": "high"}, "hash": ""},
            "environment": {"env_name": "torch212"}, "steps": {"ms": [], "loss": [], "grad_norm": []}, "summary": {},
            "rerun": {"command": ""}}


def test_a_hand_made_older_failure_record_is_read_with_the_hashes_the_runner_writes_today(tmp_path):
    path = tmp_path / "old-fail.json"
    path.write_text(json.dumps(old_failure_record()))
    r = read_record(path)
    assert r["workload_hash"] == workload_hash({"batch_size": 16, "seq_len": 1024, "precision": "bf16"})
    assert r["flags"]["hash"] == canonical_hash({"matmul_precision": "high"})
    view = RecordView(r)
    assert r["workload"]["lm_head_loss"] == view.workload_value("lm_head_loss") == "plain"  # version 2 says it
    assert view.workload_value("precision") == "bf16" and view.workload_value("no_such_field") is None
    assert view.set_key == (r["workload_hash"], r["flags"]["hash"])
    assert view.intended_device is None and view.device_label == "unknown device"  # it never said where it ran
    assert view.timed_ms == [] and view.peak_memory() == (None, "peak RSS") and view.tokens_per_step == 16 * 1024
    assert json.loads(path.read_text()) == old_failure_record()  # the file itself is untouched


def test_a_migrated_failure_record_hashes_its_flags_as_its_ok_twins_do(tmp_path):
    """One flags-hash rule: a dead worker's old record, its hash computed on read, gets the hash the worker writes for
    the same requested flags, Inductor options at "default" included (the old migration hashed them, and split such a
    failure from its ok twins)."""
    from harness.runner.flags import FrozenFlags, flags_for
    from harness.runner.worker_spec import WorkerSpec

    requested = flags_for({"precision": "bf16"}).to_dict()
    assert requested["inductor_shape_padding"] == "default" and requested != FrozenFlags().to_dict()
    old = old_failure_record()
    old["flags"]["requested"] = requested
    (tmp_path / "old-fail.json").write_text(json.dumps(old))
    spec = WorkerSpec(run_id="twin", env="torch212", plan="seed-ladder", rung="bf16", workload=old["workload"],
                      flags=requested)
    twin = spec.new_record()
    failed = RecordView(read_record(tmp_path / "old-fail.json"))
    assert failed.set_key == RecordView(twin).set_key == (workload_hash(old["workload"]), flags_for({"precision": "bf16"}).hash)
    assert failed.flags_hash != canonical_hash(requested)  # what the second rule made


def test_a_newer_version_is_refused_with_what_this_code_reads(tmp_path):
    newer = dict(old_failure_record(), schema_version=SCHEMA_VERSION + 1)
    (tmp_path / "newer.json").write_text(json.dumps(newer))
    with pytest.raises(RecordError, match=f"schema_version {SCHEMA_VERSION + 1}; this harness reads version {SCHEMA_VERSION}"):
        read_record(tmp_path / "newer.json")
    assert migrate.migrate([1, 2]) == [1, 2] and migrate.migrate({"hello": "world"}) == {"hello": "world"}  # validate refuses these


def test_a_later_version_is_reached_by_chaining_the_upgrades(monkeypatch):
    """How a version 4 will be read: version 1 brought to today's v1 shape, then UPGRADES[1], [2] and [3]."""
    monkeypatch.setattr(migrate, "SCHEMA_VERSION", 4)
    monkeypatch.setitem(migrate.UPGRADES, 3, lambda r: {**r, "renamed": r["rung"]})
    r = migrate.migrate(old_failure_record())
    assert r["schema_version"] == 4 and r["renamed"] == "bf16" and r["workload_hash"] != ""
    assert r["contention"] == "not recorded" and r["workload_code"] == "unknown"  # version 2 on the way
    assert r["invocation"] == "not recorded"  # version 3 on the way


def test_the_view_answers_each_kind_by_its_rule():
    cpu, h200, ref, peer, oom = (RecordView(read_record(p)) for p in (CPU, H200, REFERENCE, PEER, H100_OOM))
    # timed steps: warm-up and step 0 left out; a reference has its one logged step
    assert len(cpu.timed_ms) == 15 and len(h200.timed_ms) == 40 and len(peer.timed_ms) == 0
    assert ref.timed_ms == [340.22] and oom.timed_ms == []
    assert (cpu.tokens_per_step, h200.tokens_per_step, ref.tokens_per_step) == (256, 65536, 16384)
    # peak memory, with its metric: the comparable one, and the widest the record has
    assert cpu.peak_memory() == (843132928, "peak RSS")
    assert h200.peak_memory() == (121124488704, "peak alloc") and h200.peak_memory(widest=True) == (127305383936, "device used")
    assert ref.peak_memory() == (39104 * 2**20, "device used")
    assert peer.peak_memory() == (43795873792, "peak alloc") and peer.peak_memory(widest=True) == (49652170752, "peak reserved")
    assert oom.peak_memory() == (None, "peak alloc")
    assert oom.peak_memory(widest=True) == (None, "peak alloc")  # a CUDA run: the host RSS never stands in for device memory
    # where it ran
    assert h200.device_label == "NVIDIA H200" and h200.intended_device == "NVIDIA H200" and oom.intended_device == "NVIDIA H100 80GB HBM3"
    assert cpu.device_label.startswith("cpu: AMD EPYC") and ref.device_label == "H100/H800 class"
    assert (cpu.status, cpu.env, cpu.rung, cpu.kind, oom.status, ref.kind) == ("ok", "torch212", "fp32", "measured", "oom", "reference")
    assert h200.torch_version and not cpu.contended and cpu.set_key == (cpu.workload_hash, cpu.flags_hash)
    with pytest.raises(TypeError):
        cpu.raw["status"] = "error"  # read-only
