"""The matrix: its cells (one env on one GPU type), what each cell must record, and its manifest.

The manifest (RESULTS/.cluster/<matrix>/manifest.yaml) is the one place that says what was asked:
the cells in array-index order, the harness.run arguments, the expected points (rung, repeat, sweep
point, with the hashes of their workload and flags) and every submission (job id, array indices,
script). status, collect and resubmit read it and guess nothing. It is YAML, not JSON, so that
`harness.compare RESULTS/` never mistakes it for a record.

A cell's point is done when a record in the cell's folder has the same env, plan, rung, repeat and sweep point,
is the same measurement (harness.record.model.measurement_key: the workload and flags hashes every table compares
by) and ran as long (steps, warm-up and profiled steps, which the hashes leave out), and a status other than
`error` (`unsupported` and `oom` are results; `error` is a worker that died, so the point is run again).
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import yaml

from harness.console.textsafe import ScriptValueError, script_command, script_line
from harness.console.yamlfile import YamlRefused, load_yaml, read_yaml_text
from harness.envs.spec import spec_names
from harness.record.files import write_atomic
from harness.record.io import iter_records
from harness.record.model import canonical_hash, measurement_key
from harness.record.view import RecordView
from harness.run import parse_request
from harness.runner.request import USAGE_ERRORS, OptionError, build_points, check_values

CONFIG_PATH = Path(__file__).with_name("cluster.yaml")
MANIFEST_DIR = ".cluster"
MANIFEST_NAME = "manifest.yaml"
REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_CHOICES = {("slurm", "gpu_select"): ("gres", "constraint"), ("slurm", "runner"): ("nox", "container")}


class ClusterError(ValueError):
    """Bad input (exit 2, one line)."""


def load_config(path: str | os.PathLike | None = None) -> dict:
    """The default cluster.yaml, with the keys of `path` (if given) replacing those of each section."""
    config = yaml.safe_load(CONFIG_PATH.read_text())
    if path is None:
        return config
    try:
        user = load_yaml(read_yaml_text(path))
    except OSError as exc:
        raise ClusterError(f"--cluster-config {path}: {exc.strerror}") from None
    except YamlRefused as exc:
        raise ClusterError(f"--cluster-config {path}: refused: {exc}") from None
    except yaml.YAMLError as exc:
        raise ClusterError(f"--cluster-config {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(user, dict) or set(user) - set(config):
        raise ClusterError(f"--cluster-config {path}: expected a mapping with sections {', '.join(config)}")
    for section, values in user.items():
        if not isinstance(values, dict):
            raise ClusterError(f"--cluster-config {path}: {section}: expected a mapping")
        unknown = set(values) - set(config[section])
        if unknown:
            raise ClusterError(f"--cluster-config {path}: {section}: unknown key(s) {', '.join(sorted(unknown))}; "
                               f"known: {', '.join(config[section])}")
        for key, value in values.items():
            default = config[section][key]
            if isinstance(default, (dict, list)) and not isinstance(value, type(default)):
                raise ClusterError(f"--cluster-config {path}: {section}.{key}: expected a {type(default).__name__}")
            if value not in CONFIG_CHOICES.get((section, key), (value,)):
                raise ClusterError(f"--cluster-config {path}: {section}.{key}: {value!r} is not one of "
                                   f"{', '.join(CONFIG_CHOICES[section, key])}")
        config[section].update(values)
    for key, value in config["slurm"].items():  # each goes into an sbatch script: one line, or refused now
        items = value if isinstance(value, list) else [*value, *value.values()] if isinstance(value, dict) else [value]
        for item in items:  # gpu_types' names and values too
            try:
                script_line(item, f"--cluster-config {path}: slurm.{key}")
                if key == "nox" and item is not None:  # a command, not shell: one command, its words quoted
                    script_command(item, f"--cluster-config {path}: slurm.nox")
            except ScriptValueError as exc:
                raise ClusterError(str(exc)) from None
    return config


def parse_names(text: str, what: str, noun: str, known: list[str], where: str) -> list[str]:
    """--envs / --gpus: comma-separated, known, no repeats, not empty."""
    names = [n.strip() for n in (text or "").split(",") if n.strip()]
    if not names:
        raise ClusterError(f"--{what}: empty; name at least one of {', '.join(known)}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ClusterError(f"--{what}: unknown {noun} {', '.join(unknown)}; {where} knows {', '.join(known) or 'none'}")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ClusterError(f"--{what}: {', '.join(repeated)} given twice")
    return names


@dataclass(frozen=True)
class Cell:
    index: int  # the Slurm array index
    env: str
    gpu: str

    @property
    def name(self) -> str:
        return f"{self.env}/{self.gpu}"


RUN_LENGTH = ("steps", "warmup_steps", "profile_steps")  # how long a point runs: not in the hashes, asked all the same


def run_length(workload: dict) -> dict:
    return {k: workload.get(k) for k in RUN_LENGTH}


def _point_key(rung, repeat, sweep, workload_hash: str, flags_hash: str, length: dict) -> str:
    return json.dumps([rung, repeat, sweep, workload_hash, flags_hash, length], sort_keys=True)


def _manifest_point(p) -> dict:
    """One expected point as the manifest keeps it: its identity, the one measurement key and its run length."""
    workload_hash, flags_hash = measurement_key(p.workload, p.flags)
    return {"rung": p.rung, "repeat": p.repeat, "sweep": p.sweep, "workload_hash": workload_hash,
            "flags_hash": flags_hash, "run_length": run_length(p.workload)}


def expected_points(run_args: list[str]) -> tuple[str, list[dict]]:
    """The plan's name and the points one cell must record, exactly as harness.run will build them."""
    if any(a.split("=")[0] in ("--out", "--env") for a in run_args):
        raise ClusterError("harness.run options: --out and --env are set per cell by harness.cluster; leave them out")
    try:
        request = parse_request(run_args)
        check_values(request)
        plan_name, points = build_points(request)
    except OptionError as exc:
        raise ClusterError(f"harness.run options: {exc}") from None
    except USAGE_ERRORS as exc:
        raise ClusterError(str(exc)) from None
    if not points:
        raise ClusterError(f"plan {plan_name}: no points to run")
    return plan_name, [_manifest_point(p) for p in points]


