"""harness.envs and noxfile.py: specs, install arguments, single source of pins, probes, checks, bump, verify.

No torch, no network, no installs (but a stand-in torch wheel of a few bytes, from a folder, offline): fast.
The real installs run in .ci/run through the nox sessions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from module_cli import run_module
from records_factory import make_record

from harness.envs.install import effective_index, install_args, probe_index, probe_url, project_args
from harness.envs.nightly import nightly_builds
from harness.envs.pins import check_torch, missing_dependencies, pin_satisfied, project_dependencies
from harness.envs.spec import (
    ENVS_DIR_VAR,
    SpecError,
    envs_dir,
    load_all,
    load_spec,
    load_specs,
    parse_spec,
    spec_names,
    validate_spec,
)
from harness.envs.verify import verify_matrix

ROOT = Path(__file__).resolve().parent.parent
REQUIRED = {"torch212", "torch23", "latest", "nightly", "local"}


def run_envs(*args, env=None, cwd=ROOT):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "harness.envs", *args], check=False, cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def envs_copy(tmp_path, monkeypatch):
    """A private copy of envs/ that harness.envs reads (HARNESS_ENVS_DIR), for tests that rewrite specs."""
    target = tmp_path / "envs"
    shutil.copytree(ROOT / "envs", target)
    monkeypatch.setenv(ENVS_DIR_VAR, str(target))
    return target


# --------------------------------------------------------------------------- the specs themselves


def test_required_specs_exist_and_validate():
    specs = load_all()
    assert REQUIRED <= set(specs)
    assert specs["torch212"].torch == "2.1.2" and specs["torch212"].cuda == "12.1"
    assert specs["torch23"].torch == "2.3.1" and specs["torch23"].cuda == "12.1"
    assert specs["latest"].installs and not specs["latest"].pre and specs["latest"].index_url is None
    assert re.fullmatch(r"\d+\.\d+\.\d+\.dev\d{8}", specs["nightly"].torch) and specs["nightly"].pre
    assert specs["nightly"].index_url.startswith("https://download.pytorch.org/whl/nightly/cu")
    assert specs["nightly"].index_url.endswith("cu" + specs["nightly"].cuda.replace(".", ""))
    assert not specs["local"].installs and specs["local"].python is None
    assert {"numpy<2", "setuptools<70"} <= set(specs["torch212"].extra_pins)


def test_spec_files_are_read_as_yaml():
    """What the loader returns is what PyYAML reads from the file, field for field."""
    import yaml

    for name in spec_names():
        path = envs_dir() / name / "env.yaml"
        assert {k: v for k, v in load_spec(name).to_dict().items() if k != "path"} == yaml.safe_load(path.read_text())


TORCH212_PINS = 'extra_pins: ["numpy<2", "setuptools<70", "transformers==4.42.4"]'
TORCH212_EXTRA = ("numpy<2", "setuptools<70", "transformers==4.42.4")


@pytest.mark.parametrize("old, new, message", [
    ('torch: "2.1.2"', "torch: 2.10", r"YAML read 2\.1 as a number; write it as a quoted string"),
    ('torch: "2.1.2"', "torch: 2026-11-20", "torch must be a string or null"),
    ('torch: "2.1.2"', "torch: {a: 1}", "torch must be a string or null"),
    ('torch: "2.1.2"', 'torch: "2.1.2"\ntorch: "2.3.1"', r"env\.yaml:\d+: torch given twice"),
    (TORCH212_PINS, 'extra_pins: ["numpy<2"', r"env\.yaml:\d+: not valid YAML"),
    (TORCH212_PINS, "extra_pins: [1, 2]", "extra_pins must be a list of strings"),
])
def test_spec_loader_refuses_yaml_it_cannot_use(envs_copy, old, new, message):
    """Real YAML in, one-line SpecError naming the file out: numbers and dates where strings belong, a key given
    twice (YAML would keep the last silently), a file that is not YAML."""
    path = envs_copy / "torch212" / "env.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(SpecError, match=message) as info:
        load_spec("torch212")
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_spec_loader_takes_any_yaml_spelling(envs_copy):
    """A block list or a top-level list file: YAML decides the structure, not a line format."""
    path = envs_copy / "torch212" / "env.yaml"
    text = path.read_text()
    path.write_text(text.replace(TORCH212_PINS, "extra_pins:\n  - numpy<2\n  - 'setuptools<70'\n  - transformers==4.42.4"))
    assert load_spec("torch212").extra_pins == TORCH212_EXTRA
    path.write_text("- name\n- torch\n")
    with pytest.raises(SpecError, match="expected `key: value` lines"):
        load_spec("torch212")


def test_without_pyyaml_missing_deps_runs_and_specs_fail_in_one_line():
    """bench-local asks an interpreter that may lack PyYAML what it lacks; reading a spec there is one line."""
    code = ("import runpy, sys; sys.modules['yaml'] = None; sys.argv[0] = 'harness.envs'; "
            "runpy.run_module('harness.envs', run_name='__main__')")
    missing = subprocess.run([sys.executable, "-c", code, "missing-deps"], check=False, cwd=ROOT, capture_output=True,
                             text=True, timeout=60)
    assert missing.returncode == 0, missing.stderr
    show = subprocess.run([sys.executable, "-c", code, "show", "latest"], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=60)
    assert show.returncode == 1 and show.stderr.count("\n") == 1 and "needs PyYAML" in show.stderr, show.stderr


def _data(**changes):
    base = parse_spec((envs_dir() / "torch212" / "env.yaml").read_text())
    return {**base, **changes}


@pytest.mark.parametrize("changes, message", [
    ({"torch": "2.1"}, "not an exact version"),
    ({"torch": ">=2.1.2"}, "not an exact version"),
    ({"torch": "2.16.0.dev20261120"}, "pre: true"),
    ({"cuda": "cu121"}, "MAJOR.MINOR"),
    ({"python": "3"}, "3.N"),
    ({"python": None}, "3.N"),
    ({"index_url": "download.pytorch.org/whl/cu121"}, "URL"),
    ({"extra_pins": ["numpy"]}, "NAME<op>VERSION"),
    ({"extra_pins": ["torch<3"]}, "torch field"),
    ({"base_image": "nvidia/cuda"}, "explicit tag"),
    ({"base_image": "nvidia/cuda:latest"}, "floats"),
    ({"base_image_digest": "abc"}, "sha256"),
    ({"name": "Torch212"}, "lowercase"),
    ({"name": "torch23"}, "differs from its folder"),
    ({"pinned": "x"}, "unknown field"),
])
def test_validation_rejects_bad_specs(changes, message):
    with pytest.raises(SpecError, match=message):
        validate_spec(_data(**changes), "torch212")


def test_validation_rejects_missing_field_and_local_with_pins():
    data = _data()
    del data["cuda"]
    with pytest.raises(SpecError, match="missing field"):
        validate_spec(data, "torch212")
    with pytest.raises(SpecError, match="cannot be set"):
        validate_spec(_data(name="local", torch=None, python=None, extra_pins=[], base_image=None), "local")


def test_unknown_env_names_the_known_ones():
    with pytest.raises(SpecError, match="known: .*torch212"):
        load_spec("torch999")


# --------------------------------------------------------------------------- install arguments, mirrors


def test_install_args():
    specs = load_all()
    assert install_args(specs["torch212"], {}) == ["torch==2.1.2", *TORCH212_EXTRA]
    nightly = specs["nightly"]
    assert install_args(nightly, {}) == [f"torch=={nightly.torch}", *nightly.extra_pins, "--index-url", nightly.index_url, "--pre"]
    assert install_args(specs["local"], {}) == []
    assert project_args(specs["torch212"], ".", "test") == ["-e", ".[test]", *TORCH212_EXTRA]


def test_mirror_variables():
    specs = load_all()
    nightly, latest = specs["nightly"], specs["latest"]
    assert effective_index(nightly, {"HARNESS_TORCH_INDEX_URL": "https://m/whl"}) == "https://m/whl"
    both = {"HARNESS_TORCH_INDEX_URL": "https://m/whl", "HARNESS_TORCH_INDEX_URL_NIGHTLY": "https://n/whl"}
    assert effective_index(nightly, both) == "https://n/whl"
    # the global mirror is for PyTorch indexes: PyPI-default specs keep pip/uv's own configuration ...
    assert effective_index(latest, {"HARNESS_TORCH_INDEX_URL": "https://m/whl"}) is None
    # ... unless pointed at one explicitly
    assert "--index-url" in install_args(latest, {"HARNESS_TORCH_INDEX_URL_LATEST": "https://p/simple"})


def test_command_line_prints_the_specs_values():
    out = run_envs("install-args", "torch212")
    assert out.returncode == 0 and out.stdout.split() == ["torch==2.1.2", *TORCH212_EXTRA]
    assert run_envs("get", "torch212", "python").stdout.strip() == "3.11"
    listing = run_envs("list").stdout
    assert all(name in listing for name in REQUIRED)


@pytest.mark.parametrize("name", REQUIRED)
def test_show_and_pins_print_the_spec_as_it_is_read(name):
    """What `show` and `pins` print is the spec as harness.envs reads it (the golden files that pinned their text are
    gone: a spec's new value changes both sides)."""
    spec = load_all()[name]
    shown = run_envs("show", name)
    assert shown.returncode == 0 and json.loads(shown.stdout) == json.loads(json.dumps(spec.to_dict()))
    assert json.loads(shown.stdout)["torch"] == spec.torch and json.loads(shown.stdout)["name"] == name
    pins = run_envs("pins", name)
    assert pins.returncode == 0 and pins.stdout.split() == list(spec.extra_pins)


# --------------------------------------------------------------------------- no pin written twice


def _install_files():
    """Files that install or run environments; a pin written in any of them would be a second copy."""
    files = [ROOT / "noxfile.py", ROOT / ".ci" / "run", ROOT / "pyproject.toml", *sorted((ROOT / "harness" / "envs").glob("*.py")),
             ROOT / "harness" / "docker.py", ROOT / "tests" / "test_dockerfiles.py",
             ROOT / "docs" / "envs.md"]
    files += sorted((ROOT / "envs").glob("*/Dockerfile*"))
    missing = [str(f.relative_to(ROOT)) for f in files if not f.is_file()]
    assert not missing, f"moved or gone (name them here again): {missing}"  # a silent drop would check nothing
    return files


def _pins():
    pins = {}
    for spec in load_all().values():
        for value in [spec.torch, *spec.extra_pins, spec.index_url]:
            if value:
                pins.setdefault(value, []).append(spec.name)
    return pins


def test_no_pin_written_twice():
    offenders = []
    for path in _install_files():
        text = path.read_text()
        for value, owners in _pins().items():
            if re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w])", text):
                offenders.append(f"{path.relative_to(ROOT)} repeats {value!r} (pinned in {', '.join(owners)})")
    assert not offenders, "\n".join(offenders)


