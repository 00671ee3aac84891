"""The record index (harness.store.index): compare and report read through it give exactly what reading the JSON
gives; it follows new, changed and removed files; it never holds what validation leaves out; a damaged, foreign or
unwritable index is one warning line, never a traceback and never trusted; two compares at once leave it whole."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import write_hostile
from module_cli import ROOT
from shipped import RESULTS

from harness.record.io import RecordError, iter_records, read_record, record_files, record_names
from harness.store import codec as st_codec
from harness.store import file as st_file
from harness.store import identity as st_identity
from harness.store import index as idx
from harness.store import layout as st_layout
from harness.store import scan as st_scan

pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True)
def own_key(tmp_path, monkeypatch):
    """Each test its own index key (harness.store.index keeps it under XDG_CACHE_HOME)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(st_layout.INDEX_DIR, "*.py"))
    return dst


def _env(tmp_path) -> dict:
    return {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}


def _run(tmp_path, module, *args):
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], capture_output=True, text=True, cwd=ROOT,
                          env=_env(tmp_path), timeout=600, check=False)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_compare_through_the_index_prints_what_the_json_gives(tmp_path, fmt):
    """The committed records, the contended set and a hostile set: --no-index, cold (index built) and warm (index
    read) print the same bytes, warnings included."""
    sets = [_copy(RESULTS, tmp_path / "results"), _copy(ROOT / "tests/data/contended-cpu", tmp_path / "cont"),
            write_hostile(tmp_path / "hostile", limit=4)]
    (tmp_path / "results" / "broken.json").write_text('{"schema_version": 1, "run_id": ')  # a bad file, warned about
    write_hostile(tmp_path / "hostile" / "bad", edit=lambda r: r["summary"].update(step_ms_median=-1), limit=2)
    for folder in sets:
        direct = _run(tmp_path, "harness.compare", folder, "--no-index", "--format", fmt, "--detail")
        assert not (folder / st_layout.INDEX_DIR).exists()
        cold = _run(tmp_path, "harness.compare", folder, "--format", fmt, "--detail")
        assert (folder / st_layout.INDEX_DIR / "records.idx").is_file()
        warm = _run(tmp_path, "harness.compare", folder, "--format", fmt, "--detail")
        assert direct.returncode == cold.returncode == warm.returncode
        assert direct.stdout and cold.stdout == direct.stdout and warm.stdout == direct.stdout
        assert cold.stderr == direct.stderr and warm.stderr == direct.stderr


def test_report_through_the_index_writes_what_the_json_gives(tmp_path):
    records = _copy(RESULTS, tmp_path / "results")
    texts = []
    for extra in (["--no-index"], [], []):  # direct, cold, warm; the same -o (the report names its command)
        proc = _run(tmp_path, "harness.report", records, "-o", tmp_path / "out", *extra)
        assert proc.returncode == 0, proc.stderr
        text = (tmp_path / "out" / "report.md").read_text().replace(" --no-index", "")
        texts.append(re.sub(r"Generated \S+ \S+ UTC", "Generated (time)", text))  # its minute may turn between runs
        shutil.rmtree(tmp_path / "out")
    valid = len(list(iter_records([records], warn=lambda line: None)))  # every committed record (253 on 2026-11-27)
    assert valid > 200 and f"{valid} valid records" in texts[0] and texts[0] == texts[1] == texts[2]


def _read(folder: Path, **kw) -> tuple[idx.RecordIndex, list]:
    notices = []
    index = idx.RecordIndex.open([folder], notice=notices.append, **kw)
    warnings = []
    # the index lists path strings (io.record_names); as Paths here, beside what the direct listing yields
    records = [(Path(p), r) for p, r in iter_records([folder], warnings.append, index.read, index.files)]
    return index, records, warnings, notices


def test_a_new_changed_or_removed_file_is_noticed(tmp_path):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    files = sorted(folder.glob("*.json"))
    index, records, _w, _n = _read(folder)
    assert index.stats == {"indexed": 0, "read": len(files)}
    index, again, _w, _n = _read(folder)
    assert index.stats == {"indexed": len(files), "read": 0} and again == records

    # Changed with its size and mtime put back (a copy that keeps times): the ctime still tells.
    victim = files[0]
    st = victim.stat()
    raw = json.loads(victim.read_text())
    raw["summary"]["tokens_per_s"] = float(str(raw["summary"]["tokens_per_s"])[:-1] + "7")  # same length
    text = json.dumps(raw, indent=1)
    assert len(text.encode()) == st.st_size
    victim.write_text(text)
    os.utime(victim, ns=(st.st_atime_ns, st.st_mtime_ns))
    shutil.copy(files[1], folder / "new.json")
    files[2].unlink()
    index, records, _w, _n = _read(folder)
    assert index.stats == {"indexed": len(files) - 2, "read": 2}
    by_path = dict(records)
    assert by_path[victim]["summary"]["tokens_per_s"] == raw["summary"]["tokens_per_s"]
    assert files[2] not in by_path and folder / "new.json" in by_path
    assert len(st_file._Store(folder, st_file.index_path(folder, None), st_identity.user_key()).load()) == len(files)
    # The rewritten index carried the kept rows' sections over from the old file: read back, they are the records'.
    index, kept, _w, notices = _read(folder)
    assert index.stats["read"] == 0 and kept == list(iter_records([folder], lambda _line: None))
    assert sum(isinstance(r.get("explain"), st_codec.LazySection) for _p, r in kept) > 20
    assert notices == []  # no section read back from its record for want of a whole copy


def _deltas(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / st_layout.INDEX_DIR).iterdir() if st_layout.DELTA in p.name)


