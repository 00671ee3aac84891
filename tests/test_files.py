"""Issue 50: every write of a file into a results folder goes through harness.record.files. For each writer (the
record index and its key, the kept charts, the Parquet export, a command's output files, gpu_check's unpack) a
failure injected half-way (a full disk, Ctrl-C, a SIGTERM made an exception) leaves the previous file as it was and
no temp file, and each file is fsynced before it is renamed into place; and no module of the harness but files.py
renames a file into place or writes one by itself (read from the source, with the few justified exceptions named)."""

from __future__ import annotations

import ast
import errno
import os
import shutil
import signal
import stat
from pathlib import Path

import pytest
from module_cli import ROOT
from shipped import RESULTS

from harness.console import output
from harness.console.signals import Interrupted
from harness.record import files
from harness.record.files import TEMP_PREFIX

CPU = RESULTS / "cpu-amd-epyc-2core"


def _full() -> OSError:
    return OSError(errno.ENOSPC, "No space left on device")


# every kind of failure a writer meets half-way: a full disk, Ctrl-C, a SIGTERM that run_process made an exception
FAILURES = [pytest.param(_full, id="ENOSPC"), pytest.param(KeyboardInterrupt, id="Ctrl-C"),
            pytest.param(lambda: Interrupted(signal.SIGTERM), id="SIGTERM")]


def _temps(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name.startswith(TEMP_PREFIX))


def _inodes(path) -> set[int]:
    """The inode of `path`, or of every regular file under it where it is a folder."""
    if not os.path.isdir(path):
        return {os.lstat(path).st_ino}
    return {os.lstat(os.path.join(d, n)).st_ino for d, _s, names in os.walk(path) for n in names
            if stat.S_ISREG(os.lstat(os.path.join(d, n)).st_mode)}


class Disk:
    """os.fsync, os.replace, os.rename and os.link watched (and made to fail where told): what was renamed or linked
    into place, and whether each of its files had been fsynced before."""

    def __init__(self, monkeypatch):
        self.synced: set[int] = set()
        self.moves: list[tuple[str, str, bool]] = []  # (call, destination, every file fsynced before)
        self.fail: dict[str, object] = {}  # call -> a function making the exception it raises next
        for name in ("fsync", "replace", "rename", "link"):
            monkeypatch.setattr(os, name, self._watch(name, getattr(os, name)))

    def _watch(self, name, real):
        def call(*args, **kwargs):
            if name in self.fail:
                raise self.fail.pop(name)()
            if name == "fsync":
                self.synced.add(os.fstat(args[0]).st_ino)
            else:
                self.moves.append((name, str(args[1]), _inodes(args[0]) <= self.synced))
            return real(*args, **kwargs)
        return call

    def all_synced_first(self) -> bool:
        return bool(self.moves) and all(ok for _call, _to, ok in self.moves)


# ---------------------------------------------------------------- the helper itself

