"""harness.bisect: the search with stand-in measurements (no installs), the candidate listing from a local wheel
folder, the command line's one-line errors, the landscape chart, and (slow) a real bisect over two torch builds."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from records_factory import make_record, noisy_ms, write
from shipped import RESULTS

from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.series import landscapes, version_points, version_series
from harness.bisect import candidates as cmod
from harness.bisect.candidates import Candidate, CandidateError, candidates_between, env_name_for, newest_patches
from harness.bisect.explain import answer_lines, points_table, underneath, write_state
from harness.bisect.search import METRICS, CandidateFailed, Search
from harness.report.versions_chart import draw, versions_charts

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ["2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1"]


def cands(versions=VERSIONS) -> list[Candidate]:
    return [Candidate(v) for v in versions]


class StandIn:
    """measure(candidate): `repeats` records with timed steps around ms[version] (spread: relative noise), peak RSS
    mem[version]; versions in `failing` raise CandidateFailed. Counts what it measured."""

    def __init__(self, ms: dict, spread: float = 0.01, mem: dict | None = None, failing=(), repeats: int = 3,
                 records_dir: Path | None = None, run_spread: float = 0.0):
        self.ms, self.spread, self.mem, self.failing, self.repeats = ms, spread, mem or {}, set(failing), repeats
        self.run_spread = run_spread  # each run's own offset (a run is the unit of noise): up to +-run_spread
        self.calls: list[str] = []
        self.records_dir = records_dir

    def __call__(self, c: Candidate, at_least: int | None = None) -> list[dict]:
        self.calls.append(c.version)
        if c.version in self.failing:
            raise CandidateFailed("install failed (exit 1): No solution found when resolving dependencies")
        recs = []
        for r in range(max(self.repeats, at_least or 0)):
            seed = zlib.crc32(f"{c.version}/{r}".encode())  # the same noise in every process
            mem = self.mem.get(c.version)
            offset = 1 + self.run_spread * ((seed % 2001) / 1000 - 1)
            recs.append(make_record(env=env_name_for(c.version), gpu=None, rung="bf16", repeat=r,
                                    torch_version=c.version + "+cu121", workload={"precision": "bf16"},
                                    ms=noisy_ms(self.ms[c.version] * offset, self.spread, seed, warmup=2, timed=10),
                                    memory=None if mem is None else mem * (1 + 0.002 * r)))
        if self.records_dir:
            write(self.records_dir, recs)
        return recs


def step(at: str, before: float = 100.0, after: float = 60.0) -> dict:
    """Step time `before` up to the version before `at`, `after` from it on: one release changed it."""
    i = VERSIONS.index(at)
    return {v: (before if k < i else after) for k, v in enumerate(VERSIONS)}


def run(measure, versions=VERSIONS, metric="tokens_per_s", landscape=False, max_runs=0):
    search = Search(cands(versions), METRICS[metric], measure, say=lambda line: None,
                    mode="landscape" if landscape else "bisect", max_runs=max_runs)
    return search.landscape() if landscape else search.bisect()


# --------------------------------------------------------------------------- the search


@pytest.mark.parametrize("at", ["2.2.2", "2.5.1", "2.9.1"])
def test_monotone_step_found_in_log2_measurements(at):
    measure = StandIn(step(at))
    r = run(measure)
    assert r.outcome == "boundary"
    assert r.boundary == (VERSIONS[VERSIONS.index(at) - 1], at)
    assert r.boundary_delta.beyond and r.boundary_delta.value > 0.5  # 100 -> 60 ms: +67% tokens/s
    assert len(measure.calls) <= 2 + 3  # the ends, then log2(7) midpoints rounded up
    assert not r.spread and r.share == pytest.approx(1.0, abs=0.05)
    verdicts = [p.verdict for p in r.measured()]
    assert verdicts[0] == "end A" and verdicts[-1] == "end B"
    assert set(verdicts[1:-1]) <= {"like A", "like B"}


def test_one_run_builds_are_decided_only_with_the_devices_calibration(tmp_path):
    """One run a build: nothing of the builds' own says how much runs differ, so no step is decided. harness.calibrate's
    runs of the same device (two rungs, alike in noise), found by calibration_runs and handed to Search, lend their
    spread as they do to compare, and the release that changed it is found."""
    from harness.analysis.noise import CALIBRATION_PLAN
    from harness.bisect.search import calibration_runs

    alone = run(StandIn(step("2.5.1"), repeats=1))
    assert alone.outcome != "boundary" or not alone.boundary_delta.beyond
    records = []
    for rung, precision in (("fp32", "fp32"), ("bf16", "bf16")):
        for r in range(3):
            rec = make_record(env="local", gpu=None, rung=rung, plan=CALIBRATION_PLAN, repeat=r,
                              workload={"precision": precision}, torch_version="2.9.1+cu121",
                              ms=noisy_ms(100.0 * (1 + 0.01 * (r - 1)), 0.01, seed=r, warmup=2, timed=10))
            records.append(rec)
    write(tmp_path / "runs", records)
    calibration = calibration_runs([tmp_path / "runs", tmp_path / "no-such-folder"])
    assert len(calibration) == 6 and all(view.plan == CALIBRATION_PLAN for view, _inv in calibration)
    search = Search(cands(), METRICS["tokens_per_s"], StandIn(step("2.5.1"), repeats=1), say=lambda line: None,
                    calibration=calibration)
    found = search.bisect()
    assert found.outcome == "boundary" and found.boundary == ("2.4.1", "2.5.1") and found.boundary_delta.beyond
    assert found.boundary_delta.borrowed


def test_same_ends_install_nothing_more():
    measure = StandIn({v: 100.0 for v in VERSIONS})
    r = run(measure)
    assert r.outcome == "no difference" and r.boundary is None
    assert measure.calls == ["2.1.2", "2.9.1"]
    assert "do not differ beyond noise" in answer_lines(r)[0]


def test_spread_change_says_so_and_shows_every_point():
    ms = {v: 100.0 * (0.93 ** k) for k, v in enumerate(VERSIONS)}  # 7% faster every release
    r = run(StandIn(ms, spread=0.002))
    assert r.spread
    neither = [p for p in r.measured() if (p.verdict or "").startswith("like neither")]
    assert neither and "spread over releases" in neither[0].verdict
    assert r.outcome == "boundary" and r.share < 0.5  # one step is a small part of the whole change
    text = "\n".join(answer_lines(r))
    assert "not one step" in text
    table = points_table(r)
    assert all(p.version in table for p in r.measured())


def test_noisy_ends_are_within_noise():
    ms = {v: 100.0 for v in VERSIONS}
    ms["2.9.1"] = 100.5  # 0.5% slower, far inside 25% step-to-step noise
    r = run(StandIn(ms, spread=0.25))
    assert r.outcome == "no difference"


def test_noisy_midpoint_is_like_neither():
    ms = step("2.5.1", 100.0, 80.0)
    ms["2.4.1"] = 90.0  # the first midpoint sits half way: neither end
    r = run(StandIn(ms, spread=0.002))
    first_mid = next(p for p in r.measured() if p.version == "2.4.1")
    assert first_mid.verdict.startswith("like neither")
    assert r.outcome == "boundary"


def test_failed_candidates_are_stepped_around():
    measure = StandIn(step("2.5.1"), failing={"2.4.1", "2.5.1"})
    r = run(measure)
    failed = [p for p in r.measured() if p.failed]
    assert {p.version for p in failed} == {"2.4.1", "2.5.1"}
    # 2.5.1 brought it but cannot be installed: the answer is the narrowest measured pair around it, and says why
    assert r.boundary == ("2.3.1", "2.6.0") and r.outcome == "blocked"
    assert "2.4.1, 2.5.1 between them could not be measured" in "\n".join(answer_lines(r))
    assert "stepped around" in points_table(r) or any("not measured" in line for line in r.lines)


def test_failed_end_stops_with_one_line():
    r = run(StandIn(step("2.5.1"), failing={"2.9.1"}))
    assert r.outcome == "blocked" and r.boundary is None
    assert any(line.startswith("end B (torch 2.9.1) could not be measured") for line in r.lines)


def test_memory_metric_uses_the_rule_of_tokens_per_s():
    mem = {v: (400 if v < "2.6" else 600) * 2**20 for v in VERSIONS}
    r = run(StandIn({v: 100.0 for v in VERSIONS}, mem=mem), metric="peak_memory")
    assert r.boundary == ("2.5.1", "2.6.0")
    assert r.boundary_delta.bounds == "ci" and r.boundary_delta.beyond
    assert r.boundary_delta.value == pytest.approx(0.5, abs=0.01)


def test_until_decided_adds_runs_where_a_comparison_is_undecided_and_names_what_stays_so():
    # runs differ by up to +-12% (the CPU here differs by 5-26%), a 100 -> 80 ms step at 2.6.0: two runs a build
    # cannot tell the midpoints apart; with more runs of the undecided builds the search finds the step
    noisy = step("2.6.0", 100.0, 80.0)
    fixed = run(StandIn(noisy, repeats=2, run_spread=0.12))
    auto_measure = StandIn(noisy, repeats=2, run_spread=0.12)
    auto = run(auto_measure, max_runs=12)
    assert auto.boundary == ("2.5.1", "2.6.0") and auto.boundary_delta.beyond and not auto.undecided
    assert len(auto_measure.calls) > len(set(auto_measure.calls))  # some builds were asked for more runs
    assert fixed.outcome == "no difference" and not fixed.undecided  # two runs a build: not even the ends differ
    # a 1.5% step under the same noise: no run count allowed here decides it, and the answer says which builds
    tiny = run(StandIn(step("2.6.0", 100.0, 98.5), repeats=2, run_spread=0.12), max_runs=3)
    assert tiny.outcome == "no difference" and set(tiny.undecided) == {"2.1.2", "2.9.1"}
    assert "Undecided" in answer_lines(tiny)[0]


def test_landscape_measures_every_candidate_and_draws(tmp_path):
    measure = StandIn(step("2.5.1"), mem={v: 500 * 2**20 for v in VERSIONS}, records_dir=tmp_path / "records")
    r = run(measure, landscape=True)
    assert measure.calls == VERSIONS and r.outcome == "landscape"
    changed = [p.version for p in r.measured() if any(d.beyond for v, d in p.against if v != VERSIONS[0])]
    assert "2.5.1" in changed  # beyond noise against the build before it
    state = json.loads(write_state(r, tmp_path, "cmd").read_text())
    assert [p["torch"] for p in state["points"]] == VERSIONS
    # the report's chart from the same records: one rung across 9 torch builds
    cx = Compare(load([tmp_path / "records"], warn=lambda line: None))
    series = version_series(cx)
    assert len(series) == 1 and len(series[0][1]) == len(VERSIONS)
    charts = versions_charts(landscapes(cx))
    assert charts[0][1][:8] == b"\x89PNG\r\n\x1a\n"
    assert draw(version_points(series[0][1]), "t", boundary=("2.4.1", "2.5.1"))[:4] == b"\x89PNG"


def test_boundary_is_explained_with_compares_tables(tmp_path):
    records = tmp_path / "records"
    r = run(StandIn(step("2.5.1"), mem={v: 500 * 2**20 for v in VERSIONS}, records_dir=records))
    text = underneath(r, records)
    assert "torch20401" in text and "torch20501" in text  # the versions table names both builds
    assert "Kernel-time split" in text and "Significance" in text


def test_env_names_sort_and_never_collide():
    assert env_name_for("2.1.2") == "torch20102"
    assert env_name_for("2.10.0") == "torch21000" != env_name_for("2.1.10")
    assert env_name_for("2.16.0.dev20261120") == "torch21600dev20261120"
    assert env_name_for("2.1.2+cu121") == "torch20102"


def test_newest_patches_keep_both_ends():
    cs = cands(["2.1.0", "2.1.2", "2.2.0", "2.2.2", "2.3.0"])
    assert [c.version for c in newest_patches(cs)] == ["2.1.0", "2.1.2", "2.2.2", "2.3.0"]


def test_needs_beside_torch():
    assert cmod.needs_beside_torch("2.1.2") == ["numpy<2", "setuptools<70"]
    assert cmod.needs_beside_torch("2.9.1") == ["setuptools<81"]


# --------------------------------------------------------------------------- the listing


@pytest.fixture
def wheels(tmp_path):
    """A local wheel folder, the way --find-links reads it (pip reads names, not contents, to list versions)."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    for v in ("2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0.dev20240601"):
        (folder / f"torch-{v}-py3-none-any.whl").write_bytes(b"")
    (folder / "torch-2.4.1+cpu-py3-none-any.whl").write_bytes(b"")  # a local build: not a candidate of its own
    return folder


