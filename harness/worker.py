"""One measurement in its own process: `python -m harness.worker SPEC.json`.

The launcher (harness.runner.launcher) starts it through harness.lifeline, which ties it to the runner first. SPEC.json
is a harness.runner.worker_spec.WorkerSpec: the workload, the flags, the env name and where the record goes. Order
matters: flags are frozen before the model is built and compiled; the timed steps run with nothing else in
the loop; evidence (profiling, ...) is gathered only after them.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime, timezone

import torch

from gpt import torch_compat
from gpt.config import ConfigError, WorkloadConfig, timed_part
from gpt.data import DataError
from gpt.train import build, resolve_device
from harness import lifeline
from harness.evidence import calibration as gemm_calibration
from harness.evidence import guarded
from harness.evidence.capture import capture
from harness.evidence.mfu import summary_mfu
from harness.evidence.power import THROTTLING, PowerSampler
from harness.provenance import contention, envinfo, nvml
from harness.record.io import write_record
from harness.record.sections import Contention, Environment, Explain, Flags, Steps, Summary
from harness.runner import flags as flagmod
from harness.runner.worker_spec import WorkerSpec, WorkerSpecError


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class StepTimer:
    """Per-step times. CUDA: an event pair per step, read after one sync at the end (no sync inside the
    loop, so the host never stalls the GPU). CPU: perf_counter, the work being synchronous."""

    def __init__(self, device: torch.device, steps: int):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
        self.wall = [[0.0, 0.0] for _ in range(steps)]

    def start(self, i: int):
        if self.cuda:
            self.events[i][0].record()
        else:
            self.wall[i][0] = time.perf_counter()

    def stop(self, i: int):
        if self.cuda:
            self.events[i][1].record()
        else:
            self.wall[i][1] = time.perf_counter()

    def elapsed_ms(self) -> list[float]:
        if self.cuda:
            torch.cuda.synchronize()
            return [a.elapsed_time(b) for a, b in self.events]
        return [(b - a) * 1000.0 for a, b in self.wall]


def summarize(config: WorkloadConfig, ms: list[float], losses: list) -> dict:
    timed = timed_part(ms, config.warmup_steps)
    q1, median, q3 = statistics.quantiles(timed, n=4, method="inclusive") if len(timed) > 1 else (timed[0],) * 3
    timed_losses = [x for x in timed_part(losses, config.warmup_steps) if x is not None]
    return {
        "step_ms_median": median,
        "step_ms_q1": q1,
        "step_ms_q3": q3,
        "step_ms_iqr": q3 - q1,
        "step_ms_mean": statistics.fmean(timed),
        "first_step_ms": ms[0],
        "timed_steps": len(timed),
        "tokens_per_step": config.tokens_per_step,
        "tokens_per_s": config.tokens_per_step / (median / 1000.0),
        "final_loss": losses[-1],
        "mean_loss": statistics.fmean(timed_losses) if timed_losses else None,
    }


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def emit_progress(event: str, **fields) -> None:
    """One JSON line on stdout, as it happens, for harness.run to relay (the record's path is the last line)."""
    print(json.dumps({"progress": event, **fields}), flush=True)


def set_threads(requested: int | None) -> dict:
    """torch's intra-op thread count, set on purpose before anything runs: `requested` (--threads), else the
    CPUs this process may use. What torch would have picked is kept beside it."""
    default = torch.get_num_threads()
    usable = envinfo.usable_cpus()
    torch.set_num_threads(requested or usable)
    return {"torch": torch.get_num_threads(), "interop": torch.get_num_interop_threads(), "torch_default": default,
            "chosen": f"--threads {requested}" if requested else f"default: the usable CPUs ({usable})"}


def _prepare(spec: WorkerSpec, record: dict, progress) -> tuple[WorkloadConfig, torch.device]:
    """The environment and flags sections, before anything is built: the workload checked, torch's threads set,
    the environment captured, the flags applied and read back (so compile sees them), the notes they call for."""
    config = WorkloadConfig(**spec.workload).validate()
    flags = flagmod.FrozenFlags.from_dict(spec.flags)
    device = resolve_device(config.device)
    threads = set_threads(spec.threads)
    record["environment"] = Environment.named({**envinfo.capture(spec.env, device), "threads": threads}).to_json()
    progress("started", torch=torch.__version__, device=device.type, threads=threads["torch"])
    applied = flagmod.apply(flags)  # before the model exists, so compile sees them
    record["flags"] = Flags.of(record["flags"]).but(applied=applied).to_json()
    overrides = applied.get("tf32_env_overrides")
    if overrides:
        record["notes"].append(f"{', '.join(f'{k}={v}' for k, v in overrides.items())} set: CUDA math libraries "
                               "decide TF32 from it, whatever matmul_precision says")
    if device.type == "cpu" and config.precision == "tf32":
        record["notes"].append("tf32 changes GPU matmuls only; on cpu this rung computes in fp32")
    if config.memory_budget_gib and device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, config.memory_budget_gib * 2**30 / total), device)
    return config, device


