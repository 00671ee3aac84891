"""The runner is never silent for long: the worker's progress is relayed as it happens, and a quiet worker gets a
'still ...' line. Runs land in results/runs, said with one slash."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from module_cli import run_module

from harness import run
from harness.runner import launcher as runmod


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_progress_lines_say_what_the_worker_does_and_fill_silences(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(runmod.time, "monotonic", clock)
    lines = []
    p = runmod.Progress("[1/4] fp32", lines.append)
    p.event({"progress": "started", "torch": "2.15.0", "device": "cpu", "threads": 2})
    p.event({"progress": "calibrating"})
    clock.now += 7
    p.event({"progress": "building"})
    clock.now += 2
    p.tick()
    assert len(lines) == 1  # 9 s of quiet: nothing yet
    clock.now += 2
    p.tick()  # the phase began 4 s ago, the worker 11 s ago
    assert lines[-1] == "[1/4] fp32: building the model and optimizer (11 s since the worker started)"
    clock.now += 10
    p.tick()
    assert lines[-1] == "[1/4] fp32: still building the model and optimizer (14 s)"
    p.event({"progress": "compiling", "steps": 20})
    for _ in range(6):  # a minute of compiling: a line every 10 s
        clock.now += 10
        p.tick()
    assert lines[-1] == "[1/4] fp32: still compiling (60 s)" and len(lines) == 10
    p.event({"progress": "step", "step": 1, "steps": 20, "ms": 61000.0, "first_step_s": 61.2})
    assert lines[-1] == "[1/4] fp32: first step done in 61.2 s (compile included)"
    p.event({"progress": "step", "step": 2, "steps": 20, "ms": 140.0})
    assert len(lines) == 11  # steps are told every few seconds, not every 140 ms
    clock.now += 3
    p.event({"progress": "step", "step": 9, "steps": 20, "ms": 141.5})
    p.event({"progress": "step", "step": 20, "steps": 20, "ms": 139.0})
    assert lines[-2:] == ["[1/4] fp32: step 9/20, 141.5 ms", "[1/4] fp32: step 20/20, 139.0 ms"]
    p.event({"progress": "profiling", "steps": 3})
    clock.now += 10
    p.tick()
    assert lines[-1] == "[1/4] fp32: still profiling (10 s)"
    p.event({"progress": "profiling", "steps": 0})  # profile_steps=0: the other evidence only, said if it lasts
    assert lines[-1] == "[1/4] fp32: still profiling (10 s)" and p.phase == "gathering the evidence (explain)"


def test_worker_output_is_relayed_as_it_comes_not_when_the_worker_ends():
    """A stand-in worker prints one progress event, then works 3 s, then another and its record line: the
    first event reaches the runner while it still works."""
    script = ("import json, time\n"
              "print(json.dumps({'progress': 'started', 'torch': 'x', 'device': 'cpu', 'threads': 1}), flush=True)\n"
              "time.sleep(3)\n"
              "print(json.dumps({'progress': 'profiling', 'steps': 3}), flush=True)\n"
              "print(json.dumps({'record': '/nowhere.json', 'status': 'ok', 'reason': None}), flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    heard = []
    progress = runmod.Progress("[1/1] r", lambda line: heard.append((time.monotonic(), line)))
    output = runmod.WorkerOutput(proc, progress)
    started = time.monotonic()
    assert output.pump(started + 60)
    output.close()
    assert [line for _t, line in heard] == ["[1/1] r: started: torch x, cpu, 1 thread(s)",
                                            "[1/1] r: profiling 3 more step(s) for the evidence (explain) ..."]
    assert heard[1][0] - heard[0][0] >= 2.5  # the first line came before the worker's 3 s of work, not after
    assert json.loads(output.stdout.strip().splitlines()[-1])["record"] == "/nowhere.json"


@pytest.mark.slow
def test_a_run_streams_its_progress_into_results_runs_with_one_slash(tmp_path):
    out = tmp_path / "runs"
    proc = run_module("harness.run", "--out", f"{out}/", "--rungs", "fp32", "--set", "compile=off", "--steps", "3",
                      "--warmup-steps", "1", "--set", "profile_steps=1", "--threads", "1", "--env", "local")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(f"-> {out}/") and "//" not in lines[0]
    assert lines[1] == "rungs: fp32 (left out: tf32, bf16, sdpa-flash, vocab-50304, fused-adamw-clip; without --rungs every rung of the plan runs)"
    assert [line.split(": ", 1)[1].split(" ")[0] for line in lines[2:6]] == ["started:", "first", "first", "step"]
    assert lines[2] == "[1/1] fp32: started: torch " + lines[2].split("torch ")[1] and lines[2].endswith("cpu, 1 thread(s)")
    assert lines[5].startswith("[1/1] fp32: step 3/3, ") and lines[6].startswith("[1/1] fp32: profiling 1 more step(s)")
    assert lines[7].startswith("[1/1] fp32 ") and " ok " in lines[7]
    record = json.loads(next(out.glob("*.json")).read_text())
    assert record["environment"]["threads"]["torch"] == 1 and record["environment"]["threads"]["chosen"] == "--threads 1"
    assert "--threads 1" in record["rerun"]["command"]
    assert not any(line.startswith('{"progress"') for line in lines)  # relayed as lines, never as raw JSON


def test_runs_land_in_results_runs_by_default():
    args = run.make_parser().parse_args([])
    assert args.out == "results/runs"
    ignored = subprocess.run(["git", "check-ignore", "-q", "results/runs/x.json"], cwd=runmod.Path(__file__).parent.parent,
                             check=False)
    if ignored.returncode != 128:  # 128: not a git checkout (a copy); the rule is then in .gitignore as text
        assert ignored.returncode == 0
    assert "/results/runs/" in (runmod.Path(run.__file__).parent.parent / ".gitignore").read_text().splitlines()
