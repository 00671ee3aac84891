"""The report's findings are computed from the records given, each citing its records; nothing is written in.

Run on the committed real GPU records (H100 and H200, torch 2.11) and the user's transcribed log."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from shipped import RESULTS

from harness.analysis import findings, questions, stats
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.group import estimate, run_ids
from harness.analysis.knob_pairs import lm_head_roles, measured_pairs, padding_setting

ROOT = Path(__file__).resolve().parent.parent
GPU = [RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"]
REFERENCE = RESULTS / "reference"


def found(paths) -> list[findings.Finding]:
    return findings.compute(Compare(load(paths, warn=lambda line: None)))


def texts(items, topic) -> str:
    return "\n".join(f.text for f in items if f.topic == topic)


def mib(value: float) -> int:
    return round(value / 2**20)


def pct(a: float, b: float) -> float:
    return round((b / a - 1) * 100, 1)


def cites(items, topic, *groups) -> list[findings.Finding]:
    """The findings of a topic that rest on exactly these groups' runs."""
    ids = set(run_ids(*groups))
    return [f for f in items if f.topic == topic and set(f.records) == ids]


def test_findings_on_the_real_gpu_records_answer_the_users_questions():
    cmp = Compare(load([*GPU, REFERENCE], warn=lambda line: None))
    items = findings.compute(cmp)
    # TF32 on the H100 at B=16: peak alloc 30,071 -> 32,853 MiB (+9.3%), device used 34,093 -> 36,419 MiB (+6.8%)
    tf32 = questions.tf32(cmp)
    cells = {(cmp.name(gpu), a.workload.batch_size): (a, b) for (gpu, _env), a, b in tf32.every}
    a, b = cells["h100-80g", 16]
    assert a.memory[0] == "peak alloc" and padding_setting(a) == "default" and a.env == "local"
    assert (mib(a.memory_bytes), mib(b.memory_bytes), pct(a.memory_bytes, b.memory_bytes)) == (30071, 32853, 9.3)
    used = [g.summary_median("device_used_bytes") for g in (a, b)]
    assert (mib(used[0]), mib(used[1]), pct(*used)) == (34093, 36419, 6.8)
    assert cites(items, "tf32-memory", a, b)
    # the kernel capture says which lm_head GEMMs were not seen at N = 50257 under TF32: forward and backward-input
    assert set(lm_head_roles(b)) == {"backward-weight"} and b.workload.vocab_size == 50257
    assert "tf32: forward not seen at 50257, backward-input" in cites(items, "tf32-memory", a, b)[0].text
    # the user's log at B=16: device used 39,104 -> 42,246 MiB (+8.0%)
    ((ra, rb),) = tf32.refs
    assert (ra.gpu, ra.memory[0], ra.workload.batch_size) == ("H100/H800 class", "device used", 16)
    assert (mib(ra.memory_bytes), mib(rb.memory_bytes), pct(ra.memory_bytes, rb.memory_bytes)) == (39104, 42246, 8.0)
    assert cites(items, "tf32-memory", ra, rb)
    assert "higher in 4 and lower in 0 of 4 pair(s)" in texts(items, "tf32-memory")
    # vocab on the H100 at B=64: tokens/s 424,159 -> 457,808, +7.9% beyond noise (noise borrowed)
    vocab = questions.vocab(cmp)
    cells = {(cmp.name(gpu), a.workload.batch_size): (a, b) for (gpu, _env), a, b in vocab.every}
    a, b = cells["h100-80g", 64]
    d = cmp.delta(a, b)
    assert a.label == "sdpa-flash" and padding_setting(a) == "default"
    assert (round(a.throughput.point), round(b.throughput.point)) == (424159, 457808)
    assert round(d.value * 100, 1) == 7.9 and d.beyond and d.borrowed
    assert cites(items, "vocab", a, b)
    # the user's log at B=16: tokens/s 186,796 -> 291,550, +56.1% (single sample)
    ra, rb = next((ra, rb) for ra, rb in vocab.refs if ra.workload.batch_size == 16)
    d = stats.ratio(estimate(ra), estimate(rb))[0]
    assert (round(estimate(ra).point), round(estimate(rb).point)) == (186796, 291550)
    assert round(d.value * 100, 1) == 56.1 and d.verdict == stats.SINGLE
    assert cites(items, "vocab", ra, rb)
    assert tf32.effects == [] and vocab.effects == []  # so the padding A/B finding says how to get one
    assert "No padding A/B among these records" in texts(items, "padding-ab")
    # the user's two logged builds: 2.1.2 -> nightly, tokens/s 308,130 -> 443,161 (+43.8%, single sample), device
    # used 77,425 -> 48,007 MiB (-38.0%); our fused-adamw-clip at B=64 on the H100 beside them: 464,063 tokens/s, 48,571 MiB
    (logged,) = questions.versions(cmp)
    (ta, ra), (tb, rb) = logged.builds
    d = stats.ratio(estimate(ra), estimate(rb))[0]
    assert (ta, tb, logged.rung, logged.batch_size) == ("2.1.2", "nightly", "fused-adamw-clip", 64)
    assert (round(estimate(ra).point), round(estimate(rb).point)) == (308130, 443161)
    assert round(d.value * 100, 1) == 43.8 and d.verdict == stats.SINGLE
    assert ra.memory[0] == "device used"
    assert (mib(ra.memory_bytes), mib(rb.memory_bytes), pct(ra.memory_bytes, rb.memory_bytes)) == (77425, 48007, -38.0)
    assert cites(items, "versions", ra, rb)
    (h100,) = [g for g in logged.beside if cmp.name(g.gpu) == "h100-80g"]
    assert (round(h100.throughput.point), mib(h100.summary_median("device_used_bytes"))) == (464063, 48571)
    assert cites(items, "versions", h100, ra, rb)
    # the H100's batch search: B=64, 96, 104 ran (464,440, 471,396, 473,340 tokens/s), 112 and 128 did not (oom)
    (sweep,) = questions.batch(cmp).sweeps
    assert [(v, round(t)) for v, t, _m in sweep.ran] == [(64, 464440), (96, 471396), (104, 473340)]
    assert sweep.failed == [(112, "oom"), (128, "oom")]
    assert [f for f in items if f.topic == "batch" and set(f.records) == set(sweep.curve["run_ids"])]
    # SDPA on the H200: auto ran cudnn attention; forcing flash: 518,307 tokens/s, -2.4% (one run a side) against auto
    ((_cell, auto, flash),) = [(c, a, b) for c, a, b in measured_pairs(cmp, "sdpa_backend")
                               if {a.workload.sdpa_backend, b.workload.sdpa_backend} == {"auto", "flash"}]
    auto, flash = (auto, flash) if auto.workload.sdpa_backend == "auto" else (flash, auto)
    d = cmp.delta(auto, flash)
    assert auto.kernels.sdpa_backend == "cudnn" and round(flash.throughput.point) == 518307
    assert round(d.value * 100, 1) == -2.4 and d.verdict == stats.ONE_RUN
    (sdpa,) = cites(items, "sdpa", auto, flash)
    assert "auto ran cudnn attention" in sdpa.text and "forcing flash: 518,307 tokens/s" in sdpa.text
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
    cmp = Compare(load([refs], warn=lambda line: None))
    items = findings.compute(cmp)
    (logged,) = questions.versions(cmp)  # the relabelled build is the one the finding names
    (ta, ra), (tb, rb) = logged.builds
    assert (ta, tb) == ("2.1.2", "2.16.0.dev20261120")
    assert (round(estimate(ra).point), round(estimate(rb).point)) == (308130, 443161)
    assert "torch 2.1.2 -> 2.16.0.dev20261120: " in cites(items, "versions", ra, rb)[0].text
    assert "nightly" not in "\n".join(f.text for f in items)
    assert not [f for f in items if f.topic in ("sdpa", "ladder")]  # no measured run: nothing measured is claimed
    assert not [f for f in found(GPU) if "user's log" in f.text]  # no reference records: no statement about the log
