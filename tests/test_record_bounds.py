"""Every number and string of a record is bounded (harness.record.bounds), checked in one place before anything reads
it: one bad record among many never ends compare or report, whatever its value, size or position. Issue 50, class 1:
a 401-digit tokens_per_s ended compare with an OverflowError, 5e-324 ms a ZeroDivisionError, 2**64 bytes a numpy
TypeError."""

from __future__ import annotations

import json
import shutil

import pytest
from hostile import CPU_RECORDS
from shipped import RESULTS

from harness import compare
from harness.record import bounds
from harness.record.io import iter_records, read_record, record_of
from harness.record.model import RecordError
from harness.report import __main__ as report_main

CPU = CPU_RECORDS / "20261123T011151Z-torch212-seed-ladder-fp32-r0-2d048b.json"
GPU = RESULTS / "gpu-h100-80gb-hbm3/ladder/20261123T081330Z-local-seed-ladder-tf32-r0-1ed9a9.json"
EXTREMES = (10**400, -10**400, 5e-324, -5e-324, 1.7976931348623157e308, -1.7976931348623157e308, 2**64, -1, 0,
            float("nan"), float("inf"))
TEXTS = ("x" * 1_000_000, "y" * bounds.TEXT_LENGTH, "z" * bounds.NAME_LENGTH, "", "\x1b[2J<b>\u202e ../..")


def leaves(node, path=()):
    """(path, value) of every number and string in a record; a list by its first and its last item."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for i in sorted({0, len(node) - 1}) if node else ():
            yield from leaves(node[i], (*path, i))
    elif not isinstance(node, bool) and isinstance(node, (int, float, str)):
        yield path, node


def with_value(record: dict, path: tuple, value) -> dict:
    copy = json.loads(json.dumps(record))
    node = copy
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return copy


def cases(record: dict):
    """(path, value) for every leaf: the extremes and the edges of its rule for a number, texts for a string."""
    for path, value in leaves(record):
        if path[0] == "schema_version":
            continue
        if isinstance(value, str):
            yield from ((path, text) for text in TEXTS)
        else:
            name = next(p for p in reversed(path) if isinstance(p, str))
            rule = bounds.rule_for(path[0], name)
            yield from ((path, x) for x in (*EXTREMES, rule.low, rule.high))


def test_a_value_is_read_or_refused_in_one_line_naming_its_field(tmp_path):
    """Every leaf of a CPU and a GPU record, given each extreme: read, or refused with a RecordError whose one line
    names the field, and short (a megabyte string or a 401-digit number is quoted cut)."""
    refused = passed = 0
    for source in (CPU, GPU):
        record = json.loads(source.read_text())
        for path, value in cases(record):
            data = json.dumps(with_value(record, path, value)).encode()
            try:
                record_of(data)
                passed += 1
            except RecordError as exc:
                refused += 1
                why = str(exc)
                assert "\n" not in why and len(why) < 400, (path, why[:200])
                assert why.startswith(bounds.field(path)) or path[0] in ("workload", "environment", "flags", "kind",
                                                                          "status", "sweep"), (path, why)
    assert refused > 1000 and passed > 500  # both kinds met: the bounds refuse the absurd, keep the rest


def test_every_in_bounds_extreme_is_compared_and_reported_beside_the_rest(tmp_path, capsys):
    """All the values the reader keeps, each in its own copy of a record, in one folder beside good records:
    compare (every format, --detail) and report run through, and the good records' verdict is still there."""
    good = tmp_path / "good"
    good.mkdir()
    for source in sorted(CPU_RECORDS.glob("*fp32*.json")):
        shutil.copy(source, good)
    kept = tmp_path / "kept"
    kept.mkdir()
    for source in (CPU, GPU):
        record = json.loads(source.read_text())
        for n, (path, value) in enumerate(cases(record)):
            copy = with_value(record, path, value)
            if path != ("run_id",):
                copy["run_id"] = f"{record['run_id']}-{n}"
            data = json.dumps(copy).encode()
            try:
                record_of(data)
            except RecordError:
                continue
            (kept / f"{source.stem}-{n}.json").write_bytes(data)
    assert len(list(kept.iterdir())) > 500
    for fmt in ("text", "markdown", "csv", "json"):
        assert compare.main([str(good), str(kept), "--detail", "--no-index", "--format", fmt]) == 0, fmt
    out = capsys.readouterr().out
    assert "latest" in out and "torch212" in out
    assert report_main.main([str(good), str(kept), "--no-index", "-o", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.html").stat().st_size > 0


@pytest.mark.parametrize("path, value", [
    (("summary", "tokens_per_s"), 10**400), (("steps", "ms", 3), 5e-324), (("summary", "peak_rss_bytes"), 2**64),
    (("summary", "tokens_per_s"), float("nan")), (("environment", "cpu", "model"), "x" * 1_000_000),
    (("env",), "e" * (bounds.NAME_LENGTH + 1)), (("notes",), ["n" * (bounds.TEXT_LENGTH + 1)]),
], ids=["401 digits", "5e-324 ms", "2**64 bytes", "NaN", "1 MB name", "long env", "long note"])
def test_one_bad_record_among_many_is_one_line_and_the_answer_for_the_rest(tmp_path, capsys, path, value):
    """The cases of the issue: the file is left out with one warning naming it and the field, and the verdict of
    the rest is what it is without the file."""
    good = tmp_path / "good"
    good.mkdir()
    for source in sorted(CPU_RECORDS.glob("*.json")):
        if source != CPU:
            shutil.copy(source, good)
    assert compare.main([str(good), "--no-index"]) == 0
    alone = capsys.readouterr().out
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / CPU.name).write_text(json.dumps(with_value(json.loads(CPU.read_text()), path, value)))
    assert compare.main([str(good), str(bad), "--no-index"]) == 0
    out, err = capsys.readouterr()
    warnings = err.strip().splitlines()
    assert len(warnings) == 1 and CPU.name in warnings[0] and bounds.field(path[:2]) in warnings[0], warnings
    assert len(warnings[0]) < 400

    def verdict(text: str) -> list[str]:  # the pairs' lines: between the verdict's title and loss parity
        lines = text.splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith("Verdict"))
        end = next(i for i, line in enumerate(lines) if line.startswith("Loss parity"))
        return lines[start:end]

    assert verdict(out) == verdict(alone)
    assert "1 unreadable" in next(line for line in out.splitlines() if line.startswith("Left out:"))


