"""harness.lifeline: a worker dies with its runner even while its module is still importing (issue 12: a runner
SIGKILLed while the worker imported torch left the worker running for ~11 s)."""

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

RUNNER = textwrap.dedent("""
    import os, subprocess, sys, time
    env = dict(os.environ, HARNESS_RUNNER_PID=str(os.getpid()))
    child = subprocess.Popen([sys.executable, "-m", "harness.lifeline", "slow_import"], env=env, start_new_session=True)
    print(child.pid, flush=True)
    time.sleep(120)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"  # a zombie has died
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_worker_dies_with_a_sigkilled_runner_during_its_imports(tmp_path):
    (tmp_path / "slow_import.py").write_text("import time\ntime.sleep(60)  # stands in for `import torch` under load\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    runner = subprocess.Popen([sys.executable, "-c", RUNNER], stdout=subprocess.PIPE, text=True, env=env)
    child = None
    try:
        child = int(runner.stdout.readline())
        time.sleep(1.0)  # the child is in its "import" now
        assert _alive(child)
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the worker outlived its SIGKILLed runner"
    finally:
        runner.kill()
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)


def test_started_by_hand_it_runs_the_module_with_its_own_argv(tmp_path):
    (tmp_path / "echo_argv.py").write_text("import sys\nprint(sys.argv[1:])\n")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_RUNNER_PID"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(tmp_path)])
    p = subprocess.run([sys.executable, "-m", "harness.lifeline", "echo_argv", "a", "b c"], capture_output=True,
                       text=True, env=env, check=False, timeout=60)
    assert p.returncode == 0 and p.stdout.strip() == "['a', 'b c']"
