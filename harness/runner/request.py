"""What to measure: the typed request behind harness.run, batch_search and tune, and the points it expands to.

A `RunRequest` is made once at a command line's edge (`RunRequest.from_args`) or by a caller with
`dataclasses.replace`; `check_request` validates it in one place (before any worker starts),
`build_points` expands it into the measurements to make, and `rerun_command` writes the one command
that makes a point again (each record's rerun.command). The options the measuring commands share:
harness.cli.run_options. No torch import.
"""

from __future__ import annotations

import argparse
import math
import shlex
from dataclasses import dataclass, fields, replace

from gpt.config import ConfigError, coerce, make_config
from harness import argtypes
from harness.envs.spec import SpecError, check_env_name
from harness.record.io import check_writable
from harness.record.model import RecordError
from harness.runner.flags import FlagError, flags_for
from harness.runner.flags import parse_assignments as parse_flag_assignments
from harness.runner.plan import MAX_REPEATS, PlanError, Sweep, load_plan, make_sweep

DEFAULT_TIMEOUT_S = 1800
AUTO = argtypes.AUTO  # --repeats auto: runs of a rung are added until its interval is decided (harness.run)
AUTO_MAX_REPEATS = 10  # --max-repeats' default
AUTO_TARGET = 0.02  # --target's default: the rung's tokens/s known to within 2% (99% interval half-width)
MAX_POINTS = 10_000  # worker processes one command starts (rungs x sweep values x repeats)
DEFAULT_OUT = "results/runs"  # git-ignored: new runs never mix with the records shipped in results/<machine>/


class OptionError(ValueError):
    """An option a command line's parser refuses (harness.run.parse_request: argparse's message, one line)."""


USAGE_ERRORS = (OptionError, PlanError, ConfigError, FlagError, SpecError, RecordError)
SHORTHANDS = ("steps", "warmup_steps", "device", "batch_size", "seq_len", "model")  # options that stand for --set FIELD=N


@dataclass(frozen=True)
class RunRequest:
    """One `python -m harness.run` invocation, typed: which plan and rungs, what overrides, where the records go."""

    plan: str = "seed-ladder"
    preset: str = "tiny"
    out: str = DEFAULT_OUT
    env: str = "local"
    repeats: int | str | None = None  # None: the plan's; AUTO: until decided (max_repeats, target)
    rungs: str | None = None  # comma-separated rung names; None: every rung
    sets: tuple[str, ...] = ()  # FIELD=VALUE, as typed
    flags: tuple[str, ...] = ()  # NAME=VALUE, as typed
    sweep: str | None = None  # FIELD=V1,V2,...
    sweep_name: str | None = None
    steps: int | None = None
    warmup_steps: int | None = None
    batch_size: int | None = None
    seq_len: int | None = None
    device: str | None = None
    model: str | None = None  # ours, transformers or package.module:function (gpt/models.py)
    timeout: float = DEFAULT_TIMEOUT_S
    threads: int | None = None
    max_repeats: int | None = None  # --repeats auto: at most this many runs of a rung (default AUTO_MAX_REPEATS)
    target: float | None = None  # --repeats auto: the half-width to reach, a fraction (default AUTO_TARGET)

    @property
    def auto(self) -> bool:
        return self.repeats == AUTO

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunRequest:
        """The request a parsed command line stands for (a CLI that lacks an option gets its default)."""
        defaults = cls()
        given = {f.name: getattr(args, f.name, getattr(defaults, f.name)) for f in fields(cls) if f.name not in ("sets", "flags")}
        return cls(**given, sets=tuple(getattr(args, "set", None) or ()), flags=tuple(getattr(args, "flag", None) or ()))


@dataclass
class Point:
    """One measurement to make."""

    rung: str
    rung_index: int
    workload: dict
    flags: dict
    repeat: int
    sweep: dict | None = None


def parse_assignments(items, what: str = "--set") -> dict:
    values = {}
    for item in items or []:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"{what} {item!r}: expected FIELD=VALUE")
        values[name.strip()] = coerce(name.strip(), text.strip())
    return values


def parse_sweep(text: str, name: str | None = None) -> Sweep:
    """--sweep FIELD=V1,V2,... -> a checked Sweep (values typed like --set)."""
    field_name, sep, values = (text or "").partition("=")
    if not sep or not field_name.strip() or not values.strip():
        raise ConfigError(f"--sweep {text!r}: expected FIELD=V1,V2,...")
    if any(not v.strip() for v in values.split(",")):
        raise ConfigError(f"--sweep {text!r}: an empty value between commas")
    return make_sweep(field_name.strip(), values.split(","), name)


