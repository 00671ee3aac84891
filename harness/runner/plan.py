"""Plans are data: a YAML file of rungs, each a set of workload fields (and optional flag overrides).

  name, description
  cumulative: true       each rung starts from the previous rung's settings (a ladder)
  defaults: {...}        workload fields for every rung
  repeats: N             default 1
  rungs: [{name, set: {...}, flags: {...}, sweep: {...}}]
  sweep: {field: F, values: [v1, v2, ...], name: optional}
                         every rung (or one rung, under its own key) is run once per value, the value
                         applied last; each point is its own record, tagged with the sweep

A rung name "a+b+c" (in --rungs, a tune start, a gpu_check tier) is a stack: the changes rungs a, b and c of a
non-cumulative plan each make against the plan's defaults, applied together (Plan.stack). It needs no line in the
plan, so any combination of knobs can be measured and its name says exactly what it holds.

Built-in plans live in harness/plans/; a path to any .yaml file works too. No torch import here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from gpt.config import ConfigError, coerce
from harness.argtypes import MAX_REPEATS
from harness.console.yamlfile import YamlRefused, load_yaml, read_yaml_text
from harness.runner.flags import FlagError, FrozenFlags

PLAN_DIR = Path(__file__).resolve().parent.parent / "plans"  # harness/plans/
PLAN_KEYS = {"name", "description", "cumulative", "defaults", "repeats", "rungs", "sweep"}
RUNG_KEYS = {"name", "set", "flags", "sweep"}
SWEEP_KEYS = {"field", "values", "name"}
MAX_SWEEP_VALUES = 1_000  # values of one sweep
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # plan, rung and sweep names end up in record file names
STACK = "+"  # joins the rungs of a stack: "sdpa-cudnn+lm-head-cce" (never part of a rung's own name: NAME)


class PlanError(ValueError):
    pass


def _check_name(value, where: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise PlanError(f"{where}: {value!r}: expected a name of letters, digits, '.', '_' and '-'")
    return value


def _check_type(value, kind: type, where: str):
    """A plan key's value has the type the format says (a mapping, a list, true/false, ...)."""
    words = {dict: "a mapping", list: "a list", bool: "true or false", str: "a string", int: "an integer"}
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise PlanError(f"{where}: expected {words[kind]}, got {value!r}")
    return value


@dataclass
class Sweep:
    """One workload field run at several values: one point (one record) per value."""

    name: str  # tags every point's record (record["sweep"]["name"])
    field: str
    values: list


def make_sweep(field_name: str, values, name: str | None = None) -> Sweep:
    """A checked sweep: a known workload field, at least one value, values typed and distinct."""
    if not isinstance(values, (list, tuple)) or not values:
        raise ConfigError(f"sweep of {field_name!r}: expected a non-empty list of values")
    if len(values) > MAX_SWEEP_VALUES:
        raise ConfigError(f"sweep of {field_name}: {len(values):,} values; at most {MAX_SWEEP_VALUES:,}")
    if field_name == "preset":
        raise ConfigError("preset is a label, not a knob: sweep its fields (n_layer, n_embd, ...) or run each --preset")
    typed = [coerce(field_name, v.strip() if isinstance(v, str) else v) for v in values]  # as --set and plan fields
    repeated = sorted({str(v) for v in typed if typed.count(v) > 1})
    if repeated:
        raise ConfigError(f"sweep of {field_name}: value(s) {', '.join(repeated)} given twice")
    return Sweep(str(name or field_name), field_name, typed)


def _plan_sweep(raw, where: str) -> Sweep:
    if not isinstance(raw, dict) or "field" not in raw or "values" not in raw:
        raise PlanError(f"{where}: sweep: expected a mapping with field and values (and optionally name)")
    if set(raw) - SWEEP_KEYS:
        raise PlanError(f"{where}: sweep: unknown key(s) {', '.join(sorted(set(raw) - SWEEP_KEYS))}")
    _check_type(raw["field"], str, f"{where}: sweep: field")
    name = _check_name(raw["name"], f"{where}: sweep: name") if raw.get("name") is not None else None
    try:
        return make_sweep(raw["field"], raw["values"], name)
    except ConfigError as exc:
        raise PlanError(f"{where}: {exc}") from None


@dataclass
class Rung:
    name: str
    settings: dict  # workload fields, already merged with defaults (and earlier rungs if cumulative)
    flags: dict = field(default_factory=dict)
    sweep: Sweep | None = None  # the rung's own sweep, else the plan's; None: one point