@dataclass
class Loop:
    """What the timed loop leaves: per-step losses and grad norms, every flag change it saw, the flags read back
    after the last step, and the machine's load sampled when the timed steps began."""

    losses: list = field(default_factory=list)
    norms: list = field(default_factory=list)
    flag_changes: list = field(default_factory=list)
    flags_now: dict = field(default_factory=dict)
    busy_before: dict | None = None


def timed_steps(trainer, config: WorkloadConfig, timer: StepTimer, gpu_index, flags_now: dict, progress,
                step_hook=None) -> Loop:
    """The timed loop: one trainer step between the timer's marks, nothing else inside them. Outside them, after
    each step: progress, the test hook, and every flag read back (attribute reads, tens of microseconds, no sync),
    so a flag flipped and restored mid-run is caught, not just the end state."""
    loop = Loop(flags_now=flags_now)
    first_started = time.perf_counter()
    for i in range(config.steps):
        if i == config.warmup_steps:  # how busy the machine is, over the timed steps only
            loop.busy_before = contention.sample(gpu_index)
        timer.start(i)
        loss, norm = trainer.step()
        timer.stop(i)
        loop.losses.append(loss)
        loop.norms.append(norm)
        # CPU steps are timed already (host clock); a CUDA step's time is known only after the final sync, so only
        # its count is told (the first step's host time: the compile).
        progress("step", step=i + 1, steps=config.steps,
                 ms=(timer.wall[i][1] - timer.wall[i][0]) * 1000 if not timer.cuda else None,
                 first_step_s=time.perf_counter() - first_started if i == 0 else None)
        if step_hook:
            step_hook(i)
        read = flagmod.read_back()
        if read != loop.flags_now:
            loop.flag_changes.append(f"after step {i}: {flagmod.changed(loop.flags_now, read)}")
            loop.flags_now = read
    return loop


def _fill_contention(record: dict, loop: Loop, busy_after: dict) -> None:
    """The contention section: how busy the machine was over the timed steps (null: never sampled)."""
    if loop.busy_before is None:
        return
    threads = Environment.of(record["environment"]).threads.torch
    window = Contention.named(contention.window(loop.busy_before, busy_after, threads, envinfo.usable_cpus()))
    record["contention"] = window.to_json()
    line = contention.describe(record["contention"])
    if line:
        record["notes"].append(f"measured under contention: {line}")


def _fill_steps_and_summary(record: dict, config: WorkloadConfig, device: torch.device, ms: list, loop: Loop) -> None:
    """The steps and summary sections: every step's time, loss and grad norm; the summary and the peak memory."""
    steps = Steps(ms=ms, loss=[float(x) for x in loop.losses],
                  grad_norm=[float(n) if n is not None else None for n in loop.norms])
    memory = {}
    if device.type == "cuda":
        memory = {"peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
                  "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
                  "device_used_bytes": envinfo.device_used_bytes(device)}
    summary = Summary.named({**summarize(config, ms, steps.loss), "peak_rss_bytes": peak_rss_bytes(), **memory})
    record["steps"], record["summary"] = steps.to_json(), summary.to_json()


def _judge(record: dict, config: WorkloadConfig, device: torch.device, loop: Loop) -> None:
    """The flags read back after the run, and the status: invalid if a flag changed at any step, oom if a CPU run
    went past its memory budget, else ok."""
    record["flags"] = Flags.of(record["flags"]).but(after=loop.flags_now, changes=loop.flag_changes).to_json()
    record["status"], record["reason"] = "ok", None
    if loop.flag_changes:
        more = f" (and {len(loop.flag_changes) - 2} more changes)" if len(loop.flag_changes) > 2 else ""
        record["status"] = "invalid"
        record["reason"] = f"flags changed during the run: {'; '.join(loop.flag_changes[:2])}{more}"
    elif config.memory_budget_gib and device.type == "cpu":
        peak = record["summary"]["peak_rss_bytes"]
        if peak > config.memory_budget_gib * 2**30:
            record["status"] = "oom"
            record["reason"] = (f"peak RSS {peak / 2**30:.2f} GiB exceeded the memory budget "
                                f"{config.memory_budget_gib} GiB")


