"""The report's findings are computed from the records given, each citing its records; nothing is written in.

Run on the committed real GPU records (H100 and H200, torch 2.11) and the user's transcribed log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from shipped import RESULTS

from harness.analysis import findings
from harness.analysis.context import Compare
from harness.analysis.dataset import load

ROOT = Path(__file__).resolve().parent.parent
GPU = [RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"]
REFERENCE = RESULTS / "reference"


def found(paths) -> list[findings.Finding]:
    return findings.compute(Compare(load(paths, warn=lambda line: None)))


def texts(items, topic) -> str:
    return "\n".join(f.text for f in items if f.topic == topic)


def test_findings_on_the_real_gpu_records_answer_the_users_questions():
    items = found([*GPU, REFERENCE])
    tf32 = texts(items, "tf32-memory")
    assert "h100-80g / local (torch 2.11.0+cu130), B=16, T=1024" in tf32
    assert "peak alloc 30,071 -> 32,853 MiB (+9.3%), device used 34,093 -> 36,419 MiB (+6.8%)" in tf32
    assert "the user's log (H100/H800 class, torch not stated), B=16, T=1024: device used 39,104 -> 42,246 MiB (+8.0%)" in tf32
    assert "higher in 4 and lower in 0 of 4 pair(s)" in tf32
    # the kernel capture says which lm_head GEMMs were not seen at N = 50257 under TF32
    assert "tf32: forward not seen at 50257, backward-input not seen at 50257, backward-weight at 50257" in tf32
    vocab = texts(items, "vocab")
    assert "sdpa-flash on h100-80g / local (torch 2.11.0+cu130), B=64, T=1024, compiler padding default: " \
           "tokens/s 424,159 -> 457,808 (+7.9% (beyond noise; noise borrowed))" in vocab
    assert "in the user's log (H100/H800 class, torch not stated), B=16, T=1024: tokens/s 186,796 -> 291,550 (+56.1% (single sample))" in vocab
    assert "No padding A/B among these records" in texts(items, "padding-ab")
    versions = texts(items, "versions")
    assert "torch 2.1.2 -> nightly: tokens/s 308,130 -> 443,161 (+43.8% (single sample)); device used 77,425 -> 48,007 MiB (-38.0%)" in versions
    assert "fused-adamw-clip at B=64 on h100-80g / local (torch 2.11.0+cu130): 464,063 tokens/s, 48,571 MiB device used" in versions
    batch = texts(items, "batch")
    assert "B=64 464,440 tokens/s, B=96 471,396 tokens/s, B=104 473,340 tokens/s; did not run: 112 oom, 128 oom" in batch
    sdpa = texts(items, "sdpa")
    assert "auto ran cudnn attention" in sdpa and "forcing flash: 518,307 tokens/s (-2.4% (one run a side, noise unknown) against auto)" in sdpa
    assert all(f.records for f in items if not f.text.startswith("No padding A/B"))
    cited = {i for f in items for i in f.records}
    assert "20261123T081330Z-local-seed-ladder-tf32-r0-1ed9a9" in cited and "ref-000-L059-fused-adamw-clip-b64" in cited


def test_findings_follow_the_records_not_the_seeds(tmp_path):
    """Relabel the user's builds and drop the GPU records: the findings say what the records now say."""
    refs = tmp_path / "reference"
    shutil.copytree(REFERENCE, refs, ignore=shutil.ignore_patterns("*.py"))
    for path in refs.glob("*.json"):
        record = json.loads(path.read_text())
        if (record.get("reference") or {}).get("torch") == "nightly":
            record["reference"]["torch"] = "2.16.0.dev20261120"
            if record.get("sweep"):
                record["sweep"]["name"] = "batch-size (user, 2.16.0.dev20261120)"
            path.write_text(json.dumps(record))
    items = found([refs])
    assert "torch 2.1.2 -> 2.16.0.dev20261120: tokens/s 308,130 -> 443,161" in texts(items, "versions")
    assert "nightly" not in "\n".join(f.text for f in items)
    assert not [f for f in items if f.topic in ("sdpa", "ladder")]  # no measured run: nothing measured is claimed
    assert not [f for f in found(GPU) if "user's log" in f.text]  # no reference records: no statement about the log