def build_points(request: RunRequest) -> tuple[str, list[Point]]:
    """The plan's name and every measurement the request makes: rung x sweep value x repeat."""
    plan = load_plan(request.plan)
    cli_sweep = parse_sweep(request.sweep, request.sweep_name) if request.sweep else None
    overrides = parse_assignments(request.sets)
    flag_overrides = parse_flag_assignments(list(request.flags))
    for name in SHORTHANDS:
        value = getattr(request, name)
        if value is not None:
            overrides[name] = value
    wanted = None
    if request.rungs is not None:
        wanted = [name.strip() for name in request.rungs.split(",")]
        if "" in wanted:
            raise PlanError(f"--rungs {request.rungs!r}: expected rung names separated by commas (omit --rungs for all)")
    repeats = 1 if request.auto else request.repeats or plan.repeats  # auto: harness.run adds the rest one by one
    chosen = plan.select(wanted)  # a stack "a+b" composed here (harness.runner.plan)
    count = sum(len((cli_sweep or r.sweep).values) if (cli_sweep or r.sweep) else 1 for _i, r in chosen) * repeats
    if count > MAX_POINTS:  # counted before any point is built
        raise ConfigError(f"{count:,} runs (rungs x sweep values x repeats): at most {MAX_POINTS:,} in one command")
    points = []
    for index, rung in chosen:
        sweep = cli_sweep or rung.sweep
        for value in sweep.values if sweep else [None]:
            swept = {sweep.field: value} if sweep else {}  # the sweep's value wins over the rung and --set
            workload = make_config(request.preset, **{**rung.settings, **overrides, **swept}).to_dict()  # the command line wins
            flags = flags_for(workload, {**rung.flags, **flag_overrides}).to_dict()  # --flag wins over the plan
            tag = {"name": sweep.name, "field": sweep.field, "value": value} if sweep else None
            points += [Point(rung.name, index, workload, flags, r, tag) for r in range(repeats)]
    return plan.name, points


def check_values(request: RunRequest) -> None:
    """The options that stand alone: --repeats, --threads, --sweep-name, --env, --timeout. Raises one of USAGE_ERRORS."""
    if request.auto:
        if request.max_repeats is not None and not 2 <= request.max_repeats <= MAX_REPEATS:
            raise ConfigError(f"--max-repeats {request.max_repeats}: must be from 2 to {MAX_REPEATS:,}")
    elif request.max_repeats is not None or request.target is not None:
        raise ConfigError(f"--{'max-repeats' if request.max_repeats is not None else 'target'} needs --repeats auto")
    elif request.repeats is not None and not 1 <= request.repeats <= MAX_REPEATS:
        raise ConfigError(f"--repeats {request.repeats}: must be from 1 to {MAX_REPEATS:,}")
    if request.sweep_name and not request.sweep:
        raise ConfigError("--sweep-name needs --sweep")
    if request.threads is not None and request.threads < 1:
        raise ConfigError("--threads must be at least 1")
    check_env_name(request.env)
    if not (math.isfinite(request.timeout) and request.timeout > 0):
        raise ConfigError(f"--timeout {request.timeout:g}: expected a number of seconds above 0")


def check_threads(threads: int | None) -> None:
    """--threads where the workers run: at most the CPUs this process may use (its affinity mask: a container's or
    taskset's cpuset). More threads than CPUs time-slice each other, so the run would time the scheduler, not the
    workload (10,000 threads on 2 CPUs: 9,674 ms/step). A cluster submit checks it on the node, not here."""
    from harness.provenance.envinfo import usable_cpus

    if threads is not None and threads > usable_cpus():
        raise ConfigError(f"--threads {threads}: at most the {usable_cpus()} CPU(s) this process may use (more threads "
                          "than CPUs time-slice each other: the run would time the scheduler)")


def check_request(request: RunRequest) -> tuple[str, list[Point]]:
    """Everything checkable before a worker starts, so bad input costs nothing and loses nothing: the options
    (check_values), the plan and every value in it, --rungs, and that --out takes a file. Raises one of USAGE_ERRORS."""
    check_values(request)
    check_threads(request.threads)
    plan_name, points = build_points(request)
    try:
        check_writable(request.out)
    except RecordError as exc:
        raise RecordError(f"--out {exc}") from None
    return plan_name, points


def override_args(request: RunRequest) -> list[str]:
    """The request's workload overrides as command-line options: --set, --flag, the shorthands and --threads, in
    that order (what a rerun command repeats after the plan, preset and rung)."""
    parts = []
    for item in request.sets:
        parts += ["--set", item]
    for item in request.flags:
        parts += ["--flag", item]
    for name in (*SHORTHANDS, "threads"):
        if getattr(request, name) is not None:
            parts += [f"--{name.replace('_', '-')}", str(getattr(request, name))]
    return parts


def rerun_command(request: RunRequest, point: Point) -> str:
    """The one command that makes this measurement again (same env, same CLI, just this rung)."""
    pinned = str(point.workload.get("model"))
    if "@" in pinned:  # a user's model, with the digest of the source it ran: a rerun on an edited file is refused
        request = replace(request, model=pinned)  # a shorthand, after any --set model=: it wins
    parts = ["--plan", request.plan, "--preset", request.preset, "--rungs", point.rung, "--repeats", "1", "--out", request.out,
             *override_args(request)]
    if point.sweep:  # just this point, under the same sweep name
        parts += ["--sweep", f"{point.sweep['field']}={point.sweep['value']}"]
        if point.sweep["name"] != point.sweep["field"]:
            parts += ["--sweep-name", point.sweep["name"]]
    if request.env == "local":
        return shlex.join(["python", "-m", "harness.run", "--env", "local", *parts])
    return shlex.join(["nox", "-s", f"bench-{request.env}", "--", *parts])


def selection_line(request: RunRequest, points: list[Point]) -> str | None:
    """What --rungs left out of the plan, said up front (the nox bench sessions choose the Quick start's rungs)."""
    if request.rungs is None:
        return None
    every = [r.name for r in load_plan(request.plan).rungs]
    chosen = list(dict.fromkeys(p.rung for p in points))  # the plan's order, stacks after (Plan.select)
    left = [name for name in every if name not in chosen]
    return (f"rungs: {', '.join(chosen)}" + (f" (left out: {', '.join(left)}; without --rungs every "
            f"rung of the plan runs)" if left else ""))
