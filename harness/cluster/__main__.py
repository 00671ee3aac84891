"""python -m harness.cluster: the matrix on Slurm (submit, status, collect, resubmit) or as Kubernetes Jobs.

Exit status: 0 ok; 1 a Slurm command failed, or (status/collect) a cell failed or lacks records;
2 bad input (one line on stderr); 3 (status --wait) cells still pending or running at the timeout.
"""

from __future__ import annotations

import argparse
import sys
import time

from tabulate import tabulate

from harness import argtypes
from harness.cli.run_options import add_option
from harness.cluster import k8s, slurm
from harness.cluster.matrix import ClusterError, find_matrix, load_config, new_matrix
from harness.console.textsafe import WORD, ScriptValueError, bounded, script_value, terminal

PROG = "python -m harness.cluster"


def _matrix_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--envs", required=True, help="comma-separated env names (envs/<name>/env.yaml)")
    p.add_argument("--gpus", required=True, help="comma-separated GPU types, as named in the cluster config")
    add_option(p, "plan", help="built-in plan or a .yaml path (default seed-ladder)")
    p.add_argument("--preset", default="tiny", help="workload preset (default tiny)")
    p.add_argument("--rungs", help="comma-separated rungs (default: the whole plan)")
    p.add_argument("--repeats", type=argtypes.repeats, help="repeats per rung (default: the plan's)")
    add_option(p, "steps", help="steps per rung")
    add_option(p, "device", help="device (default: harness.run's)")
    p.add_argument("--cluster-config", metavar="PATH", type=argtypes.path_text, help="cluster YAML (default harness/cluster/cluster.yaml)")
    p.add_argument("run_args", nargs="*", metavar="-- HARNESS_RUN_ARGS",
                   help="more harness.run options after --, e.g. -- --set batch_size=8 --warmup-steps 2")