def test_candidates_from_a_local_folder(wheels):
    cs = candidates_between("2.2.2", "2.5.1", "3.11", find_links=wheels)
    assert [c.version for c in cs] == ["2.2.2", "2.3.1", "2.4.1", "2.5.1"]
    assert cs[0].env_name == "torch20202" and not any(c.pre for c in cs)
    backwards = candidates_between("2.5.1", "2.2.2", "3.11", find_links=wheels)
    assert [c.version for c in backwards] == ["2.5.1", "2.4.1", "2.3.1", "2.2.2"]
    with_dev = candidates_between("2.5.1", "2.6.0.dev20240601", "3.11", find_links=wheels)
    assert [c.version for c in with_dev] == ["2.5.1", "2.6.0.dev20240601"] and with_dev[-1].pre


def test_an_env_name_end_keeps_its_spec(wheels):
    cs = candidates_between("torch212", "2.3.1", "3.11", find_links=wheels)
    assert cs[0].env_name == "torch212" and cs[0].base.extra_pins == ("numpy<2", "setuptools<70", "transformers==4.42.4")
    assert cmod.candidate_spec(cs[0], "3.11") is cs[0].base


@pytest.mark.parametrize("good, bad, message", [
    ("2.1.9", "2.5.1", "--good torch 2.1.9 is not on the folder"),
    ("2.5.1", "9.9.9", "--bad torch 9.9.9 is not on the folder"),
    ("2.5.1", "2.5.1", "same torch (2.5.1): nothing to bisect"),
    ("banana", "2.5.1", "neither an env name"),
    ("local", "2.5.1", "installs no torch of its own"),
])
def test_bad_ends_are_one_line(wheels, good, bad, message):
    with pytest.raises(CandidateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        candidates_between(good, bad, "3.11", find_links=wheels)


def test_an_empty_folder_and_an_unreachable_index_are_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CandidateError, match="offers no torch wheel for Python 3.11"):
        candidates_between("2.1.2", "2.5.1", "3.11", find_links=tmp_path / "empty")
    with pytest.raises(CandidateError, match=r"index http://127.0.0.1:9/simple is unreachable"):
        candidates_between("2.1.2", "2.5.1", "3.11", index_url="http://127.0.0.1:9/simple")


