"""The records a comparison read, as Parquet files an engine past one machine can query (docs/cluster.md).

`python -m harness.compare PATH... --export-parquet DIR` writes DIR/runs.parquet (one row per record the comparison
kept: its cell's keys as harness.analysis.dataset formed them, what it is, its per-run numbers) and DIR/steps.parquet
(one row per timed step of each run: the samples the noise rule resamples). Spark, Trino or DuckDB read them where
they lie (a folder, object storage); docs/cluster.md has the query that gives the verdict's tokens/s ratios from them.
Every value comes through RecordView and the Dataset: the same rules as every table.
"""

from __future__ import annotations

from pathlib import Path

from harness.analysis.dataset import Dataset
from harness.record.files import atomic_file
from harness.record.view import RecordView

RUN_COLUMNS = ("run_id", "role", "kind", "status", "env", "env_name", "torch_version", "device", "device_alias",
               "workload_hash", "flags_hash", "plan", "rung", "rung_index", "repeat", "batch_size", "seq_len",
               "tokens_per_step", "worker_tokens_per_s", "peak_memory_bytes", "peak_memory_metric", "contended", "path")


def _runs(ds: Dataset):
    """(role, cell env label, path, RecordView) of every record the comparison kept: role 'compared' for the runs in
    its groups, then 'reference', 'peer', 'contended' (left out of the deltas) and 'not ok'."""
    for g in ds.groups:
        for path, r in zip(g.paths, g.records):
            yield "compared", g.env, path, r
    for role, groups in (("reference", ds.references), ("peer", ds.peers)):
        for g in groups:
            for path, r in zip(g.paths, g.records):
                yield role, r.env, path, r
    for role, runs in (("contended", ds.contended), ("not ok", ds.failed)):
        for path, r in runs:
            yield role, ds.env_of.get(r.run_id, r.env), path, r


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value) -> str | None:
    return None if value is None else str(value)


def _row(ds: Dataset, role: str, env: str, path: str, r: RecordView) -> tuple:
    memory, metric = r.peak_memory()
    w = r.workload
    return (r.run_id, role, r.kind, r.status, env, r.env, r.torch_version, r.device_label, ds.name(r.device_label),
            r.workload_hash, r.flags_hash, _text(r.plan), _text(r.rung), _int(r.rung_index), _int(r.repeat),
            _int(w.batch_size), _int(w.seq_len), _int(r.tokens_per_step),
            r.summary_number("tokens_per_s"), memory, metric, r.contended, str(path))


def export_parquet(ds: Dataset, out: Path) -> list[Path]:
    """Write out/runs.parquet and out/steps.parquet (each whole or not at all); return their paths."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    runs, steps = [], ([], [], [])
    for role, env, path, r in _runs(ds):
        runs.append(_row(ds, role, env, path, r))
        timed = r.timed_ms
        steps[0].extend([r.run_id] * len(timed))
        steps[1].extend(range(len(timed)))
        steps[2].extend(float(x) for x in timed)
    types = (pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(),
             pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64(), pa.int64(),
             pa.int64(), pa.int64(), pa.float64(), pa.float64(), pa.string(), pa.bool_(), pa.string())
    columns = list(zip(*runs)) if runs else [()] * len(RUN_COLUMNS)
    tables = {
        "runs": pa.table([pa.array(c, type=t) for c, t in zip(columns, types)], names=list(RUN_COLUMNS)),
        "steps": pa.table([pa.array(steps[0], pa.string()), pa.array(steps[1], pa.int32()),
                           pa.array(steps[2], pa.float64())], names=["run_id", "sample", "ms"]),
    }
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in tables.items():
        final = out / f"{name}.parquet"
        with atomic_file(final) as f:  # harness.record.files: fsynced, renamed into place, removed on any failure
            pq.write_table(table, f, compression="zstd")
        written.append(final)
    return written
