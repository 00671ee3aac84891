"""Charts kept from earlier reports: a report whose chart data did not change draws nothing.

A chart job is a module's function and the chart's data (harness.report.drawing), and drawing is deterministic: the
same data under the same code and drawing libraries gives the same PNG bytes. So each job's charts are kept under a
hash of this project's sources, the versions of matplotlib, Pillow and numpy, the function's name and its pickled data,
beside the record index (FOLDER/.harness-index/charts/, or DIR/charts/ under --index DIR; none with --no-index), and a
later report takes them from there instead of drawing them. Every record is still read and every chart's data still
computed from the records: only drawing a picture already drawn is skipped. A new run that a chart shows changes its
data, and that chart alone is drawn again.

Untrusted, as the index is: each entry ends in a keyed hash of its name and bytes under the index's key
(harness.record.index.user_key); an entry that fails it is drawn again and replaced, with one warning line for the
report. Written whole to a temp file and renamed. Entries no report used for KEEP_DAYS are removed, and the least
recently used past MAX_BYTES, when a report ends.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import pickle
import time
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path

from harness.envinfo import source_sha256
from harness.record.files import not_own_folder, open_regular, write_atomic
from harness.record.index import index_path, user_key

MAGIC = b"HARNESS-CHARTS-1\n"
SUFFIX = ".charts"
KEEP_DAYS = 14
MAX_BYTES = 256 * 2**20  # about a hundred reports' charts
DRAWING_LIBRARIES = ("matplotlib", "pillow", "numpy")


@cache
def code_identity() -> bytes:
    """What a chart's bytes depend on besides its data: the harness's sources (harness.envinfo.source_sha256: the
    drawing code, the types its data is made of, the text rules of harness.textsafe) and the drawing libraries'
    versions."""
    h = hashlib.sha256(MAGIC)
    for name in DRAWING_LIBRARIES:
        with contextlib.suppress(metadata.PackageNotFoundError):
            h.update(f"{name}=={metadata.version(name)}\0".encode())
    h.update(source_sha256()[0].encode())
    return h.digest()


class ChartCache:
    """kept.name(draw, data) names a job; kept.get(name) is its charts, or None (not kept, or failing its check);
    kept.put(name, charts) keeps them; kept.close() removes what is stale and says, once, what failed its check."""

    def __init__(self, folder: Path, key: bytes, notice: Callable[[str], None] = print):
        self.folder, self.key, self.notice = folder, key, notice
        self.used: set[str] = set()
        self.failed = 0
        self.unwritable: str | None = None

    @classmethod
    def beside_index(cls, paths, where: str | None, notice: Callable[[str], None]) -> ChartCache | None:
        """The cache beside the first folder's index (the index's key and place); None where there is no folder among
        `paths` or no key (the index says why in its own line)."""
        folder = next((Path(p) for p in paths if Path(p).is_dir()), None)
        if folder is None:
            return None
        try:
            key = user_key()
        except OSError:
            return None
        charts = index_path(folder, Path(where) if where else None).parent / "charts"
        refused = None if where else next(filter(None, (not_own_folder(p) for p in (charts.parent, charts))), None)
        if refused:
            notice(f"warning: {charts}: {refused} on its way, not used; charts drawn, not kept")
            return None
        return cls(charts, key, notice)

    @staticmethod
    def name(draw: Callable, data: tuple) -> str | None:
        """The job's name: a hash of the code and of the function and its data pickled (a function pickles as its
        module's and its own name); None where they do not pickle."""
        try:
            pickled = pickle.dumps((draw, data), protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError):
            return None
        return hashlib.sha256(code_identity() + pickled).hexdigest()

    def _mac(self, name: str, body: bytes | memoryview) -> bytes:
        return hmac.new(self.key, name.encode() + b"\0" + body, "sha256").digest()

    def get(self, name: str) -> list[tuple] | None:
        path = self.folder / (name + SUFFIX)
        try:  # a link, a FIFO or an entry larger than all the kept charts together is none of ours
            with open_regular(path, MAX_BYTES) as f:
                blob = memoryview(f.read())
        except OSError:
            return None
        self.used.add(name)
        try:
            charts = self._decode(name, blob)
        except (ValueError, TypeError, KeyError):
            self.failed += 1
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: kept for another KEEP_DAYS
        return charts

    def _decode(self, name: str, blob: memoryview) -> list[tuple]:
        body, mac = blob[:-32], blob[-32:]
        if len(blob) < len(MAGIC) + 40 or body[:len(MAGIC)] != MAGIC or \
                not hmac.compare_digest(mac, self._mac(name, body)):
            raise ValueError("fails its check")
        at = len(MAGIC) + 8
        length = int.from_bytes(body[at - 8:at], "little")
        header = json.loads(bytes(body[at:at + length]))
        at += length
        charts = []
        for items in header:
            chart = []
            for item in items:  # a text as itself, PNG bytes as their length (they follow the header in order), or None
                if isinstance(item, int):
                    chart.append(bytes(body[at:at + item]))
                    at += item
                else:
                    chart.append(item)
            charts.append(tuple(chart))
        if at != len(body):
            raise ValueError("lengths do not add up")
        return charts

    def put(self, name: str, charts: list[tuple]) -> None:
        """Keep a job's charts: each a tuple of texts, PNG bytes and None (harness.report.charts)."""
        header = json.dumps([[len(item) if isinstance(item, bytes) else item for item in chart]
                             for chart in charts]).encode()
        pngs = [item for chart in charts for item in chart if isinstance(item, bytes)]
        body = b"".join([MAGIC, len(header).to_bytes(8, "little"), header, *pngs])
        self.used.add(name)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # fsynced, renamed into place, its temp file (.tmp-*.charts: _prune's) removed on any failure
            write_atomic(self.folder / (name + SUFFIX), body + self._mac(name, body))
        except OSError as exc:
            self.unwritable = self.unwritable or (exc.strerror or str(exc))

    def close(self) -> None:
        if self.failed:
            self.notice(f"warning: {self.folder}: {self.failed} kept chart(s) failed their check; drawn again and "
                        "replaced")
        if self.unwritable:
            self.notice(f"note: {self.folder}: charts not kept ({self.unwritable}); the next report draws them again")
        self._prune()

    def _prune(self) -> None:
        """Remove the entries (and temp files left by a killed report) no report used for KEEP_DAYS, then the least
        recently used past MAX_BYTES; never one this report used."""
        entries = []
        with contextlib.suppress(OSError), os.scandir(self.folder) as it:
            for entry in it:
                if entry.name.endswith(SUFFIX) and entry.name.removesuffix(SUFFIX) not in self.used:
                    with contextlib.suppress(OSError):
                        st = entry.stat()
                        entries.append((st.st_mtime, st.st_size, entry.path))
        entries.sort(reverse=True)  # newest first
        old = time.time() - KEEP_DAYS * 86400
        total = 0
        for mtime, size, path in entries:
            total += size
            if mtime < old or total > MAX_BYTES:
                with contextlib.suppress(OSError):
                    os.unlink(path)
