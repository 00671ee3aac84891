"""A worker never outlives the runner that started it: `python -m harness.lifeline harness.worker SPEC.json`.

The launcher starts every worker through this module, which ties the process to its runner *before* the worker's
module is imported: importing torch takes seconds (more under load), and a runner SIGKILLed in that window left
a worker running on, orphaned, for as long (issue 12's table: 10.9 s). Linux: the kernel sends SIGKILL when the
parent dies (prctl PR_SET_PDEATHSIG, kept across the exec-free runpy start); elsewhere a daemon thread polls
getppid() every second and kills the worker's process group. No torch import here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import runpy
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1  # linux/prctl.h
RUNNER_PID_VAR = "HARNESS_RUNNER_PID"  # set by the launcher in the worker's environment


def runner_pid() -> int | None:
    """The pid of the runner that started this worker (the launcher sets RUNNER_PID_VAR); None when started by hand."""
    pid = os.environ.get(RUNNER_PID_VAR)
    return int(pid) if pid and pid.isdigit() else None


def die_with_runner(runner_pid: int | None) -> None:
    """Tie this process's life to runner_pid's (None: started by hand, nothing to tie)."""
    if runner_pid is None:
        return
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != runner_pid:  # the runner died before the line above took effect
        os._exit(1)
    if not sys.platform.startswith("linux"):
        def watch():
            while os.getppid() == runner_pid:
                time.sleep(1.0)
            os.killpg(os.getpgrp(), signal.SIGKILL)  # the worker's own group: it and its compiler processes

        threading.Thread(target=watch, name="runner-watch", daemon=True).start()


def main(argv: list[str]) -> None:
    if len(argv) < 1:
        print("usage: python -m harness.lifeline MODULE [ARGS...]", file=sys.stderr)
        sys.exit(2)
    die_with_runner(runner_pid())
    sys.argv = argv  # the module sees its own argv, as under `python -m MODULE ARGS`
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