def test_a_file_reached_twice_is_read_once(tmp_path):
    """A folder and a file in it, or a folder named twice: each record read (and counted) once."""
    folder = tmp_path / "cpu"
    shutil.copytree(CPU_RECORDS, folder)
    files = sorted(folder.glob("*.json"))
    once = [p for p, _r in iter_records([folder])]
    warned = []
    twice = [p for p, _r in iter_records([folder, files[0], folder, tmp_path], warned.append)]
    assert len(twice) == len(once) == len(files) and warned == []


def test_the_writer_checks_the_same_bounds(tmp_path):
    """A record the harness writes is one it reads back: write_record refuses what read_record would."""
    from harness.record.io import write_record

    record = read_record(CPU)
    record["summary"]["tokens_per_s"] = 1e300
    with pytest.raises(RecordError, match=r"summary.tokens_per_s = 1e\+300: out of range for a rate per second"):
        write_record(record, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_absurd_but_in_bounds_runs_still_give_a_report(tmp_path, capsys):
    """Three records, one timed at a nanosecond a step (one degree of freedom: an interval of e^700 and beyond ended
    the report with an OverflowError), and one naming 2,000 kernel categories (a chart of 2,000 bars and legend
    entries never finished): the report is written, its kernel-mix chart of bounded size."""
    import struct

    folder = tmp_path / "three"
    folder.mkdir()
    sources = [CPU, CPU_RECORDS / "20261123T011250Z-torch212-seed-ladder-fp32-r1-721678.json",
               CPU_RECORDS / "20261123T012147Z-latest-seed-ladder-fp32-r0-436177.json"]
    for n, source in enumerate(sources):
        record = json.loads(source.read_text())
        if n == 1:
            record["steps"]["ms"] = [1e-6] * len(record["steps"]["ms"])
        if n == 2:
            categories = record["explain"]["kernels"]["by_category"]
            categories.update({f"cat-{i}": {"share": 0.0001, "total_us": 1.0, "per_step_us": 1.0, "calls": 1}
                               for i in range(2000)})
        (folder / source.name).write_text(json.dumps(record))
    assert compare.main([str(folder), "--no-index"]) == 0
    assert "e+" in capsys.readouterr().out  # the interval's far end, in three significant digits
    assert report_main.main([str(folder), "--no-index", "-o", str(tmp_path / "report")]) == 0
    width, height = struct.unpack(">II", (tmp_path / "report" / "kernel-mix.png").read_bytes()[16:24])
    assert width < 2400 and height < 2400


def test_a_list_is_bounded_in_length():
    """An open field may hold a list of millions of small numbers (8,000,000 in a GEMM's shape took 48 s to validate):
    a list other than a step series holds at most MAX_ITEMS items, a step series at most MAX_STEPS."""
    record = json.loads(CPU.read_text())
    record["explain"]["kernels"]["lm_head_gemm"] = {"shape": [64] * (bounds.MAX_ITEMS + 1)}
    with pytest.raises(RecordError, match=r"explain.kernels.lm_head_gemm.shape: 10,001 items; at most 10,000"):
        record_of(json.dumps(record).encode())
    record["explain"]["kernels"]["lm_head_gemm"]["shape"] = [64] * bounds.MAX_ITEMS
    record_of(json.dumps(record).encode())


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


@pytest.mark.parametrize("edit, why", [
    (lambda r: r["steps"].update(ms=[0.0] * len(r["steps"]["ms"])), "steps.ms[0] = 0.0: out of range for a time in ms (from 1e-06"),
    (lambda r: r["steps"].update(ms=[-abs(v) for v in r["steps"]["ms"]]), "out of range for a time in ms"),
    (lambda r: r["summary"].update(peak_rss_bytes=-1), "summary.peak_rss_bytes = -1: out of range for a size in bytes"),
])
def test_out_of_range_measurements_are_refused_on_read(tmp_path, capsys, edit, why):
    """10. A record whose step times are 0 or negative, or whose peak RSS is -1, passes the schema; it is left out
    with one warning when read, and the rest is compared as without it."""
    import shutil
    import warnings

    sources = sorted((RESULTS / "cpu-amd-epyc-2core").glob("*.json"))[:4]
    good = tmp_path / "good"
    good.mkdir()
    for s in sources[1:]:
        shutil.copy(s, good)
    bad = json.loads(sources[0].read_text())
    edit(bad)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy divide-by-zero on the way
        assert compare.main([str(good), str(tmp_path / "bad.json"), "--detail"]) == 0
    out, err = capsys.readouterr()
    assert err.count("warning:") == 1 and why in err
    assert "Left out: 1 unreadable" in out  # the verdict counts it
    # in the left-out table, with its reason (whole in CSV; the text table may wrap the cell at WIDTH)
    assert compare.main([str(good), str(tmp_path / "bad.json"), "--table", "left-out", "--format", "csv"]) == 0
    assert why in capsys.readouterr().out
    assert compare.main([str(good), "--detail"]) == 0
    alone = capsys.readouterr().out

    def tables(text: str) -> str:  # after the verdict, before the left-out table
        return text.split("--format markdown|csv|json\n", 1)[1].split("== Left out")[0]

    assert tables(out) == tables(alone)  # the same tables as without the bad file
    assert "nan" not in out


def test_step_series_are_checked_in_linear_time_and_bounded(monkeypatch):
    """Class 14 of issue 31: a record's step series are bounded by the steps bound (a 2,000,000-step record took
    compare 87 s, 50 s of it in jsonschema) and checked in one pass: jsonschema never walks them."""
    from harness.record import bounds, validator
    from harness.record.io import read_record
    from harness.record.model import RecordError

    record = read_record(min(CPU_RECORDS.glob("*.json")))  # as read: upgraded to the current version
    seen = []
    real = validator._validator()

    class Spy:  # whatever jsonschema is handed, the whole record or one section of it, holds no step series
        def __init__(self, validator):
            self.validator = validator

        def iter_errors(self, instance):
            steps = instance.get("steps", instance) if isinstance(instance, dict) else {}
            seen.append(len(steps.get("ms") or []) if isinstance(steps, dict) else 0)
            return self.validator.iter_errors(instance)

        def evolve(self, **kwargs):
            return Spy(self.validator.evolve(**kwargs))

    monkeypatch.setattr(validator, "_validator", lambda: Spy(real))
    validator._section_validator.cache_clear()
    validator._VALID_SECTIONS.clear()
    record["steps"] = {k: [1.0] * bounds.MAX_STEPS for k in ("ms", "loss", "grad_norm")}
    assert validator.validate(record)["steps"]["ms"] == [1.0] * bounds.MAX_STEPS  # the record itself, whole
    assert seen and all(n == 0 for n in seen)
    record["steps"]["ms"] = [1.0] * (bounds.MAX_STEPS + 1)
    with pytest.raises(RecordError, match="steps.ms: 100,001 items; at most 100,000 \\(no run records more steps\\)"):
        validator.validate(record)
    record["steps"]["ms"] = [1.0, "x", None]
    with pytest.raises(RecordError, match=r"steps.ms\[1\]: 'x' is not a number or null"):
        validator.validate(record)

