"""harness.console.yamlfile: the YAML a user hands us (a plan, a cluster config, an env spec) is read within bounds:
aliases that expand to a billion values, a value that contains itself, nesting 30,000 deep, a file not UTF-8 and one of
300 MB are refused in one line naming the file, never a traceback, and nothing runs. Issues 22 (a docstring's leading
number is its item) and 31 (its classes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from module_cli import ROOT, run_module


def _laughs(levels: int = 9) -> str:
    """A YAML flow value of 9**levels strings in a few hundred bytes, every anchor inside it."""
    text = '&l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
    for i in range(1, levels):
        text = f"[{text}, " + ", ".join([f"*l{i - 1}"] * 8) + "]"
        text = f"&l{i} " + text
    return text


@pytest.mark.parametrize("key", ["description", "cumulative"])
def test_billion_laughs_plan_is_refused(tmp_path, key):
    """8. A plan whose aliases expand to a billion values: refused at once, one line, exit 2, nothing run."""
    plan = tmp_path / "laughs.yaml"
    plan.write_text(f"name: laughs\n{key}: {_laughs()}\nrungs:\n  - name: r\n    set: {{steps: 3}}\n")
    out = tmp_path / "out"
    p = run_module("harness.run", "--plan", plan, "--out", out, timeout=60)
    assert p.returncode == 2 and "aliases" in p.stderr.strip().splitlines()[-1] and not out.exists()


def test_billion_laughs_cluster_config_is_refused(tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"slurm:\n  sbatch_options: {_laughs()}\n")
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path / "results", "--cluster-config", config, timeout=60)
    assert p.returncode == 2 and "aliases" in p.stderr


def test_yaml_that_refers_to_itself_is_refused():
    from harness.console.yamlfile import YamlTooLarge, load_yaml

    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}  # an alias used sanely still works
    with pytest.raises(YamlTooLarge, match="contains it"):
        load_yaml("a: &x [1, *x]\n")


def _yaml_command(kind: str, tmp_path: Path) -> tuple[Path, list[str], dict]:
    """Where a plan, a cluster config or an env spec goes, the command that reads it, and its environment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if kind == "plan":
        return tmp_path / "in.yaml", ["-m", "harness.run", "--plan", str(tmp_path / "in.yaml"),
                                      "--out", str(tmp_path / "out")], env
    if kind == "cluster config":
        return tmp_path / "in.yaml", ["-m", "harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus",
                                      "a100", "--dry-run", "--results", str(tmp_path / "out"), "--cluster-config",
                                      str(tmp_path / "in.yaml")], env
    (tmp_path / "envs" / "x").mkdir(parents=True)
    return tmp_path / "envs" / "x" / "env.yaml", ["-m", "harness.envs", "show", "x"], \
        {**env, "HARNESS_ENVS_DIR": str(tmp_path / "envs")}


@pytest.mark.parametrize("kind", ["plan", "cluster config", "env spec"])
@pytest.mark.parametrize("content, message", [
    ("name: deep\nrungs: " + "[" * 30_000 + "\n", "nested deeper than 64 levels"),
    (b"name: caf\xe9\nrungs:\n  - name: r\n", "not UTF-8 (invalid continuation byte at byte 9)"),
    (300 * 2**20, "larger than 1 MiB"),  # a sparse file of 300 MB: refused from its size, not read
])
def test_yaml_that_is_deep_not_utf8_or_huge_is_refused_in_one_line(tmp_path, kind, content, message):
    """Classes 5 and 6 of issue 31: a plan, cluster config or env spec nested 30,000 deep, in Latin-1, or of 300 MB:
    refused with one line naming the file (exit 2 for the options harness.run and harness.cluster take), never a
    traceback; the 300 MB file under a 300 MB memory limit, so reading it whole would fail."""
    path, args, env = _yaml_command(kind, tmp_path)
    if isinstance(content, int):
        path.touch()
        os.truncate(path, content)
    else:
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    p = subprocess.run(["bash", "-c", 'ulimit -v 300000; exec "$@"', "-", sys.executable, *args], check=False,
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.stdout.strip().splitlines()[-1]
    assert "Traceback" not in p.stderr + p.stdout and message in last and "refused" in last, p.stderr[-400:] + p.stdout[-400:]
    assert p.returncode == (1 if kind == "env spec" else 2)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())