def test_a_few_changes_are_a_delta_and_a_new_base_takes_them_in(tmp_path, monkeypatch):
    """A change of a few files is written beside the index as a delta, not as the whole index again; once the deltas
    are MAX_DELTAS, the next change writes a new base that holds their rows, and removes them. At every step the
    records read are what reading the files directly gives, and nothing unchanged is read again."""
    folder = _copy(RESULTS, tmp_path / "results")
    base = st_file.index_path(folder, None)
    files = [Path(name) for name in record_names(folder)]
    _read(folder)
    inode = base.stat().st_ino

    def step(read: int, indexed: int, deltas: int) -> None:
        index, records, warnings, notices = _read(folder)
        direct = []
        assert records == list(iter_records([folder], direct.append)) and warnings == direct and notices == []
        assert index.stats == {"indexed": indexed, "read": read} and len(_deltas(folder)) == deltas

    files[0].write_text(json.dumps(json.loads(files[0].read_text()), indent=2))  # the same record, other bytes
    step(read=1, indexed=len(files) - 1, deltas=1)
    files[1].unlink()
    step(read=0, indexed=len(files) - 1, deltas=2)  # the removed file's row is dropped by a delta
    rows = st_file._Store(folder, base, st_identity.user_key()).load()
    assert len(rows) == len(files) - 1 and files[1].relative_to(folder).as_posix() not in rows
    step(read=0, indexed=len(files) - 1, deltas=2)  # nothing changed: nothing written
    assert base.stat().st_ino == inode  # the base as it was written first

    monkeypatch.setattr(st_file, "MAX_DELTAS", 2)
    shutil.copy(files[2], folder / "new.json")
    step(read=1, indexed=len(files) - 1, deltas=0)
    assert base.stat().st_ino != inode  # a new base, holding the deltas' rows
    step(read=0, indexed=len(files), deltas=0)