def absolute_run_args(run_args: list[str]) -> list[str]:
    """A --plan that is a file becomes an absolute path: the tasks run from the checkout, not from here."""
    out = list(run_args)
    for i, a in enumerate(out):
        if a == "--plan" and i + 1 < len(out) and Path(out[i + 1]).suffix in (".yaml", ".yml") and Path(out[i + 1]).is_file():
            out[i + 1] = str(Path(out[i + 1]).resolve())
    return out


def with_rungs(run_args: list[str], rungs: list[str]) -> list[str]:
    """run_args with --rungs replaced by exactly these rungs."""
    out, skip = [], False
    for a in run_args:
        if skip:
            skip = False
        elif a == "--rungs":
            skip = True
        elif not a.startswith("--rungs="):
            out.append(a)
    return out + ["--rungs", ",".join(rungs)]


@dataclass
class CellProgress:
    """What a cell's folder holds for this matrix."""

    done: int  # expected points with a usable record
    expected: int
    missing: list[dict]  # the expected points without one
    errors: int  # `error` records (the worker died) for this matrix's points
    devices: list[str]  # where the records say they ran

    @property
    def complete(self) -> bool:
        return not self.missing

    def missing_rungs(self) -> list[str]:
        return list(dict.fromkeys(p["rung"] for p in self.missing))

    def missing_text(self) -> str:
        def label(p):
            sweep = f" {p['sweep']['field']}={p['sweep']['value']}" if p.get("sweep") else ""
            return f"{p['rung']}{sweep} #{p['repeat']}"
        return ", ".join(label(p) for p in self.missing)


