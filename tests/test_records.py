"""Records: schema validation on read, atomic writes that never overwrite, NaN handling."""

import errno
import json
import os
import re
import shutil
import stat
import threading

import pytest
from hostile import CPU_RECORDS, WRONG_TYPES, disk_full, field_paths, with_value
from module_cli import run_module
from records_factory import make_record
from shipped import RESULTS

from harness import compare
from harness.envs.spec import load_spec
from harness.record import io as record
from harness.record.io import iter_records, read_record, write_record
from harness.record.model import RecordError
from harness.record.validator import validate
from harness.report import __main__ as report_main


def minimal_record(**changes):
    record = {
        "schema_version": 3, "run_id": "r1", "kind": "measured", "status": "ok", "env": "local", "plan": "p",
        "rung": "fp32", "workload": {"batch_size": 4, "lm_head_loss": "plain"}, "workload_hash": "w",
        "workload_code": "unknown", "flags": {"requested": {}, "hash": "h", "changes": []}, "environment": {},
        "steps": {"ms": [1.0], "loss": [2.0], "grad_norm": [None]}, "summary": {"final_loss": 2.0}, "contention": None,
        "invocation": None,
    }
    record.update(changes)
    return record


def test_write_is_atomic_and_never_overwrites_and_a_taken_run_id_gets_a_fresh_one(tmp_path):
    path = write_record(minimal_record(), tmp_path)
    assert path.name == "r1.json" and read_record(path)["status"] == "ok"
    again = write_record(minimal_record(status="error"), tmp_path)  # same run_id: the new measurement is kept too
    assert again != path and re.fullmatch(r"r1-[0-9a-f]{6}\.json", again.name)
    assert read_record(path)["status"] == "ok"  # the completed result survived
    assert read_record(again)["status"] == "error" and read_record(again)["run_id"] == again.stem
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, again.name])  # no temp file left behind


