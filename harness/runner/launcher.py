"""The launcher: one fresh worker process per point, its progress relayed, its record returned.

Each point crosses to its worker as a harness.runner.worker_spec.WorkerSpec (SPEC.json in the worker's temp dir).
No torch import in this process: flags, compile caches, CUDA context and memory statistics cannot leak between
points, and an OOM or a segfault ends only its own point. Each worker runs in its own session: on a timeout,
SIGTERM, SIGINT or SIGHUP (stop_on_signals) its whole process group (compiler subprocesses included) is killed,
and its temp dir removed. A worker that dies without writing its record leaves a failure record (failure_record:
the one place the runner builds a record, from the worker's spec). A worker also dies with its runner if the
runner itself is killed (harness.lifeline).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.console.signals import STOP_SIGNALS, Interrupted, stop_on_signals  # noqa: F401 - launcher.* names
from harness.lifeline import RUNNER_PID_VAR
from harness.provenance import envinfo, nvml
from harness.record.files import write_atomic
from harness.record.io import read_record, write_record
from harness.record.model import RecordError
from harness.runner.progress import Progress, finished_lines, point_label, progress_line
from harness.runner.request import Point, RunRequest, rerun_command
from harness.runner.worker_spec import WorkerSpec

DRAIN_S = 3.0  # after a worker exits, how long a leftover child may hold its pipes before the group is killed
class RecordsUnwritable(OSError):
    """--out takes no more records (a full disk): the run stops, keeping what finished. The message is one line."""


@dataclass
class Stop:
    """What report_stops yields: the caller sets `total` once it knows how many runs it plans; the exit code of the
    stop signal that ended the work (128 + its number), or 1 when --out took no more records (RecordsUnwritable),
    is set there, None when neither came."""

    total: int | None = None  # None: not known in advance (a search): the runs that finished
    exit_code: int | None = None


@contextlib.contextmanager
def report_stops(prog: str, records: list[dict], out: str | os.PathLike, note: str = ""):
    """The one stop handler of the commands that run workers (harness.run, batch_search, tune). Inside, a stop
    signal raises Interrupted (stop_on_signals), which kills the running worker's group on its way out, and an
    --out that takes no more records raises RecordsUnwritable; here, what finished is printed with where its
    records are (stdout), then why the command stopped (one stderr line), and the yielded Stop gets the exit code.
    `records`: the list each run's record is appended to as it finishes; `note`: added to the stderr line."""
    stop = Stop()
    with stop_on_signals():
        try:
            yield stop
        except Interrupted as exc:
            print("\n".join(finished_lines(records, len(records) if stop.total is None else stop.total, out)), flush=True)
            print(f"{prog}: interrupted by {exc}: the running worker and its subprocesses were stopped; {len(records)} run(s) "
                  f"finished, their records are in {Path(out).as_posix()}/" + (f" ({note})" if note else ""),
                  file=sys.stderr, flush=True)
            stop.exit_code = exc.exit_code
        except RecordsUnwritable as exc:  # a full disk: the same report, exit 1
            print("\n".join(finished_lines(records, len(records) if stop.total is None else stop.total, out)), flush=True)
            print(f"{prog}: {exc}; {len(records)} run(s) finished, their records are in {Path(out).as_posix()}/"
                  + (f" ({note})" if note else ""), file=sys.stderr, flush=True)
            stop.exit_code = 1


# This process's invocation: every run it makes carries it with its env (record.invocation), so a comparison tells
# runs of one invocation (which share its conditions: the machine's state, the venv, the GPU call) from runs of two.
_PROCESS = f"{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}-{os.getpid()}-{secrets.token_hex(4)}"


def invocation_id(env: str) -> str:
    """The invocation a run of `env` made by this process belongs to (one venv, one process)."""
    return f"{_PROCESS}-{env}"


