"""Slurm: one sbatch script per GPU type, the job states of the matrix's tasks, and what to resubmit.

Slurm applies --gres/--constraint to a whole job array, not to one task, so a matrix is one job array
per GPU type; every array index is the cell's index in the manifest, so one index means one cell
whichever array it is in. Everything goes through Slurm's own commands (sbatch, squeue, sacct) with
their parsable output; nothing here queues or schedules.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from harness.cluster.matrix import Cell, Matrix, with_rungs
from harness.console.textsafe import script_command, script_line, script_value
from harness.record.files import write_atomic

PENDING = {"PENDING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING = {"RUNNING", "CONFIGURING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "SUSPENDED", "STOPPED"}
SLURM_TIMEOUT_S = 60


class SlurmError(RuntimeError):
    """A Slurm command failed (exit 1, its message on one line)."""


@dataclass
class TaskState:
    state: str  # Slurm's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, PREEMPTED, ...
    exit_code: str  # "code:signal", as sacct prints it
    source: str  # squeue or sacct


@dataclass
class CellStatus:
    cell: Cell
    state: str  # pending, running, done, failed
    task: str  # JOB_INDEX of its latest submission, "" if never submitted
    slurm: TaskState | None
    done: int
    expected: int
    devices: list[str]
    missing: str


# ---------------------------------------------------------------- scripts and submitting

def gpu_option(config: dict, gpu: str) -> str:
    name = config["slurm"]["gpu_types"][gpu]
    return f"--gres=gpu:{name}:1" if config["slurm"]["gpu_select"] == "gres" else f"--constraint={name}"


def cell_lines(matrix: Matrix, cell: Cell, run_args: list[str]) -> list[str]:
    """The shell lines that run one cell."""
    slurm = matrix.config["slurm"]
    out = str(matrix.cell_dir(cell))
    if slurm["runner"] == "container":
        mount = slurm["container_results"]
        image = slurm["container_image"].format(env=cell.env)
        inside = f"{mount.rstrip('/')}/{cell.env}/{cell.gpu}"
        return [f"mkdir -p {shlex.quote(out)}",
                "exec " + shlex.join(["srun", f"--container-image={image}", f"--container-mounts={matrix.results}:{mount}",
                                      "python", "-m", "harness.run", *run_args, "--env", cell.env, "--out", inside])]
    nox = script_command(matrix.config["slurm"]["nox"], "slurm.nox")  # its words, each quoted: one command
    session = f"bench-{cell.env}"
    lock = f".nox/{session}.lock"
    # Installs under a lock: two tasks of one env (two GPU types) share the checkout's venv, so the
    # first installs and the second finds it ready; the run itself skips installs (-R).
    return ["mkdir -p .nox",
            f"flock {lock} {nox} -r -s {session} --install-only",
            f"exec {nox} -R -s {session} -- " + shlex.join([*run_args, "--out", out])]


def render_script(matrix: Matrix, gpu: str, work: list[tuple[Cell, list[str]]], round_no: int,
                  partition: str | None = None) -> str:
    """One job array: the cells of one GPU type, by their manifest index."""
    slurm = matrix.config["slurm"]
    indices = ",".join(str(c.index) for c, _ in work)
    partition = partition or slurm["partition"]
    options = [f"--job-name=harness-{matrix.id}-{gpu}", f"--array={indices}", gpu_option(matrix.config, gpu),
               f"--time={slurm['time']}", f"--cpus-per-task={slurm['cpus_per_task']}",
               f"--output={matrix.dir}/logs/%A_%a.out"]
    if partition:
        options.append(f"--partition={partition}")
    if slurm["mem"]:
        options.append(f"--mem={slurm['mem']}")
    options += list(slurm["sbatch_options"])
    lines = ["#!/bin/bash",
             f"# gpt-harness matrix {matrix.id}, round {round_no}, GPU type {gpu}: one array task per cell.",
             f"# Written by python -m harness.cluster; the manifest ({matrix.path}) maps each index to its cell.",
             # one word per option, on its own line: a newline in a value (--partition $'p\ntouch x') is refused
             *(f"#SBATCH {script_value(o, 'sbatch option')}" for o in options),
             "set -euo pipefail",
             f"cd {shlex.quote(matrix.repo)}",
             *(script_line(line, "slurm.setup line") for line in slurm["setup"]),
             'echo "harness.cluster: matrix ' + matrix.id + ' index ${SLURM_ARRAY_TASK_ID} on $(hostname)"',
             'case "${SLURM_ARRAY_TASK_ID:?not a job array task}" in']
    for cell, run_args in work:
        lines.append(f"  {cell.index})  # {cell.name}")
        lines += [f"    {line}" for line in cell_lines(matrix, cell, run_args)]
        lines.append("    ;;")
    lines += ['  *) echo "array index ${SLURM_ARRAY_TASK_ID} is not a cell of this array" >&2; exit 2 ;;', "esac", ""]
    return "\n".join(lines)


def work_for(matrix: Matrix, cells: list[Cell]) -> list[tuple[Cell, list[str]]]:
    """Each cell with the harness.run arguments that make only what it lacks: the rungs with a missing
    point (a rung is the smallest unit harness.run reruns, so a half-done rung is run whole again)."""
    work = []
    for cell in cells:
        progress = matrix.progress(cell)
        if progress.done == 0:
            work.append((cell, matrix.run_args))
        elif progress.missing:
            work.append((cell, with_rungs(matrix.run_args, progress.missing_rungs())))
    return work


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which(argv[0]) is None:
        raise SlurmError(f"{argv[0]} not found on PATH: run this on a Slurm login node (or start scripts/slurm_local.sh)")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=SLURM_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{argv[0]} did not answer within {SLURM_TIMEOUT_S} s (is slurmctld up?)") from None
    if check and proc.returncode != 0:
        raise SlurmError(f"{shlex.join(argv)} failed: {_one_line(proc.stderr or proc.stdout)}")
    return proc


def _one_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return " | ".join(lines[-2:]) or "no output"


def submit(matrix: Matrix, work: list[tuple[Cell, list[str]]], partition: str | None, dry_run: bool) -> list[dict]:
    """One sbatch per GPU type of `work`. Every script is first checked with `sbatch --test-only` (an
    unknown GPU feature or partition fails there, before anything is queued); the manifest is saved
    after each array is queued, so a failure half-way keeps what was submitted."""
    round_no = 1 + max((s["round"] for s in matrix.submissions), default=0)
    by_gpu: dict[str, list] = {}
    for cell, run_args in work:
        by_gpu.setdefault(cell.gpu, []).append((cell, run_args))
    scripts = {gpu: render_script(matrix, gpu, items, round_no, partition) for gpu, items in by_gpu.items()}
    if dry_run:
        for gpu, text in scripts.items():
            print(f"# --- {matrix.dir}/round{round_no}-{gpu}.sbatch (dry run: not written, not submitted)")
            print(text)
        return []
    (matrix.dir / "logs").mkdir(parents=True, exist_ok=True)
    paths = {}
    for gpu, text in scripts.items():
        paths[gpu] = matrix.dir / f"round{round_no}-{gpu}.sbatch"
        write_atomic(paths[gpu], text)
    for gpu, path in paths.items():
        _run(["sbatch", "--test-only", str(path)])
    submitted = []
    for gpu, path in paths.items():
        proc = _run(["sbatch", "--parsable", str(path)])
        job_id = proc.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise SlurmError(f"sbatch --parsable {path} printed {proc.stdout.strip()!r}, not a job id")
        entry = {"round": round_no, "gpu": gpu, "job_id": job_id, "indices": [c.index for c, _ in by_gpu[gpu]],
                 "script": path.name, "submitted_at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        matrix.submissions.append(entry)
        matrix.save()
        submitted.append(entry)
    return submitted


# ---------------------------------------------------------------- job states

def _indices(text: str) -> list[int]:
    """'2-5,7%2' (an array's pending range, throttle after %) -> [2, 3, 4, 5, 7]."""
    out = []
    for part in text.split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def parse_task_lines(text: str, source: str) -> dict[tuple[str, int], TaskState]:
    """`JOBID|STATE|EXIT` lines (sacct -X -P -n --format=JobID,State,ExitCode, or squeue -O
    JobArrayID,State,exit_code with '|' separators) -> {(array job id, index): state}. Array tasks are
    `J_I` or, still pending together, `J_[2-5,7%2]`; steps and non-array jobs are not cells and are skipped."""
    states = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or not parts[0]:
            continue
        job, state, code = parts[0], parts[1].split(" ")[0], parts[2]
        if source == "squeue":  # squeue gives the raw wait status: exit code in the high byte, signal low
            raw = int(code) if code.isdigit() else 0
            code = f"{raw >> 8}:{raw & 0x7F}"
        m = re.fullmatch(r"(\d+)_(\d+)", job) or re.fullmatch(r"(\d+)_\[([\d,\-%]+)\]", job)
        if not m:
            continue
        for index in ([int(m.group(2))] if m.group(2).isdigit() else _indices(m.group(2))):
            states[m.group(1), index] = TaskState(state, code, source)
    return states


def task_states(job_ids: list[str], since: str | None = None) -> tuple[dict[tuple[str, int], TaskState], list[str]]:
    """The state of every task of these arrays, and notes on what could not be asked. squeue first (the
    controller's own view: live tasks, and finished ones for MinJobAge seconds), then sacct for the
    rest (accounting; it can lag the controller by seconds, so squeue wins where both answer). `since`
    (local time, YYYY-MM-DDTHH:MM:SS) keeps sacct to jobs alive after the first submission: a job id
    that Slurm handed out before (a controller whose state was reset) is not this matrix's job."""
    if not job_ids:
        return {}, []
    ids = ",".join(job_ids)
    notes = []
    queue = _run(["squeue", "--states=all", "-h", "-r", "-j", ids, "-O", "JobArrayID:|,State:|,exit_code:|"], check=False)
    live = parse_task_lines(queue.stdout, "squeue") if queue.returncode == 0 else {}
    if queue.returncode != 0 and "Invalid job id" not in queue.stderr:  # all purged from memory: not an error
        notes.append(f"squeue: {_one_line(queue.stderr)}")
    acct = _run(["sacct", "-X", "-P", "-n", "-j", ids, "--format=JobID,State,ExitCode", *(["-S", since] if since else [])],
                check=False)
    accounted = parse_task_lines(acct.stdout, "sacct") if acct.returncode == 0 else {}
    if acct.returncode != 0:
        notes.append(f"sacct: {_one_line(acct.stderr or acct.stdout)} (finished tasks are known only while "
                     "slurmctld keeps them, MinJobAge)")
    return {**accounted, **live}, notes


def latest_tasks(matrix: Matrix) -> dict[int, str]:
    """cell index -> its latest (job id, index) as 'JOB_INDEX'."""
    latest = {}
    for sub in matrix.submissions:
        for index in sub["indices"]:
            latest[index] = f"{sub['job_id']}_{index}"
    return latest


def cell_states(matrix: Matrix) -> tuple[list[CellStatus], list[str]]:
    latest = latest_tasks(matrix)
    first = min((s["submitted_at"] for s in matrix.submissions), default=None)
    since = None
    if first:  # the manifest keeps UTC; sacct reads local time. A minute's margin for clock skew.
        moment = datetime.strptime(first, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc) - timedelta(minutes=1)
        since = moment.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
    states, notes = task_states(sorted({t.split("_")[0] for t in latest.values()}, key=int), since)
    rows = []
    for cell in matrix.cells:
        task = latest.get(cell.index, "")
        slurm = states.get((task.split("_")[0], cell.index)) if task else None
        progress = matrix.progress(cell)
        if slurm and slurm.state in PENDING:
            state = "pending"
        elif slurm and slurm.state in RUNNING:
            state = "running"
        else:
            state = "done" if progress.complete else "failed"
        rows.append(CellStatus(cell, state, task, slurm, progress.done, progress.expected, progress.devices,
                               progress.missing_text()))
    return rows, notes
