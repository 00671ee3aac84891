# /// script
# dependencies = ["nox>=2025.2.9", "pyyaml>=6"]
# ///
"""nox sessions: one `bench-<name>` per envs/<name>/env.yaml, plus `tests`, `lint`, `compare`, `report`, `verify-matrix`
`cluster` and `docker`.

    nox -l                                        # list
    nox -s bench-torch212 bench-nightly           # install each pinned build, check it, run the Quick start rungs
    nox -s bench-torch212 -- --plan seed-ladder   # arguments after -- go to `python -m harness.run`
    nox -s tests                                  # the fast tests; nox -s tests -- -m slow: the slow ones
    nox -s compare -- results/runs results/reference   # the tables (no torch needed)
    nox -s report -- results/ -o report/          # the technical report (no torch needed)
    nox -s verify-matrix -- results/runs torch212 latest   # the records show each env's pinned torch
    nox -s cluster -- slurm status                # the matrix on Slurm (docs/cluster.md; no torch needed)
    nox -s docker -- build latest                 # python -m harness.docker: the env images (docs/envs.md)

Every version comes from the specs through harness/envs/; nothing is pinned here.
Mirrors: HARNESS_TORCH_INDEX_URL (every PyTorch index) or HARNESS_TORCH_INDEX_URL_<NAME> (one env).
The script block above is for nox itself: the specs are YAML, so nox's own interpreter needs PyYAML. When it is
missing (`pip install nox uv` brings none), nox makes .nox/_nox_script_mode with nox and PyYAML and re-runs itself
there (nox >= 2025.2.9; --script-mode none turns that off).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

import nox
from nox.command import CommandFailed

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from harness.envs.install import install_args, project_args
from harness.envs.spec import EnvSpec, load_specs

nox.needs_version = ">=2025.2.9"  # reads the script block above
nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests"]  # `nox` alone never starts a multi-GB install

DEFAULT_RUN_ARGS = {"--plan": "seed-ladder", "--out": "results/runs"}  # results/runs is git-ignored
# Without --plan or --rungs, a bench session runs these rungs of the seed ladder (the Quick start): the user's
# questions a CPU can answer too, each one knob after the one before (fp32 -> bf16 -> SDPA flash -> vocab
# 50304), 35-40 s each on 2 idle CPU cores, most of it torch.compile. Left out: tf32 (it computes fp32 on a
# CPU; the record says so) and fused-adamw-clip. --plan seed-ladder runs all six.
QUICK_START_RUNGS = "fp32,bf16,sdpa-flash,vocab-50304"
TEST_TORCH_ENV = "latest"  # the tests session takes its torch from this spec


class _PosargsParser(argparse.ArgumentParser):
    def error(self, message: str):  # a ValueError the session reports in one line, not argparse's usage and exit
        raise ValueError(f"harness.run options: {message}")


def _given(posargs: list[str]) -> argparse.Namespace:
    """The harness.run options among a bench session's posargs that the session fills in or checks (the rest pass
    through as they are)."""
    parser = _PosargsParser(add_help=False, allow_abbrev=False)
    for option in ("--env", "--plan", "--rungs", "--out"):
        parser.add_argument(option)
    return parser.parse_known_args(posargs)[0]


def runner_args(name: str, posargs: list[str]) -> list[str]:
    """posargs for harness.run, with the default plan/output filled in and the env name fixed."""
    given = _given(posargs)
    if given.env is not None and given.env != name:
        raise ValueError(f"--env {given.env} contradicts the session's env {name}")
    args = list(posargs)
    if given.plan is None and given.rungs is None:
        args += ["--rungs", QUICK_START_RUNGS]
    for option, value in DEFAULT_RUN_ARGS.items():
        if getattr(given, option.lstrip("-")) is None:
            args += [option, value]
    if given.env is None:
        args += ["--env", name]
    return args


def _no_install(session: nox.Session) -> bool:
    """--no-install / -R given. Only the venv-less bench-local asks: nox's public API says it only by skipping
    install steps (session.install, session.run_install) in a reused venv, and a venv-less session has none
    (nox issue #710 asks for a public attribute). Read defensively: a nox that moves it reads as not given."""
    config = getattr(getattr(session, "_runner", None), "global_config", None)
    return bool(getattr(config, "no_install", False))


def _install_spec(session: nox.Session, spec: EnvSpec, extras: str = "") -> None:
    """Install exactly the spec's torch build, then the project with its pins still in force. First the index is
    probed (seconds, not a resolver timeout, when it is unreachable), as an install step: nox skips it with the
    installs (--no-install on a reused venv)."""
    try:
        session.run_install(sys.executable, "-m", "harness.envs", "probe", spec.name, silent=True, external=True,
                            env={"PYTHONPATH": str(ROOT)})
    except CommandFailed:
        session.error(f"stopped before installing anything: envs/{spec.name}/env.yaml's torch index does not answer "
                      "(the line above)")
    session.install(*install_args(spec))
    session.install(*project_args(spec, ".", extras))


def _check(session: nox.Session, name: str, python: str = "python") -> None:
    try:
        session.run(python, "-m", "harness.envs", "check", name, external=True)
    except CommandFailed:
        session.error(f"python -m harness.envs check {name} failed: see the line above (spec: envs/{name}/env.yaml)")


def _make_bench(spec: EnvSpec):
    def bench(session: nox.Session) -> None:
        try:
            args = runner_args(spec.name, session.posargs)
        except ValueError as exc:
            session.error(str(exc))
        _install_spec(session, spec)
        _check(session, spec.name)
        session.run("python", "-m", "harness.run", *args, env={"HARNESS_ENV": spec.name})

    bench.__doc__ = f"{spec.description} [envs/{spec.name}/env.yaml]"
    return nox.session(name=f"bench-{spec.name}", python=spec.python, tags=["bench"], default=False)(bench)


def _local_python() -> str:
    """The interpreter whose torch `local` uses: HARNESS_LOCAL_PYTHON, else python3/python on PATH."""
    chosen = os.environ.get("HARNESS_LOCAL_PYTHON") or shutil.which("python3") or shutil.which("python")
    return chosen or sys.executable


def _make_local(spec: EnvSpec):
    def bench(session: nox.Session) -> None:
        """No venv, no torch install: the interpreter's own environment. The harness's light deps are
        installed only if missing, and a failed install (offline machine) is a warning, not an error."""
        try:
            args = runner_args(spec.name, session.posargs)
        except ValueError as exc:
            session.error(str(exc))
        python = _local_python()
        missing = session.run(python, "-m", "harness.envs", "missing-deps", silent=True, external=True)
        missing = [line for line in (missing or "").splitlines() if line.strip()]
        if missing and not _no_install(session):
            try:
                session.run(python, "-m", "pip", "install", *missing, external=True)
            except CommandFailed:
                session.warn(f"local: could not install {', '.join(missing)}; running without them")
        elif missing:
            session.warn(f"local: missing {', '.join(missing)} (--no-install given); running without them")
        _check(session, spec.name, python)
        session.run(python, "-m", "harness.run", *args, env={"HARNESS_ENV": spec.name}, external=True)

    bench.__doc__ = f"{spec.description} [envs/{spec.name}/env.yaml]"
    return nox.session(name=f"bench-{spec.name}", venv_backend="none", tags=["bench"], default=False)(bench)


def _make_invalid(name: str, error: str):
    def bench(session: nox.Session) -> None:
        session.error(error)

    bench.__doc__ = f"INVALID spec: {error}"
    return nox.session(name=f"bench-{name}", venv_backend="none", tags=["bench"], default=False)(bench)


# A spec that does not load still gets its session, which fails with the spec's error: `nox -l` names it,
# and every other session (lint, tests, the other benches) works as before.
SPECS, SPEC_ERRORS = load_specs()
for _spec in SPECS.values():
    globals()[f"bench_{_spec.name}"] = (_make_bench if _spec.installs else _make_local)(_spec)
for _name, _error in SPEC_ERRORS.items():
    globals()[f"bench_{_name}"] = _make_invalid(_name, _error)


def _test_spec(session: nox.Session) -> EnvSpec:
    if TEST_TORCH_ENV not in SPECS:
        session.error(SPEC_ERRORS.get(TEST_TORCH_ENV) or f"no spec envs/{TEST_TORCH_ENV}/env.yaml for the tests' torch")
    return SPECS[TEST_TORCH_ENV]


@nox.session(python=SPECS[TEST_TORCH_ENV].python if TEST_TORCH_ENV in SPECS else None)
def tests(session: nox.Session) -> None:
    """pytest with the project's test extra and the `latest` spec's torch: the fast tests by default (posargs go
    to pytest instead: `-- -m slow` for the slow ones, which run real compiled training; `-- -m ""` for all)."""
    _install_spec(session, _test_spec(session), extras="test")
    _check(session, TEST_TORCH_ENV)
    # -rs: each skip says why; tests/run_pytest.py keeps triton's exit-time leak report off the screen
    session.run("python", "tests/run_pytest.py", "-rs", *(session.posargs or ["-m", "not slow"]))


@nox.session(default=False)
def compare(session: nox.Session) -> None:
    """`python -m harness.compare` (posargs: record paths and options); no torch: the light deps only."""
    if not session.posargs:
        shipped = " ".join(sorted(str(p.relative_to(ROOT)) for p in (ROOT / "results").iterdir()
                                  if p.is_dir() and p.name != "runs"))
        session.error(f"which records? e.g. nox -s compare -- {DEFAULT_RUN_ARGS['--out']} results/cpu-amd-epyc-2core "
                      f"(your runs beside the shipped ones; shipped: {shipped})")
    session.install("-e", ".")
    session.run("python", "-m", "harness.compare", *session.posargs)


@nox.session(default=False)
def report(session: nox.Session) -> None:
    """`python -m harness.report` (posargs: record paths, -o DIR); no torch: it runs where only results are."""
    session.install("-e", ".")
    session.run("python", "-m", "harness.report", *session.posargs)


@nox.session(name="verify-matrix", default=False)
def verify_matrix(session: nox.Session) -> None:
    """`python -m harness.envs verify-matrix` (posargs: DIR NAME...): the records show each env's pinned torch; no torch."""
    session.install("-e", ".")
    session.run("python", "-m", "harness.envs", "verify-matrix", *session.posargs)


@nox.session(default=False)
def cluster(session: nox.Session) -> None:
    """`python -m harness.cluster` (posargs: slurm submit|status|collect|resubmit, k8s render); no torch. nox and
    uv are installed beside it: the Slurm tasks run `<this venv's python> -m nox -s bench-<env>` (docs/cluster.md)."""
    session.install("-e", ".", "nox", "uv")
    session.run("python", "-m", "harness.cluster", *session.posargs)


@nox.session(default=False)
def docker(session: nox.Session) -> None:
    """`python -m harness.docker` (posargs: build|run|check|render ...): the env images through the docker SDK; no torch."""
    session.install("-e", ".")
    session.run("python", "-m", "harness.docker", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the repository."""
    session.install("ruff==0.17.6")  # a fixed ruff: its default rule set changes between releases
    session.run("ruff", "check", ".", *session.posargs)