def new_run_id(env: str, plan: str, point: Point, out: str | os.PathLike) -> str:
    """A run id that is a plain file name (a sweep value like data=text:/a/b cannot make a path of it) and is
    not taken in `out` yet."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    label = point.rung if point.sweep is None else f"{point.rung}-{point.sweep['field']}{point.sweep['value']}"
    while True:
        run_id = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{stamp}-{env}-{plan}-{label}-r{point.repeat}-{secrets.token_hex(3)}")
        if not (Path(out) / f"{run_id}.json").exists():
            return run_id


def intended_environment(spec: WorkerSpec) -> dict:
    """What the runner can tell, without torch, of where the worker was meant to run: for a worker that died
    before capturing its own environment, so its record is not an "unknown device" (the GPU from NVML, CUDA
    device 0 as CUDA_VISIBLE_DEVICES exposes it; else the CPU)."""
    env = {"env_name": spec.env, "captured_by": "runner: the worker died before capturing its environment",
           "harness": envinfo.code_identity()}
    wanted = spec.workload.get("device", "auto")
    index = nvml.visible_index(0) if wanted in ("cuda", "auto") else None
    gpu = nvml.gpu_identity(index) if index is not None else None
    if gpu or wanted == "cuda":
        return {**env, "device": "cuda", "gpu": gpu, "machine": envinfo.machine_id()}
    threads = spec.threads or envinfo.usable_cpus()
    return {**env, "device": "cpu", "machine": envinfo.machine_id(), "threads": {"torch": threads},
            "cpu": {"model": envinfo.cpu_model(), "count": os.cpu_count(), "usable": envinfo.usable_cpus(),
                    "isa": envinfo.cpu_isa()}}


def failure_record(spec: WorkerSpec, reason: str) -> dict:
    """For a worker that died without writing its record (segfault, kill, timeout)."""
    return spec.new_record(reason=reason, environment=intended_environment(spec))



class WorkerOutput:
    """A worker's stdout and stderr, read as they come (one thread, a selector): each stdout line that is a
    progress event goes to `progress` at once; everything is kept for the record's path and the error tail."""

    def __init__(self, proc: subprocess.Popen, progress: Progress | None = None):
        self.proc, self.progress = proc, progress
        self.chunks = {proc.stdout: bytearray(), proc.stderr: bytearray()}
        self.selector = selectors.DefaultSelector()
        for pipe in self.chunks:
            self.selector.register(pipe, selectors.EVENT_READ)
        self.exited_at = None
        self.closed = False

    @property
    def stdout(self) -> str:
        return self.chunks[self.proc.stdout].decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        return self.chunks[self.proc.stderr].decode("utf-8", "replace")

    def _read(self, pipe) -> None:
        data = os.read(pipe.fileno(), 65536)
        if not data:
            self.selector.unregister(pipe)
            return
        buf = self.chunks[pipe]
        start = len(buf)
        buf += data
        if pipe is self.proc.stdout and self.progress:
            line_start = buf.rfind(b"\n", 0, start) + 1
            for line in bytes(buf[line_start:]).split(b"\n")[:-1]:  # the complete lines among the new bytes
                if line.startswith(b'{"progress"'):
                    with contextlib.suppress(ValueError):
                        self.progress.event(json.loads(line))

    def pump(self, deadline: float) -> bool:
        """Read until the worker has exited and its pipes are closed (True), or until `deadline` (False). A child
        the worker left behind that still holds the pipes DRAIN_S after the worker exited is killed with its group."""
        while True:
            now = time.monotonic()
            if self.closed or not self.selector.get_map():
                try:
                    self.proc.wait(timeout=max(deadline - now, 0.01))
                    return True
                except subprocess.TimeoutExpired:
                    return False
            if now >= deadline:
                return False
            if self.proc.poll() is not None:
                self.exited_at = self.exited_at or now
                if now - self.exited_at > DRAIN_S:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(self.proc.pid, signal.SIGKILL)  # the group outlives its leader only through such children
                    self.close()
                    continue
            for key, _ in self.selector.select(timeout=min(1.0, deadline - now)):
                self._read(key.fileobj)
            if self.progress:
                self.progress.tick()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.selector.close()
        for pipe in self.chunks:
            pipe.close()


def run_point(spec: WorkerSpec, timeout_s: float, progress: Progress | None = None, python: str | None = None) -> dict:
    """Run one worker process; return its record (or an error record if it died without one). `python`: the
    interpreter the worker runs under (another env's venv: harness.bisect); default this one.

    The worker gets its own session, so it and everything it starts (Inductor's compiler processes) are one
    process group, killed together on a timeout or when Interrupted passes through here. Its output is read
    as it comes: progress events go to `progress`. Call it from a thread that outlives the worker (the main
    thread): the worker's parent-death signal fires when the thread that started it ends."""
    with tempfile.TemporaryDirectory(prefix="harness-worker-", ignore_cleanup_errors=True) as tmp:
        spec_path = Path(tmp) / "spec.json"
        write_atomic(spec_path, spec.to_json())
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Cold, private compile caches: a rung never reuses another's compiled graphs or kernels.
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
        root = Path(__file__).resolve().parents[2]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        env[RUNNER_PID_VAR] = str(os.getpid())  # the worker dies when this process does (harness.lifeline)
        proc = subprocess.Popen([python or sys.executable, "-m", "harness.lifeline", "harness.worker", str(spec_path)],
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, start_new_session=True)
        output = WorkerOutput(proc, progress)
        try:
            finished = output.pump(time.monotonic() + timeout_s)
            if not finished:
                kill_group(proc, output)
                return _record_or_failure(spec, output.stdout, f"worker timed out after {timeout_s:g} s")
        except Interrupted as exc:
            kill_group(proc, output)
            path = _worker_record_path(spec, output.stdout)  # it may have written its record just before the signal
            with contextlib.suppress(RecordError):
                exc.finished = read_record(path) if path else None
            raise
        except BaseException:  # anything else: never leave the worker group running either
            kill_group(proc, output)
            raise
        finally:
            output.close()
        stdout, stderr = output.stdout, output.stderr
        if proc.returncode != 0:
            lines = [line for line in (stderr or stdout).strip().splitlines() if not line.startswith('{"progress"')]
            tail = " | ".join(lines[-3:])
            return _record_or_failure(spec, stdout, exit_reason(proc.returncode, tail)[:800])
        return _record_or_failure(spec, stdout, "worker exited 0 but wrote no record")