@dataclass
class Plan:
    name: str
    description: str
    rungs: list[Rung]
    repeats: int = 1
    source: str = ""
    sweep: Sweep | None = None  # the plan-wide sweep, if any (already copied into rungs without their own)
    defaults: dict = field(default_factory=dict)  # the plan's `defaults` (already merged into every rung)
    cumulative: bool = False

    def check_rungs(self, names) -> None:
        """PlanError naming each of `names` that is not a rung (or a stack of rungs) of this plan, and the rungs it has."""
        missing = [name for name in dict.fromkeys(names)
                   if name not in {r.name for r in self.rungs} and STACK not in name]
        if missing:
            raise PlanError(f"no rung{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))} in plan {self.name}; "
                            f"it has {', '.join(r.name for r in self.rungs)}")
        for name in names:
            if STACK in name:
                self.stack(name)

    def rung(self, name: str) -> Rung:
        """The rung called `name`, or the stack it names (PlanError if there is none: check_rungs)."""
        return self.select([name])[0][1]

    def changes(self, rung: Rung) -> dict:
        """The workload fields `rung` sets to other values than the plan's defaults: what it changes."""
        return {k: v for k, v in rung.settings.items() if self.defaults.get(k) != v}

    def stack(self, name: str) -> tuple[int, Rung]:
        """The stack "a+b+c": its rungs' changes against the defaults and their flags, together. Named in the plan's
        order whatever the order given (one stack, one name); its index follows every rung's, so tables list it after
        the single knobs. PlanError where the plan is a ladder, a part is unknown, repeated or changes nothing, or two
        parts set one field or flag to different values."""
        parts = name.split(STACK)
        if self.cumulative:
            raise PlanError(f"--rungs {name!r}: plan {self.name} is a ladder (cumulative: each rung builds on the one "
                            "before), so its rungs do not stack; stack the rungs of a plan like beyond-ladder")
        if "" in parts or len(set(parts)) < len(parts):
            raise PlanError(f"--rungs {name!r}: a stack names two or more different rungs joined by '{STACK}'")
        self.check_rungs(parts)
        index = {r.name: i for i, r in enumerate(self.rungs)}
        parts.sort(key=index.__getitem__)
        settings, flags, set_by = dict(self.defaults), {}, {}
        for part in parts:
            rung = self.rungs[index[part]]
            changed = self.changes(rung)
            if not changed and not rung.flags:
                raise PlanError(f"--rungs {name!r}: rung {part} changes nothing against plan {self.name}'s defaults: "
                                "it is the base every stack starts from")
            for what, mine, so_far in (("", changed, settings), ("flag ", rung.flags, flags)):
                for k, value in mine.items():
                    if what + k in set_by and so_far.get(k) != value:
                        raise PlanError(f"--rungs {name!r}: {set_by[what + k]} and {part} both set {what}{k} "
                                        f"({so_far.get(k)} vs {value}): they do not stack")
                    set_by[what + k] = part
            settings.update(changed)
            flags.update(rung.flags)
        canonical = STACK.join(parts)
        return len(self.rungs) + index[parts[-1]], Rung(canonical, settings, flags, self.sweep)

    def select(self, names: list[str] | None = None) -> list[tuple[int, Rung]]:
        """(rung index, rung) of each name (a stack composed), in the plan's order, stacks after the rungs; every
        rung of the plan where names is None. PlanError as check_rungs and stack say."""
        if names is None:
            return list(enumerate(self.rungs))
        self.check_rungs(names)
        plain = [(i, r) for i, r in enumerate(self.rungs) if r.name in names]
        stacks = {s[1].name: s for s in (self.stack(n) for n in names if STACK in n)}  # two orders, one stack
        return plain + sorted(stacks.values(), key=lambda s: (s[0], s[1].name))


def builtin_plans() -> list[str]:
    return sorted(p.stem for p in PLAN_DIR.glob("*.yaml"))


def _typed(values, where: str) -> dict:
    _check_type(values, dict, where)
    try:
        return {k: coerce(k, v) for k, v in values.items()}
    except ConfigError as exc:
        raise PlanError(f"{where}: {exc}") from None


def load_plan(name_or_path: str) -> Plan:
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = PLAN_DIR / f"{name_or_path}.yaml"
    if not path.is_file():
        raise PlanError(f"no plan {name_or_path!r}: not a .yaml file, and not one of {', '.join(builtin_plans())}")
    try:
        data = load_yaml(read_yaml_text(path))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PlanError(f"{path}: not valid YAML: {exc}") from None
    except YamlRefused as exc:
        raise PlanError(f"{path}: refused: {exc}") from None
    if not isinstance(data, dict):
        raise PlanError(f"{path}: expected a mapping at the top")
    unknown = set(data) - PLAN_KEYS
    if unknown:
        raise PlanError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    if not data.get("rungs"):
        raise PlanError(f"{path}: no rungs")
    plan_name = _check_name(data.get("name", path.stem), f"{path}: name")
    description = _check_type(data.get("description", ""), str, f"{path}: description")
    cumulative = _check_type(data.get("cumulative", False), bool, f"{path}: cumulative")
    base = _typed(data.get("defaults") or {}, f"{path}: defaults")
    plan_sweep = _plan_sweep(data["sweep"], str(path)) if data.get("sweep") is not None else None
    rungs, names = [], set()
    for i, raw in enumerate(_check_type(data["rungs"], list, f"{path}: rungs")):
        if not isinstance(raw, dict) or "name" not in raw:
            raise PlanError(f"{path}: rung {i}: expected a mapping with a name")
        name = _check_name(raw["name"], f"{path}: rung {i}: name")
        if set(raw) - RUNG_KEYS:
            raise PlanError(f"{path}: rung {name}: unknown key(s) {', '.join(sorted(set(raw) - RUNG_KEYS))}")
        if name in names:
            raise PlanError(f"{path}: rung name {name!r} appears twice")
        names.add(name)
        start = rungs[-1].settings if cumulative and rungs else base
        settings = {**start, **_typed(raw.get("set") or {}, f"{path}: rung {name}: set")}
        flags = _check_type(raw.get("flags") or {}, dict, f"{path}: rung {name}: flags")  # not a record: a plan rung
        try:
            FrozenFlags.from_dict({**FrozenFlags().to_dict(), **flags})  # names and values checked now
        except (FlagError, TypeError) as exc:
            raise PlanError(f"{path}: rung {name}: {exc}") from None
        sweep = _plan_sweep(raw["sweep"], f"{path}: rung {name}") if raw.get("sweep") is not None else plan_sweep
        rungs.append(Rung(name, settings, dict(flags), sweep))
    repeats = data.get("repeats", 1)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        raise PlanError(f"{path}: repeats must be an integer from 1 to {MAX_REPEATS:,}")
    return Plan(plan_name, description, rungs, repeats, str(path), plan_sweep, base, cumulative)