def test_no_torch_install_pin_anywhere_else():
    """Across the repository (prose may name versions), nothing installs a pinned torch outside envs/*/env.yaml.
    Records under results/, tests/data/contended-cpu/, aa-cpu-*/, aa6-cpu-*/ and calibration-*/ are skipped: their captured `pip freeze` says `torch==...` as a
    fact, not a pin; so are
    the commands' outputs stored in tests/data/golden/ (`envs install-args` prints the spec's pin)."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], check=False, cwd=ROOT,
                            capture_output=True, text=True).stdout.split()
    pattern = re.compile(r"torch\s*==\s*\d|--index-url\s+https://download\.pytorch\.org")
    offenders = []
    for rel in listed:
        path = ROOT / rel
        recorded = ("results/", "tests/data/golden/", "tests/data/contended-cpu/", "tests/data/aa-cpu-",
                    "tests/data/aa6-cpu-", "tests/data/calibration-")  # records and outputs: their pip freeze is a fact
        record = rel.startswith("tests/data/") and rel.endswith(".json")  # a test's record: its pip freeze, a fact
        if rel.endswith("env.yaml") or rel == "tests/test_envs.py" or rel.startswith(recorded) or record or \
                not path.is_file():
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if pattern.search(text):
            offenders.append(rel)
    assert not offenders, f"torch pinned outside the specs in: {', '.join(offenders)}"


def test_pins_live_only_in_env_yaml():
    """Within envs/, each spec's own file is the only place its torch version appears."""
    for spec in load_all().values():
        if not spec.installs:
            continue
        for path in (ROOT / "envs").rglob("*"):
            if path.is_file() and path != spec.path and f'"{spec.torch}"' in path.read_text():
                pytest.fail(f"{path} repeats {spec.name}'s torch {spec.torch}")


