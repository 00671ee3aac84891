"""The peer's own numbers as records (results/transcribe_peers.py): transcribed exactly, read through the one record
reader, and never grouped with measured runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from shipped import RESULTS

from harness.analysis.dataset import load
from harness.analysis.group import estimate
from harness.record.io import iter_records

ROOT = Path(__file__).resolve().parent.parent
GPU_DIRS = [RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"]


def test_transcription_matches_the_files():
    out = subprocess.run([sys.executable, str(ROOT / "results" / "transcribe_peers.py"), "--check"],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_check_fails_on_a_changed_record(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("transcribe_peers", ROOT / "results" / "transcribe_peers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    copy = tmp_path / "gpu-x"
    (copy / "peer").mkdir(parents=True)
    jsonl = copy / "peer-build-nanogpt.jsonl"
    jsonl.write_text((GPU_DIRS[1] / "peer-build-nanogpt.jsonl").read_text())
    monkeypatch.setattr(module, "HERE", tmp_path)
    monkeypatch.setattr(module, "ROOT", tmp_path)
    assert module.main([]) == 0 and module.main(["--check"]) == 0
    record = next((copy / "peer").glob("*.json"))
    record.write_text(record.read_text().replace("533861.7", "600000.0"))
    assert module.main(["--check"]) == 1


def test_every_json_line_is_one_peer_record_with_its_numbers():
    lines = []
    for folder in GPU_DIRS:
        for i, text in enumerate((folder / "peer-build-nanogpt.jsonl").read_text().splitlines(), 1):
            if text.startswith("{"):
                lines.append((folder, i, json.loads(text)))
    assert len(lines) == 3  # two runs on the H100, one on the H200
    for folder, line, reported in lines:
        records = [r for _p, r in iter_records([folder / "peer"]) if r["peer"]["line"] == line]
        assert len(records) == 1
        r = records[0]
        assert r["kind"] == "peer" and r["env"] == "peer" and r["status"] == "ok"
        assert r["summary"]["tokens_per_s"] == reported["tokens_per_s"]
        assert r["summary"]["step_ms_median"] == reported["median_ms"]
        # its own arithmetic holds: B*T tokens per step / the median step (median_ms is rounded to 1 us)
        assert abs(r["summary"]["tokens_per_step"] / (reported["median_ms"] / 1000) / reported["tokens_per_s"] - 1) < 1e-5
        assert r["summary"]["peak_allocated_bytes"] == reported["peak_alloc_mib"] * 2**20
        assert r["environment"]["gpu"]["name"] == reported["gpu"] and r["environment"]["torch"]["version"] == reported["torch"]
        assert r["steps"]["loss"][0] == reported["loss_first"] and r["steps"]["loss"][-1] == reported["loss_last"]
        w = r["workload"]
        assert (w["batch_size"], w["seq_len"], w["vocab_size"]) == (reported["B"], reported["T"], reported["vocab"])
        assert w["lr"] is None and w["seed"] is None and w["data"] is None  # not in the line or the README: null


def test_compare_keeps_peers_beside_the_measured_runs():
    warnings = []
    ds = load(GPU_DIRS, warn=warnings.append)
    assert len(ds.peers) == 3 and all(p.kind == "peer" for p in ds.peers)
    assert all(g.kind == "measured" for g in ds.groups)
    assert not any(r.kind == "peer" for g in ds.groups for r in g.records)
    assert "peer" not in ds.env_order  # not an env: no cross-version table pairs it with anything
    assert {p.gpu for p in ds.peers} == {"NVIDIA H100 80GB HBM3", "NVIDIA H200"}
    assert estimate(ds.peers[-1]).point == 533861.7
    assert all(r.get("peer") is None for g in ds.groups for r in g.records)
