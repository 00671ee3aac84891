"""`python -m harness.gpu_check unpack` on an archive that is someone else's (docs/input.md): every summary field it
uses is checked before it is used, the README gets the summary's text only as text, the archive is read within
bounds (members, bytes inflated, the summary's size and nesting) and refused as soon as one is passed, an ARCHIVE
that is no regular file is refused without blocking, and every failure and every stop signal is one line and leaves
nothing behind. CPU only, seconds."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from shipped import RESULTS
from test_gpu_check import _archive, results_folder, summary_for

from harness.gpu_check import __main__ as cli
from harness.gpu_check import pack

ROOT = Path(__file__).resolve().parent.parent


def _raw_archive(path: Path, members, fmt=tarfile.GNU_FORMAT) -> Path:
    """An archive of these (name, bytes) members, in this order, the summary's bytes as given."""
    with tarfile.open(path, "w:gz", format=fmt) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _nothing_left(results: Path) -> bool:
    return not results.exists() or list(results.iterdir()) == []


# ---------------------------------------------------------------- a summary field that may be null (N=4)

def test_a_null_source_sanity_compare_or_report_is_read_as_none(tmp_path):
    """The field check allows null for these; the README read them with .get() on them: AttributeError."""
    summary = summary_for(source=None, sanity=None, compare=None, report=None, finished_at=None, command=None)
    target = pack.unpack(_archive(tmp_path / "a.tar.gz", summary), tmp_path / "results")
    readme = (target / "README.md").read_text()
    assert "(source unknown: `python -m harness.gpu_check`" in readme
    assert "10:15-? UTC" in readme and "harness.compare and harness.report over nothing (they did not run)" in readme


# ---------------------------------------------------------------- a GPU name as long as a file name may not be (N=5)

def test_a_long_gpu_name_names_a_bounded_folder_the_same_every_time(tmp_path):
    results = tmp_path / "results"
    results.mkdir()  # results/ normally exists
    long_a, long_b = "NVIDIA " + "H" * 300, "NVIDIA " + "H" * 299 + "X"
    target = pack.unpack(_archive(tmp_path / "a.tar.gz", summary_for(gpu=long_a)), results)
    assert len(target.name) <= 100 and target.name.startswith("gpu-hhhh") and target.name.endswith("-20261126")
    assert pack.slug(long_a) == pack.slug(long_a) != pack.slug(long_b)  # deterministic, and still two folders
    assert len(pack.slug(long_b)) <= pack.SLUG_LENGTH and pack.slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert len(pack.archive_name(summary_for(gpu=long_a))) < 128  # pack's file name too
    assert pack.unpack(_archive(tmp_path / "b.tar.gz", summary_for(gpu=long_b)), results) != target
    too_long = "NVIDIA " + "H" * 2000  # a name past a name's bound is refused in one line
    with pytest.raises(pack.PackError, match=r"gpu: .* is not a text of at most 1,024 characters"):
        pack.unpack(_archive(tmp_path / "c.tar.gz", summary_for(gpu=too_long)), results)


# ---------------------------------------------------------------- the summary's size and nesting (N=6)