@dataclass
class Matrix:
    id: str
    plan: str
    results: str  # absolute
    repo: str  # the checkout the tasks run from
    run_args: list[str]  # harness.run arguments, without --out/--env
    cells: list[Cell]
    points: list[dict]
    config: dict  # the cluster config it was submitted with
    created: str = ""
    submissions: list[dict] = field(default_factory=list)

    @property
    def dir(self) -> Path:
        return Path(self.results) / MANIFEST_DIR / self.id

    @property
    def path(self) -> Path:
        return self.dir / MANIFEST_NAME

    def cell_dir(self, cell: Cell) -> Path:
        return Path(self.results) / cell.env / cell.gpu

    def cell(self, name: str) -> Cell:
        for c in self.cells:
            if c.name == name:
                return c
        raise ClusterError(f"--cells: no cell {name} in matrix {self.id}; it has {', '.join(c.name for c in self.cells)}")

    def progress(self, cell: Cell) -> CellProgress:
        wanted = {_point_key(p["rung"], p["repeat"], p["sweep"], p["workload_hash"], p["flags_hash"], p["run_length"]): p
                  for p in self.points}
        done, errors, devices = set(), 0, []
        folder = self.cell_dir(cell)
        for _path, raw in iter_records([folder], warn=lambda line: None) if folder.is_dir() else ():
            r = RecordView(raw)
            if r.env != cell.env or r.plan != self.plan:
                continue
            sweep = r.sweep.to_dict() if r.sweep else None
            key = _point_key(r.rung, r.repeat, sweep, *r.set_key, run_length(r.workload.to_dict()))
            if key not in wanted:
                continue
            if r.status == "error":
                errors += 1
                continue
            done.add(key)
            device = r.device_label
            if device not in devices:
                devices.append(device)
        missing = [p for k, p in wanted.items() if k not in done]
        return CellProgress(len(wanted) - len(missing), len(wanted), missing, errors, devices)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["cells"] = [asdict(c) for c in self.cells]
        return data

    def save(self) -> None:
        """Atomically (a crash never leaves half a manifest)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, yaml.safe_dump(self.to_dict(), sort_keys=False, width=200))

    @classmethod
    def load(cls, path: Path) -> Matrix:
        try:
            data = yaml.safe_load(Path(path).read_text())
            data["cells"] = [Cell(**c) for c in data["cells"]]
            matrix = cls(**data)
        except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
            raise ClusterError(f"{path}: not a harness.cluster manifest ({exc})") from None
        if any(not isinstance(p, dict) or "run_length" not in p for p in matrix.points):
            # Written before the one measurement key (its hashes were of the whole workload and flags): the points
            # are made again from the harness.run arguments it kept, as new_matrix made them.
            matrix.points = expected_points(matrix.run_args)[1]
        return matrix


def new_matrix(envs_text: str, gpus_text: str, gpu_table: dict, config_name: str, run_args: list[str],
               results: str | os.PathLike, config: dict) -> Matrix:
    """Check every input and build the matrix (nothing written)."""
    env_names = parse_names(envs_text, "envs", "env", spec_names(), "envs/")
    gpus = parse_names(gpus_text, "gpus", "GPU type", list(gpu_table), config_name)
    run_args = absolute_run_args(run_args)
    plan, points = expected_points(run_args)
    cells = [Cell(i, e, g) for i, (e, g) in enumerate((e, g) for e in env_names for g in gpus)]
    identity = canonical_hash([[c.env, c.gpu] for c in cells] + [run_args])[:8]
    # `nox: null` becomes this interpreter's nox, kept in the manifest's config: a later resubmit, from
    # whatever interpreter, renders the same command.
    config = copy.deepcopy(config)
    config["slurm"]["nox"] = config["slurm"]["nox"] or shlex.join([sys.executable, "-m", "nox"])
    results = str(Path(results).resolve())
    return Matrix(id=f"{plan}-{identity}", plan=plan, results=results, repo=str(REPO_ROOT), run_args=run_args,
                  cells=cells, points=points, config=config,
                  created=datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))


def find_matrix(results: str | os.PathLike, matrix_id: str | None = None) -> Matrix:
    """The manifest under RESULTS/.cluster/: the one named, or the only one there."""
    base = Path(results) / MANIFEST_DIR
    found = sorted(p.parent.name for p in base.glob(f"*/{MANIFEST_NAME}"))
    if matrix_id:
        if matrix_id not in found:
            raise ClusterError(f"--matrix {matrix_id}: no {base / matrix_id / MANIFEST_NAME}"
                               + (f"; there: {', '.join(found)}" if found else ""))
        return Matrix.load(base / matrix_id / MANIFEST_NAME)
    if not found:
        raise ClusterError(f"no matrix under {base}/ (submit one first, or pass --results DIR)")
    if len(found) > 1:
        raise ClusterError(f"{len(found)} matrices under {base}/: name one with --matrix ({', '.join(found)})")
    return Matrix.load(base / found[0] / MANIFEST_NAME)