def test_atomic_file_fsyncs_then_renames_into_place(tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    target = tmp_path / "index.idx"
    with files.atomic_file(target) as f:
        assert Path(f.name).parent == tmp_path and Path(f.name).name.startswith(TEMP_PREFIX)
        f.write(b"new ")
        f.writelines([b"bytes"])
    assert target.read_bytes() == b"new bytes" and disk.all_synced_first() and os.listdir(tmp_path) == ["index.idx"]


def test_a_record_caught_half_written_matches_no_glob_for_records(tmp_path, monkeypatch):
    """A reader that globs `*.json` (pathlib's glob takes names that start with a dot) never sees a record the writer
    has not renamed into place yet: the runner's stop test took one for the first record and failed in CI."""
    from harness.record import io as record_io

    seen = []
    real = os.link

    def link(src, dst):  # the record's temp file is whole, and hard-linked to its final name
        seen.append(sorted(p.name for p in tmp_path.glob("*.json")) + sorted(p.name for p in tmp_path.rglob("*.json")))
        return real(src, dst)

    monkeypatch.setattr(os, "link", link)
    record = record_io.read_record(min(CPU.glob("*.json")))
    path = record_io.write_record(record, tmp_path)
    assert seen == [[]] and [p.name for p in tmp_path.glob("*.json")] == [path.name]


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_atomic_file_that_fails_leaves_the_old_file_and_no_temp(tmp_path, monkeypatch, failure, where):
    target = tmp_path / "index.idx"
    target.write_bytes(b"old")
    disk = Disk(monkeypatch)
    if where != "write":
        disk.fail[where] = failure
    with pytest.raises(type(failure())), files.atomic_file(target) as f:
        f.write(b"half")
        if where == "write":
            raise failure()
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["index.idx"]


@pytest.mark.parametrize("failure", FAILURES)
def test_publish_removes_its_temp_when_the_rename_fails(tmp_path, monkeypatch, failure):
    target = tmp_path / "a.md"
    target.write_text("old")
    tmp = files.stage(target, "new")
    Disk(monkeypatch).fail["replace"] = failure
    with pytest.raises(type(failure())):
        files.publish(tmp, target)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["a.md"]


def test_publish_folder_fsyncs_every_file_then_renames_and_never_replaces(tmp_path, monkeypatch):
    staging = tmp_path / f"{TEMP_PREFIX}x"
    (staging / "logs").mkdir(parents=True)
    (staging / "a.json").write_text("{}")
    (staging / "logs" / "b.log").write_text("b")
    disk = Disk(monkeypatch)
    taken = tmp_path / "taken"
    taken.mkdir()  # empty: os.rename would silently replace it
    with pytest.raises(FileExistsError):
        files.publish_folder(staging, taken)
    assert staging.is_dir() and list(taken.iterdir()) == []
    files.publish_folder(staging, tmp_path / "target")
    assert disk.all_synced_first() and (tmp_path / "target" / "logs" / "b.log").read_text() == "b"


# ---------------------------------------------------------------- each writer

def test_the_index_key_is_fsynced_before_it_is_linked_and_a_failure_leaves_nothing(tmp_path, monkeypatch):
    from harness.store import identity as st_identity

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    disk = Disk(monkeypatch)
    disk.fail["fsync"] = _full
    with pytest.raises(OSError, match="No space"):
        st_identity.user_key()
    assert _temps(tmp_path) == [] and not st_identity._key_file().exists()
    key = st_identity.user_key()
    assert len(key) == 32 and disk.all_synced_first() and _temps(tmp_path) == []
    assert stat.S_IMODE(st_identity._key_file().stat().st_mode) == 0o600


def _index_read(folder: Path):
    from harness.record.io import iter_records
    from harness.store import index

    notices = []
    reader = index.RecordIndex.open([folder], notice=notices.append)
    records = list(iter_records([folder], lambda line: None, reader.read, reader.files))
    return records, notices


def test_the_index_is_fsynced_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    from harness.store import identity as st_identity
    from harness.store import layout as st_layout

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = shutil.copytree(CPU, tmp_path / "cpu", ignore=shutil.ignore_patterns(st_layout.INDEX_DIR))
    st_identity.user_key()
    disk = Disk(monkeypatch)
    _index_read(folder)
    assert (folder / st_layout.INDEX_DIR / "records.idx").is_file()
    assert [call for call, _to, _ok in disk.moves] == ["replace"] and disk.all_synced_first()


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_an_index_write_that_fails_leaves_the_old_index_and_no_temp(tmp_path, monkeypatch, failure, where):
    pytest.importorskip("pyarrow")
    from harness.store import layout as st_layout

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    folder = shutil.copytree(CPU, tmp_path / "cpu", ignore=shutil.ignore_patterns(st_layout.INDEX_DIR))
    before, _n = _index_read(folder)
    where_to = folder / st_layout.INDEX_DIR
    kept = {p.name: p.read_bytes() for p in where_to.iterdir()}
    shutil.copy(min(folder.glob("*.json")), folder / "new.json")  # a change: the next read writes the index
    Disk(monkeypatch).fail[where] = failure
    if failure is _full:
        records, notices = _index_read(folder)
        assert len(records) == len(before) + 1 and any("not written" in line for line in notices)
    else:
        with pytest.raises(type(failure())):
            _index_read(folder)
    assert {p.name: p.read_bytes() for p in where_to.iterdir()} == kept  # no delta, no temp, the base as it was


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_a_kept_chart_that_fails_leaves_the_old_entry_and_no_temp(tmp_path, monkeypatch, failure, where):
    from harness.report import chart_cache

    disk = Disk(monkeypatch)
    cache = chart_cache.ChartCache(tmp_path, b"k" * 32)
    cache.put("e", [("x.png", b"old png", "c")])
    assert disk.all_synced_first()
    old = (tmp_path / f"e{chart_cache.SUFFIX}").read_bytes()
    disk.fail[where] = failure
    if failure is _full:
        cache.put("e", [("x.png", b"new png", "c")])
        assert cache.unwritable == "No space left on device"
    else:
        with pytest.raises(type(failure())):
            cache.put("e", [("x.png", b"new png", "c")])
    entry = tmp_path / f"e{chart_cache.SUFFIX}"
    assert os.listdir(tmp_path) == [entry.name] and entry.read_bytes() == old
    assert chart_cache.ChartCache(tmp_path, b"k" * 32).get("e") == [("x.png", b"old png", "c")]


def _dataset():
    from harness.analysis.dataset import load

    return load([CPU], warn=lambda line: None)


def test_the_parquet_export_is_fsynced_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    pytest.importorskip("pyarrow")
    from harness.analysis.export import export_parquet

    ds = _dataset()
    disk = Disk(monkeypatch)
    written = export_parquet(ds, tmp_path)
    assert [p.name for p in written] == ["runs.parquet", "steps.parquet"] and sorted(os.listdir(tmp_path)) == [
        "runs.parquet", "steps.parquet"]
    assert [to for _call, to, _ok in disk.moves] == [str(p) for p in written] and disk.all_synced_first()


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["write", "fsync", "replace"])
def test_a_parquet_export_that_fails_leaves_the_old_files_and_no_temp(tmp_path, monkeypatch, failure, where):
    pq = pytest.importorskip("pyarrow.parquet")
    from harness.analysis.export import export_parquet

    ds = _dataset()
    for name in ("runs", "steps"):
        (tmp_path / f"{name}.parquet").write_bytes(b"old " + name.encode())
    disk = Disk(monkeypatch)
    if where == "write":
        real = pq.write_table

        def half(table, where, **kw):  # some bytes out, then the failure
            real(table.slice(0, 1), where, **kw)
            raise failure()

        monkeypatch.setattr(pq, "write_table", half)
    else:
        disk.fail[where] = failure
    with pytest.raises(type(failure())):
        export_parquet(ds, tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {"runs.parquet": b"old runs",
                                                                   "steps.parquet": b"old steps"}


def test_output_files_are_fsynced_before_they_are_renamed_into_place(tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    output.write_files(tmp_path, {"report.md": b"md", "report.html": b"html"})
    assert [Path(to).name for _call, to, _ok in disk.moves] == ["report.md", "report.html"] and disk.all_synced_first()


@pytest.mark.parametrize("failure", FAILURES)
def test_output_files_whose_rename_fails_leave_no_temp_and_no_half_file(tmp_path, monkeypatch, failure):
    (tmp_path / "report.md").write_bytes(b"old md")
    disk = Disk(monkeypatch)
    disk.fail["replace"] = failure
    with pytest.raises(output.OutputError if failure is _full else type(failure())):
        output.write_files(tmp_path, {"report.md": b"new md", "report.html": b"html"})
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == {"report.md": b"old md"}


def _gpu_archive(tmp_path: Path) -> Path:
    from test_gpu_check import results_folder, summary_for

    from harness.gpu_check import pack

    return pack.pack(results_folder(tmp_path), summary_for(), "t\n", tmp_path / "OUT")[0]


def test_unpack_fsyncs_every_file_before_the_folder_is_renamed_into_place(tmp_path, monkeypatch):
    from harness.gpu_check import pack

    archive = _gpu_archive(tmp_path)
    disk = Disk(monkeypatch)
    target = pack.unpack(archive, tmp_path / "results")
    assert (target / "README.md").is_file() and (target / "logs" / "padding-tf32.log").is_file()
    assert disk.moves[-1][:2] == ("rename", str(target)) and disk.all_synced_first()
    assert _temps(tmp_path / "results") == []


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("where", ["fsync", "replace", "rename"])
def test_an_unpack_that_fails_leaves_nothing_behind(tmp_path, monkeypatch, failure, where):
    """fsync: a file of the archive or the README cannot be made durable; replace: the README's rename; rename: the
    folder's."""
    from harness.gpu_check import pack

    archive = _gpu_archive(tmp_path)
    results = tmp_path / "results"
    results.mkdir()
    Disk(monkeypatch).fail[where] = failure
    with pytest.raises(pack.PackError if failure is _full else type(failure())):
        pack.unpack(archive, results)
    assert list(results.iterdir()) == []
    monkeypatch.undo()
    assert pack.unpack(archive, results).is_dir()  # nothing blocks the retry


# ---------------------------------------------------------------- read from the source: files.py is the one way

HARNESS = ROOT / "harness"
HELPER = HARNESS / "record" / "files.py"

# (module, what it does) -> why it may. Everything else that puts a file in place, or writes one, is files.py's.
ALLOWED = {
    ("harness/console/output.py", "open(..., 'w')"): "stdout pointed at /dev/null once it failed (no file is written)",
    ("harness/console/output.py", "os.open(..., write)"): "stdout pointed at /dev/null once it failed (no file is written)",
    ("harness/gpu_check/runner.py", "open(..., 'a')"): "a run's log, appended line by line as the run goes",
    ("harness/bisect/measure.py", "open(..., 'a')"): "an environment build's log, appended to as it goes",
    ("harness/gpu_check/pack.py", "open(..., 'w:gz')"): "tarfile writing into an in-memory buffer (write_atomic "
                                                        "puts it in place)",
}
WRITE_MODES = set("wax+")


def _mode(call: ast.Call, position: int) -> str | None:
    """The literal mode of an open()-like call (positional `position`, or mode=), or None where it reads."""
    node = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if WRITE_MODES & set(node.value.split(":")[0]) else None
    return None if node is None else "?"  # a mode not written out: counted as a write, to be looked at


def _writes(source: str) -> list[tuple[int, str]]:
    """(line, what) for every rename into place and every write of a file in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "shutil", "pathlib"):
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names
                      if a.name in ("replace", "rename", "renames", "move")]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                (node.value.id, node.attr) in {("os", "replace"), ("os", "rename"), ("os", "renames"),
                                               ("shutil", "move")}:
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        owner = getattr(getattr(func, "value", None), "id", None)
        if isinstance(func, ast.Attribute) and name == "rename" and owner != "os":
            found.append((node.lineno, "Path.rename"))
        # Path.replace(target): one argument (str.replace takes two; datetime's and dataclasses' take keywords)
        if isinstance(func, ast.Attribute) and name == "replace" and owner not in ("os", "dataclasses") and \
                len(node.args) == 1 and not node.keywords:
            found.append((node.lineno, "Path.replace"))
        if name in ("write_text", "write_bytes"):
            found.append((node.lineno, f"Path.{name}"))
        if owner == "os" and name == "open":
            flags = node.args[1] if len(node.args) > 1 else None
            if flags is not None and any(isinstance(n, ast.Attribute) and n.attr in (
                    "O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC") for n in ast.walk(flags)):
                found.append((node.lineno, "os.open(..., write)"))
        elif name in ("open", "fdopen"):
            # open(file, mode), os.fdopen(fd, mode), tarfile.open(name, mode): the mode second; path.open(mode) first
            method = isinstance(func, ast.Attribute) and owner not in ("io", "tarfile", "gzip") and name == "open"
            mode = _mode(node, 0 if method else 1)
            if mode is not None and not (method and mode == "?"):  # Cls.open(paths, ...): no file mode
                found.append((node.lineno, f"open(..., {mode!r})"))
    return sorted(found)


def test_the_source_scan_finds_each_way_of_writing():
    probe = ("import os, shutil\nfrom pathlib import Path\nos.replace(a, b)\nos.rename(a, b)\nPath(a).rename(b)\n"
             "Path(a).replace(b)\nshutil.move(a, b)\nPath(a).write_text('x')\nopen(a, 'wb')\nPath(a).open('w')\n"
             "os.fdopen(fd, 'wb')\nos.open(a, os.O_WRONLY | os.O_CREAT)\nopen(a, mode)\nIndex.open(paths, x)\n"
             "'a'.replace('a', 'b')\nopen(a)\nopen(a, 'rb')\nos.open(a, os.O_RDONLY)\ndataclasses.replace(x)\n"
             "d.replace(tzinfo=z)\ntarfile.open(a, 'r:gz')\nos.fdopen(fd, 'rb')\n")
    found = [what for _line, what in _writes(probe)]
    assert found == ["os.replace", "os.rename", "Path.rename", "Path.replace", "shutil.move", "Path.write_text",
                     "open(..., 'wb')", "open(..., 'w')", "open(..., 'wb')", "os.open(..., write)",
                     "open(..., '?')"], found


def test_no_module_but_files_py_renames_a_file_into_place_or_writes_one():
    """Every rename into place (os.replace, os.rename, Path.rename/replace, shutil.move) and every file written (open
    for writing, write_text/write_bytes, os.open for writing) under harness/ is harness.record.files', or listed in
    ALLOWED with why; and every entry of ALLOWED is still needed."""
    found, used = [], set()
    for path in sorted(HARNESS.rglob("*.py")):
        if path == HELPER:
            continue
        rel = path.relative_to(ROOT).as_posix()
        for line, what in _writes(path.read_text()):
            if (rel, what) in ALLOWED:
                used.add((rel, what))
            else:
                found.append(f"{rel}:{line}: {what}")
    assert found == [], "write through harness.record.files (write_atomic, atomic_file, stage + publish): " + \
        "; ".join(found)
    assert used == set(ALLOWED), f"no longer needed: {set(ALLOWED) - used}"