@pytest.mark.parametrize("data, why", [
    (b'{"a":' * 60_000 + b"{}" + b"}" * 60_000, "nested deeper than 16 levels"),  # a RecursionError
    (json.dumps(summary_for(source={"x": [[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]})).encode(), "nested deeper than 16"),
    (json.dumps(summary_for(note="x" * (2**20 + 1))).encode(), "is not a file of at most 1 MiB"),
    (b"[" + b"1" * 5000 + b"]", "not a gpu_check archive (its gpu-check.json: ValueError"),  # 5,000 digits
])
def test_a_summary_too_deep_or_too_large_is_one_line(tmp_path, data, why):
    archive = _raw_archive(tmp_path / "a.tar.gz", [(f"{pack.TOP}/{pack.SUMMARY}", data)])
    with pytest.raises(pack.PackError) as exc:
        pack.unpack(archive, tmp_path / "results")
    assert why in str(exc.value) and "\n" not in str(exc.value) and len(str(exc.value)) < 400, str(exc.value)[:400]
    assert _nothing_left(tmp_path / "results")


# ---------------------------------------------------------------- every value that reaches the README (N=7)

MARKUP = "<script>alert(1)</script> [click](http://evil.example) | a | b |\n|---|---|\n<!-- `x` ![i](http://e/i.png)"


def _set(summary: dict, path: str, value) -> dict:
    """summary with the field at `path` ('sanity.torch', 'runs.0.note', 'command.1') set to value."""
    *parents, last = path.split(".")
    node = summary
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return summary


def _runs():
    from harness.gpu_check import budget, plan
    return [budget.Outcome(plan.tier("padding-tf32").runs[0], 57.0, "b", status="error", seconds=55.2, note="n", memory="1"),
            budget.Outcome(plan.tier("fastest").runs[0], 51.0, "b", note="needs ~51 s")]


TEXT_FIELDS = ["gpu", "archive_name", "sanity.torch", "sanity.driver", "sanity.python", "sanity.cuda", "sanity.cudnn",
               "source.commit", "source.source_sha256", "command.1", "compare.paths.1", "runs.0.tier", "runs.0.key",
               "runs.0.status", "runs.0.memory", "runs.0.note", "runs.1.tier", "runs.1.rung", "runs.1.note",
               "choices.0"]


@pytest.mark.parametrize("field", TEXT_FIELDS)
def test_every_summary_text_reaches_the_readme_as_text(tmp_path, field):
    def with_value(value):
        summary = _set(summary_for(_runs()), field, value)
        if field == "source.source_sha256":
            summary["source"]["commit"] = None
        return summary
    target = pack.unpack(_archive(tmp_path / "a.tar.gz", with_value(MARKUP)), tmp_path / "results")
    readme = (target / "README.md").read_text()
    plain = pack.readme(with_value("plain"), target.name)
    assert "<script" not in readme and "<!--" not in readme and "](" not in readme and "&lt;script>" in readme
    assert "http://" not in readme and "\n|---|---|\n<" not in readme
    # no table cell and no line of its own: every table row has as many cells as without the markup
    cells = [len(re.findall(r"(?<!\\)\|", line)) for line in readme.splitlines() if line.startswith("|")]
    assert cells == [len(re.findall(r"(?<!\\)\|", line)) for line in plain.splitlines() if line.startswith("|")]
    assert len(readme.splitlines()) == len(plain.splitlines())


WRONG = [
    ("report.exit", "1\n\n<script>alert(1)</script>", "report.exit: "),
    ("compare.exit", [1], "compare.exit: '[1]' is not a whole number"),
    ("report.exit", True, "report.exit: 'True' is not a whole number"),
    ("finished_at", "2026-11-27T<!-- hidden", "finished_at: '2026-11-27T<!-- hidden' is no ISO time"),
    ("finished_at", "2026-11-27T10:00:00<b>", "is no ISO time"),
    ("started_at", "2026-13-45T10:00:00+00:00", "started_at: '2026-13-45T10:00:00+00:00' is no ISO time"),
    ("runs.0.steps", 10**4000, "runs[0].steps: '100000000000000…(+3,971)…000000000000000' is not a whole number"),
    ("runs.0.warmup_steps", 40, "runs[0].warmup_steps: '40' is not below its steps"),
    ("runs.0.estimate_s", 1e308, "runs[0].estimate_s: '1e+308' is not a number of seconds"),
    ("runs.0.tokens_s", "fast", "runs[0].tokens_s: 'fast' is not a rate per second"),
    ("runs.0.capture", 1, "runs[0].capture: '1' is not true or false"),
    ("sanity.torch", ["a", {"b": 1}], "sanity.torch: \"['a', {'b': 1}]\" is not a text"),
    ("source.commit", {"x": "[l](http://e)"}, "source.commit: "),
    ("command.1", {"x": 1}, "command[1]: \"{'x': 1}\" is not a text"),
    ("compare.paths", "abc", "compare.paths: 'abc' is not a list"),
    ("choices", "B=96", "choices: 'B=96' is not a list"),
    ("choices.0", {"b": 96}, "choices[0]: \"{'b': 96}\" is not a text"),
    ("runs", [{"status": "ok"}] * 1001, "runs: "),
]


@pytest.mark.parametrize("field, value, why", WRONG, ids=[f"{field}-{i}" for i, (field, _, _) in enumerate(WRONG)])
def test_a_summary_value_of_the_wrong_kind_or_size_is_refused_before_it_is_used(tmp_path, field, value, why):
    archive = _archive(tmp_path / "a.tar.gz", _set(summary_for(_runs()), field, value))
    with pytest.raises(pack.PackError, match="is not a gpu_check summary") as exc:
        pack.unpack(archive, tmp_path / "results")
    assert why in str(exc.value) and "\n" not in str(exc.value) and len(str(exc.value)) < 400, str(exc.value)
    assert _nothing_left(tmp_path / "results")


# ---------------------------------------------------------------- a stop signal during unpack (N=8)

STOPPED = """
import os, signal, sys
from harness.gpu_check import pack
publish = pack.publish_folder
def stop_then_publish(tmp, path):  # every member extracted into the temp folder, the README written: then a signal
    os.kill(os.getpid(), signal.{sig})
    return publish(tmp, path)
pack.publish_folder = stop_then_publish
import runpy
sys.argv = ["python -m harness.gpu_check", *sys.argv[1:]]
runpy.run_module("harness.gpu_check", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig, code", [("SIGTERM", 143), ("SIGINT", 130), ("SIGHUP", 129)])
def test_a_stop_signal_during_unpack_is_one_line_and_leaves_nothing(tmp_path, sig, code):
    """SIGTERM left the temp folder (hundreds of MB, that compare then read); SIGINT printed a traceback."""
    archive = pack.pack(results_folder(tmp_path), summary_for(), "t\n", tmp_path / "OUT")[0]
    results = tmp_path / "results"
    proc = subprocess.run([sys.executable, "-c", STOPPED.replace("{sig}", sig), "unpack", str(archive), "--results",
                           str(results)], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == code, proc.stderr[-2000:]
    line = f"python -m harness.gpu_check unpack: stopped by {sig}; no output file is left half-written"
    assert proc.stderr.splitlines() == [line]
    assert _nothing_left(results)


# ---------------------------------------------------------------- bounds, checked as the archive is read (N=11)

class _Inflating(gzip.GzipFile):
    """gzip.GzipFile, noting how far into the inflated stream it got before it was closed."""

    furthest = 0

    def close(self):
        if self.fileobj is not None:
            type(self).furthest = max(type(self).furthest, self.tell())
        super().close()


def test_an_archive_past_its_bounds_is_refused_before_it_is_inflated(tmp_path, monkeypatch):
    """A 1 MB archive of zeros was inflated whole (1 GiB, 5 s) before its refusal; 100,000 empty files were
    unpacked (20 s); a long-name header of any size was read into memory."""
    summary = (f"{pack.TOP}/{pack.SUMMARY}", json.dumps(summary_for()).encode())
    results = tmp_path / "results"
    bomb = _raw_archive(tmp_path / "bomb.tar.gz", [(f"{pack.TOP}/zeros.bin", bytes(16 * 2**20)), summary])
    outside = _raw_archive(tmp_path / "outside.tar.gz", [summary, ("elsewhere/zeros.bin", bytes(16 * 2**20))])
    long_name = _raw_archive(tmp_path / "long.tar.gz", [summary, ("x" * (8 * 2**20), b"")])  # GNU long-name header
    many = _raw_archive(tmp_path / "many.tar.gz", [summary, *((f"{pack.TOP}/m/{i}", b"") for i in range(60))])
    monkeypatch.setattr(gzip, "GzipFile", _Inflating)
    monkeypatch.setattr(pack, "MAX_UNPACKED_BYTES", 2**20)
    monkeypatch.setattr(pack, "MAX_MEMBERS", 50)

    _Inflating.furthest = 0
    with pytest.raises(pack.PackError, match="unpacks to more than 1 MiB; not unpacked"):
        pack.unpack(bomb, results)
    assert _Inflating.furthest < 64 * 1024  # its header read, none of its 16 MiB

    _Inflating.furthest = 0  # a member outside gpu-check/ is not unpacked, but inflated on the way past it all the same
    with pytest.raises(pack.PackError, match="unpacks to more than 1 MiB"):
        pack.unpack(outside, results)
    assert _Inflating.furthest < 64 * 1024

    _Inflating.furthest = 0
    with pytest.raises(pack.PackError, match="unpacks to more than"):
        pack.unpack(long_name, results)
    assert _Inflating.furthest < 2 * 2**20

    with pytest.raises(pack.PackError, match="holds more than 50 members; not unpacked"):
        pack.unpack(many, results)
    assert _nothing_left(results)


def test_the_member_bound_is_far_above_a_real_calls_count(tmp_path):
    counts = [sum(1 for _ in folder.rglob("*")) for folder in RESULTS.glob("gpu-*-call*/")]
    assert counts and max(counts) * 100 <= pack.MAX_MEMBERS
    archive = pack.pack(results_folder(tmp_path), summary_for(), "t\n", tmp_path / "OUT")[0]
    with tarfile.open(archive) as tar:
        assert len(tar.getmembers()) * 100 <= pack.MAX_MEMBERS


# ---------------------------------------------------------------- ARCHIVE that is no regular file (N=15)

def test_an_archive_that_is_no_regular_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "a.tar.gz"
    os.mkfifo(fifo)
    done = threading.Event()

    def unblock():  # on the code that opened the FIFO as a file, the open blocked until a writer came: come at 3 s
        deadline = time.monotonic() + 3
        while not done.wait(0.05):
            if time.monotonic() > deadline:
                try:
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    continue
                return
    helper = threading.Thread(target=unblock, daemon=True)
    helper.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(pack.PackError, match="a.tar.gz: cannot be read .not a regular file.; nothing unpacked"):
            pack.unpack(fifo, tmp_path / "results")
    finally:
        done.set()
        helper.join()
    assert time.monotonic() - t0 < 2
    with pytest.raises(pack.PackError, match="cannot be read .not a regular file."):
        pack.unpack(tmp_path, tmp_path / "results")  # a folder
    with pytest.raises(pack.PackError, match="cannot be read .No such file or directory."):
        pack.unpack(tmp_path / "missing.tar.gz", tmp_path / "results")
    assert _nothing_left(tmp_path / "results")


# ---------------------------------------------------------------- member names: twice, inside a file, too long

@pytest.mark.parametrize("members, why", [
    ([("compare.txt", b"first"), ("compare.txt", b"second")], "holds 'compare.txt' twice; not unpacked"),
    ([(pack.SUMMARY, json.dumps(summary_for(gpu="other")).encode())], "holds 'gpu-check.json' twice"),
    ([("zz", b"x"), ("zz/y", b"y")], "'zz/y' would be inside a file; not unpacked"),
    ([("zz/y", b"y"), ("zz", b"x")], "'zz' is a file and a folder; not unpacked"),
    ([("a//b", b"x")], "a member's name is no plain path ('gpu-check/a//b')"),
    ([("/".join(["d" * 200] * 30) + "/x", b"x")], "a member's name is longer or deeper than a file's may be"),
    ([("d" * 300, b"x")], "a member's name is longer or deeper than a file's may be"),
])
def test_a_member_name_twice_or_that_is_no_plain_path_is_refused(tmp_path, members, why):
    """The second of two members of one name replaced the first, unseen (the summary read, another unpacked)."""
    archive = _archive(tmp_path / "a.tar.gz", summary_for(), [(f"{pack.TOP}/{n}", d) for n, d in members])
    with pytest.raises(pack.PackError) as exc:
        pack.unpack(archive, tmp_path / "results")
    assert why in str(exc.value) and len(str(exc.value)) < 400, str(exc.value)
    assert _nothing_left(tmp_path / "results")


# ---------------------------------------------------------------- the command line: one line, exit 2

def test_the_command_line_says_each_failure_in_one_line(tmp_path, capsys):
    archive = _archive(tmp_path / "a.tar.gz", summary_for(report={"exit": "1\n<script>"}))
    assert cli.main(["unpack", str(archive), "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m harness.gpu_check unpack: ") and "usage" not in err
    assert "report.exit: '1\\n<script>' is not a whole number" in err
    assert _nothing_left(tmp_path / "results")
