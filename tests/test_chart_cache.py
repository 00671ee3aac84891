"""harness.report.chart_cache: a report whose chart data did not change draws nothing and writes the same bytes; an
entry that fails its keyed hash is drawn again with one warning; --no-index keeps nothing; stale entries go."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from records_factory import rich_dataset, write

from harness.record.files import STALE_TEMP_S
from harness.report import __main__ as report
from harness.report import chart_cache, charts, delta_charts
from harness.store.layout import INDEX_DIR

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def records(tmp_path):
    return write(tmp_path / "records", rich_dataset())


def _report(records: Path, out: Path, *extra: str) -> dict[str, bytes]:
    """Every file the report wrote, the line naming its own command left out of the text."""
    assert report.main([str(records), "-o", str(out), *extra]) == 0
    files = {}
    for path in sorted(out.iterdir()):
        data = path.read_bytes()
        if path.suffix in (".md", ".html"):
            data = b"\n".join(line for line in data.split(b"\n") if b"Generated" not in line)
        files[path.name] = data
    return files


def _entries(records: Path) -> list[Path]:
    return sorted((records / INDEX_DIR / "charts").glob("*" + chart_cache.SUFFIX))


def _no_drawing(monkeypatch):
    def refuse(fig):
        raise AssertionError("a chart was drawn")
    monkeypatch.setattr(charts, "_png", refuse)  # the workers, forked by the report, inherit it


def test_a_second_report_draws_nothing_and_writes_the_same_bytes(records, tmp_path, monkeypatch):
    first = _report(records, tmp_path / "one")
    entries = _entries(records)
    assert len(entries) >= 8  # a job each: the ladders, the cross charts, memory, kernel mix, sweeps, the answers
    assert sum(name.endswith(".png") for name in first) >= 9
    _no_drawing(monkeypatch)
    assert _report(records, tmp_path / "two") == first


def test_an_entry_that_fails_its_check_is_drawn_again_with_one_warning(records, tmp_path, capsys):
    first = _report(records, tmp_path / "one")
    entries = _entries(records)
    damaged = entries[0].read_bytes()
    entries[0].write_bytes(damaged[:40] + bytes([damaged[40] ^ 1]) + damaged[41:])  # one bit, in its header
    foreign = chart_cache.ChartCache(entries[1].parent, b"k" * 32)  # another user's key, under one of our names
    name = entries[1].name.removesuffix(chart_cache.SUFFIX)
    foreign.put(name, [("x.png", b"not a png", "caption")])
    capsys.readouterr()
    assert _report(records, tmp_path / "two") == first
    warnings = [line for line in capsys.readouterr().err.splitlines() if "failed their check" in line]
    assert warnings == [f"warning: {entries[0].parent}: 2 kept chart(s) failed their check; drawn again and replaced"]
    assert _report(records, tmp_path / "three") == first  # replaced: nothing to say now
    assert "failed their check" not in capsys.readouterr().err


def test_a_chart_whose_data_changed_is_drawn_again():
    kept = chart_cache.ChartCache(Path("unused"), b"k" * 32)
    same = kept.name(charts.memory_chart, ([("a", [1.0, 2.0])],))
    assert same == kept.name(charts.memory_chart, ([("a", [1.0, 2.0])],))
    assert same != kept.name(charts.memory_chart, ([("a", [1.0, 2.5])],))
    assert same != kept.name(delta_charts.factors_chart, ([("a", [1.0, 2.0])],))
    assert kept.name(charts.memory_chart, (lambda: None,)) is None  # does not pickle: drawn, not kept


def test_the_code_and_the_drawing_libraries_name_the_entries(monkeypatch):
    before = chart_cache.code_identity()
    chart_cache.code_identity.cache_clear()
    monkeypatch.setattr(chart_cache.metadata, "version", lambda name: "0.0" if name == "matplotlib" else "1.0")
    try:
        assert chart_cache.code_identity() != before
    finally:
        chart_cache.code_identity.cache_clear()


def test_no_index_keeps_no_charts(records, tmp_path):
    _report(records, tmp_path / "one", "--no-index")
    assert not (records / INDEX_DIR).exists()


def test_the_charts_are_kept_beside_an_index_kept_elsewhere(records, tmp_path):
    _report(records, tmp_path / "one", "--index", str(tmp_path / "idx"))
    assert len(list((tmp_path / "idx" / "charts").glob("*" + chart_cache.SUFFIX))) >= 8
    assert not (records / INDEX_DIR).exists()


def test_entries_no_report_used_for_two_weeks_are_removed_and_the_least_recent_past_the_limit(tmp_path, monkeypatch):
    kept = chart_cache.ChartCache(tmp_path, b"k" * 32)
    for n in range(5):
        kept.put(f"e{n}", [("x.png", bytes(1000), "c")])
    now = time.time()
    for n, age_days in enumerate((0, 1, 2, 15, 30)):
        os.utime(tmp_path / f"e{n}{chart_cache.SUFFIX}", (now - age_days * 86400,) * 2)
    (tmp_path / f".tmp-0{chart_cache.SUFFIX}").write_bytes(b"left by a killed report")
    os.utime(tmp_path / f".tmp-0{chart_cache.SUFFIX}", (now - 20 * 86400,) * 2)
    monkeypatch.setattr(chart_cache, "MAX_BYTES", 2500)  # two entries' worth
    later = chart_cache.ChartCache(tmp_path, b"k" * 32)
    assert later.get("e2") is not None  # used by this report: kept, whatever its age
    later.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"e{n}{chart_cache.SUFFIX}" for n in (0, 1, 2)]


def test_a_report_whose_charts_were_all_kept_never_imports_matplotlib(records, tmp_path):
    """Half a second of a warm report's time: the chart modules are imported where a chart is drawn."""
    script = ("import sys; from harness.report import __main__ as r; "
              f"r.main([{str(records)!r}, '-o', sys.argv[1]]); print('matplotlib' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(out: str) -> str:
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / out)], capture_output=True, text=True,
                              env=env, cwd=tmp_path, check=True)
        return done.stdout.splitlines()[-1]

    run("one")
    assert run("two") == "False"