def test_asking_for_pip_leaves_setuptools_distutils_alone():
    """The pip check before listing must not switch setuptools' distutils hack off for the process (find_spec("pip")
    did: the fast suite's compiled-loss test then failed in Inductor's import of setuptools, in CI only)."""
    pytest.importorskip("_distutils_hack")
    code = ("from harness.bisect.candidates import has_pip; assert has_pip(); import setuptools, distutils.core; "
            "print(distutils.core.__file__)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "_distutils" in out.stdout, out.stdout + out.stderr[-2000:]


def test_spec_yaml_loads_like_an_env_yaml(tmp_path):
    from harness.envs.spec import load_spec

    spec = cmod.candidate_spec(Candidate("2.10.0"), "3.11")
    (tmp_path / spec.name).mkdir()
    (tmp_path / spec.name / "env.yaml").write_text(cmod.spec_yaml(spec))
    loaded = load_spec(spec.name, tmp_path)
    assert loaded.torch == "2.10.0" and loaded.extra_pins == ("setuptools<81",) and loaded.python == "3.11"


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "harness.bisect", *args], check=False, cwd=cwd, capture_output=True,
                          text=True)


def test_cli_lists_and_refuses_in_one_line(wheels, tmp_path):
    out = _cli("--good", "2.2.2", "--bad", "2.4.1", "--find-links", str(wheels), "--list")
    assert out.returncode == 0 and out.stdout.splitlines()[1].split()[:3] == ["2.3.1", "env", "torch20301"]
    out = _cli("--good", "2.2.2", "--bad", "2.2.3", "--find-links", str(wheels), "--rung", "bf16", "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--bad torch 2.2.3 is not on the folder" in out.stderr
    out = _cli("--good", "2.2.2", "--bad", "2.4.1", "--find-links", str(wheels), "--rung", "nope", "--out", str(tmp_path))
    assert out.returncode == 2 and "no rung 'nope' in plan seed-ladder" in out.stderr
    out = _cli("--good", "2.2.2", "--bad", "2.4.1", "--metric", "peak_memory", "--repeats", "1", "--rung", "bf16")
    assert out.returncode == 2 and "needs --repeats 2 or more" in out.stderr


def test_failed_install_is_recorded_and_stepped_around(tmp_path):
    """Wheels that cannot install (empty files, versions no index has): each failure is a record, and the bisect
    says so in one line. Nothing is downloaded."""
    folder = tmp_path / "broken"
    folder.mkdir()
    for v in ("2.2.7", "2.2.8", "2.2.9"):
        (folder / f"torch-{v}-py3-none-any.whl").write_bytes(b"")
    out = _cli("--good", "2.2.7", "--bad", "2.2.9", "--find-links", str(folder), "--rung", "bf16", "--device", "cpu",
               "--out", str(tmp_path / "b"), "--venvs", str(tmp_path / "venvs"), "--repeats", "1", "--steps", "2",
               "--warmup-steps", "1")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "end A (torch 2.2.7) could not be measured: install failed" in out.stdout
    failures = [json.loads(p.read_text()) for p in (tmp_path / "b" / "records").glob("*.json")]
    assert len(failures) == 2 and all(r["status"] != "ok" and "install failed" in r["reason"] for r in failures)
    # each names the one command that measures its build again: the bisect's --at (no nox session installs it)
    reruns = sorted(r["rerun"]["command"] for r in failures)
    assert reruns[0].startswith("python -m harness.bisect --at 2.2.7 --rung bf16 --plan seed-ladder --preset tiny")
    assert f"--find-links {folder}" in reruns[0] and "--device cpu" in reruns[0] and "--steps 2" in reruns[0]
    assert (tmp_path / "b" / "envs" / "torch20207" / "env.yaml").is_file()
    assert json.loads((tmp_path / "b" / "bisect-tokens_per_s.json").read_text())["outcome"] == "blocked"


def test_at_one_build_is_checked_like_an_end(wheels):
    assert cmod.candidate_at("2.3.1", "3.11", find_links=wheels) == Candidate("2.3.1")
    assert cmod.candidate_at("torch212", "3.11", find_links=wheels).base.name == "torch212"
    with pytest.raises(CandidateError, match="--at torch 2.3.9 is not on the folder"):
        cmod.candidate_at("2.3.9", "3.11", find_links=wheels)


def test_cli_at_refuses_a_range_in_one_line(wheels, tmp_path):
    out = _cli("--at", "2.3.1", "--good", "2.2.2", "--rung", "bf16")
    assert out.returncode == 2 and "--at measures one build" in out.stderr
    out = _cli("--rung", "bf16")
    assert out.returncode == 2 and "--good and --bad are required (or --at for one build)" in out.stderr
    out = _cli("--at", "2.3.9", "--find-links", str(wheels), "--rung", "bf16", "--out", str(tmp_path))
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "--at torch 2.3.9 is not on the folder" in out.stderr


def test_at_measures_one_build_and_keeps_no_search_state(tmp_path):
    """--at is a landscape of one build: its point line and table, no "end A/B" of a bisect over itself, no state
    file; a build that cannot install is a failure record and exit 1."""
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "torch-2.2.7-py3-none-any.whl").write_bytes(b"")
    out = _cli("--at", "2.2.7", "--find-links", str(folder), "--rung", "bf16", "--device", "cpu", "--repeats", "1",
               "--out", str(tmp_path / "b"), "--venvs", str(tmp_path / "venvs"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "torch 2.2.7: not measured (install failed" in out.stdout and "end A" not in out.stdout
    assert len(list((tmp_path / "b" / "records").glob("*.json"))) == 1
    assert not list((tmp_path / "b").glob("*.json"))  # the search state of a bisect or landscape stays as it was


def test_contended_runs_are_not_reused_unless_asked(tmp_path):
    """A build whose runs were timed under contention is measured again by the next bisect (compare's rule: a
    contended run counts nowhere); --include-contended reuses them; --at reuses nothing."""
    from harness.bisect.measure import Measurer
    from harness.runner.request import RunRequest

    request = RunRequest(out=str(tmp_path / "records"), rungs="bf16", repeats=1, device="cpu", threads=1, steps=20)
    m = Measurer(request, tmp_path, "3.11", tmp_path / "venvs", repeats=2)
    for i, contended in enumerate((False, True)):
        rec = make_record(env="torch20800", gpu=None, rung="bf16", repeat=i, torch_version="2.8.0+cu128",
                          workload=m.point.workload, flags=m.point.flags)
        rec["workload_hash"], rec["flags"]["hash"] = m.key
        rec["environment"].update(machine=m.machine, threads={"torch": 1})
        rec["contention"] = {"contended": contended, "reason": "other processes used 1.6 of 2 CPUs" if contended else None}
        write(tmp_path / "records", [rec])
    c = Candidate("2.8.0")
    assert [r["contention"]["contended"] for r in m.reusable(c)] == [False]
    m.include_contended = True
    assert len(m.reusable(c)) == 2
    assert Measurer(request, tmp_path, "3.11", tmp_path / "venvs", repeats=2, reuse=False).reusable(c) == []
    assert m.rerun_for(c)(m.point) == ("python -m harness.bisect --at 2.8.0 --rung bf16 --plan seed-ladder --preset "
                                       f"tiny --repeats 1 --out {tmp_path.as_posix()} --steps 20 --device cpu --threads 1 "
                                       "--python 3.11")


# --------------------------------------------------------------------------- real torch builds


@pytest.mark.slow
def test_real_bisect_over_two_torch_builds(tmp_path):
    """Two adjacent releases from the default index (uv's cache makes the installs cheap after the first), the bf16
    rung uncompiled for a few steps: the ends are measured in their own venvs and tagged with their torch."""
    from harness.envs.install import probe_url

    if probe_url("https://pypi.org/simple/torch/") is not None:
        pytest.skip("PyPI is unreachable from here")
    args = ["--good", "2.14.1", "--bad", "2.15.0", "--rung", "bf16", "--device", "cpu", "--set", "compile=off",
            "--steps", "8", "--warmup-steps", "2", "--repeats", "2", "--out", str(tmp_path / "b"),
            "--venvs", str(tmp_path / "venvs"), "--remove-venvs", "--timeout", "600",
            "--include-contended"]  # about the reuse, not the load: a run timed on a busy CI machine counts too
    out = _cli(*args)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    records = [json.loads(p.read_text()) for p in (tmp_path / "b" / "records").glob("*.json")]
    versions = sorted({r["environment"]["torch"]["version"].split("+")[0] for r in records if r["status"] == "ok"})
    assert versions == ["2.14.1", "2.15.0"] and len(records) == 4
    assert not (tmp_path / "venvs" / "torch21401").exists()  # --remove-venvs
    again = _cli(*args)  # a second bisect reuses every point: nothing installed, no new record
    assert again.returncode == 0 and "installing" not in again.stdout
    assert len(list((tmp_path / "b" / "records").glob("*.json"))) == 4
    # a record's rerun command measures that build once more (a new record; the search's state untouched)
    state = (tmp_path / "b" / "bisect-tokens_per_s.json").read_text()
    rerun = next(r["rerun"]["command"] for r in records if r["environment"]["torch"]["version"].startswith("2.15.0"))
    assert rerun.startswith("python -m harness.bisect --at 2.15.0 --rung bf16"), rerun
    once_more = subprocess.run([sys.executable, *shlex.split(rerun)[1:], "--venvs", str(tmp_path / "venvs"),
                                "--remove-venvs", "--timeout", "600"], check=False, cwd=ROOT, capture_output=True, text=True)
    assert once_more.returncode == 0, once_more.stdout[-3000:] + once_more.stderr[-3000:]
    assert len(list((tmp_path / "b" / "records").glob("*.json"))) == 5
    assert (tmp_path / "b" / "bisect-tokens_per_s.json").read_text() == state


def test_remove_venvs_with_repeats_auto_keeps_the_two_newest_venvs_until_a_third_or_the_end(tmp_path):
    """--repeats auto grows the two sides of an undecided comparison a run at a time, alternately: with --remove-venvs
    each of those runs must not install its build again (keep=2), and nothing is left once the search is over."""
    from harness.bisect.measure import Measurer

    m = Measurer.__new__(Measurer)
    m.remove_venvs, m.free_disk, m.keep, m.kept = True, True, 2, []
    freed = []
    m.free_cache = lambda heavy: freed.extend(heavy)
    venvs = {name: tmp_path / name for name in ("a", "b", "c")}
    for v in venvs.values():
        v.mkdir()
    for name in ("a", "b", "a", "b"):  # the two sides of one comparison, alternately
        m.release(venvs[name], [f"torch-{name}"])
    assert all(v.exists() for v in venvs.values()) and not freed
    m.release(venvs["c"], ["torch-c"])  # a third build: the oldest kept goes, with its wheels
    assert not venvs["a"].exists() and venvs["b"].exists() and freed == ["torch-a"]
    m.close()
    assert not any(v.exists() for v in venvs.values()) and sorted(freed) == ["torch-a", "torch-b", "torch-c"]
    # without --repeats auto (keep=0) a venv goes as soon as it is measured, as before
    m.keep, d = 0, tmp_path / "d"
    d.mkdir()
    m.release(d, [])
    assert not d.exists()


LANDSCAPE_PNG = """
import sys
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.series import landscapes
from harness.report.versions_chart import versions_charts
sys.stdout.buffer.write(versions_charts(landscapes(Compare(load([sys.argv[1]], warn=lambda line: None))))[0][1])
"""


def test_the_landscape_chart_is_drawn_the_same_where_the_other_charts_were_not_imported():
    """harness.bisect imports the landscape chart alone; a report has imported every chart module first. The chart
    takes the charts' type and text settings as it is imported, so both draw the same PNG."""
    import harness.report.charts  # noqa: F401  (as in a report: its settings in place before this chart is drawn)

    folder = RESULTS / "cpu-bisect"
    here = versions_charts(landscapes(Compare(load([folder], warn=lambda line: None))))[0][1]
    alone = subprocess.run([sys.executable, "-c", LANDSCAPE_PNG, str(folder)], capture_output=True, cwd=ROOT,
                           check=True, timeout=300).stdout
    assert here[:8] == b"\x89PNG\r\n\x1a\n" and alone == here