# --------------------------------------------------------------------------- nox sessions


def test_every_spec_has_a_nox_session_and_a_dockerfile_where_it_has_an_image():
    out = subprocess.run([sys.executable, "-m", "nox", "-l"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    sessions = {m.group(1) for m in re.finditer(r"^[*-] (\S+)", out.stdout, re.MULTILINE)}
    for name, spec in load_all().items():
        assert f"bench-{name}" in sessions
        assert (ROOT / "envs" / name / "Dockerfile").is_file() == bool(spec.base_image), name
    assert {"tests", "lint"} <= sessions


def nox(*args, cwd=ROOT, timeout=120):
    return subprocess.run([sys.executable, "-m", "nox", *args], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "HARNESS_LOCAL_PYTHON": sys.executable})


@pytest.mark.parametrize("bad, text", [
    ("broken", 'name: "broken"\n'),  # a new env with fields missing
    ("latest", 'name: "latest"\ntorch: 2.15\n'),  # the tests session's own spec
    ("torch23", b"\xff\xfe not UTF-8"),
])
def test_one_invalid_spec_is_named_and_the_others_still_list_and_run(envs_copy, tmp_path, bad, text):
    (envs_copy / bad).mkdir(exist_ok=True)
    path = envs_copy / bad / "env.yaml"
    path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)
    good = REQUIRED - {bad}

    specs, errors = load_specs()
    assert set(specs) == good and set(errors) == {bad} and str(path) in errors[bad]
    with pytest.raises(SpecError, match=re.escape(str(path))):
        load_all()

    out = run_envs("list")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    lines = {line.split()[0]: line for line in out.stdout.splitlines()}
    assert set(lines) == good | {bad} and f"invalid: {path}" in lines[bad]

    listed = nox("-l")
    assert listed.returncode == 0, listed.stderr
    sessions = {m.group(1): m.group(0) for m in re.finditer(r"^[*-] (\S+).*$", listed.stdout, re.MULTILINE)}
    assert {f"bench-{n}" for n in good} | {"tests", "lint", f"bench-{bad}"} <= set(sessions)
    assert "INVALID spec" in sessions[f"bench-{bad}"] and str(path) in sessions[f"bench-{bad}"]
    failed = nox("-s", f"bench-{bad}", "--envdir", str(tmp_path / "nox"))
    assert failed.returncode == 1 and f"Session bench-{bad} aborted: {path}" in failed.stdout + failed.stderr
    local = nox("-s", "bench-local", "--no-install", "--envdir", str(tmp_path / "nox"), "--",
                "--set", "compile=off", "--rungs", "nope", timeout=300)  # a good env still runs (up to harness.run)
    assert "no rung 'nope' in plan seed-ladder" in local.stdout + local.stderr


