"""results/reference/: the user's logged numbers as records, checked against the log itself."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from records_factory import constant_ms, make_record, write
from shipped import RESULTS

from harness.analysis import stats
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import reference, registry
from harness.record.io import iter_records

ROOT = Path(__file__).resolve().parent.parent
REF_DIR = RESULTS / "reference"


def references():
    warnings = []
    records = [r for _p, r in iter_records([REF_DIR], warnings.append)]
    assert warnings == []
    return records


def test_every_reference_record_is_valid_and_marked():
    records = references()
    assert len(records) == 21
    for r in records:
        assert r["kind"] == "reference" and r["env"] == "reference" and r["plan"] == "seed-ladder"
        ref = r["reference"]
        assert ref["source"].endswith("000_3624f831bf4e6e33.txt") and isinstance(ref["line"], int)
        assert ref["gpu_class"] == "H100/H800 class" and ref["seq_len"] == 1024
        w = r["workload"]
        assert (w["n_layer"], w["n_head"], w["n_embd"], w["seq_len"]) == (12, 12, 768, 1024)
        assert w["batch_size"] == ref["batch_size"]
        for unknown in ("lr", "seed", "data", "steps", "warmup_steps", "sdpa_backend"):
            assert w[unknown] is None, unknown  # not in the log: null, not guessed
        if r["status"] == "ok":
            known = [x for x in r["steps"]["ms"][1:] if x is not None]
            assert known == [ref["dt_ms_logged"]]  # one step (49) known: a single sample
            assert len(r["steps"]["ms"]) == 50 and r["steps"]["ms"][49] == ref["dt_ms_logged"]
            assert r["summary"]["device_used_bytes"] == ref["memory_mib_nvidia_smi"] * 2**20
            assert r["summary"]["timed_steps"] == 1
    statuses = sorted(r["status"] for r in records)
    assert statuses.count("oom") == 1  # 'B = 32, T = 1024, out of memory' under TF32
    torches = {r["reference"]["line"]: r["reference"]["torch"] for r in records}
    assert torches[57] == "2.1.2" and torches[59] == "nightly" and torches[5] is None


def test_transcription_matches_the_files():
    out = subprocess.run([sys.executable, str(REF_DIR / "transcribe.py"), "--check"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_numbers_match_the_users_log():
    """Each record's numbers are the ones on its source line (read from ../shared/seeds)."""
    records = references()
    source = (ROOT / records[0]["reference"]["source"]).resolve()
    if not source.is_file():
        pytest.skip(f"{source} not present (shared/ is beside the repo in CI)")
    lines = source.read_text(encoding="utf-8").splitlines()
    for r in records:
        ref = r["reference"]
        line = lines[ref["line"] - 1]
        assert ref["text"] == line.strip()
        batch = next(int(m.group(1)) for m in (re.search(r"B = (\d+)", lines[i]) for i in range(ref["line"] - 1, -1, -1)) if m)
        assert batch == r["workload"]["batch_size"], ref["line"]
        if r["status"] != "ok":
            assert "out of memory" in line
            continue
        dt = float(re.search(r"dt: ([\d.]+) ms", line).group(1))
        tok = float(re.search(r"tokens/sec: ([\d.]+)", line).group(1))
        mem = int(re.search(r"Memory: (\d+)", line).group(1))
        loss = float(re.search(r"loss\s*:\s*([\d.]+)", line).group(1))
        assert (dt, tok, mem) == (r["summary"]["step_ms_median"], r["summary"]["tokens_per_s"], ref["memory_mib_nvidia_smi"])
        assert loss == r["summary"]["final_loss"] == r["steps"]["loss"][49]
        watts = re.search(r"(\d+)\s*w(?:att)?", line, re.IGNORECASE)
        assert ref["watts"] == (int(watts.group(1)) if watts else None)
        first = re.findall(r"([\d.]+) ?ms", line)
        assert ref["first_step_ms_logged"] == (float(first[-1]) if len(first) > 1 else None)
        assert r["workload"]["compile"] == ("off" if "not compiled" in lines[ref["line"] - 4] else "default")


def test_compare_puts_references_beside_measured_runs(tmp_path):
    measured = write(tmp_path / "m", [
        make_record(env="torch212", rung="vocab-50304", workload={"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash", "vocab_size": 50304},
                    ms=constant_ms(56.2 * 1.25)),
        make_record(env="torch212", rung="vocab-50304", workload={"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash",
                                                                     "vocab_size": 50304, "batch_size": 8}),  # no reference at B=8
    ])
    ds = load([REF_DIR, measured], warn=lambda line: None)
    assert len(ds.references) == 21
    assert all(g.kind == "measured" for g in ds.groups) and len(ds.groups) == 2  # never merged
    cmp = Compare(ds)
    table = registry.one(cmp, "reference")
    beside = [r for r in table.rows if r.get("measured") not in (None, "(none)")]
    assert len(beside) == 1
    row = beside[0]
    assert row["rung"] == "vocab-50304" and row["batch"] == "B=16, T=1024" and row["source"].endswith(":44")
    assert row["ref_tokens_s"] == 291549.90
    assert row["d_tokens_s"].delta.value == pytest.approx(16384 / (56.2 * 1.25 / 1000) / 291549.90 - 1)
    assert row["d_tokens_s"].delta.verdict == stats.SINGLE  # the log's one step: no noise estimate
    assert "sdpa_backend" in row["differs"]  # unknown in the log, said so
    # the measured ladder holds measured runs only
    for t in registry.build(cmp, ["ladder"]):
        assert "H100/H800" not in t.title
    # the user's own ladder, rebuilt from the records: TF32 at B=16 is 2.56x the FP32 baseline
    ladders = reference.reference_ladder_tables(cmp)
    b16 = next(t for t in ladders if "B=16," in t.title and "compile default" in t.title)
    tf32 = next(r for r in b16.rows if r["rung"] == "tf32" and r["line"] == 11)
    assert tf32["vs_previous"].delta.value == pytest.approx(123183.87 / 48157.21 - 1)
    assert tf32["vs_previous"].text() == "2.56x (single sample)"
