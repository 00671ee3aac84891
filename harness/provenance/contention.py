"""How busy the machine was while a run was timed: other processes on its CPUs, steal, load, other GPU processes.

A benchmark on a shared machine measures the sharing too. The worker samples before the first timed step
and after the last (host side, outside the timed region: a /proc read and an NVML query), and the record
keeps the window: the CPU time that processes other than the worker spent on the worker's CPUs (its
affinity mask; /proc/stat minus the worker's own CPU time), the steal time the hypervisor reports there,
the load average, and on a GPU the other processes NVML lists on it. A run is `contended` when other work
took more of the CPUs than the worker's threads left free (by CONTENDED_SHARE of its threads' capacity),
when steal took STEAL_SHARE of the window, or when another process ran on its GPU.

Linux only (/proc); elsewhere the record says the window was not measured. No torch import here.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.provenance import nvml

CONTENDED_SHARE = 0.10  # other processes' CPU use beyond the free CPUs, as a share of the worker's threads
STEAL_SHARE = 0.05  # steal time as a share of the window's CPU time on the worker's CPUs
# /proc/stat per-CPU columns: user nice system idle iowait irq softirq steal guest guest_nice (guest is in user)
BUSY_COLUMNS = (0, 1, 2, 5, 6)
STEAL_COLUMN = 7


@dataclass
class Sample:
    at: float  # time.monotonic()
    busy_s: float | None  # CPU seconds busy on the worker's CPUs since boot (all processes)
    steal_s: float | None
    own_s: float  # this process's CPU seconds (all its threads)
    loadavg: list | None
    gpu_pids: dict = field(default_factory=dict)  # other processes on the GPU: pid -> used memory bytes or None


def cpu_times(cpus: set[int] | None = None, stat_text: str | None = None) -> tuple[float, float] | None:
    """(busy, steal) seconds summed over the given CPUs (default: this process's affinity), from /proc/stat."""
    if stat_text is None:
        try:
            stat_text = Path("/proc/stat").read_text()
        except OSError:
            return None
    if cpus is None:
        cpus = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    busy = steal = 0
    found = False
    for line in stat_text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        values = [int(v) for v in rest.split()]
        busy += sum(values[i] for i in BUSY_COLUMNS if i < len(values))
        steal += values[STEAL_COLUMN] if len(values) > STEAL_COLUMN else 0
        found = True
    return (busy / tick, steal / tick) if found else None


def sample(gpu_index: int | None = None) -> Sample:
    times = cpu_times()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        load = None
    return Sample(time.monotonic(), times[0] if times else None, times[1] if times else None, time.process_time(),
                  load, nvml.compute_processes(gpu_index))


def window(start: Sample, end: Sample, threads: int, usable: int, own_pid: int | None = None) -> dict:
    """The record's `contention` part for the timed window between two samples."""
    own_pid = os.getpid() if own_pid is None else own_pid
    wall = max(end.at - start.at, 1e-9)
    out = {"window": "timed steps", "wall_s": round(wall, 3), "threads": threads, "usable_cpus": usable,
           "loadavg_start": start.loadavg, "loadavg_end": end.loadavg}
    reasons = []
    if start.busy_s is not None and end.busy_s is not None:
        own = max(end.own_s - start.own_s, 0.0)
        others = max(end.busy_s - start.busy_s - own, 0.0)
        steal = max((end.steal_s or 0.0) - (start.steal_s or 0.0), 0.0)
        others_cores = others / wall
        spare = max(usable - threads, 0)
        competing = max(others_cores - spare, 0.0)
        out.update(own_cpu_s=round(own, 3), others_cpu_s=round(others, 3), others_busy_cpus=round(others_cores, 3),
                   steal_s=round(steal, 3), steal_share=round(steal / (wall * usable), 4))
        if competing >= CONTENDED_SHARE * threads:
            reasons.append(f"other processes kept {others_cores:.2f} of the {usable} usable CPU(s) busy "
                           f"({threads} thread(s) measuring)")
        if steal / (wall * usable) >= STEAL_SHARE:
            reasons.append(f"the hypervisor stole {steal / (wall * usable):.0%} of the CPU time")
    else:
        out["cpu"] = "not measured: /proc/stat unreadable"
    if start.gpu_pids or end.gpu_pids:
        pids = {**start.gpu_pids, **end.gpu_pids}
        others = {p: m for p, m in pids.items() if p != own_pid}
        note = None
        if len(others) == len(pids):  # our own pid is not among them: another pid namespace (a container)
            note = "this process's pid is not among NVML's (another pid namespace): one process is taken to be it"
            others = dict(sorted(others.items())[1:])
        out["gpu_other_processes"] = [{"pid": p, "used_memory_bytes": m} for p, m in sorted(others.items())]
        if note:
            out["gpu_note"] = note
        if others:
            reasons.append(f"{len(others)} other process(es) on the GPU")
    if start.loadavg and end.loadavg:
        load = max(start.loadavg[0], end.loadavg[0])
        out["loadavg_1min_max"] = load
    out["contended"] = bool(reasons)
    out["reason"] = "; ".join(reasons) or None
    return out


def describe(contention: dict | None) -> str | None:
    """One line with the numbers for a contended record, else None."""
    if not isinstance(contention, dict) or not contention.get("contended"):
        return None
    load = contention.get("loadavg_end")
    extra = f", load {load[0]:.2f}" if load else ""
    return f"{contention.get('reason')}{extra}, over {contention.get('wall_s', 0):.1f} s of timed steps"
