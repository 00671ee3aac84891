"""The record index: what reading each record file gave, kept beside the records, so a warm compare parses and
validates nothing.

harness.compare and harness.report read a folder's records through RecordIndex.read instead of io.read_record. For
each record file under the folder the index holds what read_record gave (the record, migrated and validated, or why
the file is skipped: validator.validate refuses NaN and infinity with every other out-of-bounds value), keyed by the
file's path and identity: size, mtime, ctime and inode (no tool sets a ctime back, so a rewritten file is noticed even
where its mtime was restored), and, for a file changed within RACY_NS of being indexed, a hash of its bytes, compared
on every later read (a second change within the filesystem's time resolution leaves the times as they were). A file
the index does not hold, or whose identity differs, is read again through read_record; a removed file's entry is
dropped. The index also names the harness code that made it (the schema and every module of this package): when
the rules of reading or validating change, it is rebuilt, so nothing stale is ever used.

Engine: Apache Parquet through pyarrow for the table (docs/architecture.md says why). One base file per folder,
FOLDER/.harness-index/records.idx (or, with --index DIR, DIR/<hash of the folder's path>.idx), and the deltas written
beside it since (a few files changed: their rows alone, not the whole index again; _Store), each mapped when read: a
Parquet body, the records' core sections, their explain sections, and a keyed hash of all but the explain sections
under a key only this user can read (~/.cache/gpt-harness/index-key); each explain section is checked against its
own hash in the body when it is read (StoredBlob). An index file that is damaged, made by another user or machine, or
not an index at all fails a check, and the index is rebuilt with one warning line: it is never trusted; so is one
larger than an index of the folder's records could be (INDEX_FLOOR), before it is read. Each file is written whole to
a temp file and renamed into place, so two compares at once each read whole files (the later base wins; the other's
new entries are read again next time); a killed writer's temp file is removed by the next read of the folder's index
(STALE_TEMP_S).

A record's sections that repeat across runs (environment, flags, workload) are stored once per distinct value and
shared, read-only, by the records that have them (SharedSection); its explain section (most of its bytes, read by a few
tables for a few runs) stays unread until a reader asks for it (LazySection). Beside each record's core the index keeps
what its RecordView derived when it was indexed (harness.record.view.INDEXED: timed steps and their median, losses,
warm-up, peak memory, contention, MFU, whether it has a kernel profile): a record read back brings them
(IndexedRecord.known), so a warm compare derives nothing per run. No torch import; pyarrow only when an index is used
(without it, the records are read directly, as with --no-index).
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

from harness.record.files import not_own_folder
from harness.record.io import read_record, record_names
from harness.record.model import RecordError
from harness.record.view import RecordView
from harness.store.codec import IndexedRecord, LazySection, SharedSection, decode
from harness.store.file import IndexError_, _Store, index_path, not_a_folder
from harness.store.identity import _key_file, user_key
from harness.store.layout import COLUMNS, INDEX_DIR, LAZY, PARALLEL_FROM, SHARED
from harness.store.scan import _digest, _listed, _relative, index_file


class RecordIndex:
    """The indexes of the folders among `paths`: read(path) gives what io.read_record gives, from the index where it
    is current. Made by open(); a file argument (not a folder) is read directly."""

    def __init__(self):
        self.outcomes: dict[str, tuple] = {}  # str(path) -> ("record", core, explain, shared sections) or ("bad", why)
        self.shared: dict[bytes, object] = {}  # a SHARED section's bytes -> its one decoded value
        self.stats = {"indexed": 0, "read": 0}
        self.listings: dict[Path, list[str]] = {}  # folder -> its record files, as listed when the index was updated

    def files(self, folder: Path) -> list[str]:
        """A folder's record files (io.record_names): the listing the index update just made (io.iter_records'
        `files`)."""
        listing = self.listings.pop(Path(folder), None)
        return listing if listing is not None else record_names(Path(folder))

    @classmethod
    def open(cls, paths, where=None, notice=print) -> RecordIndex | None:
        """The index of every folder among `paths`, brought up to date (new and changed files read, removed ones
        dropped; written back when anything changed); None where no index can be used (pyarrow missing, no key):
        notice says why in one line, and the caller reads the records directly."""
        try:
            import pyarrow
        except ImportError:
            notice("note: pyarrow is not installed: records read without an index (pip install pyarrow)")
            return None
        if not pyarrow.Codec.is_available("lz4"):
            notice("note: this pyarrow has no LZ4 codec: records read without an index (pip install pyarrow)")
            return None
        try:
            key = user_key()
        except OSError as exc:
            notice(f"note: no index key ({_key_file()}: {exc.strerror or exc}): records read without an index")
            return None
        if where and (kind := not_a_folder(Path(where))):
            notice(f"warning: --index {where}: {kind}, not a folder; the records were read directly, without an index")
            return None
        index = cls()
        for folder in dict.fromkeys(Path(p) for p in paths):
            if not folder.is_dir():
                continue
            refused = None if where else not_own_folder(folder / INDEX_DIR)  # --index DIR: the user's own choice
            if refused:
                notice(f"warning: {folder / INDEX_DIR}: {refused}, not used; {folder} read without an index")
                continue
            store = _Store(folder, index_path(folder, Path(where) if where else None), key, notice)
            index._update(store, notice, hint="" if where else " (--index DIR keeps the index elsewhere)")
        return index

    def _update(self, store: _Store, notice, hint: str = "") -> None:
        # the folder is listed, and each file's identity taken, while the index file is checked and read: its keyed
        # hash and its Parquet body (0.5 s at 100,000 records) leave the interpreter free for the listing's loops, and
        # the stat calls free it for reading them
        with ThreadPoolExecutor(1) as lister:
            listed = store.listed = lister.submit(_listed, store.folder)  # the bound of the index's size, too
            try:
                old = store.load()
            except IndexError_ as exc:
                notice(f"warning: {exc}; rebuilt")
                old = {}
            listing, identities = listed.result()
            self.listings[store.folder] = listing
        rows, jobs = [], []
        for path, key, identity in zip(listing, _relative(listing, store.folder), identities):
            row = old.get(key)
            if row is not None and self._current(row, path, identity):
                rows.append(row)
                self._keep(path, row, store)
            else:
                jobs.append((key, path))
        self.stats["indexed"] += len(rows)
        self.stats["read"] += len(jobs)
        changed = []
        for (key, path), (row, outcome) in zip(jobs, _read_all(jobs)):
            if row is not None:
                row = (*row[:len(COLUMNS)], *(store.blob_id(b) for b in row[len(COLUMNS):]))
                changed.append(row)
            self.outcomes[path] = outcome
        if changed or len(rows) != len(old):
            current = {row[0] for row in rows}.union(row[0] for row in changed)
            gone = [key for key in old if key not in current]  # removed, or changed and not indexed now (read again)
            try:
                store.save(rows + changed, changed, gone)
            except OSError as exc:
                notice(f"warning: {store.path}: not written ({exc.strerror or exc}); the records were read directly"
                       + hint)

    @staticmethod
    def _current(row: tuple, path: str, identity: tuple | None) -> bool:
        """The file is as it was when indexed: same identity (taken as it was listed), and same bytes where its times
        may not tell."""
        if identity != tuple(row[1:5]):
            return False
        return row[5] is None or _digest(path) == row[5]

    def _keep(self, path: str, row: tuple, store: _Store) -> None:
        outcome, why, core, explain = row[6:10]
        self.outcomes[path] = (outcome, why, core, explain, store.blobs_of(row[len(COLUMNS):]))

    def read(self, path) -> dict:
        """What io.read_record(path) gives (a RecordError for a bad file), from the index when it holds the file."""
        outcome = self.outcomes.pop(str(path), None)
        if outcome is None:
            return read_record(path)
        kind, why, core, explain, shared = outcome
        if kind == "bad":
            raise RecordError(why)
        record = IndexedRecord()
        record.known = None
        if kind == "record":
            fields, known = decode(core)
            record.update(fields)
            record.known = RecordView.known_values(known, fields)
            for name, blob in zip(SHARED, shared):
                if blob is not None:
                    if blob not in self.shared:
                        self.shared[blob] = SharedSection(decode(blob))
                    record[name] = self.shared[blob]
            if explain is not None:
                record[LAZY] = LazySection(explain)
        return record


def _read_all(jobs: list[tuple[str, str]]) -> list[tuple]:
    """index_file of each job, in order: in a process per CPU when there are many."""
    if len(jobs) < PARALLEL_FROM:
        return [index_file(job) for job in jobs]
    workers = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 8)
    if workers < 2:
        return [index_file(job) for job in jobs]
    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(index_file, jobs, chunksize=64))