def exit_reason(returncode: int, tail: str) -> str:
    """Why a worker ended without its record, in words: the signal that killed it by name (-9 is SIGKILL, most
    often the kernel's OOM killer), and the last lines it printed, or that it printed nothing."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        said = f"worker killed by {name} (exit code {returncode})"
        if -returncode == signal.SIGKILL:
            said += ", from outside: the kernel's OOM killer does this (dmesg says)"
    else:
        said = f"worker exited with code {returncode}"
    return f"{said}: {tail}" if tail else f"{said}; it printed nothing"


def kill_group(proc: subprocess.Popen, output: WorkerOutput) -> None:
    """SIGKILL the worker's whole process group (it leads its own session), reap it, keep what it printed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Interrupted):  # a second signal must not cut the clean-up short
        if not output.pump(time.monotonic() + 10):  # a grandchild that left the group still holds the pipes
            proc.kill()
            proc.wait()


def _worker_record_path(spec: WorkerSpec, stdout: str) -> Path | None:
    """Where the worker wrote its record: the path on its last JSON line (a taken run_id made it pick a fresh
    one), else <run_id>.json if it exists (new_run_id made sure it did not before the worker started)."""
    for line in reversed((stdout or "").strip().splitlines()):
        with contextlib.suppress(ValueError):
            reported = json.loads(line)
            if isinstance(reported, dict) and isinstance(reported.get("record"), str):
                return Path(reported["record"])
    expected = Path(spec.out) / f"{spec.run_id}.json"
    return expected if expected.exists() else None


def _record_or_failure(spec: WorkerSpec, stdout: str, reason: str) -> dict:
    path = _worker_record_path(spec, stdout)
    if path is not None:
        try:
            return read_record(path)
        except RecordError as exc:
            reason = f"{reason}; its record is unreadable: {exc}"
    try:
        return read_record(write_record(failure_record(spec, reason), spec.out))
    except OSError as exc:  # not even the small failure record fits: no later run could keep its record either
        raise RecordsUnwritable(f"cannot write records to {spec.out}/ any more ({exc.strerror or exc}); the run "
                                "stops here") from None



def run_points(request: RunRequest, plan_name: str, points: list[Point], records: list | None = None,
               python: str | None = None, rerun: Callable[[Point], str] | None = None,
               numbering: tuple[int, int] | None = None) -> list[dict]:
    """Run each point; append its record to `records` as it finishes (so an interrupted caller keeps them).
    `python`: the interpreter the workers run under (default this one); `rerun`: the command each record names to
    make it again (default harness.run's, through the env's nox session; the bisect's builds have none);
    `numbering`: (first, total) the progress lines count from and to (default 1..len(points))."""
    records = [] if records is None else records
    rerun = rerun or (lambda point: rerun_command(request, point))
    first, total = numbering or (1, len(points))
    for i, point in enumerate(points, first):
        spec = WorkerSpec(
            run_id=new_run_id(request.env, plan_name, point, request.out), env=request.env, plan=plan_name,
            rung=point.rung, rung_index=point.rung_index, repeat=point.repeat, sweep=point.sweep,
            workload=point.workload, flags=point.flags, out=str(request.out),
            rerun=rerun(point), threads=request.threads, invocation=invocation_id(request.env),
        )
        started = time.monotonic()
        try:
            record = run_point(spec, request.timeout, Progress(f"[{i}/{total}] {point_label(point)}"), python)
        except Interrupted as exc:
            if exc.finished:
                records.append(exc.finished)
            raise
        print(progress_line(i, total, point, record, time.monotonic() - started), flush=True)
        records.append(record)
    return records
