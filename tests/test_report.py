"""harness.report renders Markdown, a self-contained HTML page and PNG charts from records (no torch)."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest
from records_factory import constant_ms, make_record, rich_dataset, write

from harness import report

ROOT = Path(__file__).resolve().parent.parent
CHARTS = ("ladder-seed-ladder.png", "cross-version.png", "memory-split.png", "kernel-mix.png", "sweep-0.png", "sweep-1.png")


@pytest.fixture(scope="module")
def rich(tmp_path_factory):
    """The full report from a synthetic 2 GPUs x 2 envs set plus the user's reference records."""
    base = tmp_path_factory.mktemp("rich")
    records = write(base / "records", rich_dataset())
    out = base / "report"
    assert report.main([str(records), str(ROOT / "results" / "reference"), "-o", str(out)]) == 0
    return out


def test_all_outputs_written(rich):
    for name in ("report.md", "report.html", *CHARTS):
        assert (rich / name).is_file(), name


def test_charts_are_real_pictures(rich):
    for name in CHARTS:
        data = (rich / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        pixels = matplotlib.image.imread(rich / name)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400, name
        # not an empty canvas: a good part of it is neither white nor one flat colour
        rgb = pixels[..., :3].reshape(-1, 3)
        assert (rgb.min(axis=1) < 0.9).mean() > 0.02, name
        packed = (rgb * 15).astype(int) @ np.array([256, 16, 1])
        assert len(np.unique(packed)) > 8, name


def test_html_is_self_contained(rich):
    text = (rich / "report.html").read_text()
    images = re.findall(r"<img [^>]*src='([^']+)'", text)
    assert len(images) == len(CHARTS)
    assert all(src.startswith("data:image/png;base64,") for src in images)
    assert "<table>" in text and "http" not in text.replace("http-equiv", "")


def test_markdown_sections_and_computed_findings(rich):
    md = (rich / "report.md").read_text()
    for section in ("Findings", "Environments", "Method", "The ladder", "Torch versions and GPUs", "Knob effects",
                    "Memory", "What changed underneath", "Sweeps", "Loss parity", "The user's own numbers", "Left out"):
        assert f". {section}" in md, section
    for chart in CHARTS:
        assert f"]({chart})" in md
    findings = md.split("## 1. Findings")[1].split("## 2.")[0]
    # the knob effects and the 2x2 split are stated with numbers computed from the records
    assert re.search(r"Knob vocab_size 50257 -> 50304 .*: tokens/s \+\d+\.\d% on A100-SXM4-80GB/torch212", findings)
    assert re.search(r"GPU factor [+-]\d+\.\d pp, version factor [+-]\d+\.\d pp", findings)
    assert "User's log (002's H800 pair), fused AdamW + clip at B=64: torch 2.1.2 -> nightly tokens/s +43.8% (single sample)" in findings
    assert "77,425 -> 48,007 MiB (-38.0%)" in findings
    assert "Significance:" in md and "bootstrap" in md
    assert "status oom: CUDA out of memory" in md  # the OOM sweep point is reported, not dropped


def test_cpu_only_report_skips_empty_charts(tmp_path):
    """CPU records have no memory split, kernel profile, second env or sweep: those charts are not drawn."""
    recs = [make_record(env="local", gpu=None, rung=rung, workload=w, ms=constant_ms(ms), memory=600 * 2**20,
                        torch_version="2.5.1+cpu") for rung, w, ms in
            (("fp32", {}, 200.0), ("tf32", {"precision": "tf32"}, 190.0), ("bf16", {"precision": "bf16"}, 120.0))]
    out = tmp_path / "out"
    assert report.main([str(write(tmp_path / "r", recs)), "-o", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.png")) == ["ladder-seed-ladder.png"]
    md = (out / "report.md").read_text()
    for sentence in ("No cross-version heatmap", "No memory-split chart", "No kernel-mix chart", "No sweep chart"):
        assert sentence in md
    assert "cpu: Test CPU @ 2GHz / local" in md and "peak RSS MiB" in md
    assert "fp32 81,920 tokens/s -> bf16 136,533 tokens/s (1.67x [1.67,1.67] beyond)" in md  # 200 ms -> 120 ms, B=16, T=1024


def test_report_needs_an_output_dir(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        report.main([str(tmp_path)])
    assert exc.value.code == 2
