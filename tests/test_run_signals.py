"""Interruption and processes, for real: the runner and its workers as subprocesses (tiny preset, compile off).

A SIGTERM/SIGINT'd runner stops its worker and everything the worker started, removes the worker's temp
dir, says what finished and exits 128 + signal; a worker whose runner is SIGKILLed dies too and writes
nothing; a timed-out worker's whole process group goes; a worker killed from outside (OOM killer) leaves an
error record and the ladder goes on.

The worker's "compiler subprocess" is a `sleep` that a sitecustomize.py (on PYTHONPATH, read by the worker's
interpreter only) starts in every worker, so the grandchild case is tested without waiting for a compile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import run as runmod
from harness.record.io import iter_records
from harness.runner import launcher
from harness.runner.request import build_points
from harness.runner.worker_spec import WorkerSpec

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

ROOT = Path(__file__).resolve().parent.parent
FAST = ["--set", "compile=off", "--steps", "3", "--warmup-steps", "1", "--env", "local"]
SITECUSTOMIZE = """\
import os, subprocess, sys
if "harness.worker" in getattr(sys, "orig_argv", []) and os.environ.get("HARNESS_TEST_GRANDCHILD_PIDS"):
    child = subprocess.Popen(["sleep", "600"])  # stands in for g++/cc1plus started by Inductor
    with open(os.environ["HARNESS_TEST_GRANDCHILD_PIDS"], "a") as f:
        f.write(f"{child.pid}\\n")