def test_runner_args_defaults_and_env_name():
    sys.path.insert(0, str(ROOT))
    import noxfile

    # no --plan and no --rungs: the Quick start's rungs of the seed ladder, into the git-ignored results/runs
    assert noxfile.runner_args("torch212", ["--preset", "tiny"]) == [
        "--preset", "tiny", "--rungs", "fp32,bf16,sdpa-flash,vocab-50304", "--plan", "seed-ladder", "--out",
        "results/runs", "--env", "torch212"]
    assert noxfile.runner_args("latest", ["--plan=x", "--out", "o", "--env", "latest"]) == [
        "--plan=x", "--out", "o", "--env", "latest"]
    assert noxfile.runner_args("latest", ["--rungs", "tf32"]) == [
        "--rungs", "tf32", "--plan", "seed-ladder", "--out", "results/runs", "--env", "latest"]
    with pytest.raises(ValueError, match="contradicts"):
        noxfile.runner_args("latest", ["--env", "torch212"])


def test_nightly_session_fails_fast_on_unreachable_index(tmp_path):
    """nox -s bench-nightly against an index that cannot answer: seconds, one line naming it and the fix."""
    bad = "http://127.0.0.1:9/whl/nightly/cu132"  # discard port: connection refused at once
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "nox", "-s", "bench-nightly", "--envdir", str(tmp_path / "nox")], check=False,
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HARNESS_TORCH_INDEX_URL_NIGHTLY": bad})
    elapsed = time.monotonic() - start
    assert out.returncode != 0
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if "unreachable" in ln]
    assert len(lines) == 1, out.stdout + out.stderr
    assert bad in lines[0] and "HARNESS_TORCH_INDEX_URL_NIGHTLY" in lines[0]
    assert "uv pip install" not in out.stdout + out.stderr  # stopped before any install
    assert elapsed < 30, elapsed


# --------------------------------------------------------------------------- index probe


