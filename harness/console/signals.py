"""Stop signals as an exception: SIGTERM (timeout, docker stop, a batch scheduler), SIGINT (Ctrl-C) and SIGHUP raise
Interrupted in the main thread, so a command cleans up (kills its worker group, removes its temp files) and says
in one line what happened, exiting 128 + the signal's number (harness.run, harness.compare, harness.report).
No imports beyond the standard library.
"""

from __future__ import annotations

import contextlib
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(Exception):
    """A stop signal reached the command (harness.run: the worker running then has been killed with its process
    group)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.finished: dict | None = None  # the record of a worker that wrote it just before the signal

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


@contextlib.contextmanager
def stop_on_signals():
    """SIGTERM, SIGINT and SIGHUP raise Interrupted in the main thread (instead of killing the command outright
    or a KeyboardInterrupt traceback), so the current worker group is killed and what finished is reported, or a
    half-written output removed."""

    def handler(signum, frame):
        for sig in STOP_SIGNALS:  # the first stop signal wins; a second one must not cut the clean-up short
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def held():
    """Stop signals wait until the block ends (blocked, then raised as usual): for what a signal must not cut in half,
    a clean-up or a set of renames. The one way the harness holds them."""
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
