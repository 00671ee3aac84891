"""pytest as `nox -s tests` runs it: in a child process whose stdout is the terminal's and whose stderr passes through
line by line, less one thing: the leak report triton's nanobind bindings print as the interpreter exits ("nanobind:
leaked 4 instances!" and about 30 lines more, triton-lang/triton#10921). After a passing run it reads as a crash, and
it says nothing about this project. Every other line, and the exit status, are pytest's own.

    python tests/run_pytest.py [pytest arguments]
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading

# The report's lines, and nothing else: a line that matches none of them ends the report and is shown.
LEAK_START = re.compile(rb"nanobind: leaked \d+ (instances|types|functions)!\r?\n?$")
LEAK_LINE = re.compile(rb"( - leaked (instance|type|function) .*| - \.\.\. skipped remainder|"
                       rb"nanobind: leaked \d+ (instances|types|functions)!|"
                       rb"nanobind: this is likely caused by a reference counting issue in the binding code\.)\r?\n?$")
LEAK_END = b"See https://nanobind.readthedocs.io/en/latest/refleaks.html"


class LeakFilter:
    """Feed it stderr's lines in order; it returns what to show of each (b"" for a line of the report)."""

    def __init__(self):
        self.inside = False

    def line(self, line: bytes) -> bytes:
        if not self.inside and LEAK_START.match(line):
            self.inside = True
            return b""
        if not self.inside:
            return line
        if LEAK_LINE.match(line):
            return b""
        self.inside = False
        if line.startswith(LEAK_END):  # its last line; nanobind ends it without a newline, so what follows is glued on
            return line[len(LEAK_END):].lstrip(b"\r\n")
        return line


def _pump(stream, out) -> None:
    leaks = LeakFilter()
    for line in iter(stream.readline, b""):
        shown = leaks.line(line)
        if shown:
            out.write(shown)
            out.flush()


def main(argv: list[str]) -> int:
    child = subprocess.Popen([sys.executable, "-m", "pytest", *argv], stderr=subprocess.PIPE)
    # Ctrl-C reaches pytest too (one process group): it stops, prints its summary and exits; this process waits for it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    pump = threading.Thread(target=_pump, args=(child.stderr, sys.stderr.buffer), daemon=True)
    pump.start()
    code = child.wait()
    pump.join()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