def test_probe_fails_fast_and_names_index_and_mirror_variable():
    spec = load_spec("nightly")
    start = time.monotonic()
    error = probe_index(spec, {"HARNESS_TORCH_INDEX_URL_NIGHTLY": "http://127.0.0.1:9/whl"}, timeout=3)
    assert time.monotonic() - start < 5
    assert error and "\n" not in error
    assert "http://127.0.0.1:9/whl" in error and "HARNESS_TORCH_INDEX_URL_NIGHTLY" in error


def test_probe_timeout_bounds_a_silent_server():
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)  # accepts the connection, never answers
    try:
        url = f"http://127.0.0.1:{server.getsockname()[1]}/whl/"
        start = time.monotonic()
        reason = probe_url(url, timeout=1)
        assert reason is not None and time.monotonic() - start < 3
    finally:
        server.close()


def test_probe_accepts_a_reachable_file_index(tmp_path):
    (tmp_path / "torch").mkdir()
    spec = load_spec("nightly")
    assert probe_index(spec, {"HARNESS_TORCH_INDEX_URL_NIGHTLY": tmp_path.as_uri()}) is None
    assert probe_index(load_spec("latest"), {}) is None  # default index: not probed


def test_probe_command_exit_code():
    out = run_envs("probe", "nightly", env={"HARNESS_TORCH_INDEX_URL_NIGHTLY": "http://127.0.0.1:9/x"})
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- check: imported torch vs spec


def test_check_torch_matches_and_mismatches():
    specs = load_all()
    t212 = specs["torch212"]
    ok_pins = {"numpy": "1.26.4", "setuptools": "69.5.1", "transformers": "4.42.4"}
    assert check_torch(t212, "2.1.2+cu121", "12.1", installed=ok_pins) is None
    error = check_torch(t212, "2.13.0+cpu", None, "/venv/torch", ok_pins)
    assert error == ("torch212: spec pins torch 2.1.2 (CUDA 12.1) but this env imports torch 2.13.0+cpu "
                     "(CUDA none: CPU build) from /venv/torch")
    assert "CUDA 11.8" in check_torch(t212, "2.1.2+cu118", "11.8", installed=ok_pins)
    assert "numpy 2.1.0" in check_torch(t212, "2.1.2", "12.1", installed={**ok_pins, "numpy": "2.1.0"})
    assert "not installed" in check_torch(t212, "2.1.2", "12.1", installed={"numpy": "1.26.4"})
    nightly = specs["nightly"]
    assert check_torch(nightly, nightly.torch + "+cu" + nightly.cuda.replace(".", ""), nightly.cuda,
                       installed={"transformers": "5.24.0"}) is None
    assert check_torch(specs["local"], "anything", None) is None


def test_check_command_in_this_interpreter_is_one_line():
    """This interpreter's torch (if any) is not latest's pinned CUDA build on a CPU machine; either way the
    command answers with exactly one line and the matching exit code."""
    out = run_envs("check", "latest")
    text = (out.stdout if out.returncode == 0 else out.stderr).strip()
    assert len(text.splitlines()) == 1
    if out.returncode:
        assert text.startswith("latest: ") and "spec pins torch" in text or "cannot import torch" in text


@pytest.mark.parametrize("pin, version, ok", [
    ("numpy<2", "1.26.4", True), ("numpy<2", "2.0.0", False), ("numpy<2", "2.0.0rc1", False),
    ("setuptools<70", "69.5.1", True), ("setuptools<70", "70.0.0", False),
    ("x>=1.2", "1.2", True), ("x==1.2", "1.2.0", True), ("x==1.2.*", "1.2.7", True), ("x!=1.2", "1.2", False),
    ("x~=1.4", "1.9", True), ("x~=1.4", "2.0", False), ("x>3", "3.0.1", True), ("x<=3", "3.0.1", False),
])
def test_pin_satisfied(pin, version, ok):
    assert pin_satisfied(pin, version) is ok


def test_missing_dependencies():
    deps = project_dependencies()
    assert "numpy" in deps and not any(d.startswith("torch") for d in deps)
    assert missing_dependencies(["surely-not-installed-pkg-xyz>=1", "pytest"]) == ["surely-not-installed-pkg-xyz>=1"]
    assert missing_dependencies(["pytest>=9999"]) == ["pytest>=9999"]


# --------------------------------------------------------------------------- bump-nightly