def test_a_linked_charts_folder_is_not_followed(records, tmp_path, capsys):
    """FOLDER/.harness-index/charts a symbolic link: the report draws its charts and keeps none where it points."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (records / INDEX_DIR).mkdir(exist_ok=True)
    (records / INDEX_DIR / "charts").symlink_to(elsewhere)
    first = _report(records, tmp_path / "one")
    assert list(elsewhere.iterdir()) == [] and sum(name.endswith(".png") for name in first) >= 9
    assert capsys.readouterr().err.count("a symbolic link on its way, not used; charts drawn, not kept") == 1


def test_an_entry_that_is_a_fifo_is_not_waited_on(records, tmp_path):
    first = _report(records, tmp_path / "one")
    entries = _entries(records)
    entries[0].unlink()
    os.mkfifo(entries[0])  # read whole, it hung the report
    assert _report(records, tmp_path / "two") == first
    assert entries[0].is_file()  # drawn again, and kept in its place


def test_a_killed_reports_temp_file_is_removed_once_an_hour_old(tmp_path):
    """A report killed outright leaves its entry's temp file: the next report's end removes it once STALE_TEMP_S old
    (it waited KEEP_DAYS), a fresh one (a live report's) stays, and so does a folder or a link of such a name."""
    kept = chart_cache.ChartCache(tmp_path, b"k" * 32)
    kept.put("e0", [("x.png", bytes(1000), "c")])
    dead, live = tmp_path / f".tmp-0123456789abcdef-e1{chart_cache.SUFFIX}", tmp_path / f".tmp-fedc-e2{chart_cache.SUFFIX}"
    for path in (dead, live):
        path.write_bytes(b"left by a killed report")
    (tmp_path / f".tmp-a-folder{chart_cache.SUFFIX}").mkdir()
    hours_ago = time.time() - 2 * STALE_TEMP_S
    for path in (dead, tmp_path / f".tmp-a-folder{chart_cache.SUFFIX}"):
        os.utime(path, (hours_ago, hours_ago))
    later = chart_cache.ChartCache(tmp_path, b"k" * 32)
    assert later.get("e0") == [("x.png", bytes(1000), "c")]
    later.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [live.name, f"e0{chart_cache.SUFFIX}", f".tmp-a-folder{chart_cache.SUFFIX}"])


class _Counted:
    """A file that notes how many bytes each read gave."""

    def __init__(self, f, reads: list[int]):
        self.f, self.reads = f, reads

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    def fileno(self):
        return self.f.fileno()

    def read(self, n=-1):
        data = self.f.read(n)
        self.reads.append(len(data))
        return data


def test_an_entry_is_checked_by_its_size_and_header_before_its_charts_are_read(tmp_path, monkeypatch):
    """An entry of 255 MiB that fails its check was read whole first (13 of them: 8.6 s, 349 MB): its size, magic,
    header and the header's keyed hash are checked first, and its PNGs read only where it is used."""
    key = b"k" * 32
    chart_cache.ChartCache(tmp_path, key).put("ours", [("x.png", b"\x89PNG" + bytes(1000), "caption")])
    chart_cache.ChartCache(tmp_path, b"f" * 32).put("foreign", [("x.png", bytes(16 * 2**20), "caption")])
    with open(tmp_path / f"sparse{chart_cache.SUFFIX}", "wb") as f:
        f.truncate(200 * 2**20)  # what the tester made: zeros, on no disk
    with open(tmp_path / f"long{chart_cache.SUFFIX}", "wb") as f:  # its magic, then a header as long as itself
        f.write(chart_cache.MAGIC + (100 * 2**20).to_bytes(8, "little"))
        f.truncate(100 * 2**20 + 100)
    reads, real = [], chart_cache.open_regular
    monkeypatch.setattr(chart_cache, "open_regular", lambda path, limit=None: _Counted(real(path, limit), reads))
    kept = chart_cache.ChartCache(tmp_path, key)
    for name in ("sparse", "long", "foreign"):
        assert kept.get(name) is None, name
    assert kept.failed == 3 and sum(reads) < 4096
    assert kept.get("ours") == [("x.png", b"\x89PNG" + bytes(1000), "caption")] and kept.failed == 3