"""


def process_table() -> dict[int, tuple[int, str]]:
    """{pid: (parent pid, command line)} of every live (not zombie) process."""
    table = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if fields[0] != "Z":
            table[int(stat.parent.name)] = (int(fields[1]), cmdline)
    return table


def descendants(pid: int) -> dict[int, str]:
    table = process_table()
    found = {}
    for p, (_, cmd) in table.items():
        q = p
        for _ in range(64):
            q = table.get(q, (0, ""))[0]
            if q == pid:
                found[p] = cmd
                break
            if q <= 1:
                break
    return found


def alive(pid: int) -> bool:
    return pid in process_table()


def wait_for(predicate, timeout: float, what: str, poll=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if poll:
            poll()
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Runner:
    """`python -m harness.run` as a subprocess, with every descendant it ever had remembered."""

    def __init__(self, tmp_path: Path, *args, grandchild: bool = False):
        self.out = tmp_path / "out"
        self.pids_file = tmp_path / "grandchildren.txt"
        env = dict(os.environ)
        if grandchild:
            site = tmp_path / "site"
            site.mkdir()
            (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
            env["HARNESS_TEST_GRANDCHILD_PIDS"] = str(self.pids_file)
        self.proc = subprocess.Popen([sys.executable, "-m", "harness.run", "--out", str(self.out), *FAST, *args],
                                     cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.seen: dict[int, str] = {}

    def watch(self):
        # A process on its way out (its memory released, not yet a zombie) reads an empty command line: keep the
        # one seen before, or a SIGKILLed runner's worker is forgotten in the very poll that watches it die.
        self.seen.update({pid: cmd for pid, cmd in descendants(self.proc.pid).items() if cmd.strip()})

    def workers(self) -> dict[int, str]:
        return {p: c for p, c in self.seen.items() if "harness.worker" in c}

    def grandchildren(self) -> list[int]:
        return [int(x) for x in self.pids_file.read_text().split()] if self.pids_file.exists() else []

    def temp_dirs(self) -> set[Path]:
        return {Path(c.split()[-1]).parent for c in self.workers().values()}

    def records(self) -> list[Path]:
        return sorted(self.out.glob("*.json")) if self.out.exists() else []

    def finish(self, timeout: float = 120) -> tuple[str, str]:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.watch()
            time.sleep(0.1)
        return self.proc.communicate(timeout=max(1.0, deadline - time.monotonic()))

    def cleanup(self):
        """Kill whatever this test started that is still alive (only on failure is there anything)."""
        for pid in [self.proc.pid, *self.seen, *self.grandchildren()]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.fixture
def runner(tmp_path):
    started = []

    def start(*args, grandchild=False):
        started.append(Runner(tmp_path, *args, grandchild=grandchild))
        return started[-1]

    yield start
    for r in started:
        r.cleanup()


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_stopped_runner_stops_its_worker_group_cleans_up_and_says_what_finished(runner, sig, code):
    r = runner("--rungs", "fp32,tf32,bf16", grandchild=True)
    wait_for(lambda: r.records() and r.grandchildren(), 600, "the first record", poll=r.watch)
    first = r.records()
    r.proc.send_signal(sig)
    stdout, stderr = r.finish()
    assert r.proc.returncode == code, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    assert f"interrupted by {sig.name}" in stderr.strip().splitlines()[-1]
    assert "finished before the stop: 1 of 3 run(s)" in stdout and f"fp32 #0: ok -> {first[0]}" in stdout
    everything = [*r.seen, *r.grandchildren()]
    wait_for(lambda: not any(alive(p) for p in everything), 10, "the workers and their children to be gone")
    assert len(r.grandchildren()) >= 1 and not any(d.exists() for d in r.temp_dirs())
    time.sleep(3)
    assert r.records() == first  # nothing written after the runner stopped


def test_a_worker_dies_with_a_sigkilled_runner_and_writes_nothing(runner):
    r = runner("--rungs", "fp32,tf32", "--steps", "2000")
    wait_for(lambda: r.workers(), 120, "a worker", poll=r.watch)
    time.sleep(2)
    r.proc.kill()
    r.finish()
    worker = next(iter(r.workers()))
    wait_for(lambda: not alive(worker), 60, f"worker {worker} to notice its runner is gone")
    time.sleep(3)
    assert r.records() == []
    for d in r.temp_dirs():  # the runner was SIGKILLed: nobody left to remove its temp dir
        subprocess.run(["rm", "-rf", str(d)], check=False)


def test_a_timed_out_worker_goes_with_its_whole_process_group(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pids_file = tmp_path / "grandchildren.txt"
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("HARNESS_TEST_GRANDCHILD_PIDS", str(pids_file))
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    _, points = build_points(runmod.parse_request(["--out", str(tmp_path / "out"), "--rungs", "fp32", *FAST, "--steps", "5000"]))
    spec = WorkerSpec(run_id="slow", env="local", plan="seed-ladder", rung="fp32", rung_index=0, repeat=0,
                      workload=points[0].workload, flags=points[0].flags, out=str(tmp_path / "out"), rerun="x")
    record = launcher.run_point(spec, timeout_s=20)
    assert record["status"] == "error" and "timed out after 20 s" in record["reason"]
    grandchildren = [int(x) for x in pids_file.read_text().split()]
    try:
        assert grandchildren
        wait_for(lambda: not any(alive(p) for p in grandchildren), 10, "the worker's child to be gone")
        assert not list(tmp_path.glob("harness-worker-*"))  # its temp dir went with it
    finally:
        for pid in grandchildren:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_worker_killed_mid_run_leaves_an_error_record_and_the_ladder_goes_on(runner):
    r = runner("--rungs", "fp32,tf32")
    wait_for(lambda: r.workers(), 120, "a worker", poll=r.watch)
    time.sleep(2)
    os.kill(next(iter(r.workers())), signal.SIGKILL)  # what the OOM killer does
    stdout, stderr = r.finish(timeout=600)
    assert r.proc.returncode == 1, stderr
    records = {rec["rung"]: rec for _, rec in iter_records([r.out])}
    assert records["fp32"]["status"] == "error" and "killed by SIGKILL (exit code -9)" in records["fp32"]["reason"]
    assert not records["fp32"]["reason"].endswith(": ")  # issue 22: it says what it knows, never a dangling colon
    assert records["tf32"]["status"] == "ok" and "[2/2] tf32" in stdout