def _which(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", type=argtypes.path_text, help="the shared results folder (default results/)")
    p.add_argument("--matrix", help="the matrix id, where RESULTS/.cluster/ holds more than one")


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    backends = p.add_subparsers(dest="backend", required=True)
    s = backends.add_parser("slurm", help="the matrix as Slurm job arrays").add_subparsers(dest="command", required=True)

    sub = s.add_parser("submit", help="one job array per GPU type, one task per (env, GPU type) cell")
    _matrix_options(sub)
    sub.add_argument("--results", default="results", type=argtypes.path_text, help="the shared results folder (default results/)")
    sub.add_argument("--partition", help="Slurm partition (default: the cluster config's, else Slurm's default)")
    sub.add_argument("--dry-run", action="store_true", help="print the sbatch scripts; write and submit nothing")

    st = s.add_parser("status", help="per cell: pending, running, done or failed (squeue/sacct and the records)")
    _which(st)
    st.add_argument("--wait", action="store_true", help="poll until no cell is pending or running")
    st.add_argument("--timeout", type=argtypes.seconds, default=3600, help="seconds --wait waits at most (default 3600)")
    st.add_argument("--poll", type=argtypes.seconds, default=10, help="seconds between polls (default 10)")

    co = s.add_parser("collect", help="check every cell has its records, name the missing ones, run harness.compare")
    _which(co)
    co.add_argument("compare_args", nargs="*", metavar="-- COMPARE_ARGS", help="harness.compare options after --")

    re_ = s.add_parser("resubmit", help="submit again the cells that failed (never a done or queued one)")
    _which(re_)
    re_.add_argument("--cells", help="comma-separated ENV/GPU cells (default: every failed cell)")
    re_.add_argument("--partition", help="Slurm partition (default: the cluster config's)")
    re_.add_argument("--dry-run", action="store_true", help="print the sbatch scripts; write and submit nothing")

    k = backends.add_parser("k8s", help="the matrix as Kubernetes Jobs").add_subparsers(dest="command", required=True)
    render = k.add_parser("render", help="write one batch/v1 Job per cell")
    _matrix_options(render)
    render.add_argument("-o", "--out", required=True, type=argtypes.path_arg, help="folder for the Job manifests")
    return p


def run_args_of(args) -> list[str]:
    out = ["--plan", args.plan, "--preset", args.preset]
    for name in ("rungs", "repeats", "steps", "device"):
        if getattr(args, name) is not None:
            out += [f"--{name}", str(getattr(args, name))]
    return out + _after_dashes(args.run_args)


def _after_dashes(items: list[str]) -> list[str]:
    """What followed `--` (argparse keeps the `--` itself in some Python versions)."""
    return list(items[1:] if items[:1] == ["--"] else items)


def status_table(rows: list[slurm.CellStatus]) -> str:
    table = [[r.cell.name, r.state, r.task or "-", r.slurm.state if r.slurm else "-", r.slurm.exit_code if r.slurm else "-",
              f"{r.done}/{r.expected}", ", ".join(bounded(d, WORD) for d in r.devices) or "-"] for r in rows]
    return terminal(tabulate(table, headers=["cell", "state", "slurm task", "slurm state", "exit", "records", "ran on"],
                             disable_numparse=True))  # "ran on" comes from the records


def counts(rows) -> str:
    return ", ".join(f"{sum(r.state == s for r in rows)} {s}" for s in ("done", "failed", "running", "pending"))


def cmd_submit(args) -> int:
    config = load_config(args.cluster_config)
    matrix = new_matrix(args.envs, args.gpus, config["slurm"]["gpu_types"], args.cluster_config or "the cluster config",
                        run_args_of(args), args.results, config)
    if matrix.path.exists():
        raise ClusterError(f"matrix {matrix.id} was submitted before ({matrix.path}): see `slurm status`; "
                           "`slurm resubmit` runs its failed cells again")
    work = slurm.work_for(matrix, matrix.cells)
    print(f"matrix {matrix.id}: plan {matrix.plan}, {len(matrix.cells)} cell(s) x {len(matrix.points)} point(s), "
          f"results {matrix.results}")
    for cell in matrix.cells:
        if cell not in [c for c, _ in work]:
            print(f"  {cell.name}: already has every record here; not submitted")
    if not work:
        print("nothing to submit")
        return 0
    return _submit(matrix, work, args.partition, args.dry_run)


def _submit(matrix, work, partition, dry_run) -> int:
    for sub in slurm.submit(matrix, work, partition, dry_run):
        cells = ", ".join(f"{i}={c.name}" for c in matrix.cells for i in sub["indices"] if c.index == i)
        print(f"submitted job {sub['job_id']} ({sub['gpu']}, array {','.join(map(str, sub['indices']))}): {cells}")
    if not dry_run:
        print(f"manifest {matrix.path}; logs {matrix.dir / 'logs'}/")
    return 0


def cmd_status(args) -> int:
    matrix = find_matrix(args.results, args.matrix)
    deadline = time.monotonic() + args.timeout
    last = None
    while True:
        rows, notes = slurm.cell_states(matrix)
        active = [r for r in rows if r.state in ("pending", "running")]
        if not (args.wait and active and time.monotonic() < deadline):
            break
        if counts(rows) != last:
            last = counts(rows)
            print(f"{time.strftime('%H:%M:%S')} {last}", flush=True)
        time.sleep(args.poll)
    print(f"matrix {matrix.id}: plan {matrix.plan}, results {matrix.results}")
    print(status_table(rows))
    for note in notes:
        print(f"note: {note}")
    print(counts(rows))
    return 3 if active else 1 if any(r.state == "failed" for r in rows) else 0


def cmd_collect(args) -> int:
    from harness import compare

    matrix = find_matrix(args.results, args.matrix)
    missing, folders, records = [], [], 0
    latest = slurm.latest_tasks(matrix)
    for cell in matrix.cells:
        progress = matrix.progress(cell)
        records += progress.done
        if matrix.cell_dir(cell).is_dir():
            folders.append(str(matrix.cell_dir(cell)))
        if progress.missing:
            task = latest.get(cell.index)
            where = f"; slurm task {task}, log {matrix.dir / 'logs' / (task + '.out')}" if task else "; never submitted"
            errors = f"; {progress.errors} error record(s)" if progress.errors else ""
            missing.append(f"missing: {cell.name}: {progress.missing_text()}{errors}{where}")
    complete = len(matrix.cells) - len(missing)
    print(f"matrix {matrix.id}: {complete}/{len(matrix.cells)} cell(s) complete, {records} of "
          f"{len(matrix.cells) * len(matrix.points)} point(s) recorded")
    for line in missing:
        print(line)
    if not folders:
        print("no records to compare")
        return 1
    print(f"$ python -m harness.compare {' '.join(folders + _after_dashes(args.compare_args))}", flush=True)
    code = compare.main(folders + _after_dashes(args.compare_args))
    return 1 if missing else code


def cmd_resubmit(args) -> int:
    matrix = find_matrix(args.results, args.matrix)
    rows, _notes = slurm.cell_states(matrix)
    by_name = {r.cell.name: r for r in rows}
    if args.cells:
        names = [n.strip() for n in args.cells.split(",") if n.strip()]
        if not names:
            raise ClusterError("--cells: empty")
        chosen = [matrix.cell(n) for n in names]
        for cell in chosen:
            row = by_name[cell.name]
            if row.state != "failed":
                raise ClusterError(f"--cells: {cell.name} is {row.state} ({row.done}/{row.expected} records"
                                   + (f", slurm task {row.task} {row.slurm.state}" if row.slurm else "")
                                   + "); only failed cells are resubmitted")
    else:
        chosen = [r.cell for r in rows if r.state == "failed"]
    if not chosen:
        print(f"matrix {matrix.id}: nothing to resubmit ({counts(rows)})")
        return 0
    work = slurm.work_for(matrix, chosen)
    for cell, run_args in work:
        row = by_name[cell.name]
        print(f"resubmit {cell.name}: {row.done}/{row.expected} records"
              + (f", was {row.task} {row.slurm.state}" if row.slurm else "") + f"; runs {' '.join(run_args)}")
    return _submit(matrix, work, args.partition, args.dry_run)


def cmd_render(args) -> int:
    config = load_config(args.cluster_config)
    matrix = new_matrix(args.envs, args.gpus, config["k8s"]["gpu_products"], args.cluster_config or "the cluster config",
                        run_args_of(args), args.out, config)
    for path in k8s.render(matrix, args.out):
        print(path)
    print(f"{len(matrix.cells)} Job(s) for matrix {matrix.id}; apply with: kubectl apply -f {args.out}")
    return 0


COMMANDS = {("slurm", "submit"): cmd_submit, ("slurm", "status"): cmd_status, ("slurm", "collect"): cmd_collect,
            ("slurm", "resubmit"): cmd_resubmit, ("k8s", "render"): cmd_render}


def main(argv=None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "partition", None) is not None:  # refused before anything is written
            script_value(args.partition, "--partition")
        return COMMANDS[args.backend, args.command](args)
    except (ClusterError, ScriptValueError) as exc:
        parser.exit(2, f"{PROG}: error: {exc}\n")
    except slurm.SlurmError as exc:
        parser.exit(1, f"{PROG}: {exc}\n")


if __name__ == "__main__":
    sys.exit(main())