@pytest.mark.parametrize("err", [errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV])
def test_a_filesystem_without_hard_links_still_gets_the_record_and_never_overwrites(tmp_path, monkeypatch, err):
    def no_link(src, dst):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(os, "link", no_link)
    path = write_record(minimal_record(), tmp_path)
    assert read_record(path)["status"] == "ok"
    again = write_record(minimal_record(status="error"), tmp_path)  # the exclusive create found r1.json taken
    assert again != path and read_record(path)["status"] == "ok" and read_record(again)["status"] == "error"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, again.name])


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_records_get_the_umasks_normal_mode(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = write_record(minimal_record(), tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode  # not mkstemp's 0600: a root container's results stay readable


def test_a_run_id_that_is_not_a_file_name_is_refused(tmp_path):
    with pytest.raises(RecordError, match="not a plain file name"):
        write_record(minimal_record(run_id="../escape"), tmp_path)
    assert not list(tmp_path.iterdir()) and not (tmp_path.parent / "escape.json").exists()


def hostile_files(directory):
    """Files that crashed every reader once, each next to a good record."""
    (directory / "deep.json").write_text("[" * 200_000 + "]" * 200_000)  # RecursionError in json.loads
    (directory / "bigint.json").write_text('{"schema_version": 1, "x": ' + "9" * 5000 + "}")  # ValueError: > 4300 digits
    nested = {"x": 1}
    for _ in range(200):  # parses, but would overflow whatever walks it
        nested = {"x": nested}
    (directory / "nested.json").write_text(json.dumps(minimal_record(run_id="nested", workload=nested)))
    (directory / "latin1.json").write_bytes(b'{"run_id": "\xe9"}')
    (directory / "dir.json").mkdir()
    return ["deep.json", "bigint.json", "nested.json", "latin1.json", "dir.json"]


def test_hostile_files_get_one_warning_each_and_the_rest_are_read(tmp_path):
    write_record(minimal_record(), tmp_path)
    bad = hostile_files(tmp_path)
    warnings = []
    found = [r["run_id"] for _, r in iter_records([tmp_path], warn=warnings.append)]
    assert found == ["r1"]
    assert len(warnings) == len(bad) and all("skipped" in w for w in warnings)
    assert sorted(w.split(": ")[1].rsplit("/", 1)[1] for w in warnings) == sorted(bad)


def test_a_file_over_the_size_limit_is_refused_unread(tmp_path, monkeypatch):
    path = write_record(minimal_record(), tmp_path)
    monkeypatch.setattr(record, "MAX_RECORD_BYTES", path.stat().st_size - 1)
    with pytest.raises(RecordError, match="larger than"):
        read_record(path)
    assert record.MAX_RECORD_BYTES < 2**30


def test_a_fifo_named_like_a_record_does_not_hang_the_reader(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    warnings = []
    reader = threading.Thread(target=lambda: list(iter_records([tmp_path], warn=warnings.append)), daemon=True)
    reader.start()
    reader.join(30)
    assert not reader.is_alive() and warnings == [f"warning: {tmp_path / 'pipe.json'}: skipped: not a regular file"]


@pytest.mark.parametrize("module, args", [
    ("harness.compare", []),
    ("harness.report", ["-o", "{tmp}/report"]),
    ("harness.envs", None),  # verify-matrix
])
def test_hostile_files_do_not_stop_compare_report_or_verify_matrix(tmp_path, module, args):
    records = tmp_path / "records"
    records.mkdir()
    for env in ("torch212", "latest"):
        for rung in ("fp32", "tf32"):
            r = make_record(env=env, gpu=None, rung=rung, workload={"precision": rung})
            r["environment"]["torch"]["version"] = load_spec(env).torch + ("+cu121" if env == "torch212" else "")
            r["environment"]["torch"]["cuda"] = load_spec(env).cuda
            (records / f"{r['run_id']}.json").write_text(json.dumps(r))
    bad = hostile_files(records)
    argv = ["verify-matrix", records, "torch212", "latest"] if args is None else [records, *(a.format(tmp=tmp_path) for a in args)]
    proc = run_module(module, *argv, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    warned = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("warning:") and "skipped" in line]
    assert sorted(line.split(": ")[1].rsplit("/", 1)[1] for line in warned) == sorted(bad)
    if module == "harness.compare":
        assert "4 valid record(s)" in proc.stdout and "Verdict:" in proc.stdout and "2 rungs" in proc.stdout
    if module == "harness.envs":
        assert "torch212: 2 records (2 ok)" in proc.stdout and "latest: 2 records (2 ok)" in proc.stdout


def test_nan_is_stored_as_null(tmp_path):
    path = write_record(minimal_record(summary={"final_loss": float("nan")}, steps={"ms": [1.0], "loss": [float("inf")]}), tmp_path)
    data = json.loads(path.read_text())
    assert data["summary"]["final_loss"] is None and data["steps"]["loss"] == [None]


@pytest.mark.parametrize("change, message", [
    ({"schema_version": 4}, "schema_version 4; this harness reads version 3"),
    ({"status": "great"}, "status"),
    ({"steps": {"ms": ["fast"]}}, r"steps\.ms\[0\]"),
])
def test_invalid_records_are_refused(change, message):
    with pytest.raises(RecordError, match=message):
        validate(minimal_record(**change))


def test_iter_records_warns_once_per_bad_file_and_keeps_the_rest(tmp_path):
    write_record(minimal_record(), tmp_path)
    (tmp_path / "truncated.json").write_text('{"schema_version": 1, "run_id"')
    (tmp_path / "foreign.json").write_text('{"hello": "world"}')
    (tmp_path / "sub").mkdir()
    write_record(minimal_record(run_id="r2"), tmp_path / "sub")
    warnings = []
    found = [r["run_id"] for _, r in iter_records([tmp_path], warn=warnings.append)]
    assert sorted(found) == ["r1", "r2"]
    assert len(warnings) == 2 and all("skipped" in w for w in warnings)
    # harness.bisect's search state beside its records is not a record, and no warning
    (tmp_path / "bisect-tokens_per_s.json").write_text('{"mode": "bisect"}')
    (tmp_path / "landscape-peak_memory.json").write_text('{"mode": "landscape"}')
    (tmp_path / "gpu-check.json").write_text('{"tool": "python -m harness.gpu_check"}')  # a gpu_check call's summary
    again = []
    assert sorted(r["run_id"] for _, r in iter_records([tmp_path], warn=again.append)) == ["r1", "r2"]
    assert len(again) == 2


def test_the_one_whole_file_writer_leaves_the_file_whole_or_not_at_all(tmp_path, monkeypatch):
    """harness.record.files: every whole-file write (records, output files, manifests, plans, search states, specs,
    scripts) is fsynced before it is renamed into place; a failure leaves the old file and no temp file."""
    import os

    from harness.record import files

    target = tmp_path / "state.json"
    files.write_atomic(target, "old")
    assert target.read_text() == "old"
    with pytest.raises(FileExistsError):
        files.write_new(target, "new")
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    files.write_atomic(target, b"new")
    assert target.read_text() == "new" and synced
    monkeypatch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with pytest.raises(OSError, match="No space"):
        files.write_atomic(target, "lost")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]


def test_a_record_that_is_a_link_in_a_folder_is_not_followed_and_one_named_is(tmp_path):
    """A symbolic link among a folder's records could bring any file of the machine into a report: one line names
    it and the rest is read. A link named as a path is the user's choice: read where it points."""
    outside, folder = tmp_path / "outside", tmp_path / "records"
    outside.mkdir()
    folder.mkdir()
    (outside / "r.json").write_text(json.dumps(make_record(run_id="outside")))
    (folder / "own.json").write_text(json.dumps(make_record(run_id="own")))
    (folder / "linked.json").symlink_to(outside / "r.json")
    warnings = []
    found = {r["run_id"] for _p, r in iter_records([folder], warnings.append)}
    assert found == {"own"}
    why = "a symbolic link, not followed (name the file it points to, to read it)"
    assert [str(w) for w in warnings] == [f"warning: {folder / 'linked.json'}: skipped: {why}"]
    assert [r["run_id"] for _p, r in iter_records([folder / "linked.json"], warnings.append)] == ["outside"]


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


def test_ten_thousand_other_json_files_are_summarised(tmp_path, capsys):
    """Also seen: 10,000 non-record JSON files beside the records: 20 named, one line for the rest."""
    import shutil

    for s in sorted((RESULTS / "cpu-amd-epyc-2core").glob("*.json"))[:2]:
        shutil.copy(s, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    for i in range(10_000):
        (other / f"{i:05}.json").write_text("{}")
    assert compare.main([str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21 and "9,980 more file(s) skipped, 10,000 in all" in err[-1]


def test_disk_full_leaves_no_partial_or_temp_file(tmp_path, monkeypatch):
    """6. A disk full from the start: --out's check is one RecordError and leaves no 0-byte probe; a record whose
    write fails half-way leaves neither the record nor its .tmp-*.partial."""
    from harness.record import io as record_io
    from harness.record.model import RecordError

    record = record_io.read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")))
    disk_full(monkeypatch, record_io)
    with pytest.raises(RecordError, match="No space left on device"):
        record_io.check_writable(tmp_path)
    with pytest.raises(OSError, match="No space left on device"):
        record_io.write_record(record, tmp_path)
    assert not list(tmp_path.iterdir())


def test_wrong_typed_fields_never_crash_compare_or_report(tmp_path, capsys):
    """Class 3 of issue 31: every field of a CPU and a GPU record given a value of each other JSON type. The schema
    refuses it (the file is left out with one warning naming the file and the field) or compare (every format) and
    report read it without a traceback; the rest is compared."""
    from harness.record.migrate import migrate
    from harness.record.model import RecordError
    from harness.record.validator import validate

    sources = [CPU_RECORDS / "20261123T011151Z-torch212-seed-ladder-fp32-r0-2d048b.json",
               RESULTS / "gpu-h100-80gb-hbm3/ladder/20261123T081330Z-local-seed-ladder-tf32-r0-1ed9a9.json"]
    good = tmp_path / "good"
    good.mkdir()
    for s in [*sources, CPU_RECORDS / "20261123T012147Z-latest-seed-ladder-fp32-r0-436177.json"]:
        shutil.copy(s, good)
    passing, refused = tmp_path / "passing", []
    passing.mkdir()
    for source in sources:
        record = json.loads(source.read_text())
        for path in list(field_paths(record))[1:]:
            for value in WRONG_TYPES:
                if type(value) is type(_at(record, path)) or path[0] == "schema_version":
                    continue
                bad = with_value(record, path, value)
                bad["run_id"] = f"{record['run_id']}-{len(refused)}-{len(list(passing.iterdir()))}"
                try:
                    validate(migrate(bad))
                except RecordError as exc:
                    refused.append((path, str(exc)))
                    continue
                (passing / f"{bad['run_id']}.json").write_text(json.dumps(bad))
    assert len(refused) > 500 and all(str(p[-1]) in why for p, why in refused if not isinstance(p[-1], int))
    for fmt in ("text", "markdown", "csv", "json"):
        assert compare.main([str(good), str(passing), "--detail", "--format", fmt]) == 0, fmt
    assert report_main.main([str(good), str(passing), "-o", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    one = tmp_path / "one"
    one.mkdir()
    (one / "bad.json").write_text(json.dumps(with_value(json.loads(sources[0].read_text()), ("workload", "batch_size"), "4")))
    assert compare.main([str(good), str(one)]) == 0
    _out, err = capsys.readouterr()
    assert err.count("warning:") == 1 and "bad.json: skipped: workload.batch_size: '4' is not of type" in err


def _at(record, path):
    for key in path:
        record = record[key]
    return record

