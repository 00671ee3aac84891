"""The real steps of a call, each a subprocess of this interpreter: the sanity check, one `python -m harness.run`
per planned run, and at the end harness.compare and harness.report. Output goes to the console and to a log."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from harness.gpu_check import sanity
from harness.gpu_check.budget import Result
from harness.gpu_check.plan import Run
from harness.record.io import read_json
from harness.record.view import RecordView

KILL_GRACE_S = 30  # harness.run kills its worker at --timeout; past this more, the harness.run process itself goes
MIN_CLOSING_S = 5  # compare and report get at least this long even when the runs used the whole budget


def tee(argv: list[str], log: Path, timeout_s: float | None = None, header: str | None = None) -> tuple[int, str]:
    """Run argv, its stdout and stderr shown and appended to `log`; (exit status, output). A process still running
    `timeout_s` after its start is killed (status 124)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    chunks: list[str] = []
    with open(log, "a", encoding="utf-8") as f:
        if header:
            f.write(header + "\n")

        def pump(stream) -> None:  # a thread: the wait below keeps its timeout even when the output stops
            for line in stream:
                sys.stdout.write(line)
                sys.stdout.flush()
                f.write(line)
                chunks.append(line)

        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        reader = threading.Thread(target=pump, args=(proc.stdout,), daemon=True)
        reader.start()
        try:
            code = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = 124
        reader.join(timeout=5)
        if code == 124:
            f.write(f"gpu_check: killed after {timeout_s:.0f} s\n")
    return code, "".join(chunks)


def run_sanity(python: str, logs: Path) -> tuple[int, dict | None]:
    """nvidia-smi (where there is one) and the torch check; (its exit status, what it found)."""
    log = logs / "sanity.log"
    if shutil.which("nvidia-smi"):
        tee(["nvidia-smi"], log)
        tee(["nvidia-smi", "--query-gpu=index,name,driver_version,memory.total,memory.used,power.limit,clocks.max.sm",
             "--format=csv"], log)
    code, output = tee([python, "-m", "harness.gpu_check.sanity"], log, timeout_s=120)
    return code, sanity.parse(output)


class WorkerRunner:
    """One planned run = one `python -m harness.run` of one rung, its records in OUT/<folder>/."""

    def __init__(self, python: str, out: Path):
        self.python, self.out = python, out

    def argv(self, run: Run, timeout_s: float) -> list[str]:
        return [self.python, "-m", "harness.run", *run.argv(),
                "--out", str(self.out / run.folder), "--timeout", f"{max(timeout_s, 1.0):.0f}"]

    def __call__(self, run: Run, timeout_s: float) -> Result:
        folder = self.out / run.folder
        before = set(folder.glob("*.json")) if folder.is_dir() else set()
        code, _output = tee(self.argv(run, timeout_s), self.out / "logs" / f"{run.tier}.log",
                            timeout_s=timeout_s + KILL_GRACE_S, header=f"=== {run.key}")
        records = [read_json(p) for p in sorted(set(folder.glob("*.json")) - before)] if folder.is_dir() else []
        records = [r for r in records if isinstance(r, dict) and "run_id" in r]
        if not records:
            return Result("error", note=f"harness.run exit {code}, no record")
        statuses = sorted({r.get("status") for r in records})
        reasons = [r.get("reason") for r in records if r.get("reason")]
        view = RecordView(records[0])  # one rung, one repeat: one record
        memory, metric = view.peak_memory(widest=True)
        return Result(statuses[0] if len(statuses) == 1 else "+".join(statuses), [r["run_id"] for r in records],
                      note=(reasons[0] or "")[:160] if reasons else "", tokens_s=view.tokens_per_s,
                      memory=None if memory is None else f"{memory / 2**20:,.0f}" + (
                          "" if metric == "device used" else f" ({metric})"))


def closing(python: str, out: Path, paths: list[Path], deadline: float | None = None) -> dict:
    """harness.compare into OUT/compare.txt and harness.report into OUT/report/, over OUT and `paths`; each is killed
    at `deadline` (a time.monotonic() reading: the end of the budget), with at least MIN_CLOSING_S to run."""
    def limit() -> float:
        return 300.0 if deadline is None else max(deadline - time.monotonic(), MIN_CLOSING_S)

    done = {}
    where = [str(out), *map(str, paths)]
    compare_txt = out / "compare.txt"
    compare_txt.unlink(missing_ok=True)
    t0 = time.monotonic()
    code, _ = tee([python, "-m", "harness.compare", *where], compare_txt, timeout_s=limit())
    done["compare"] = {"exit": code, "seconds": round(time.monotonic() - t0, 1), "paths": where}
    t0 = time.monotonic()
    code, _ = tee([python, "-m", "harness.report", *where, "-o", str(out / "report")], out / "logs" / "report.log",
                  timeout_s=limit())
    done["report"] = {"exit": code, "seconds": round(time.monotonic() - t0, 1)}
    return done