def _fill_explain(record: dict, trainer, config: WorkloadConfig, ms: list, sampler, calibration, run_dtype) -> None:
    """The explain section (harness/evidence/), after the timed steps: each part fails on its own, never the run."""
    explain = Explain.named(capture(trainer, config, record["summary"], timed_part(ms, config.warmup_steps), sampler,
                                    calibration, run_dtype))
    summary = Summary.of(record["summary"]).but(mfu=summary_mfu(explain.mfu.to_json()))
    record["explain"], record["summary"] = explain.to_json(), summary.to_json()
    power = explain.power
    if power.throttled:
        throttles = [r for r in power.throttle_reasons or [] if r in THROTTLING]
        deficit = power.clock_deficit
        record["notes"].append(f"GPU clocks were throttled during the timed steps: {', '.join(throttles)} "
                               f"(SM clock mean {power.sm_clock_mhz_mean or 0:.0f}, min "
                               f"{power.sm_clock_mhz_min} of max {power.sm_clock_mhz_max} MHz"
                               + (f", {deficit:.1%} below it)" if deficit is not None else ")"))


def _fill_failure(record: dict, exc: Exception) -> None:
    """A failed run is a result too: its status and one-line reason (a traceback's tail for an unexpected error)."""
    if isinstance(exc, torch_compat.Unsupported):
        record["status"], record["reason"] = "unsupported", str(exc)
    elif isinstance(exc, (torch_compat.OutOfMemoryError, MemoryError)):
        record["status"], record["reason"] = "oom", str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    elif isinstance(exc, (ConfigError, DataError, flagmod.FlagError, torch_compat.ToolMissing)):
        record["status"], record["reason"] = "error", str(exc)
    elif "out of memory" in str(exc).lower():
        record["status"], record["reason"] = "oom", str(exc).splitlines()[0]
    else:
        tb = traceback.format_exception(exc)
        lines = "".join(tb).strip().splitlines()
        record["status"], record["reason"] = "error", f"{type(exc).__name__}: {exc}".splitlines()[0][:500]
        record["notes"].append("traceback tail: " + " | ".join(lines[-6:]))


def measure(spec: WorkerSpec, step_hook=None, progress=None) -> dict:
    """Run one measurement and return its record (never raises for a failed run: the status says it), filled
    section by section: environment and flags, the timed steps, contention, steps and summary, status, explain.

    step_hook(i) is called after step i, outside the timed region (tests use it to tamper with flags).
    progress(event, **fields), if given, hears what is happening as it happens (main() prints it for the
    runner): started, calibrating, building, compiling (or first step), each step (with its ms on CPU), profiling.
    Called outside the timed region."""
    progress = progress or (lambda event, **fields: None)
    record = spec.new_record(started_at=now())
    sampler = None
    try:
        config, device = _prepare(spec, record, progress)
        # Measured GEMM peak for MFU: short, before the model exists, with the run's flags already applied.
        applied = Flags.of(record["flags"]).applied
        run_dtype = gemm_calibration.gemm_dtype(config.precision, applied.get("matmul_precision"), device.type)
        progress("calibrating")
        calibration = guarded(gemm_calibration.calibrate_gemm_peak, device, run_dtype)
        progress("building")
        trainer = build(config)
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        timer = StepTimer(device, config.steps)
        sampler = PowerSampler(device).start()  # NVML in its own thread; nothing is added to the loop
        gpu_index = nvml.torch_device_index(device) if device.type == "cuda" else None
        progress("compiling" if config.compile != "off" else "first step", steps=config.steps)
        loop = timed_steps(trainer, config, timer, gpu_index, applied, progress, step_hook)
        ms = timer.elapsed_ms()  # syncs once
        busy_after = contention.sample(gpu_index)
        sampler.stop()
        _fill_contention(record, loop, busy_after)
        _fill_steps_and_summary(record, config, device, ms, loop)
        _judge(record, config, device, loop)
        progress("profiling", steps=config.profile_steps)
        _fill_explain(record, trainer, config, ms, sampler, calibration, run_dtype)
    except Exception as exc:  # noqa: BLE001 -- any failure is a result too; the plan goes on
        _fill_failure(record, exc)
    if sampler is not None:
        sampler.stop()  # a failed loop must not leave the sampling thread running
    if not Summary.of(record["summary"]):
        record["summary"] = Summary.named({"peak_rss_bytes": peak_rss_bytes()}).to_json()
    record["finished_at"] = now()
    return record


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m harness.worker SPEC.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0]) as f:
            spec = WorkerSpec.from_json(f.read())
    except (OSError, WorkerSpecError) as exc:
        print(f"python -m harness.worker: {argv[0]}: {exc}", file=sys.stderr)
        return 2
    runner_pid = lifeline.runner_pid()  # the launcher started this process through harness.lifeline, tied to it
    record = measure(spec, progress=emit_progress)
    if runner_pid is not None and os.getppid() != runner_pid:
        return 1  # the runner is gone (a platform without PR_SET_PDEATHSIG): nobody asked for this record any more
    try:
        path = write_record(record, spec.out)
    except OSError as exc:  # a full disk: one line (the launcher's reason for the run), no traceback, nothing left
        print(f"harness.worker: cannot write its record to {spec.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(json.dumps({"record": str(path), "status": record["status"], "reason": record["reason"]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
