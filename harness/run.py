"""Run a plan: one fresh worker process per rung and repeat, one record each, a summary at the end.

  python -m harness.run --plan seed-ladder --preset tiny --out results/
  python -m harness.run --plan seed-ladder --rungs fused-adamw-clip --sweep batch_size=64,80,96   # a sweep

No torch import in this process: flags, compile caches, CUDA context and memory statistics cannot
leak between rungs, and an OOM or a segfault ends only its own rung.

Everything that can be checked is checked before the first worker starts (plan, values, --env, --rungs,
--timeout, that --out takes a file). Each worker runs in its own session: on a timeout, SIGTERM, SIGINT
or SIGHUP its whole process group (compiler subprocesses included) is killed, and its temp dir removed;
an interrupted run prints what finished and exits 128 + the signal number (143 for SIGTERM, 130 for
SIGINT). A worker also dies with its runner if the runner itself is killed (harness.worker).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import secrets
import selectors
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from tabulate import tabulate

from gpt.config import PRESETS, ConfigError, coerce, make_config
from harness import contention, envinfo, nvml
from harness.envs.spec import SpecError, check_env_name
from harness.flags import FlagError, flags_for, flags_hash
from harness.flags import parse_assignments as parse_flag_assignments
from harness.plan import PlanError, Sweep, builtin_plans, load_plan, make_sweep
from harness.record.io import check_writable, read_record, write_record
from harness.record.model import RecordError, new_record

DEFAULT_TIMEOUT_S = 1800
DEFAULT_OUT = "results/runs"  # git-ignored: new runs never mix with the records shipped in results/<machine>/
QUIET_S = 10.0  # the longest the runner stays silent while a worker runs (a compile takes a minute on a small CPU)
STEP_LINE_S = 3.0  # step progress is printed at most this often (and for the last step)
DRAIN_S = 3.0  # after a worker exits, how long a leftover child may hold its pipes before the group is killed
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
USAGE_ERRORS = (PlanError, ConfigError, FlagError, SpecError, RecordError)


class Interrupted(Exception):
    """A stop signal reached the runner; the worker running then has been killed with its process group."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.finished: dict | None = None  # the record of a worker that wrote it just before the signal

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM, SIGINT and SIGHUP raise Interrupted in the main thread (instead of killing the runner outright
    or a KeyboardInterrupt traceback), so the current worker group is killed and what finished is reported."""

    def handler(signum, frame):
        for sig in STOP_SIGNALS:  # the first stop signal wins; a second one must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class Point:
    """One measurement to make."""

    rung: str
    rung_index: int
    workload: dict
    flags: dict
    repeat: int
    sweep: dict | None = None


def parse_assignments(items: list[str], what: str = "--set") -> dict:
    values = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"{what} {item!r}: expected FIELD=VALUE")
        values[name.strip()] = coerce(name.strip(), text.strip())
    return values


def parse_sweep(text: str, name: str | None = None) -> Sweep:
    """--sweep FIELD=V1,V2,... -> a checked Sweep (values typed like --set)."""
    field, sep, values = (text or "").partition("=")
    if not sep or not field.strip() or not values.strip():
        raise ConfigError(f"--sweep {text!r}: expected FIELD=V1,V2,...")
    if any(not v.strip() for v in values.split(",")):
        raise ConfigError(f"--sweep {text!r}: an empty value between commas")
    return make_sweep(field.strip(), values.split(","), name)


def build_points(args) -> tuple[str, list[Point]]:
    plan = load_plan(args.plan)
    cli_sweep = parse_sweep(args.sweep, getattr(args, "sweep_name", None)) if getattr(args, "sweep", None) else None
    overrides = parse_assignments(args.set)
    flag_overrides = parse_flag_assignments(getattr(args, "flag", None))
    for name in ("steps", "warmup_steps", "device", "batch_size", "seq_len"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    wanted = None
    if args.rungs is not None:
        wanted = {name.strip() for name in args.rungs.split(",")}
        if "" in wanted:
            raise PlanError(f"--rungs {args.rungs!r}: expected rung names separated by commas (omit --rungs for all)")
    if wanted and wanted - {r.name for r in plan.rungs}:
        raise PlanError(f"no rung(s) {', '.join(sorted(wanted - {r.name for r in plan.rungs}))} in plan {plan.name}; it has {', '.join(r.name for r in plan.rungs)}")
    repeats = args.repeats or plan.repeats
    points = []
    for index, rung in enumerate(plan.rungs):
        if wanted and rung.name not in wanted:
            continue
        sweep = cli_sweep or rung.sweep
        for value in sweep.values if sweep else [None]:
            swept = {sweep.field: value} if sweep else {}  # the sweep's value wins over the rung and --set
            workload = make_config(args.preset, **{**rung.settings, **overrides, **swept}).to_dict()  # the command line wins
            flags = flags_for(workload, {**rung.flags, **flag_overrides}).to_dict()  # --flag wins over the plan
            tag = {"name": sweep.name, "field": sweep.field, "value": value} if sweep else None
            points += [Point(rung.name, index, workload, flags, r, tag) for r in range(repeats)]
    return plan.name, points


def rerun_command(args, point: Point) -> str:
    """The one command that makes this measurement again (same env, same CLI, just this rung)."""
    parts = ["--plan", args.plan, "--preset", args.preset, "--rungs", point.rung, "--repeats", "1", "--out", args.out]
    for item in args.set or []:
        parts += ["--set", item]
    for item in getattr(args, "flag", None) or []:
        parts += ["--flag", item]
    for name in ("steps", "warmup_steps", "device", "batch_size", "seq_len", "threads"):
        if getattr(args, name, None) is not None:
            parts += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    if point.sweep:  # just this point, under the same sweep name
        parts += ["--sweep", f"{point.sweep['field']}={point.sweep['value']}"]
        if point.sweep["name"] != point.sweep["field"]:
            parts += ["--sweep-name", point.sweep["name"]]
    if args.env == "local":
        return shlex.join(["python", "-m", "harness.run", "--env", "local", *parts])
    return shlex.join(["nox", "-s", f"bench-{args.env}", "--", *parts])


def selection_line(args, points: list[Point]) -> str | None:
    """What --rungs left out of the plan, said up front (the nox bench sessions choose the Quick start's rungs)."""
    if args.rungs is None:
        return None
    every = [r.name for r in load_plan(args.plan).rungs]
    chosen = {p.rung for p in points}
    left = [name for name in every if name not in chosen]
    return (f"rungs: {', '.join(n for n in every if n in chosen)}" + (f" (left out: {', '.join(left)}; without --rungs every "
            f"rung of the plan runs)" if left else ""))


def check_run_args(args) -> tuple[str, list[Point]]:
    """Everything checkable before a worker starts, so bad input costs nothing and loses nothing: the plan and
    every value in it, --env, --rungs, --timeout, and that --out takes a file. Raises one of USAGE_ERRORS."""
    check_env_name(args.env)
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise ConfigError(f"--timeout {args.timeout:g}: expected a number of seconds above 0")
    plan_name, points = build_points(args)
    try:
        check_writable(args.out)
    except RecordError as exc:
        raise RecordError(f"--out {exc}") from None
    return plan_name, points


def new_run_id(env: str, plan: str, point: Point, out: str | os.PathLike) -> str:
    """A run id that is a plain file name (a sweep value like data=text:/a/b cannot make a path of it) and is
    not taken in `out` yet."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    label = point.rung if point.sweep is None else f"{point.rung}-{point.sweep['field']}{point.sweep['value']}"
    while True:
        run_id = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{stamp}-{env}-{plan}-{label}-r{point.repeat}-{secrets.token_hex(3)}")
        if not (Path(out) / f"{run_id}.json").exists():
            return run_id


def intended_environment(spec: dict) -> dict:
    """What the runner can tell, without torch, of where the worker was meant to run: for a worker that died
    before capturing its own environment, so its record is not an "unknown device" (the GPU from NVML, CUDA
    device 0 as CUDA_VISIBLE_DEVICES exposes it; else the CPU)."""
    env = {"env_name": spec["env"], "captured_by": "runner: the worker died before capturing its environment",
           "harness": envinfo.code_identity()}
    wanted = (spec.get("workload") or {}).get("device", "auto")
    index = nvml.visible_index(0) if wanted in ("cuda", "auto") else None
    gpu = nvml.gpu_identity(index) if index is not None else None
    if gpu or wanted == "cuda":
        return {**env, "device": "cuda", "gpu": gpu, "machine": envinfo.machine_id()}
    threads = spec.get("threads") or envinfo.usable_cpus()
    return {**env, "device": "cpu", "machine": envinfo.machine_id(), "threads": {"torch": threads},
            "cpu": {"model": envinfo.cpu_model(), "count": os.cpu_count(), "usable": envinfo.usable_cpus(),
                    "isa": envinfo.cpu_isa()}}


def failure_record(spec: dict, reason: str) -> dict:
    """For a worker that died without writing its record (segfault, kill, timeout)."""
    return new_record(
        run_id=spec["run_id"], env=spec["env"], plan=spec["plan"], rung=spec["rung"], rung_index=spec["rung_index"],
        repeat=spec["repeat"], sweep=spec["sweep"], workload=spec["workload"], flags_requested=spec["flags"],
        flags_hash=flags_hash(spec["flags"]), reason=reason, environment=intended_environment(spec),
        rerun_command=spec["rerun"],
    )


PHASES = {"calibrating": "measuring the GEMM peak (for MFU)", "building": "building the model and optimizer"}


class Progress:
    """The worker's progress, relayed as it comes, one line each, prefixed with the run's place in the plan:
    started, compiling, the first step's time (the compile), step i/N with its ms (at most every STEP_LINE_S),
    profiling; and a "still ..." line whenever the worker has said nothing for QUIET_S."""

    def __init__(self, prefix: str, write=None):
        self.prefix = prefix
        self.write = write or (lambda line: print(line, flush=True))
        self.phase = "starting (importing torch)"
        self.started = self.phase_since = self.last = time.monotonic()

    def say(self, text: str) -> None:
        self.write(f"{self.prefix}: {text}")
        self.last = time.monotonic()

    def enter(self, phase: str, text: str | None = None) -> None:
        self.phase, self.phase_since = phase, time.monotonic()
        if text:
            self.say(text)

    def event(self, event: dict) -> None:
        kind = event.get("progress")
        if kind == "started":
            self.enter("setting up", f"started: torch {event.get('torch')}, {event.get('device')}, "
                                     f"{event.get('threads')} thread(s)")
        elif kind in PHASES:  # said only if it lasts (tick)
            self.enter(PHASES[kind])
        elif kind in ("compiling", "first step"):
            text = "compiling (torch.compile works during the first step) ..." if kind == "compiling" else "first step ..."
            self.enter(kind, text)
        elif kind == "step":
            i, n, ms = event.get("step"), event.get("steps"), event.get("ms")
            if event.get("first_step_s") is not None:
                self.say(f"first step done in {event['first_step_s']:.1f} s" + (" (compile included)" if self.phase == "compiling" else ""))
            elif i == n or time.monotonic() - self.last >= STEP_LINE_S:
                self.say(f"step {i}/{n}" + (f", {ms:,.1f} ms" if isinstance(ms, (int, float)) else ""))
            self.phase = f"running steps ({i}/{n} done)"
        elif kind == "profiling" and event.get("steps"):
            self.enter("profiling", f"profiling {event.get('steps')} more step(s) for the evidence (explain) ...")
        elif kind == "profiling":
            self.enter("gathering the evidence (explain)")

    def tick(self) -> None:
        now = time.monotonic()
        if now - self.last >= QUIET_S:
            if now - self.phase_since >= QUIET_S:
                self.say(f"still {self.phase} ({now - self.phase_since:.0f} s)")
            else:  # a phase that began since the last line
                self.say(f"{self.phase} ({now - self.started:.0f} s since the worker started)")


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


def run_point(spec: dict, timeout_s: float, progress: Progress | None = None) -> dict:
    """Run one worker process; return its record (or an error record if it died without one).

    The worker gets its own session, so it and everything it starts (Inductor's compiler processes) are one
    process group, killed together on a timeout or when Interrupted passes through here. Its output is read
    as it comes: progress events go to `progress`. Call it from a thread that outlives the worker (the main
    thread): the worker's parent-death signal fires when the thread that started it ends."""
    with tempfile.TemporaryDirectory(prefix="harness-worker-", ignore_cleanup_errors=True) as tmp:
        spec = dict(spec, runner_pid=os.getpid())  # the worker dies when this process does
        spec_path = Path(tmp) / "spec.json"
        spec_path.write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # Cold, private compile caches: a rung never reuses another's compiled graphs or kernels.
        env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(tmp) / "inductor")
        env["TRITON_CACHE_DIR"] = str(Path(tmp) / "triton")
        root = Path(__file__).resolve().parent.parent
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
        proc = subprocess.Popen([sys.executable, "-m", "harness.worker", str(spec_path)], stdout=subprocess.PIPE,
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
            return _record_or_failure(spec, stdout, f"worker exited with code {proc.returncode}: {tail}"[:800])
        return _record_or_failure(spec, stdout, "worker exited 0 but wrote no record")


def kill_group(proc: subprocess.Popen, output: WorkerOutput) -> None:
    """SIGKILL the worker's whole process group (it leads its own session), reap it, keep what it printed."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(Interrupted):  # a second signal must not cut the clean-up short
        if not output.pump(time.monotonic() + 10):  # a grandchild that left the group still holds the pipes
            proc.kill()
            proc.wait()


def _worker_record_path(spec: dict, stdout: str) -> Path | None:
    """Where the worker wrote its record: the path on its last JSON line (a taken run_id made it pick a fresh
    one), else <run_id>.json if it exists (new_run_id made sure it did not before the worker started)."""
    for line in reversed((stdout or "").strip().splitlines()):
        with contextlib.suppress(ValueError):
            reported = json.loads(line)
            if isinstance(reported, dict) and isinstance(reported.get("record"), str):
                return Path(reported["record"])
    expected = Path(spec["out"]) / f"{spec['run_id']}.json"
    return expected if expected.exists() else None


def _record_or_failure(spec: dict, stdout: str, reason: str) -> dict:
    path = _worker_record_path(spec, stdout)
    if path is not None:
        try:
            return read_record(path)
        except RecordError as exc:
            reason = f"{reason}; its record is unreadable: {exc}"
    return read_record(write_record(failure_record(spec, reason), spec["out"]))


def fmt(value, spec: str, scale: float = 1.0) -> str:
    return "-" if value is None else format(value / scale, spec)


def progress_line(i: int, n: int, point: Point, record: dict, seconds: float) -> str:
    s = record.get("summary") or {}
    label = point_label(point)
    if record["status"] != "ok":
        return f"[{i}/{n}] {label:<24} {record['status']:<11} {record.get('reason') or ''} ({seconds:.0f} s)"
    mem = s.get("peak_allocated_bytes") or s.get("peak_rss_bytes")
    busy = " CONTENDED" if (record.get("contention") or {}).get("contended") else ""
    return (f"[{i}/{n}] {label:<24} ok          {fmt(s.get('step_ms_median'), '.1f')} ms/step  "
            f"{fmt(s.get('tokens_per_s'), ',.0f')} tok/s  peak {fmt(mem, ',.0f', 2**20)} MiB  "
            f"loss {fmt(s.get('final_loss'), '.3f')}  ({seconds:.0f} s){busy}")


def point_label(point: Point) -> str:
    return point.rung + (f" {point.sweep['field']}={point.sweep['value']}" if point.sweep else "") + (f" #{point.repeat}" if point.repeat else "")


def contention_warning(records: list[dict]) -> str | None:
    """One line for the end of a run when any of its runs was measured on a busy machine, with the numbers."""
    busy = [(r, contention.describe(r.get("contention"))) for r in records]
    busy = [(r, line) for r, line in busy if line]
    if not busy:
        return None
    return (f"warning: {len(busy)} of {len(records)} run(s) measured under contention, their times include other "
            f"work: " + "; ".join(f"{r['rung']} #{r.get('repeat')}: {line}" for r, line in busy))


def summary_table(records: list[dict]) -> str:
    rows = []
    for r in records:
        s = r.get("summary") or {}
        mem = s.get("peak_allocated_bytes") or s.get("peak_rss_bytes")
        label = r["rung"] + (f" {r['sweep']['field']}={r['sweep']['value']}" if r.get("sweep") else "")
        rows.append([
            label, r.get("repeat"), r["status"], fmt(s.get("step_ms_median"), ".2f"),
            fmt(s.get("step_ms_iqr"), ".2f"), fmt(s.get("tokens_per_s"), ",.0f"), fmt(mem, ",.0f", 2**20),
            fmt(s.get("first_step_ms"), ",.0f"), fmt(s.get("final_loss"), ".4f"),
        ])
    headers = ["rung", "rep", "status", "ms/step (median)", "IQR ms", "tokens/s", "peak MiB", "first step ms", "final loss"]
    return tabulate(rows, headers=headers, disable_numparse=True)


def run_points(args, plan_name: str, points: list[Point], records: list | None = None) -> list[dict]:
    """Run each point; append its record to `records` as it finishes (so an interrupted caller keeps them)."""
    records = [] if records is None else records
    for i, point in enumerate(points, 1):
        spec = {
            "run_id": new_run_id(args.env, plan_name, point, args.out), "env": args.env, "plan": plan_name,
            "rung": point.rung, "rung_index": point.rung_index, "repeat": point.repeat, "sweep": point.sweep,
            "workload": point.workload, "flags": point.flags, "out": str(args.out), "rerun": rerun_command(args, point),
            "threads": getattr(args, "threads", None),
        }
        started = time.monotonic()
        try:
            record = run_point(spec, args.timeout, Progress(f"[{i}/{len(points)}] {point_label(point)}"))
        except Interrupted as exc:
            if exc.finished:
                records.append(exc.finished)
            raise
        print(progress_line(i, len(points), point, record, time.monotonic() - started), flush=True)
        records.append(record)
    return records


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.run", description="Run a plan of the GPT workload; one record per rung in --out.")
    p.add_argument("--plan", default="seed-ladder", help=f"built-in plan ({', '.join(builtin_plans())}) or a .yaml path")
    p.add_argument("--preset", default="tiny", choices=sorted(PRESETS), help="model shape (default: tiny, trains in seconds on a CPU)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"directory for the records (default: {DEFAULT_OUT}/, "
                   "git-ignored, apart from the records shipped in results/)")
    p.add_argument("--env", default=os.environ.get("HARNESS_ENV", "local"), help="env name the records belong to (default: $HARNESS_ENV or local)")
    p.add_argument("--repeats", type=int, help="repeats per rung (default: the plan's, else 1)")
    p.add_argument("--rungs", help="comma-separated rung names to run (default: all)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override a workload field for every rung (repeatable)")
    p.add_argument("--flag", action="append", metavar="NAME=VALUE", help="override a frozen flag for every rung "
                   "(repeatable; wins over the plan's), e.g. inductor_shape_padding=off (harness/flags.py lists them)")
    p.add_argument("--sweep", metavar="FIELD=V1,V2,...", help="run every rung once per value of a workload field, "
                   "each point its own process and record (the value wins over the plan and --set; replaces the plan's sweeps)")
    p.add_argument("--sweep-name", dest="sweep_name", help="the name the points' records are tagged with (default: FIELD)")
    p.add_argument("--steps", type=int, help="steps per rung (shorthand for --set steps=N)")
    p.add_argument("--warmup-steps", dest="warmup_steps", type=int, help="warm-up steps excluded from the summary")
    p.add_argument("--batch-size", dest="batch_size", type=int, help="B (shorthand for --set batch_size=N)")
    p.add_argument("--seq-len", dest="seq_len", type=int, help="T (shorthand for --set seq_len=N)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], help="device (default: cuda if available, else cpu)")
    p.add_argument("--threads", type=int, help="torch threads in each worker (default: the CPUs this process may use)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help=f"seconds per worker before it is killed (default {DEFAULT_TIMEOUT_S})")
    return p


def finished_lines(records: list[dict], total: int, out) -> list[str]:
    """For an interrupted run: which runs finished, and where their records are."""
    return [f"finished before the stop: {len(records)} of {total} run(s)"] + [
        f"  {r['rung']}" + (f" {r['sweep']['field']}={r['sweep']['value']}" if r.get("sweep") else "")
        + f" #{r.get('repeat')}: {r['status']} -> {Path(out) / (r['run_id'] + '.json')}" for r in records]


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.repeats is not None and args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.sweep_name and not args.sweep:
        parser.error("--sweep-name needs --sweep")
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    records: list[dict] = []
    points: list[Point] = []
    with stop_on_signals():
        try:
            try:
                plan_name, points = check_run_args(args)
            except USAGE_ERRORS as exc:
                parser.error(str(exc))
            print(f"plan {plan_name}: {len(points)} run(s), env {args.env}, preset {args.preset} -> "
                  f"{Path(args.out).as_posix()}/", flush=True)
            chosen = selection_line(args, points)
            if chosen:
                print(chosen, flush=True)
            run_points(args, plan_name, points, records)
        except Interrupted as exc:
            print("\n".join(finished_lines(records, len(points), args.out)), flush=True)
            print(f"python -m harness.run: interrupted by {exc}: the running worker and its subprocesses were stopped; "
                  f"{len(records)} run(s) finished, their records are in {args.out}/", file=sys.stderr, flush=True)
            return exc.exit_code
    print()
    print(summary_table(records))
    warning = contention_warning(records)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    return 1 if any(r["status"] == "error" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