def _nightly_index(tmp_path, dates, variant="cu132", py="cp311"):
    (tmp_path / "idx" / "torch").mkdir(parents=True)
    links = []
    for d in dates:
        for v, p in ((variant, py), ("cu126", py), (variant, "cp312")):
            name = f"torch-2.16.0.dev{d}%2B{v}-{p}-{p}-manylinux_2_28_x86_64.whl"
            links.append(f'<a href="/whl/nightly/{v}/{name}#sha256=00">{name.replace("%2B", "+")}</a><br/>')
    (tmp_path / "idx" / "torch" / "index.html").write_text("<html><body>" + "\n".join(links) + "</body></html>")
    return (tmp_path / "idx").as_uri()


def test_bump_nightly_fails_clearly_offline(envs_copy):
    before = (envs_copy / "nightly" / "env.yaml").read_text()
    start = time.monotonic()
    out = run_envs("bump-nightly", env={"HARNESS_TORCH_INDEX_URL_NIGHTLY": "http://127.0.0.1:9/whl/nightly/cu132"})
    assert time.monotonic() - start < 30
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1 and "unreachable" in out.stderr and "HARNESS_TORCH_INDEX_URL" in out.stderr
    assert (envs_copy / "nightly" / "env.yaml").read_text() == before


def test_bump_nightly_rewrites_only_the_torch_line(envs_copy, tmp_path):
    url = _nightly_index(tmp_path, ["20261118", "20261121", "20261119"])
    path = envs_copy / "nightly" / "env.yaml"
    before = path.read_text()
    out = run_envs("bump-nightly", env={"HARNESS_TORCH_INDEX_URL_NIGHTLY": url})
    assert out.returncode == 0, out.stderr
    after = path.read_text()
    assert 'torch: "2.16.0.dev20261121"' in after
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].startswith("torch:")  # comments and other fields kept
    assert load_spec("nightly").torch == "2.16.0.dev20261121"

    out = run_envs("bump-nightly", "--date", "20261118", env={"HARNESS_TORCH_INDEX_URL_NIGHTLY": url})
    assert out.returncode == 0 and load_spec("nightly").torch == "2.16.0.dev20261118"
    out = run_envs("bump-nightly", "--date", "20261001", env={"HARNESS_TORCH_INDEX_URL_NIGHTLY": url})
    assert out.returncode == 1 and "no cu132 build dated 20261001" in out.stderr
    assert load_spec("nightly").torch == "2.16.0.dev20261118"


def test_nightly_builds_parses_only_matching_wheels():
    html = ('<a href="torch-2.16.0.dev20261120%2Bcu132-cp311-cp311-manylinux_2_28_x86_64.whl">x</a>'
            '<a href="torch-2.16.0.dev20261121%2Bcu132-cp311-cp311-manylinux_2_28_aarch64.whl">x</a>'
            '<a href="torch-2.16.0.dev20261122%2Bcu134-cp311-cp311-manylinux_2_28_x86_64.whl">x</a>'
            'torch-2.16.0.dev20261123+cu132-cp311-cp311-manylinux_2_28_x86_64.whl')
    assert nightly_builds(html, "13.2", "3.11") == {"20261120": "2.16.0.dev20261120",
                                                        "20261123": "2.16.0.dev20261123"}


# --------------------------------------------------------------------------- verify-matrix


def _record(env, version, cuda, status="ok", packages=None):
    """A schema-valid record with these facts: verify-matrix reads records through harness.record's validating
    reader, like harness.compare."""
    r = make_record(env=env, gpu=None, status=status, reason=None if status == "ok" else "worker exited with code 1",
                    run_id=f"r-{env}-{version}")
    r["environment"]["torch"] = {"version": version, "cuda": cuda}
    if packages is not None:
        r["environment"]["packages"] = {"sha256": "0", "packages": packages}
    return r


def test_verify_matrix(tmp_path):
    t212, latest = load_spec("torch212"), load_spec("latest")
    (tmp_path / "a.json").write_text(json.dumps(_record("torch212", t212.torch + "+cu121", t212.cuda)))
    (tmp_path / "b.json").write_text(json.dumps(_record("latest", latest.torch, latest.cuda)))
    (tmp_path / "junk.json").write_text("[1, 2]")
    out = run_envs("verify-matrix", str(tmp_path), "torch212", "latest")
    assert out.returncode == 0, out.stderr
    assert "torch212: 1 records (1 ok)" in out.stdout

    (tmp_path / "c.json").write_text(json.dumps(_record("latest", "2.13.0+cpu", None)))
    out = run_envs("verify-matrix", str(tmp_path), "torch212", "latest")
    assert out.returncode == 1 and "c.json: latest: spec pins torch" in out.stderr

    problems, _ = verify_matrix(tmp_path, ["torch23"])
    assert problems and "no records" in problems[0]
    pkgs = ["numpy==2.1.0", "setuptools==69.5.1", "torch==" + t212.torch]
    (tmp_path / "e.json").write_text(json.dumps(_record("torch212", t212.torch, t212.cuda, packages=pkgs)))
    problems, _ = verify_matrix(tmp_path, ["torch212"])
    assert problems == ["e.json: torch212: spec pins numpy<2 but this env has numpy 2.1.0"]
    (tmp_path / "d.json").write_text(json.dumps(_record("torch23", "2.3.1", "12.1", status="error")))
    problems, _ = verify_matrix(tmp_path, ["torch23"])
    assert problems == ["torch23: none of its 1 records has status ok"]


