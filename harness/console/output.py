"""Writing what a command outputs where the disk or the stream may refuse it: stdout that is /dev/full, closed or a
closed pipe, and an output folder that is read-only, a file, or fills up. Each is one line on stderr and a
non-zero exit (OutputError, exit 1), and no partial or temp file is left behind. (Records have their own writer,
harness.record.io, which never replaces a file; both write through harness.record.files.)
"""

from __future__ import annotations

import contextlib
import errno
import gc
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

from harness.console.signals import Interrupted, held, stop_on_signals
from harness.console.textsafe import is_file_part, terminal
from harness.record.files import publish, stage


class OutputError(OSError):
    """Output that could not be written; its message is the one line to print."""


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return "stdout is closed"


def emit(text: str, stream=None) -> None:
    """Write `text` to stdout (already made safe for a terminal by the caller) and flush; OutputError with one line
    if stdout is closed, full or a broken pipe. Afterwards stdout points at /dev/null, so the interpreter's own
    flush at exit cannot print a second traceback."""
    try:
        out = stream or sys.stdout
        out.write(text)
        out.flush()
    except (OSError, ValueError, AttributeError) as exc:  # /dev/full, EPIPE; a closed stream; `>&-` (stdout None)
        _silence_stdout()
        raise OutputError(f"cannot write the output to stdout: {_why(exc)}") from None


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the interpreter, as stdout does


def fail(message: str, code: int = 1) -> int:
    """Print one error line (made safe for a terminal) to stderr, if there still is one; the exit code."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        print(terminal(message), file=sys.stderr, flush=True)
    return code


_held: list | None = None  # what hold() keeps while run_process runs; None elsewhere (nothing is kept)


def hold(*objects) -> None:
    """Keep `objects` until the process ends, where run_process ends it: the OS then takes their memory back at once,
    where freeing a 100,000-record comparison object by object was 0.6 s of a 10 s report. Where main is called
    otherwise (a test calls it), nothing is kept."""
    if _held is not None:
        _held.extend(objects)


def run_process(command: str, main) -> NoReturn:
    """run_main as the whole life of this process (a command's `if __name__ == "__main__"`). Where main succeeded,
    the process ends once stdout and stderr are flushed, with no teardown of what main held (os._exit: the pools main
    used are shut down and joined by then, and nothing of this package registers an atexit handler). Any other end
    (an error code, a stop signal, an exception, SystemExit) is the interpreter's usual exit: after a stop signal,
    multiprocessing's own exit handler ends the chart workers that were told to stop. So is a run under a profiler or
    a tracer (python -m cProfile, coverage), which writes what it found on the way out.

    The cyclic garbage collector is off for the whole command: what compare and report make (the records, then the
    analyses and tables over them) lives until the process ends, and makes no garbage cycles worth collecting; its
    passes over those millions of live objects found nothing and took 0.7 s of a 100,000-record report, peak memory
    the same (refcounting frees all else). A chart drawn here keeps its figure's cycles until the end (+70 MB where this
    process drew every chart of a report, on one CPU); the chart workers collect as usual (harness.report.drawing)."""
    global _held
    _held = []
    gc.disable()
    code = run_main(command, main)
    if code == 0 and sys.getprofile() is None and sys.gettrace() is None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(0)
    sys.exit(code)


def run_main(command: str, main) -> int:
    """main()'s exit code; a stop signal (Ctrl-C, SIGTERM, SIGHUP) on the way is one line and exit 128 + its
    number, never a traceback: whatever main was writing is removed (write_files) or not started."""
    try:
        with stop_on_signals():
            return main()
    except (Interrupted, KeyboardInterrupt) as exc:
        signum = getattr(exc, "signum", 2)
        return fail(f"{command}: stopped by {signal.Signals(signum).name}; no output file is left half-written",
                    128 + signum)


def write_files(out_dir: str | os.PathLike, files: dict[str, bytes]) -> list[Path]:
    """Write every `name -> bytes` into out_dir (created if needed), each whole or not at all: into a temp file
    first, renamed over its name only once everything is written; on any failure the temp files are removed and
    nothing of this call is left. A name must be a plain file name (harness.console.textsafe.file_part makes one), so
    nothing is written outside out_dir. OutputError with one line otherwise."""
    out = Path(out_dir)
    for name in files:
        if not is_file_part(name):
            raise OutputError(f"{out}: refusing to write {terminal(name)!r}: not a plain file name")
    try:
        if out.exists() and not out.is_dir():
            raise OSError(errno.ENOTDIR, "it is a file, not a directory")
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{out}: cannot write there: {_why(exc)}") from None
    temps: dict[str, Path] = {}
    try:
        for name, data in files.items():
            temps[name] = stage(out / name, data)  # harness.record.files: fsynced, removed again on a failure
        # a stop signal waits until every file has its new content, so the folder never holds half old, half new
        with held():
            for name, tmp in temps.items():
                publish(tmp, out / name)
    except BaseException as exc:  # a full disk, and a stop signal (Ctrl-C, SIGTERM) half-way: no temp file stays
        for tmp in temps.values():
            with contextlib.suppress(OSError):
                tmp.unlink()
        if isinstance(exc, OSError):
            raise OutputError(f"{out}: cannot write {len(files)} file(s) there: {_why(exc)}; no partial or temp file "
                              "left") from None
        raise
    return [out / name for name in files]
