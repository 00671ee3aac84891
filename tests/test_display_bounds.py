"""Text from records is bounded where it is displayed (issue 50): names of hundreds or tens of thousands of characters
in compare's text and Markdown, the report's pages and its charts are shortened with a marker (harness.console.textsafe.bounded),
two long names that differ at their end still read different, and JSON and CSV keep every name exact (no torch)."""

from __future__ import annotations

import base64
import json
import re
import struct

import pytest
from records_factory import constant_ms, kernels, make_record, write

from harness import compare
from harness.console.textsafe import TEXT, WORD, bounded
from harness.report import __main__ as report

ENV_A = "env-" + "a" * 240 + "-one"  # 248 characters: two envs that differ only at the end
ENV_B = "env-" + "a" * 240 + "-two"
GPU = "NVIDIA H100 80GB " + "X" * 230 + " HBM3"
CPU = "Intel(R) Xeon(R) " + "Y" * 230 + " @ 2.00GHz"
RUNG = "vocab-50304-" + "r" * 230 + "-end"
KERNEL = "k" * 20_000  # a kernel name of 20,000 characters, within a record's bounds
REASON = "worker exited: " + "z" * 20_000 + " (and then some)"
TORCH = "2.1.2+" + "v" * 240
BF16 = {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"}
MARK = re.compile(r"…\(\+[\d,]+\)…")  # harness.console.textsafe.bounded's marker


def _record(env, gpu, rung, repeat, ms, run_id):
    workload = dict(BF16, vocab_size=50304) if rung == RUNG else BF16
    top = [(f"sm90_gemm_{KERNEL}_{env[-3:]}", "gemm", ms * 400, 0.45), (f"flash_fwd_{KERNEL}", "attention", ms * 200, 0.2)]
    r = make_record(env=env, gpu=gpu, rung=rung, rung_index=0 if rung == "bf16" else 1, repeat=repeat, run_id=run_id,
                    workload=workload, ms=constant_ms(ms + repeat), memory=(12 + repeat) * 2**30,
                    explain=kernels(top[0][0], [top[1][0]], top, backend="flash"), torch_version=TORCH if env == ENV_A else None)
    r["environment"]["cpu"]["model"] = CPU
    if gpu == "H100":
        r["environment"]["gpu"]["name"] = GPU
    return r


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """2 envs x 2 GPUs x 2 rungs x 2 runs, every name long, and one failed run with a reason of 20,000 characters."""
    cells = [(env, gpu, base, rung, rep) for env in (ENV_A, ENV_B) for gpu, base in (("H100", 100.0), ("A100", 160.0))
             for rung in ("bf16", RUNG) for rep in range(2)]
    records = [_record(env, gpu, rung, rep, base * (1.1 if env == ENV_B else 1.0), f"run-{i}")
               for i, (env, gpu, base, rung, rep) in enumerate(cells)]
    records.append(make_record(env=ENV_A, gpu="A100", rung="fp32", rung_index=2, status="error", reason=REASON,
                               torch_version=TORCH, run_id="run-failed"))
    return write(tmp_path_factory.mktemp("long") / "records", records)


def _compare(capsys, *argv) -> str:
    assert compare.main([*map(str, argv), "--no-index"]) == 0
    out = capsys.readouterr()
    assert all(len(line) <= TEXT + 100 for line in out.err.splitlines())
    return out.out


def _bounded(text: str, longest: int) -> None:
    """No line over `longest`, no name shown whole, the marker shown, the two envs told apart."""
    assert max(map(len, text.splitlines())) <= longest
    assert len(text) < 300_000
    assert "k" * (WORD + 1) not in text and "z" * (WORD + 1) not in text and "a" * (WORD + 1) not in text
    assert MARK.search(text)


def test_bounded_keeps_what_fits_and_marks_what_it_cuts():
    assert bounded("NVIDIA H100 80GB HBM3", 60) == "NVIDIA H100 80GB HBM3"
    assert bounded(ENV_A, 60) == "env-aaaaaaaaaaaaaaaaaaaaaa…(+196)…aaaaaaaaaaaaaaaaaaaaaa-one"
    assert bounded(ENV_A, 60) != bounded(ENV_B, 60)
    # a label's long part is shortened, its other parts kept; the longest words first
    label = bounded(f"h100-80g / {ENV_A} / B=16, T=1024", 60)
    assert label.startswith("h100-80g / env-a") and label.endswith("a-one / B=16, T=1024") and len(label) == 60
    # an env split by its torch versions ('env@version'): each part shortened, the env's end kept
    split = bounded(f"{ENV_A}@{TORCH}", 120)
    assert "a-one@2.1.2+v" in split and len(split) <= 120
    # shortened again (a name, then the line it is in): one marker, counting all that was left out
    assert bounded(f"({bounded(ENV_A, 120)})", 120) == f"({bounded(ENV_A, 118)})"
    # a sentence keeps its words; only the long one is cut, to `word`
    said = bounded(f"the kernel {KERNEL} ran", 4_000, 120)
    assert said.startswith("the kernel k") and said.endswith("k ran") and len(said) == len("the kernel  ran") + 120
    assert "…(+19,891)…" in said  # 20,000 less the 109 kept
    for n in (1, 59, 60, 61, 1_000, 1_000_000):
        for text in ("x" * n, "x " * n, f"a {'b' * n} c"):
            shown = bounded(text, 60, 30)
            assert len(shown) <= 60 and all(len(w) <= 30 for w in shown.split())
            assert bounded(shown, 60, 30) == shown  # shortening what is shown changes nothing


def test_compare_text_and_markdown_are_bounded(folder, capsys):
    verdict = _compare(capsys, folder)
    _bounded(verdict, 120)  # harness.console.render.WIDTH
    flat = re.sub(r"\n\s*", "", verdict)  # a name too long for a line is wrapped inside it
    assert "a-one" in flat and "a-two" in flat  # each env's end is shown
    detail = _compare(capsys, folder, "--detail")
    _bounded(detail, 120)
    markdown = _compare(capsys, folder, "--detail", "--format", "markdown")
    _bounded(markdown, TEXT + 200)
    # the two envs stay two: each shown by its own shortened name
    one, two = bounded(ENV_A, WORD), bounded(ENV_B, WORD)
    assert one != two and one.endswith("-one") and two.endswith("-two")
    assert one in markdown and two in markdown


def test_json_and_csv_keep_every_name_exact(folder, capsys):
    data = json.loads(_compare(capsys, folder, "--detail", "--format", "json"))
    text = json.dumps(data)
    assert ENV_A in text and ENV_B in text and GPU in text and RUNG in text
    assert {d["label"] for d in data["verdict"]["devices"]} >= {GPU}
    table = _compare(capsys, folder, "--format", "csv", "--table", "ladder", "--table", "left-out")
    assert ENV_A in table and ENV_B in table and RUNG in table and REASON in table


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_the_report_completes_with_charts_of_a_sane_size(folder, tmp_path, capsys):
    out = tmp_path / "report"
    assert report.main([str(folder), "-o", str(out), "--no-index"]) == 0
    capsys.readouterr()
    charts = sorted(out.glob("*.png"))
    assert len(charts) >= 4
    for png in charts:
        width, height = _png_size(png.read_bytes())
        assert width <= 2_400 and height <= 2_400, (png.name, width, height)
    md = (out / "report.md").read_text()
    _bounded(md, TEXT + 1_000)  # a table row of bounded cells, a list item
    html = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]*", "", (out / "report.html").read_text())
    assert "k" * (WORD + 1) not in html and "z" * (WORD + 1) not in html and len(html) < 1_000_000
    for narrow in re.findall(r"srcset='data:image/png;base64,([A-Za-z0-9+/=]+)'", (out / "report.html").read_text()):
        width, height = _png_size(base64.b64decode(narrow))
        assert width <= 2_400 and height <= 2_400
