"""harness.console.output (and the stop signals of harness.console.signals it turns into one line): a command's
output where the stream or the disk refuses it, stdout that is /dev/full or closed, an -o that is a file or a
read-only folder, a disk that fills up while the report's files are written, and Ctrl-C or SIGTERM while the report
is analysed or written: one line, exit 1 (or 128 + the signal), no traceback, no partial or temp file. Issues 22 (a
docstring's leading number is its item) and 31 (its classes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from hostile import hostile_records  # noqa: F401 (the fixture `hostile`)
from module_cli import ROOT, run_module

from harness import compare
from harness.report import __main__ as report_main


def _run_shell(command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", command], check=False, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("redirect", ["> /dev/full", ">&-"])
def test_stdout_that_takes_nothing(hostile, redirect):
    """9. compare into /dev/full or a closed stdout: one line, exit 1, no traceback."""
    p = _run_shell(f"{sys.executable} -m harness.compare {hostile} --format json {redirect}")
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "cannot write the output to stdout" in p.stderr, p.stderr


def test_report_into_a_folder_it_cannot_write(hostile, tmp_path):
    """9. report -o onto a file, or into a read-only folder: one line, exit 1, nothing left behind."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    p = run_module("harness.report", hostile, "-o", a_file)
    assert p.returncode == 1 and "not a directory" in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        p = run_module("harness.report", hostile, "-o", ro)
        assert p.returncode == 1 and "Permission denied" in p.stderr and "Traceback" not in p.stderr
        assert not list(ro.iterdir())
    finally:
        ro.chmod(0o700)


def test_report_files_whole_or_not_at_all(tmp_path, monkeypatch):
    """6/9. A disk that fills up while the report is written: no partial file, no temp file."""
    from harness.console import output

    real = os.fsync
    calls = []

    def full(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd)

    monkeypatch.setattr(output.os, "fsync", full)
    with pytest.raises(output.OutputError, match="No space left on device"):
        output.write_files(tmp_path, {"a.md": b"a", "b.html": b"b", "c.png": b"c"})
    assert not list(tmp_path.iterdir())
    with pytest.raises(output.OutputError, match="not a plain file name"):
        output.write_files(tmp_path, {"../x.png": b"x"})


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_the_report_is_written_leaves_nothing(hostile, tmp_path, monkeypatch, capsys, signum):
    """Class 7 of issue 31: Ctrl-C or SIGTERM arriving while report's files are written (the signal sent for real,
    after the first file reached the disk): one line, exit 128 + the signal, no temp file, no report file."""
    from harness.console import output

    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        real(fd)
        if len(calls) == 1:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(output.os, "fsync", fsync)
    out = tmp_path / "r"
    code = output.run_main("python -m harness.report", lambda: report_main.main([str(hostile), "-o", str(out)]))
    err = capsys.readouterr().err.strip()
    assert code == 128 + signum and calls
    assert err.splitlines()[-1] == f"python -m harness.report: stopped by {signal.Signals(signum).name}; no output " \
                                   "file is left half-written"
    assert not list(out.iterdir())


@pytest.mark.parametrize("module", [compare, report_main])
def test_a_stop_signal_during_the_analysis_is_one_line(hostile, tmp_path, monkeypatch, capsys, module):
    """Class 7 of issue 31: Ctrl-C during compare's or report's analysis: one line, exit 130, nothing written."""
    from harness.analysis import options
    from harness.console import output

    real = options.load

    def load(*args, **kwargs):  # the signal arrives while the records are read
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(options, "load", load)
    out = tmp_path / "r"
    code = output.run_main("python -m x", lambda: module.main([str(hostile), *(["-o", str(out)] if module is report_main else [])]))
    captured = capsys.readouterr()
    assert code == 130 and captured.err.strip() == "python -m x: stopped by SIGINT; no output file is left half-written"
    assert not captured.out and not out.exists()