def test_verify_matrix_container_wants_the_image_and_its_digest(tmp_path):
    """--container (.ci/docker): every record was made inside image envs/NAME and names the image's id."""
    latest = load_spec("latest")
    digest = "sha256:" + "c" * 64
    inside = _record("latest", latest.torch, latest.cuda)
    inside["environment"]["container"] = {"image": "envs/latest", "digest": digest, "revision": "unknown",
                                          "base": "harness-ci/debian-base:bookworm"}
    (tmp_path / "a.json").write_text(json.dumps(inside))
    out = run_envs("verify-matrix", str(tmp_path), "latest", "--container")
    assert out.returncode == 0, out.stderr
    assert f"latest: 1 records (1 ok), torch {latest.torch} (CUDA {latest.cuda}), made in envs/latest@{digest[:19]}" \
        in out.stdout
    outside = _record("latest", latest.torch, latest.cuda)  # a nox run: no image
    outside["run_id"] = "r-nox"
    outside["environment"]["container"] = {"image": None, "digest": None}
    (tmp_path / "b.json").write_text(json.dumps(outside))
    problems, _ = verify_matrix(tmp_path, ["latest"], container=True)
    assert problems == ["latest: b.json: environment.container.image is None, not 'envs/latest'"]
    assert verify_matrix(tmp_path, ["latest"])[0] == []  # without --container a nox record is fine
    outside["environment"]["container"] = {"image": "envs/latest", "digest": None}  # docker run without -e DIGEST
    (tmp_path / "b.json").write_text(json.dumps(outside))
    problems, _ = verify_matrix(tmp_path, ["latest"], container=True)
    assert problems == ["latest: b.json: environment.container.digest is None, not the image's sha256:... id"]


def test_every_version_string_is_read_by_packaging():
    """One parser (packaging.version, PEP 440) for the torch order, the env names of the bisect and the pins."""
    from harness.analysis.dataset import torch_version_key
    from harness.bisect.candidates import Candidate, env_name_for
    from harness.envs.pins import pin_satisfied
    from harness.envs.spec import exact_version

    order = ["2.1.2", "2.6.0.dev20241203", "2.6.0rc1", "2.6.0", "2.10.0", None, "garbage"]
    assert sorted(reversed(order), key=torch_version_key) == order  # noqa: C414 (the key orders, not the input)
    assert torch_version_key("2.1.2+cu121") == torch_version_key("2.1.2")
    assert env_name_for("2.16.0.dev20261120") == "torch21600dev20261120" and env_name_for("2.6.0rc1") == "torch20600rc1"
    assert Candidate("2.6.0rc1").pre and Candidate("2.6.0.dev20241203").pre and not Candidate("2.6.0").pre
    assert exact_version("2.1.2+cu121") and not exact_version("2.1") and not exact_version("v2.1.2")
    assert pin_satisfied("torch==2.1.2", "2.1.2+cu121") and pin_satisfied("numpy<2", "1.26.4")
    assert pin_satisfied("setuptools~=69.1", "69.5.1") and not pin_satisfied("setuptools<70", "70.0.0")
    assert pin_satisfied("numpy==1.26.*", "1.26.4") and not pin_satisfied("numpy!=1.26.*", "1.26.4")


