"""Charts kept from earlier reports: a report whose chart data did not change draws nothing.

A chart job is a module's function and the chart's data (harness.report.drawing), and drawing is deterministic: the
same data under the same code and drawing libraries gives the same PNG bytes. So each job's charts are kept under a
hash of this project's sources, the versions of matplotlib, Pillow and numpy, the function's name and its pickled data,
beside the record index (FOLDER/.harness-index/charts/, or DIR/charts/ under --index DIR; none with --no-index), and a
later report takes them from there instead of drawing them. Every record is still read and every chart's data still
computed from the records: only drawing a picture already drawn is skipped. A new run that a chart shows changes its
data, and that chart alone is drawn again.

Untrusted, as the index is: an entry is MAGIC, its header's length, its header (JSON: each chart's texts, and its PNGs'
lengths), a keyed hash of its name and all before it under the index's key (harness.store.identity.user_key), the PNGs,
and a keyed hash of its name and all before that. Its size, magic, header and header's hash are checked before its
PNGs are read (an entry of hundreds of megabytes that fails is not read whole to fail), its PNGs' lengths must add up to
its size, and the whole is checked when it is read. An entry that fails is drawn again and replaced, with one warning
line for the report. Written whole to a temp file and renamed. Entries no report used for KEEP_DAYS are removed, and
the least recently used past MAX_BYTES, when a report ends; so are temp files left by a killed report, once
STALE_TEMP_S old.
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

from harness.provenance.envinfo import source_sha256
from harness.record.files import TEMP_PREFIX, not_own_folder, open_regular, sweep_temp, write_atomic
from harness.store.file import index_path, not_a_folder
from harness.store.identity import user_key

MAGIC = b"HARNESS-CHARTS-2\n"  # -1: one keyed hash, of the whole entry, at its end
SUFFIX = ".charts"
KEEP_DAYS = 14
MAX_BYTES = 256 * 2**20  # about a hundred reports' charts
MAX_HEADER = 4 * 2**20  # a job's header is its charts' captions and file names: ~100-300 bytes; a larger one is not kept
HASH = 32
DRAWING_LIBRARIES = ("matplotlib", "pillow", "numpy")


@cache
def code_identity() -> bytes:
    """What a chart's bytes depend on besides its data: the harness's sources (harness.provenance.envinfo.source_sha256: the
    drawing code, the types its data is made of, the text rules of harness.console.textsafe) and the drawing libraries'
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
        if folder is None or (where and not_a_folder(Path(where))):  # --index a file or a FIFO: the index says so
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

    def _mac(self, name: str, *parts: bytes | memoryview) -> bytes:
        mac = hmac.new(self.key, name.encode() + b"\0", "sha256")
        for part in parts:
            mac.update(part)
        return mac.digest()

    def get(self, name: str) -> list[tuple] | None:
        path = self.folder / (name + SUFFIX)
        try:  # a link, a FIFO or an entry larger than all the kept charts together is none of ours
            with open_regular(path, MAX_BYTES) as f:
                self.used.add(name)
                try:
                    charts = self._read(name, f)
                except (ValueError, TypeError, KeyError):
                    self.failed += 1
                    return None
        except OSError:
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # used now: kept for another KEEP_DAYS
        return charts

    def _read(self, name: str, f) -> list[tuple]:
        """The entry's charts; ValueError (or TypeError, KeyError) where it fails its check. Its PNGs are read only
        once its size, magic, header and the header's keyed hash are found right."""
        size = os.fstat(f.fileno()).st_size
        head = f.read(len(MAGIC) + 8)
        if size < len(head) + 2 * HASH or head[:len(MAGIC)] != MAGIC:
            raise ValueError("not a kept chart")
        length = int.from_bytes(head[len(MAGIC):], "little")
        if length > min(MAX_HEADER, size - len(head) - 2 * HASH):
            raise ValueError("its header's length does not fit")
        header, header_mac = f.read(length), f.read(HASH)
        if not hmac.compare_digest(header_mac, self._mac(name, head, header)):
            raise ValueError("its header fails its check")
        items = json.loads(header)
        lengths = [item for chart in items for item in chart if isinstance(item, int)]
        pngs = size - len(head) - length - 2 * HASH
        if sum(lengths) != pngs:
            raise ValueError("lengths do not add up")
        body = memoryview(f.read(pngs + HASH))  # its PNGs: the entry is used
        if len(body) != pngs + HASH or not hmac.compare_digest(
                body[pngs:], self._mac(name, head, header, header_mac, body[:pngs])):
            raise ValueError("fails its check")
        at, charts = 0, []
        for chart in items:  # a text as itself, PNG bytes as their length (in order), or None
            taken = []
            for item in chart:
                if isinstance(item, int):
                    taken.append(bytes(body[at:at + item]))
                    at += item
                else:
                    taken.append(item)
            charts.append(tuple(taken))
        return charts

    def put(self, name: str, charts: list[tuple]) -> None:
        """Keep a job's charts: each a tuple of texts, PNG bytes and None (harness.report.figures.Chart)."""
        header = json.dumps([[len(item) if isinstance(item, bytes) else item for item in chart]
                             for chart in charts]).encode()
        if len(header) > MAX_HEADER:  # get() would not read it
            return
        pngs = [item for chart in charts for item in chart if isinstance(item, bytes)]
        head = MAGIC + len(header).to_bytes(8, "little")
        header_mac = self._mac(name, head, header)
        body = b"".join([head, header, header_mac, *pngs])
        self.used.add(name)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            # fsynced, renamed into place, its temp file (.tmp-*.partial: _prune's sweep) removed on any failure
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
        """Remove the temp files left by a killed report (harness.record.files.sweep_temp: STALE_TEMP_S old), the
        entries no report used for KEEP_DAYS, then the least recently used past MAX_BYTES; never one this report
        used."""
        sweep_temp(self.folder)
        entries = []
        with contextlib.suppress(OSError), os.scandir(self.folder) as it:
            for entry in it:
                if entry.name.endswith(SUFFIX) and not entry.name.startswith(TEMP_PREFIX) and \
                        entry.name.removesuffix(SUFFIX) not in self.used:
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
