"""harness.docker's command line and its engine errors, and the images' entrypoint (harness.image_entry), without an
engine: the SDK client is a stand-in that raises what dockerd answers. .ci/docker runs the same paths on a real one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness import docker as hdocker
from harness import image_entry

ROOT = Path(__file__).resolve().parent.parent


# --------------------------------------------------------------------------- the command line


def test_run_options_after_the_env_name_are_ours_and_only_what_follows_dashdash_is_the_runners(monkeypatch, tmp_path):
    """docs/envs.md's order: `run torch212 --no-gpus --results X -- ...`. A REMAINDER positional once took
    --no-gpus and --results as runner arguments and still asked for GPUs."""
    calls = []
    monkeypatch.setattr(hdocker, "run", lambda name, runner_args, results, gpus, tag: calls.append(
        (name, runner_args, results, gpus, tag)) or 0)
    assert hdocker.main(["run", "torch212", "--no-gpus", "--results", str(tmp_path), "--", "--preset", "tiny",
                         "--rungs", "fp32"]) == 0
    assert hdocker.main(["run", "--no-gpus", "torch212", "--results", str(tmp_path)]) == 0
    assert hdocker.main(["run", "torch212", "--tag", "t:1", "--", "--results", "x"]) == 0  # after --: the runner's
    assert calls == [
        ("torch212", ["--preset", "tiny", "--rungs", "fp32"], tmp_path, False, None),
        ("torch212", [], tmp_path, False, None),
        ("torch212", ["--results", "x"], Path("results/runs"), True, "t:1"),
    ]


def test_runner_arguments_without_dashdash_are_an_error_not_swallowed(capsys):
    with pytest.raises(SystemExit) as exc:
        hdocker.main(["run", "torch212", "--preset", "tiny"])
    assert exc.value.code == 2 and "unrecognized arguments: --preset tiny" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        hdocker.main(["build", "torch212", "--", "--preset", "tiny"])
    assert "only `run` takes them" in capsys.readouterr().err


def test_build_takes_build_arguments(monkeypatch):
    calls = []
    monkeypatch.setattr(hdocker, "build", lambda *a: calls.append(a) or "sha256:" + "0" * 64)
    assert hdocker.main(["build", "latest", "--build-arg", "BASE_IMAGE=local/base:1",
                         "--build-arg", "UV_IMAGE=local/uv:0.13.9"]) == 0
    assert calls == [("latest", None, False, {"BASE_IMAGE": "local/base:1", "UV_IMAGE": "local/uv:0.13.9"})]
    with pytest.raises(SystemExit):
        hdocker.main(["build", "latest", "--build-arg", "BASE_IMAGE"])


def _fake_engine(monkeypatch, start_error=None, build_error=None):
    """A docker SDK client that answers like dockerd 20.10 without the NVIDIA Container Toolkit."""
    docker = pytest.importorskip("docker")

    def api_error(explanation):  # as the SDK raises it for a 500 answer
        return docker.errors.APIError("500 Server Error for http+docker://localhost/v1.41/containers/x/start",
                                      explanation=explanation)

    state = {"created": [], "removed": [], "buildargs": None}

    class Container:
        def start(self):
            if start_error:
                raise api_error(start_error)

        def remove(self, force=False):
            state["removed"].append(self)

    class Client:
        class images:
            @staticmethod
            def get(tag):
                return type("Image", (), {"id": "sha256:" + "a" * 64})()

        class containers:
            @staticmethod
            def create(image, **kwargs):
                state["created"].append(kwargs)
                return Container()

        class api:
            @staticmethod
            def build(**kwargs):
                state["buildargs"] = kwargs["buildargs"]
                if build_error:
                    raise api_error(build_error)
                return iter([{"stream": "Step 1/2\n"}, {"aux": {"ID": "sha256:" + "b" * 64}}])

    monkeypatch.setattr(hdocker, "client", lambda: Client())
    monkeypatch.setattr(hdocker, "build_context", lambda name: None)
    return state


def test_gpus_without_the_container_toolkit_is_one_line_naming_what_is_missing(monkeypatch, tmp_path, capsys):
    state = _fake_engine(monkeypatch, start_error='could not select device driver "" with capabilities: [[gpu]]')
    rc = hdocker.main(["run", "latest", "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("run of envs/latest: the Docker engine cannot give GPUs to containers: the NVIDIA Container "
                          "Toolkit is not installed"), err
    assert "--no-gpus" in err
    assert len(state["removed"]) == 1  # the container created but never started is not left behind
    assert state["created"][0]["device_requests"]  # GPUs were asked for: no --no-gpus


def test_other_engine_errors_are_one_line_too(monkeypatch, tmp_path, capsys):
    _fake_engine(monkeypatch, start_error="driver failed programming external connectivity\non endpoint x")
    assert hdocker.main(["run", "latest", "--no-gpus", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == "run of envs/latest: the Docker engine refused: driver failed programming external connectivity " \
                  "on endpoint x\n", err
    _fake_engine(monkeypatch, build_error="pull access denied for nvidia/cuda")
    assert hdocker.main(["build", "latest"]) == 1
    assert capsys.readouterr().err == "build of envs/latest: the Docker engine refused: pull access denied for nvidia/cuda\n"


def test_build_passes_the_build_arguments_to_the_engine(monkeypatch, capsys):
    state = _fake_engine(monkeypatch)
    assert hdocker.main(["build", "latest", "--build-arg", "BASE_IMAGE=local/base:1"]) == 0
    assert state["buildargs"]["BASE_IMAGE"] == "local/base:1" and state["buildargs"]["HARNESS_ENV"] == "latest"
    assert capsys.readouterr().out.endswith(f"built envs/latest sha256:{'b' * 64}\n")


def test_run_cli_in_the_documented_order_reaches_the_engine(tmp_path):
    """In a subprocess, as users type it: no engine, so the one engine line and exit 2, not a usage error."""
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"}
    out = subprocess.run([sys.executable, "-m", "harness.docker", "run", "torch212", "--no-gpus", "--results",
                          str(tmp_path / "r"), "--", "--preset", "tiny"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=60, check=False)
    assert out.returncode == 2 and out.stderr.startswith("no Docker engine reachable"), out.stderr


# --------------------------------------------------------------------------- the images' entrypoint

# /proc/self/mountinfo of containers on dockerd 20.10 (overlay2), trimmed to what matters
OVERLAY_ROOT = "402 329 0:52 / / rw,relatime master:183 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X\n"
ETC = "410 402 254:1 /etc/machine-id /etc/machine-id ro,relatime - ext4 /dev/vda rw\n"
BIND = "411 402 254:1 /home/u/results/runs /results rw,relatime - ext4 /dev/vda rw\n"
ANONYMOUS = ("411 402 254:1 /var/lib/docker/volumes/" + "0123456789abcdef" * 4 + "/_data /results rw,relatime - "
             "ext4 /dev/vda rw\n")
NAMED = "411 402 254:1 /var/lib/docker/volumes/harness-results/_data /results rw,relatime - ext4 /dev/vda rw\n"


@pytest.mark.parametrize("mountinfo, out, vanishes", [
    (OVERLAY_ROOT + ETC, "/results", "is not in a mounted folder"),  # docker run envs/nightly (no -v)
    (OVERLAY_ROOT + ETC + ANONYMOUS, "/results", "anonymous volume"),  # docker run -v /results ...
    (OVERLAY_ROOT + ETC + BIND, "/results", None),
    (OVERLAY_ROOT + ETC + BIND, "/results/sub/dir", None),
    (OVERLAY_ROOT + ETC + BIND, "/resultsX", "is not in a mounted folder"),
    (OVERLAY_ROOT + ETC + NAMED, "/results", None),  # a named volume: the user chose it
    (OVERLAY_ROOT + BIND.replace("/results ", "/my\\040results "), "/my results/x", None),  # mountinfo's escapes
])
def test_entry_tells_where_records_would_vanish(mountinfo, out, vanishes):
    reason = image_entry.problem(out, mountinfo)
    assert (reason is None) if vanishes is None else (vanishes in reason), reason


def test_entry_reads_the_last_out():
    assert image_entry.out_dir(["--plan", "p", "--out", "/results", "--preset", "tiny", "--out=/results/x"]) == "/results/x"
    assert image_entry.out_dir(["--plan", "p"]) is None


def _entry(tmp_path, monkeypatch, mountinfo, keep=None):
    """main() with a given mountinfo; exec replaced by a recorder."""
    execs = []
    real_open = open

    def fake_open(path, *a, **k):
        return real_open(tmp_path / "mountinfo", *a, **k) if path == "/proc/self/mountinfo" else real_open(path, *a, **k)

    (tmp_path / "mountinfo").write_text(mountinfo)
    monkeypatch.setattr("builtins.open", fake_open)
    monkeypatch.setattr(image_entry.os, "execv", lambda exe, argv: execs.append(argv))
    monkeypatch.setenv("HARNESS_IMAGE", "envs/nightly")
    if keep:
        monkeypatch.setenv(image_entry.KEEP_VAR, keep)
    else:
        monkeypatch.delenv(image_entry.KEEP_VAR, raising=False)
    rc = image_entry.main(["--plan", "seed-ladder", "--out", "/results", "--preset", "tiny"])
    return rc, execs


def test_entry_refuses_without_a_mount_in_one_line(tmp_path, monkeypatch, capsys):
    rc, execs = _entry(tmp_path, monkeypatch, OVERLAY_ROOT + ETC)
    err = capsys.readouterr().err
    assert rc == image_entry.REFUSED_EXIT and not execs
    assert err.count("\n") == 1 and err.startswith("envs/nightly: --out /results is not in a mounted folder"), err
    assert '-v "$PWD/results/runs:/results"' in err and "envs/nightly [ARGS]" in err


def test_entry_runs_the_runner_with_a_mount_or_when_asked_and_says_so_first(tmp_path, monkeypatch, capsys):
    rc, execs = _entry(tmp_path, monkeypatch, OVERLAY_ROOT + BIND)
    assert rc == 0 and execs == [[sys.executable, "-m", "harness.run", "--plan", "seed-ladder", "--out", "/results", "--preset",
                      "tiny"]]
    assert capsys.readouterr().err == ""
    rc, execs = _entry(tmp_path, monkeypatch, OVERLAY_ROOT, keep="1")
    assert rc == 0 and len(execs) == 1
    assert capsys.readouterr().err.startswith("WARNING envs/nightly: --out /results is not in a mounted folder")


def test_entry_as_a_process_refuses_where_results_is_no_mount(tmp_path):
    """The real module in a subprocess: on this machine tmp_path is no mount point of its own."""
    out = subprocess.run([sys.executable, "-m", "harness.image_entry", "--out", str(tmp_path / "r")], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False,
                         env={**os.environ, "HARNESS_IMAGE": "envs/x"})
    table = image_entry.mounts(Path("/proc/self/mountinfo").read_text())
    point, _ = image_entry.holding_mount(str(tmp_path), table)
    if point != "/":
        pytest.skip(f"{tmp_path} lies in the mount {point} here")
    assert out.returncode == 2 and out.stderr.startswith(f"envs/x: --out {tmp_path / 'r'} is not in a mounted"), out


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


@pytest.mark.parametrize("args", [["run", "latest"], ["run", "latest", "--no-gpus"], ["build", "latest"]])
def test_docker_commands_without_the_docker_sdk_say_so_in_one_line(tmp_path, args):
    """Class 11 of issue 31: every harness.docker command that needs the docker SDK, where it is not installed: one
    line naming it, exit 2, no traceback."""
    blocker = tmp_path / "blocker"
    (blocker / "docker").mkdir(parents=True)
    (blocker / "docker" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'docker'\", name='docker')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "harness.docker", *args, "--results", str(tmp_path / "r")]
                       if args[0] == "run" else [sys.executable, "-m", "harness.docker", *args], check=False,
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == "the docker SDK is not installed (pip install docker)", p.stderr

