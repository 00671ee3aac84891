"""Measuring one candidate for real: reuse its records already in the bisect's folder, else write its spec, install
it with harness.envs' install code (uv's cache makes a reinstall cheap), check it with `python -m harness.envs check`,
and run the rung in the harness's own worker processes (harness.runner.launcher, under the candidate's interpreter).

Layout of the bisect's output folder (--out):
  envs/<name>/env.yaml    each candidate's spec (what it is installed from and with)
  records/                every record (tagged with its env and, inside, the torch version it ran): reused by the
                          next bisect or landscape of the same rung and workload on the same machine
  logs/<name>.log         each install's output
  bisect.json             what the search found so far (rewritten after every point)

No torch import in this process.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from harness.bisect.candidates import Candidate, candidate_spec, spec_yaml
from harness.bisect.search import CandidateFailed
from harness.envs.install import find_uv, install
from harness.envs.spec import ENVS_DIR_VAR, ROOT, EnvSpec
from harness.provenance import envinfo
from harness.record.files import write_atomic
from harness.record.io import iter_records, write_record
from harness.record.model import measurement_key, public_version
from harness.record.view import RecordView
from harness.runner.launcher import failure_record, invocation_id, new_run_id, run_points
from harness.runner.request import RunRequest, check_request, override_args
from harness.runner.worker_spec import WorkerSpec

# what `--free-disk` removes from uv's cache after a candidate: the multi-GB parts of a torch build
HEAVY_PACKAGES = ("torch", "triton", "pytorch-triton")
CLEAN_TIMEOUT_S = 120


class Measurer:
    """measure(candidate) -> its ok records for the request's one rung, `repeats` of them (reused or new)."""

    def __init__(self, request: RunRequest, out: Path, python: str, venvs: Path, repeats: int,
                 find_links: Path | None = None, remove_venvs: bool = False, free_disk: bool = False,
                 say=print, reuse: bool = True, include_contended: bool = False, keep: int = 0):
        self.request, self.out, self.python, self.venvs = request, Path(out), python, Path(venvs)
        # --remove-venvs with --repeats auto: the search grows the two sides of an undecided comparison a run at a
        # time, alternately; the newest `keep` venvs stay until a newer one is installed (or close()), so those runs
        # do not each install their build again
        self.keep, self.kept = keep, []
        self.repeats, self.find_links, self.remove_venvs, self.free_disk = repeats, find_links, remove_venvs, free_disk
        self.say, self.reuse, self.include_contended = say, reuse, include_contended
        self.plan_name, points = check_request(dataclasses.replace(request, repeats=1))
        if len(points) != 1:
            raise ValueError(f"a bisect measures one rung; the request makes {len(points)} points")
        self.point = points[0]
        self.key = measurement_key(self.point.workload, self.point.flags)
        self.machine = envinfo.machine_id()
        self.threads = request.threads or envinfo.usable_cpus()  # part of where it ran (the device label), not the workload
        self.new_runs = 0

    @property
    def records_dir(self) -> Path:
        return Path(self.request.out)

    def reusable(self, c: Candidate) -> list[dict]:
        """Ok records in the folder of this rung and workload, made with this torch on this machine, on as many
        threads, and not timed under contention (a contended run counts nowhere, as in harness.compare, unless
        --include-contended)."""
        out = []
        if not self.reuse or not self.records_dir.is_dir():
            return out
        for _path, rec in iter_records([self.records_dir], warn=lambda line: None):
            v = RecordView(rec)
            if (v.ok and v.rung == self.point.rung and v.set_key == self.key
                    and public_version(v.torch_version or "") == c.version
                    and (v.environment.machine.to_json() if v.environment.machine else None) == (self.machine or None)
                    and v.torch_threads == self.threads
                    and (self.include_contended or not v.contended)):
                out.append(rec)
        return sorted(out, key=lambda r: RecordView(r).get("started_at") or "")

    def __call__(self, c: Candidate, at_least: int | None = None) -> list[dict]:
        """Its records, `repeats` of them, or at_least (the search asking for more runs of an undecided build)."""
        wanted = at_least or self.repeats
        have = self.reusable(c)
        if len(have) >= wanted:
            return have
        spec = candidate_spec(c, self.python)
        venv = self.venvs / spec.name
        python = self.ensure_env(c, spec, venv)
        request = dataclasses.replace(self.request, env=spec.name)
        points = [dataclasses.replace(self.point, repeat=len(have) + i) for i in range(wanted - len(have))]
        records: list[dict] = []
        heavy = self.heavy_packages(venv) if self.free_disk else []
        try:
            run_points(request, self.plan_name, points, records, python=str(python), rerun=self.rerun_for(c))
        finally:
            self.new_runs += len(records)
            self.release(venv, heavy)
        ok = [r for r in records if r.get("status") == "ok"]
        if not have and not ok:
            reasons = {str(r.get("reason") or "?")[:200] for r in records}
            raise CandidateFailed(f"every run failed: {'; '.join(sorted(reasons))}")
        return have + ok

    def rerun_for(self, c: Candidate):
        """The command a record of this build names to measure it again: the bisect's own `--at`, since the
        build is no env of envs/ (no nox session installs it)."""
        r = self.request
        parts = ["python", "-m", "harness.bisect", "--at", c.base.name if c.base else c.version, "--rung", self.point.rung,
                 "--plan", r.plan, "--preset", r.preset, "--repeats", "1", "--out", self.out.as_posix(), *override_args(r)]
        if c.index_url:
            parts += ["--index-url", c.index_url]
        if self.find_links:
            parts += ["--find-links", str(self.find_links)]
        parts += ["--python", self.python]
        return lambda point: shlex.join(parts)

    # ------------------------------------------------------------------ the env
    def spec_dir(self) -> Path:
        return self.out / "envs"

    def write_spec(self, spec: EnvSpec, cuda: str | None = None) -> Path:
        path = self.spec_dir() / spec.name / "env.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        note = (f"torch from --find-links {self.find_links} alone (the wheel: environment.torch_source of its records); "
                "what it needs from the folder, then the index." if self.find_links else "")
        write_atomic(path, spec_yaml(dataclasses.replace(spec, cuda=cuda, path=None), note))
        return path

    def ensure_env(self, c: Candidate, spec: EnvSpec, venv: Path) -> Path:
        """The candidate's interpreter, installed (or reused when it already holds this torch) and checked."""
        python = venv / "bin" / "python"
        log_path = self.out / "logs" / f"{spec.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        if c.base is None:
            self.write_spec(spec)
        installed = self.torch_in(python)
        if installed is None or public_version(installed[0]) != c.version:
            self.remove(venv)
            self.say(f"  installing torch {c.version} ({', '.join(spec.extra_pins) or 'nothing'} beside it) into {venv}")
            try:
                with open(log_path, "a") as log:
                    install(spec, venv, ROOT, editable=True, find_links=self.find_links, log=log)
            except subprocess.CalledProcessError as exc:
                self.fail_install(c, spec, f"install failed (exit {exc.returncode}): {last_line(log_path)}")
            except Exception as exc:  # noqa: BLE001 - a SpecError (unreachable index) and the like: one line
                self.fail_install(c, spec, f"install failed: {exc}")
            installed = self.torch_in(python)
            if installed is None or public_version(installed[0]) != c.version:
                got = installed[0] if installed else "no importable torch"
                self.fail_install(c, spec, f"install gave {got}, not torch {c.version} (log: {log_path})")
        if c.base is None:  # what the wheel is: PyPI's Linux wheels are CUDA builds
            spec = dataclasses.replace(spec, cuda=installed[1])
            self.write_spec(spec, installed[1])
        envs_dir = self.spec_dir() if c.base is None else c.base.path.parent.parent
        check = subprocess.run([str(python), "-m", "harness.envs", "check", spec.name], check=False, capture_output=True, text=True,
                               cwd=ROOT, env=dict(os.environ, **{ENVS_DIR_VAR: str(envs_dir)},
                                                  PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))))
        if check.returncode != 0:
            self.fail_install(c, spec, (check.stderr or check.stdout).strip().splitlines()[-1])
        return python

    @staticmethod
    def torch_in(python: Path) -> tuple[str, str | None] | None:
        """(torch.__version__, torch.version.cuda) in that interpreter, None when it has none (or does not exist)."""
        if not python.exists():
            return None
        code = "import json, torch; print(json.dumps([torch.__version__, torch.version.cuda]))"
        out = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True)
        if out.returncode != 0:
            return None
        with contextlib.suppress(ValueError, IndexError):
            return tuple(json.loads(out.stdout.strip().splitlines()[-1]))
        return None

    def fail_install(self, c: Candidate, spec: EnvSpec, reason: str):
        """Record the failed install (a failure record: it shows in compare's "left out") and step around it."""
        point = self.point
        run_spec = WorkerSpec(
            run_id=new_run_id(spec.name, self.plan_name, point, self.records_dir), env=spec.name, plan=self.plan_name,
            rung=point.rung, rung_index=point.rung_index, repeat=point.repeat, sweep=point.sweep,
            workload=point.workload, flags=point.flags, out=str(self.records_dir),
            rerun=self.rerun_for(c)(point), threads=self.request.threads, invocation=invocation_id(spec.name))
        self.records_dir.mkdir(parents=True, exist_ok=True)
        write_record(failure_record(run_spec, f"torch {c.version}: {reason}"[:800]), self.records_dir)
        raise CandidateFailed(reason)

    def release(self, venv: Path, heavy: list[str]) -> None:
        """A measured build's venv (and, with --free-disk, its heavy wheels in uv's cache): removed with
        --remove-venvs, once `keep` newer ones are measured."""
        if self.remove_venvs:
            self.kept = [(v, h) for v, h in self.kept if v != venv] + [(venv, heavy)]
            self._trim(self.keep)

    def close(self) -> None:
        """The search is over: remove the venvs still kept."""
        self._trim(0)

    def _trim(self, keep: int) -> None:
        while len(self.kept) > keep:
            old, old_heavy = self.kept.pop(0)
            self.remove(old)
            if self.free_disk:
                self.free_cache(old_heavy)

    def remove(self, venv: Path) -> None:
        """Remove a candidate's venv (hard links into uv's cache: little disk of its own)."""
        shutil.rmtree(venv, ignore_errors=True)

    @staticmethod
    def heavy_packages(venv: Path) -> list[str]:
        """The venv's multi-GB packages: torch, triton and the nvidia-* CUDA libraries."""
        heavy = set()
        for dist in venv.glob("lib/python*/site-packages/*.dist-info"):
            name = dist.name.split("-")[0].lower().replace("_", "-")
            if name in HEAVY_PACKAGES or name.startswith("nvidia-"):
                heavy.add(name)
        return sorted(heavy)

    def free_cache(self, packages: list[str]) -> None:
        """--free-disk: drop a measured build's heavy wheels from uv's cache (GBs each; a later install downloads
        them again). uv waits for other uv processes to let go of the cache: bounded, and said when it gives up."""
        uv = find_uv()
        if not packages or not uv:
            return
        try:
            subprocess.run([uv, "cache", "clean", *packages], capture_output=True, check=False, timeout=CLEAN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.say(f"  --free-disk: uv's cache stayed locked by another uv process for {CLEAN_TIMEOUT_S} s; not cleaned")


def last_line(path: Path) -> str:
    with contextlib.suppress(OSError):
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
        return lines[-1].strip()[:300] if lines else "no output"
    return "no log"