def test_a_spec_is_read_without_packaging_as_the_images_bootstrap_does():
    """The env images install the pinned build with the base image's bare python3 (no packaging): reading a spec
    there must not need it, and the exact-version rule there refuses what packaging's refuses (CI's container step
    failed on the import)."""
    code = ("import sys; sys.modules['packaging'] = sys.modules['packaging.version'] = None\n"
            "from harness.envs.spec import exact_version, load_spec\n"
            "assert load_spec('torch212').torch == load_spec('torch212').torch.strip()\n"
            "assert [exact_version(v) for v in ('2.1.2', '2.1.2\\n', '2.6.0.dev20241203', '2.1', '2.1.2+cu121', 'x')] == "
            "[True, False, True, False, True, False]\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


def _fake_torch_wheel(folder: Path, version: str, tag: str = "py3-none-any") -> Path:
    """A small installable wheel that calls itself torch `version` (a module and its dist-info)."""
    import base64
    import hashlib
    import zipfile

    info = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(text.encode())}\n" for name, text in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"torch-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(name, text)
    return path


def test_a_wheel_folder_installs_torch_from_the_folder_alone_and_says_which_wheel(tmp_path, monkeypatch):
    """Class 8 of issue 31: bisect --find-links DIR installs torch from DIR alone (--no-index: an index's build of the
    same version never wins), its dependencies from the folder and then the index (said in the record), and the
    record names the wheel file and its sha256. Run for real on a small wheel (offline: a step that would reach an
    index is recorded, not run)."""
    import hashlib

    from harness.bisect.candidates import Candidate, candidate_spec
    from harness.envs import install as install_mod
    from harness.provenance import envinfo

    if install_mod.find_uv() is None:
        pytest.skip("needs uv")
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel = _fake_torch_wheel(folder, "2.1.2+cpu")
    _fake_torch_wheel(folder, "2.1.1")  # another version beside it
    spec = candidate_spec(Candidate("2.1.2"), f"{sys.version_info.major}.{sys.version_info.minor}")
    venv = tmp_path / "venv"
    real, skipped = subprocess.run, []

    def run(cmd, **kwargs):  # the venv and the folder-alone torch step run; a step that may reach an index does not
        if "venv" in cmd or "--no-index" in cmd:
            return real(cmd, **kwargs)
        skipped.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(install_mod.subprocess, "run", run)
    install_mod.install(spec, venv, ROOT, find_links=folder)
    torch_step = install_mod.folder_install_steps(spec, ["pip"], folder)[0]
    assert torch_step[1:] == [spec.torch_requirement, "--no-index", "--find-links", str(folder), "--no-deps"]
    assert "--no-index" not in skipped[0] and spec.torch_requirement in skipped[0] and "--find-links" in skipped[0]
    installed = real([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                     text=True, check=True)
    assert installed.stdout.strip() == "2.1.2+cpu"  # the folder's build
    assert envinfo.torch_source(str(venv)) == {
        "folder": str(folder), "file": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "dependencies": "the folder, then the default index"}
    assert envinfo.torch_source(str(tmp_path)) is None  # a torch from an index: no such entry


def test_no_pattern_ends_at_a_dollar_that_passes_a_trailing_newline():
    """Class 9 of issue 31: '$' also matches before a final newline, so '2.1.2\\n' passed the version check. Every
    regular expression in harness/ and gpt/ that checks a value is anchored at the true end (\\Z or fullmatch)."""
    import ast

    offenders = []
    for path in sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "gpt").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in
                    ("compile", "match", "search", "fullmatch") and getattr(node.func.value, "id", None) == "re"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and node.args[0].value.endswith("$") and not node.args[0].value.endswith("\\$")
                    and "MULTILINE" not in ast.dump(node)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders


@pytest.mark.parametrize("field, value", [("torch", "2.1.2\n"), ("python", "3.11\n"), ("cuda", "12.1\n")])
def test_a_trailing_newline_is_no_version(tmp_path, field, value):
    """Class 9 of issue 31: --at '2.1.2\\n' and an env.yaml value with a trailing newline are refused in one line."""
    from harness.envs.spec import SpecError, load_spec

    p = run_module("harness.bisect", "--at", "2.1.2\n", "--rung", "bf16", "--out", tmp_path / "b", timeout=60)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "neither an env name" in p.stderr
    assert "--at '2.1.2\\n'" in p.stderr
    (tmp_path / "envs" / "x").mkdir(parents=True)
    spec = {"name": "x", "description": "d", "torch": "2.1.2", "cuda": "12.1", "index_url": None, "pre": False,
            "python": "3.11", "extra_pins": [], "base_image": None, "base_image_digest": None, field: value}
    (tmp_path / "envs" / "x" / "env.yaml").write_text(json.dumps(spec))  # JSON is YAML
    with pytest.raises(SpecError, match=field):
        load_spec("x", tmp_path / "envs")