def test_a_damaged_delta_is_one_warning_and_the_index_rebuilt(tmp_path):
    folder = _copy(RESULTS, tmp_path / "results")
    _read(folder)
    victim = Path(record_names(folder)[0])
    victim.write_text(json.dumps(json.loads(victim.read_text()), indent=2))
    _read(folder)
    [delta] = _deltas(folder)
    data = bytearray(delta.read_bytes())
    data[int.from_bytes(data[-st_layout.TRAILER:-st_layout.TRAILER + 8], "little") // 2] ^= 0x40  # in its body
    delta.write_bytes(bytes(data))
    index, records, warnings, notices = _read(folder)
    direct = []
    assert records == list(iter_records([folder], direct.append)) and warnings == direct
    assert len(notices) == 1 and notices[0].startswith(f"warning: {delta}: damaged")
    assert notices[0].endswith("; rebuilt")
    assert index.stats["indexed"] == 0 and _deltas(folder) == []  # rebuilt whole, the delta removed
    assert _read(folder)[0].stats["read"] == 0

    # A folder, or a link, named as a delta is none of the index's: left alone, not a warning and a rebuild each time.
    (folder / st_layout.INDEX_DIR / f"records.idx{st_layout.DELTA}0-folder").mkdir()
    (folder / st_layout.INDEX_DIR / f"records.idx{st_layout.DELTA}0-link").symlink_to(victim)
    for _ in range(2):
        index, records, warnings, notices = _read(folder)
        assert notices == [] and index.stats["read"] == 0 and records == list(iter_records([folder], direct.append))


def test_a_file_changed_as_it_was_indexed_is_checked_by_its_bytes(tmp_path):
    """A row whose times match but whose file was written again within the same tick: its hash tells."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    path = min(folder.glob("*.json"))
    row, _outcome = st_scan.index_file(("x", str(path)))
    assert row[5] is not None  # just copied: within RACY_NS, so its bytes were hashed
    identity = dict(zip(*st_scan._listed(folder)))[str(path)]
    assert identity == tuple(row[1:5]) and idx.RecordIndex._current(row, path, identity)
    assert not idx.RecordIndex._current((*row[:5], b"\0" * 16, *row[6:]), path, identity)
    assert not idx.RecordIndex._current(row, path, None)  # gone, or unreadable, since it was listed


def test_what_validation_leaves_out_the_index_leaves_out(tmp_path):
    """Bad files (out of range, not JSON, NaN) are held as what they are: the same warning, never a record."""
    folder = write_hostile(tmp_path / "h", edit=lambda r: r["summary"].update(step_ms_median=0), limit=2)
    (folder / "nan.json").write_text(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")).read_text()
                                     .replace('"loss": [', '"loss": [NaN, ', 1))
    (folder / "big.json").write_text('{"a": 123456789012345678901234567890}')
    for _ in range(2):  # cold, then warm
        _index, records, warnings, _n = _read(folder)
        direct = []
        assert [p for p, _r in records] == [p for p, _r in iter_records([folder], direct.append)]
        assert warnings == direct and len(warnings) == 4 and records == []
        assert any("nan.json: skipped: steps.loss[0] = nan: NaN or infinity" in line for line in warnings)
    rows = st_file._Store(folder, st_file.index_path(folder, None), st_identity.user_key()).load()
    assert sorted(row[6] for row in rows.values()) == ["bad", "bad", "bad", "bad"]


@pytest.mark.parametrize("damage", ["flip", "truncate", "foreign", "other-key", "empty"])
def test_a_damaged_or_foreign_index_is_rebuilt_with_one_warning(tmp_path, damage):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    direct = _run(tmp_path, "harness.compare", folder, "--no-index")
    _run(tmp_path, "harness.compare", folder)
    path = folder / st_layout.INDEX_DIR / "records.idx"
    data = bytearray(path.read_bytes())
    if damage == "flip":  # in the body, which the keyed hash covers
        data[int.from_bytes(data[-st_layout.TRAILER:-st_layout.TRAILER + 8], "little") // 2] ^= 0x40
    elif damage == "truncate":
        data = data[:len(data) // 3]
    elif damage == "foreign":
        data = bytearray(b"PAR1" + os.urandom(500) + b"PAR1")
    elif damage == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))
    env = _env(tmp_path)
    if damage == "other-key":  # made by another user: their key, not ours
        env["XDG_CACHE_HOME"] = str(tmp_path / "other-cache")
    proc = subprocess.run([sys.executable, "-m", "harness.compare", str(folder)], capture_output=True, text=True,
                          cwd=ROOT, env=env, check=False)
    assert proc.returncode == 0 and proc.stdout == direct.stdout
    extra = [line for line in proc.stderr.splitlines() if line not in direct.stderr.splitlines()]
    assert len(extra) == 1 and extra[0].startswith(f"warning: {path}: ") and extra[0].endswith("; rebuilt")
    assert "Traceback" not in proc.stderr
    again = subprocess.run([sys.executable, "-m", "harness.compare", str(folder)], capture_output=True, text=True,
                           cwd=ROOT, env=env, check=False)
    assert again.stderr == direct.stderr  # rebuilt: read quietly now


def test_a_damaged_explain_section_is_read_from_its_record_with_one_warning(tmp_path):
    """The explain sections lie past what the keyed hash covers: each is checked against its hash when read. One
    byte changed in every one: the output is what the records give, with one warning, and the next read rebuilds."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    direct = _run(tmp_path, "harness.compare", folder, "--no-index", "--detail")
    _run(tmp_path, "harness.compare", folder)
    path = folder / st_layout.INDEX_DIR / "records.idx"
    rows = st_file._Store(folder, path, st_identity.user_key()).load()
    blobs = [row[9] for row in rows.values() if row[9] is not None]
    assert len(blobs) > 20
    data = bytearray(path.read_bytes())
    for blob in blobs:
        data[blob.at + blob.length // 2] ^= 0x40
    path.write_bytes(bytes(data))
    proc = _run(tmp_path, "harness.compare", folder, "--detail")
    assert proc.returncode == 0 and proc.stdout == direct.stdout and "Traceback" not in proc.stderr
    extra = [line for line in proc.stderr.splitlines() if line not in direct.stderr.splitlines()]
    assert len(extra) == 1 and extra[0].startswith(f"warning: {path}: damaged") and not path.exists()
    again = _run(tmp_path, "harness.compare", folder, "--detail")
    assert again.stdout == direct.stdout and again.stderr == direct.stderr and path.exists()


def test_an_index_of_another_harness_version_is_rebuilt_quietly(tmp_path, monkeypatch):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    monkeypatch.setattr(st_file, "code_identity", lambda: "a changed validation rule")
    index, _r, _w, notices = _read(folder)
    assert index.stats["indexed"] == 0 and notices == []


def test_an_index_that_cannot_be_mapped_is_read(tmp_path, monkeypatch):
    """A filesystem that cannot map files (some network and FUSE ones): the index is read whole instead, quietly."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _index, records, _w, _n = _read(folder)

    def refuse(*_args, **_kw):
        raise OSError(19, "No such device")

    monkeypatch.setattr(st_file.mmap, "mmap", refuse)
    index, again, _w, notices = _read(folder)
    assert notices == [] and index.stats["read"] == 0 and again == records
    assert all(dict(r.get("explain") or {}) == dict(r0.get("explain") or {})
               for (_p, r), (_q, r0) in zip(again, records, strict=True))


def test_an_index_in_an_earlier_format_is_rebuilt_quietly(tmp_path):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    path = folder / st_layout.INDEX_DIR / "records.idx"
    path.write_bytes(b"PAR1" + os.urandom(300) + b"PAR1" + st_layout.EARLIER_MAGICS[0] + os.urandom(32))
    index, _r, _w, notices = _read(folder)
    assert index.stats["indexed"] == 0 and notices == []
    index, _r, _w, notices = _read(folder)
    assert index.stats["read"] == 0 and notices == []


def test_an_unwritable_index_is_one_warning_and_the_records_are_read(tmp_path):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    (folder / st_layout.INDEX_DIR).write_text("a file where the index folder goes")
    direct = _run(tmp_path, "harness.compare", folder, "--no-index")
    proc = _run(tmp_path, "harness.compare", folder)
    assert proc.returncode == 0 and proc.stdout == direct.stdout
    extra = [line for line in proc.stderr.splitlines() if line not in direct.stderr.splitlines()]
    assert len(extra) == 1 and "not a folder, not used" in extra[0] and "Traceback" not in proc.stderr


def test_index_option_keeps_it_elsewhere_and_no_index_refuses_it(tmp_path):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    proc = _run(tmp_path, "harness.compare", folder, "--index", tmp_path / "ix")
    assert proc.returncode == 0 and not (folder / st_layout.INDEX_DIR).exists()
    assert [p.suffix for p in (tmp_path / "ix").iterdir()] == [".idx"]
    proc = _run(tmp_path, "harness.compare", folder, "--index", tmp_path / "ix", "--no-index")
    assert proc.returncode == 2 and "--index and --no-index" in proc.stderr.splitlines()[-1]


def _three_compares_at_once(tmp_path, folder: Path, direct) -> None:
    """Three compares of the folder started together: each prints what --no-index printed (`direct`)."""
    procs = [subprocess.Popen([sys.executable, "-m", "harness.compare", str(folder)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=ROOT, env=_env(tmp_path)) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert all(out == direct.stdout and err == direct.stderr for out, err in outs)


def test_two_compares_at_once_leave_a_whole_index(tmp_path):
    folder = _copy(RESULTS, tmp_path / "results")
    direct = _run(tmp_path, "harness.compare", folder, "--no-index")
    _three_compares_at_once(tmp_path, folder, direct)
    index, _r, _w, notices = _read(folder)
    assert notices == [] and index.stats["read"] == 0
    assert not [p for p in (folder / st_layout.INDEX_DIR).iterdir() if p.name != "records.idx"]  # no temp file left

    # Then, a file changed: each writes its delta over the same base, and what they leave reads as the files do.
    victim = Path(record_names(folder)[0])
    victim.write_text(json.dumps(json.loads(victim.read_text()), indent=2))
    _three_compares_at_once(tmp_path, folder, direct)
    index, records, _w, notices = _read(folder)
    assert notices == [] and index.stats["read"] == 0 and records == list(iter_records([folder], lambda _line: None))
    assert 1 <= len(_deltas(folder)) <= 3
    assert not [p for p in (folder / st_layout.INDEX_DIR).iterdir() if p.name.startswith(".tmp")]


def test_a_lazy_section_is_the_dict_it_stands_for():
    section = {"kernels": {"top": [{"name": "gemm", "share": 0.5}]}, "mfu": {"mfu_measured": 0.25}, "x": None}
    blob = st_codec.compress(st_codec.encode(section))
    assert dict(st_codec.LazySection(blob)) == section
    assert st_codec.LazySection(blob) == section and section == st_codec.LazySection(blob)
    assert json.dumps(dict(st_codec.LazySection(blob))) == json.dumps(section)
    lazy = st_codec.LazySection(blob)
    assert "mfu" in lazy and lazy.get("x", 1) is None and lazy["kernels"]["top"][0]["name"] == "gemm"
    assert list(lazy.items()) == list(section.items()) and len(lazy) == 3 and bool(st_codec.LazySection(blob))
    assert not st_codec.LazySection(st_codec.compress(st_codec.encode({})))
    lazy = st_codec.LazySection(blob)
    assert lazy.peek("mfu") == section["mfu"] and lazy.peek("none", 7) == 7 and lazy._blob is not None  # left unread
    assert lazy["x"] is None and lazy.peek("mfu") == section["mfu"]


def test_a_runs_mfu_read_through_the_index_is_its_records_and_leaves_explain_unread(tmp_path):
    """RecordView.mfu reads explain's mfu object alone (LazySection.peek): the same numbers as the whole section
    gives, for every committed record, and no record's explain section is read whole for it."""
    from harness.record.view import RecordView

    folder = _copy(RESULTS, tmp_path / "results")
    _read(folder)
    _index, records, _w, _n = _read(folder)
    direct = dict(iter_records([folder], lambda _line: None))
    found = 0
    for path, record in records:
        view = RecordView(record)
        for key in ("mfu_measured", "mfu_datasheet"):
            value = view.mfu(key)
            assert value == getattr(RecordView(direct[path]).explain.mfu, key), (path, key)
            found += value is not None
        assert not isinstance(record.get("explain"), st_codec.LazySection) or record["explain"]._blob is not None
    assert found > 50


def test_a_record_from_the_index_brings_what_its_view_derives(tmp_path, monkeypatch):
    """The values every run's view derives for compare (view.INDEXED: timed steps, losses, memory, contention, MFU)
    come with a record read from the index, made by the view when it was indexed: for every committed record the
    same values, of the same types, as a view of the record read directly derives, and none of the sections they
    are derived from is read for them on a warm read."""
    from harness.record import parts
    from harness.record.view import INDEXED, RecordView

    folder = _copy(RESULTS, tmp_path / "results")
    _read(folder)
    direct = dict(iter_records([folder], lambda _line: None))
    made = []
    monkeypatch.setattr(parts.Part, "of", classmethod(lambda cls, value: made.append(cls) or pytest.fail("derived")))
    _index, records, _w, _n = _read(folder)
    views = [(path, RecordView(record)) for path, record in records]
    read = {name: [repr(view._once(name, pytest.fail)) for _path, view in views] for name in INDEXED}
    monkeypatch.undo()
    assert len(views) > 200 and not made
    for i, (path, _view) in enumerate(views):
        fresh = RecordView(direct[path])
        fresh.indexed()
        assert {name: read[name][i] for name in INDEXED} == {name: repr(vars(fresh)[name]) for name in INDEXED}, path
    assert any(v.timed_ms for _p, v in views) and any(v.mfu("mfu_datasheet") for _p, v in views)
    # kernels_reason, lm_head_kernel and vocab_gemms read one object of explain: what the whole profile typed says
    for record in direct.values():
        whole = RecordView(record).explain.kernels
        fresh = RecordView(record)
        assert fresh.kernels_reason == ("available" if whole.available else whole.reason or "not profiled")
        name = whole.lm_head_gemm.name if whole.available else None
        assert fresh.lm_head_kernel == (str(name) if name else None)
        assert fresh.vocab_gemms == ((whole.vocab_gemms or ()) if whole.available else ())
    assert any(RecordView(r).lm_head_kernel for r in direct.values())
    assert any(RecordView(r).vocab_gemms for r in direct.values())
    assert {type(RecordView(r).peak_memory()) for _p, r in records} == {tuple}


def test_sections_round_trip_exactly():
    """What the index stores decodes to the value read_record gave: long integers, surrogates, -0.0, key order."""
    for value in ({"b": 1, "a": [1.0, -0.0, 1e-300, 2**70, -(2**65)], "s": "\ud800 \U0001f600 é"},
                  {"n": None, "t": True, "f": 0.1 + 0.2}):
        back = st_codec.decode(st_codec.encode(value))
        assert back == value and list(back) == list(value)
        assert repr(back) == repr(value)  # the same types too: 2**70 stays an int, -0.0 a float


def test_a_warm_load_walks_no_record_and_opens_no_explain(tmp_path, monkeypatch):
    """A warm load opens no record's explain section (a walk of every record for NaN once did, and was most of a warm
    compare's time: the reader's bounds refuse a NaN now, before anything is indexed); the verdict opens the explain
    sections of the few runs whose kernels it compares, not every run's."""
    from harness.analysis.options import CompareOptions, analyse
    from harness.analysis.verdict import verdict

    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    analyse(CompareOptions(paths=(folder,)), warn=lambda _line: None)  # cold: the index built
    opened, fill = set(), st_codec.LazySection._fill
    monkeypatch.setattr(st_codec.LazySection, "_fill", lambda self: opened.add(id(self)) or fill(self))
    ds, cmp = analyse(CompareOptions(paths=(folder,)), warn=lambda _line: None)
    assert ds.valid_records > 20 and not opened
    verdict(cmp)
    assert len(opened) < ds.valid_records / 4


def test_read_json_fast_path_gives_what_json_gives(tmp_path):
    """orjson where it is exact; json (and its error) everywhere else."""
    from harness.record import io

    texts = ['[18446744073709551616]', '[-9223372036854775809]', '[12345678901234567890]', '[0.00044378077229848456]',
             '[1e400]', '[NaN]', '["\\ud800"]', '{"a": 1, "a": 2}', '[-0.0, 1E2, 2.2250738585072011e-308]', '\ufeff{}',
             '{"a": [1, 2', '[1e-00000000000000000000005]', '[-1234567890123456789]', '[1234567890123456789]']
    for i, text in enumerate(texts):
        path = tmp_path / f"{i}.json"
        path.write_text(text, encoding="utf-8")
        try:
            fast = ("ok", io.read_json(path))
        except RecordError as exc:
            fast = ("error", str(exc))
        try:
            slow = ("ok", json.loads(text, parse_constant=float))
            slow = ("ok", slow[1]) if not isinstance(slow[1], str) else slow
        except ValueError:
            slow = ("error", None)
        assert fast[0] == slow[0], text
        if fast[0] == "ok":
            assert repr(fast[1]) == repr(slow[1]), text


def test_validation_by_sections_is_validation_whole(tmp_path):
    """A record valid whole is valid by sections, and each kind of invalid one is refused with jsonschema's message."""
    from harness.record import validator

    good = read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")))
    assert validator.validate(good) is good
    for edit, where in ((lambda r: r["steps"]["ms"].append("x"), "steps.ms["), (lambda r: r.pop("summary"), "the record"),
                        (lambda r: r["steps"]["loss"].append(True), "steps.loss["),
                        (lambda r: r.update(workload=[]), "workload"),
                        (lambda r: r.update(kind="bogus"), "kind")):
        bad = json.loads(json.dumps(good))
        edit(bad)
        with pytest.raises(RecordError) as exc:
            validator.validate(bad)
        assert str(exc.value).startswith(where)
        if where.startswith("steps."):  # the step series are checked in one pass of their own, with their own words
            assert str(exc.value).endswith("is not a number or null")
            continue
        import jsonschema
        best = jsonschema.exceptions.best_match(validator._validator().iter_errors(bad))
        assert str(exc.value).endswith(best.message)


def test_the_listing_is_what_rglob_finds(tmp_path, monkeypatch):
    """io.record_files lists with one scandir per folder: the same paths, in the same order, as rglob("*.json") gives
    (hidden files, a folder named *.json, a linked folder not followed, links to files and nowhere, .JSON not), less
    what a writer's temp folder holds (a half-unpacked GPU call: its records are not there yet)."""
    from harness.record import io

    root = tmp_path / "t"
    for folder in ("a/b", ".hid", "d.json", "real", ".tmp-unpack-1"):
        (root / folder).mkdir(parents=True)
    for name in ("x.json", ".y.json", "a/z.json", "a/b/w.JSON", "a/b/v.json", ".hid/h.json", "d.json/in.json",
                 ".tmp-1.json", "bisect-x.json", "a/b.txt", "real/r.json", ".tmp-unpack-1/u.json"):
        (root / name).write_text("{}")
    (root / "a" / "link").symlink_to(root / "real")
    (root / "sl.json").symlink_to(root / "real" / "r.json")
    (root / "broken.json").symlink_to(tmp_path / "nowhere")

    def by_rglob(folder):
        return sorted((p for p in folder.rglob("*.json")
                       if not any(part.startswith(io.TEMP_PREFIX) for part in p.relative_to(folder).parts)
                       and not any(p.match(pattern) for pattern in io.NOT_RECORDS)), key=lambda p: p.parts)

    for folder in (root, RESULTS, ROOT / "tests" / "data"):
        assert io.record_files(folder) == by_rglob(folder) and io.record_files(folder)
    monkeypatch.chdir(root)
    assert io.record_files(Path(".")) == by_rglob(Path(".")) and len(by_rglob(Path("."))) == 10


def test_a_section_the_plain_check_passes_jsonschema_passes():
    """validator._plain_section's checks only save work: every value one passes that is within the bounds (checked
    first, harness.record.bounds), over a grid of JSON values of every type (bool beside int, 1.0 beside 1, null,
    nested, out of bounds) and each committed record's own, jsonschema finds valid; and they are what most of a
    record's sections go through."""
    import itertools

    from harness.record import bounds, validator

    def within(name, value) -> bool:
        try:
            bounds.check({name: value})
            return True
        except RecordError:
            return False

    scalars = [None, True, False, 0, 1, -3, 2**70, 1.0, 2.5, -0.0, "", "ok", "measured", "x" * 3, [], {}, ["a"], [1]]
    records = [r for _p, r in iter_records([RESULTS], lambda _line: None)]
    checked = 0
    for name in validator.schema()["properties"]:
        plain = validator._plain_section(name)
        if plain is None:
            continue
        check = validator._section_validator(name)
        values = scalars + [r.get(name) for r in records]
        if name == "summary":
            keys = list(validator.schema()["properties"]["summary"]["properties"])[:4] + ["not_in_the_schema"]
            values += [dict(zip(keys, combo)) for combo in itertools.product(scalars[:9], repeat=2)]
        for value in values:
            if plain(value) and within(name, value):
                checked += 1
                assert check.is_valid(value), (name, value)
    properties = validator.schema()["properties"]
    assert checked > 1000 and sum(validator._plain_section(n) is not None for n in properties) >= 12


def test_the_export_and_the_cluster_docs_query_give_the_verdicts_numbers(tmp_path):
    """docs/cluster.md's export command and its SQL, run with DuckDB on the exported Parquet files, give the
    verdict's tokens/s geometric mean and its most-changed rung, to the last digit."""
    duckdb = pytest.importorskip("duckdb")
    docs = (ROOT / "docs" / "cluster.md").read_text()
    command = re.search(r"```\n(python -m harness.compare .*--export-parquet export/)\n```", docs).group(1).split()
    sql = re.search(r"```sql\n(.*?)```", docs, re.DOTALL).group(1)
    records = _copy(ROOT / command[3], tmp_path / "records")
    proc = _run(tmp_path, "harness.compare", records, *command[4:-1], tmp_path / "export")
    assert proc.returncode == 0, proc.stderr
    export = tmp_path / "export"
    assert proc.stdout.split() == [str(export / "runs.parquet"), str(export / "steps.parquet")]
    verdict = json.loads(_run(tmp_path, "harness.compare", records, "--format", "json").stdout)["verdict"]
    pair = next(p for p in verdict["pairs"] if p["base"] == "torch212" and p["other"] == "latest")
    rows = duckdb.sql(sql.replace("'export/", f"'{tmp_path}/export/")).fetchall()
    assert rows == [("epyc", "latest", "torch212", pair["rungs"], pytest.approx(pair["tokens_per_s_geomean"]["value"],
                                                                                   rel=1e-12),
                     pytest.approx(pair["most_changed_rung"]["tokens_per_s"]["value"], rel=1e-12))]
    assert f"{rows[0][4]!r}" in docs  # the digits the docs quote are the ones the query gives


def test_without_pyarrow_or_a_key_the_records_are_read_directly(tmp_path, monkeypatch):
    """No index can be used: one line says why, and open() gives None (analyse then reads every file)."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    notices = []
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow raises ImportError
    assert idx.RecordIndex.open([folder], notice=notices.append) is None
    monkeypatch.delitem(sys.modules, "pyarrow")
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    assert idx.RecordIndex.open([folder], notice=notices.append) is None
    assert [n.split(":")[0] for n in notices] == ["note", "note"] and "pyarrow" in notices[0]
    assert "no index key" in notices[1] and not (folder / st_layout.INDEX_DIR).exists()


def test_a_folder_copied_with_its_index_is_reindexed_quietly(tmp_path):
    """cp -r takes .harness-index/ along: the copy's index names the original folder (and its files' identities
    differ anyway), so it is rebuilt without a warning: it is this user's, only not this folder's."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    shutil.copytree(folder, tmp_path / "copy")
    index, _r, _w, notices = _read(tmp_path / "copy")
    assert notices == [] and index.stats["indexed"] == 0


def test_every_text_that_parses_to_nan_is_refused_by_the_bounds():
    """Whichever parser reads a text (orjson refuses NaN, infinity and numbers past a double; json reads them as
    floats), a NaN or an infinity it holds is refused by the bounds, naming the field; finite texts give finite
    floats."""
    from harness.record import bounds
    from harness.record.io import parse_json

    for text in (b'[NaN]', b'[-Infinity]', b'[1e400]', b'[1E+309]', b'[1e0000000309]', b'[' + b'9' * 309 + b'.0]',
                 b'{"a": 2e999}', b'[1e400 ]', b'[' + b'9' * 250 + b'e60]'):
        with pytest.raises(RecordError, match="NaN or infinity"):
            bounds.check({"loss": parse_json(text)})
    for text in (b'[1.5e-300, 1e99, 1e308]', b'{"a": [0.00044378077229848456, -2.5E+10]}', b'{"note": "NaN, 1e400"}',
                 b'{"workload_hash": "3fe0123ab12e456", "h": "12e4567c"}', b'[1e-400]'):
        value = parse_json(text)
        floats = [v for v in (value.values() if isinstance(value, dict) else value) if isinstance(v, float)]
        floats += [v for v in value.get("a", []) if isinstance(v, float)] if isinstance(value, dict) else []
        assert all(map(math.isfinite, floats)), text


def test_the_listing_as_strings_is_in_the_order_of_the_paths(tmp_path, monkeypatch):
    """io.record_names (the index's listing) sorts by path components as Paths do, not as strings do: 'a/x.json'
    before 'a-b/y.json' before 'a.json' ('-' and '.' sort before '/' as characters)."""
    for name in ("a.json", "a/x.json", "a-b/y.json", "a/b/z.json", "b.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("{}")
    names = record_names(tmp_path)
    assert names == [str(p) for p in record_files(tmp_path)] == [str(tmp_path / n) for n in (
        "a/b/z.json", "a/x.json", "a-b/y.json", "a.json", "b.json")]
    assert names != sorted(names)  # as plain strings they would sort otherwise
    monkeypatch.chdir(tmp_path)  # the folder named as "." (compare .): names as Paths say them, "a/x.json"
    assert record_names(Path(".")) == [str(p) for p in record_files(Path("."))] == [
        "a/b/z.json", "a/x.json", "a-b/y.json", "a.json", "b.json"]


def test_a_runs_losses_and_timed_steps_are_not_kept_twice(tmp_path):
    """The index keeps a run's losses and timed steps as a mark where they are its steps' own list or the tail of its
    steps' times (a fifth of a record's bytes in it): read back, they are the record's own lists (the values equal to
    a direct view's: test_a_record_from_the_index_brings_what_its_view_derives)."""
    from harness.record.view import SAME_AS_STEPS_LOSS, RecordView

    folder = _copy(RESULTS, tmp_path / "results")
    _read(folder)
    rows = st_file._Store(folder, st_file.index_path(folder, None), st_identity.user_key()).load().values()
    known = [st_codec.decode(row[8])[1] for row in rows if row[6] == "record"]
    assert sum(k["step_losses"] == SAME_AS_STEPS_LOSS for k in known) > 100
    assert sum(isinstance(k["timed_ms"], int) for k in known) > 100
    _index, records, _w, _n = _read(folder)
    shared = [RecordView(r).step_losses is r["steps"]["loss"] for _p, r in records if r.get("steps", {}).get("loss")]
    assert sum(shared) > 100


def _code_copy(into: Path) -> Path:
    """harness/ and gpt/ of this checkout, to edit."""
    for package in ("harness", "gpt"):
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def test_the_index_identity_covers_every_file_reading_depends_on(tmp_path):
    """Each file that decides a record's validity, upgrade or values changes the identity when it changes: the
    record package's modules and data, the schema, and what they import of this project (gpt/config.py's bounds)."""
    code = _code_copy(tmp_path / "code")
    names = {p.relative_to(code).as_posix() for p in st_identity.identity_files(code)}
    assert {"harness/record/schema.json", "harness/record/workload_code_history.json", "gpt/config.py",
            "harness/record/io.py", "harness/record/validator.py", "harness/record/migrate.py"} <= names
    assert "harness/analysis/stats.py" not in names  # what reading does not use leaves the index alone
    before = st_identity.code_identity(code)
    for path in st_identity.identity_files(code):
        kept = path.read_bytes()
        path.write_bytes(kept + b"\n")
        assert st_identity.code_identity(code) != before, path
        path.write_bytes(kept)
    assert st_identity.code_identity(code) == before


def test_a_warm_compare_after_a_change_to_the_bounds_reads_as_no_index(tmp_path):
    """gpt/config.py's step bound lowered below what the records hold: the warm compare rebuilds the index and
    leaves them out, as --no-index does (it printed '24 valid' from the stale index)."""
    code = _code_copy(tmp_path / "code")
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    env = {**_env(tmp_path), "PYTHONPATH": str(code), "COLUMNS": "120"}

    def compare(*args):
        return subprocess.run([sys.executable, "-m", "harness.compare", str(folder), *args], capture_output=True,
                              text=True, cwd=tmp_path, env=env, timeout=600, check=False)
    assert compare().returncode == 0  # the index built
    config = code / "gpt" / "config.py"
    config.write_text(config.read_text().replace('"steps": (1, 100_000)', '"steps": (1, 10)'))
    warm, direct = compare(), compare("--no-index")
    assert (warm.returncode, warm.stdout, warm.stderr) == (direct.returncode, direct.stdout, direct.stderr)
    assert "24 valid" not in warm.stdout + warm.stderr


def test_a_killed_writers_temp_file_is_removed_by_the_next_write(tmp_path):
    """A writer killed outright (SIGKILL) cannot remove its temp file; the next write removes one an hour old and
    leaves a fresh one, which may be a live writer's."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    where = st_file.index_path(folder, None).parent
    dead, live = where / ".tmp-0123456789abcdef.idx", where / ".tmp-fedcba9876543210.idx"
    for path in (dead, live):
        path.write_bytes(b"\0" * 1024)
    hours_ago = time.time() - 2 * st_file.STALE_TEMP_S
    os.utime(dead, (hours_ago, hours_ago))
    shutil.copy(min(folder.glob("*.json")), folder / "new.json")  # a change: the next read writes
    index, _r, _w, _n = _read(folder)
    assert index.stats["read"] == 1 and not dead.exists() and live.exists()


def test_a_linked_index_folder_is_not_followed(tmp_path):
    """FOLDER/.harness-index a symbolic link (to / once): compare writes nothing where it points, says so in one line
    and prints what --no-index prints."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (folder / st_layout.INDEX_DIR).symlink_to(elsewhere)
    linked, direct = _run(tmp_path, "harness.compare", folder), _run(tmp_path, "harness.compare", folder, "--no-index")
    assert linked.returncode == 0 and linked.stdout == direct.stdout and list(elsewhere.iterdir()) == []
    assert linked.stderr.count("a symbolic link, not used; ") == 1


def test_a_fifo_in_place_of_the_index_file_is_not_waited_on(tmp_path):
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    (folder / st_layout.INDEX_DIR).mkdir()
    os.mkfifo(folder / st_layout.INDEX_DIR / "records.idx")
    proc = subprocess.run([sys.executable, "-m", "harness.compare", str(folder)], capture_output=True, text=True,
                          cwd=ROOT, env=_env(tmp_path), timeout=60, check=False)  # it hung here, opening the FIFO
    direct = _run(tmp_path, "harness.compare", folder, "--no-index")
    assert proc.returncode == 0 and proc.stdout == direct.stdout
    assert "records.idx: unreadable" in proc.stderr


def test_a_killed_writers_temp_file_is_removed_by_a_read_that_writes_nothing(tmp_path):
    """The index folder's stale temp files are removed whenever it is read: a warm compare writes nothing, and one left
    by a writer killed outright stayed for good. Only regular files of that name, STALE_TEMP_S old."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    base = st_file.index_path(folder, None)
    where, written = base.parent, base.stat().st_mtime_ns
    dead, live = where / ".tmp-0123456789abcdef-records.idx", where / ".tmp-fedcba9876543210-records.idx"
    for path in (dead, live):
        path.write_bytes(b"\0" * 1024)
    (where / ".tmp-a-folder").mkdir()
    (where / ".tmp-a-link").symlink_to(folder / "elsewhere")
    hours_ago = time.time() - 2 * st_file.STALE_TEMP_S
    for path in (dead, where / ".tmp-a-folder"):
        os.utime(path, (hours_ago, hours_ago))
    os.utime(where / ".tmp-a-link", (hours_ago, hours_ago), follow_symlinks=False)
    index, _r, _w, notices = _read(folder)
    assert index.stats["read"] == 0 and notices == [] and base.stat().st_mtime_ns == written  # nothing written
    assert not dead.exists() and live.exists()
    assert (where / ".tmp-a-folder").is_dir() and (where / ".tmp-a-link").is_symlink()


def _hashed(monkeypatch) -> list[int]:
    """hmac.new made to note the length of each piece of bytes it is given (its message, each update)."""
    pieces, real = [], st_file.hmac.new

    class Counted:
        def __init__(self, key, msg=None, digestmod=""):
            self._mac = real(key, None, digestmod)
            if msg is not None:
                self.update(msg)

        def update(self, data):
            pieces.append(memoryview(data).nbytes)
            self._mac.update(data)

        def digest(self):
            return self._mac.digest()
    monkeypatch.setattr(st_file.hmac, "new", Counted)
    return pieces


def test_an_index_file_larger_than_its_folder_could_have_is_not_read(tmp_path, monkeypatch):
    """A sparse index file (20 GiB with the index's magic and lengths was hashed whole: 33 s, 18 GB resident) past
    what the folder's records could make is refused unread, with one warning, and rebuilt; INDEX_FLOOR lowered here so
    that a file of 64 MiB (sparse: no disk) is past it."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _index, records, _w, _n = _read(folder)
    base = st_file.index_path(folder, None)
    size = 64 * 2**20
    with open(base, "r+b") as f:  # its own trailer, moved to the end of a file of `size` bytes
        f.seek(-st_layout.TRAILER, os.SEEK_END)
        trailer = f.read()
        f.truncate(0)
        f.truncate(size)
        f.seek(size - st_layout.TRAILER)
        f.write((size - st_layout.TRAILER).to_bytes(8, "little") + bytes(8) + trailer[16:])  # all of it hashed
    monkeypatch.setattr(st_file, "INDEX_FLOOR", 2**20)
    monkeypatch.setattr(st_scan, "INDEX_FLOOR", 2**20)
    hashed = _hashed(monkeypatch)
    for mapped in (True, False):  # where it cannot be mapped, it is not read whole either
        if not mapped:
            monkeypatch.setattr(st_file.mmap, "mmap", lambda *_a, **_k: (_ for _ in ()).throw(OSError(19, "No device")))
        with pytest.raises(st_file.IndexError_, match=f"{size:,} bytes, larger than an index of the "):
            st_file._Store(folder, base, st_identity.user_key()).load()
        assert sum(hashed) == 0
    assert st_scan.index_bound(st_scan._listed(folder)[1]) < size / 4  # far past the bound, not at its edge
    index, again, _w, notices = _read(folder)
    assert again == records and index.stats["indexed"] == 0
    assert len(notices) == 1 and notices[0].startswith(f"warning: {base}: {size:,} bytes, larger than an index of")
    assert notices[0].endswith("; rebuilt") and base.stat().st_size < 2**20
    index, _r, _w, notices = _read(folder)
    assert notices == [] and index.stats["read"] == 0


def test_an_index_file_is_hashed_a_chunk_at_a_time(tmp_path, monkeypatch):
    """Within the bound, the index's keyed hash reads it HASH_CHUNK at a time, never whole into memory."""
    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    _read(folder)
    monkeypatch.setattr(st_file, "HASH_CHUNK", 4096)
    chunks = _hashed(monkeypatch)
    index, _r, _w, notices = _read(folder)
    assert notices == [] and index.stats["read"] == 0
    assert len(chunks) > 10 and max(chunks) <= 4096


def test_index_option_naming_a_file_or_a_fifo_says_so_in_one_line(tmp_path):
    """--index a regular file or a FIFO: one line saying so, the records read directly (it said 'not written (File
    exists) ... (--index DIR keeps the index elsewhere)', the wrong reason and a hint repeating what the user did)."""
    from harness.report.chart_cache import ChartCache

    folder = _copy(RESULTS / "cpu-amd-epyc-2core", tmp_path / "cpu")
    (tmp_path / "afile").write_text("x")
    os.mkfifo(tmp_path / "fifo")
    said = "not a folder; the records were read directly, without an index"
    for name, kind in (("afile", "a file"), ("fifo", "a FIFO")):
        notices = []
        assert idx.RecordIndex.open([folder], str(tmp_path / name), notices.append) is None
        assert notices == [f"warning: --index {tmp_path / name}: {kind}, {said}"]
        assert ChartCache.beside_index([folder], str(tmp_path / name), notices.append) is None and len(notices) == 1
    proc, direct = _run(tmp_path, "harness.compare", folder, "--index", tmp_path / "fifo"), \
        _run(tmp_path, "harness.compare", folder, "--no-index")
    assert proc.returncode == direct.returncode == 0 and proc.stdout == direct.stdout
    extra = [line for line in proc.stderr.splitlines() if line not in direct.stderr.splitlines()]
    assert extra == [f"warning: --index {tmp_path / 'fifo'}: a FIFO, {said}"]
