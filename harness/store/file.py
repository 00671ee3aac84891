"""One folder's index files, the base and its deltas: read (mapped, checked by their keyed hash) and written (whole,
then renamed into place)."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import mmap
import os
import secrets
import stat
import time
from concurrent.futures import Future
from pathlib import Path

from harness.record.files import STALE_TEMP_S, atomic_file, open_regular, sweep_temp
from harness.record.io import read_record
from harness.record.model import RecordError
from harness.store.codec import StoredBlob, _Mapped
from harness.store.identity import code_identity
from harness.store.layout import (
    COLUMNS,
    DELTA,
    DELTA_SHARE,
    EARLIER_MAGICS,
    GONE,
    HASH_CHUNK,
    INDEX_DIR,
    INDEX_FLOOR,
    INDEX_FORMAT,
    LAZY,
    MAGIC,
    MAX_DELTAS,
    SHARED,
    STORED,
    TRAILER,
)
from harness.store.scan import _listed, index_bound


class IndexError_(Exception):
    """An index file that cannot be used (damaged, foreign, another harness's): the index rebuilt, with one warning
    that names the file."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")


def index_path(folder: Path, where: Path | None) -> Path:
    """Where a folder's index is: FOLDER/.harness-index/records.idx, or under --index DIR, named for the folder."""
    if where is None:
        return folder / INDEX_DIR / "records.idx"
    return where / f"{hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:24]}.idx"


class _Store:
    """One folder's index: its rows (COLUMNS, then one id per SHARED section into `blobs`) read and written. It is a
    base file and the deltas written on top of it since. Each file: a Parquet body (STORED columns: the small ones, and
    where each row's sections lie), the core sections one after another, the explain sections one after another, the
    body's and the cores' lengths, MAGIC, and a keyed hash of all but the explain sections (each of those is checked
    against its own hash in the body when read: StoredBlob). A core section is read where it lies (orjson parses a view
    of the mapped file), not copied.

    A change of a few files is written as a delta (the base's name, DELTA, when it was written: the rows read again,
    and a GONE row for each file no longer there), not as the whole index again (700 MB at 100,000 records: 2 s here
    for one file changed); once the deltas are MAX_DELTAS, or hold DELTA_SHARE of the rows, the next change writes a
    new base that takes them in, and removes them. A delta read over another base than the one it was written on (two
    compares at once) is as safe: every row is used only while its file's identity is the row's (RecordIndex._current),
    so a row out of date costs a read of its file, never a stale record."""

    def __init__(self, folder: Path, path: Path, key: bytes, notice=print):
        self.folder, self.path, self.key, self.notice = folder, path, key, notice
        self.listed: Future | None = None  # _listed(folder), taken while the index is read (None: taken when needed)
        self.bound: tuple[int, int] | None = None  # (index_bound of the listing, the record files listed)
        self.blobs: list[bytes] = []  # distinct SHARED section values
        self.blob_ids: dict[bytes, int] = {}
        self.combinations: dict[tuple, tuple] = {}  # a row's SHARED ids -> their sections' bytes (blobs_of)
        self.files: list[_Mapped] = []  # the files read, kept mapped (their explain sections are read when asked for)
        self.deltas: list[Path] = []  # the deltas beside the base, as listed when it was read
        self.delta_rows = 0  # the rows those held
        self.based = False  # the base was read and is this code's: a delta may be written on top of it
        self.warned = False

    def blob_id(self, blob: bytes | None) -> int:
        if blob is None:
            return -1
        if blob not in self.blob_ids:
            self.blob_ids[blob] = len(self.blobs)
            self.blobs.append(blob)
        return self.blob_ids[blob]

    def blobs_of(self, ids: tuple) -> tuple:
        """The SHARED sections a row names by their ids (None for -1), made once per distinct combination (100,000
        records of the benchmark: 241)."""
        blobs = self.combinations.get(ids)
        if blobs is None:
            blobs = self.combinations[ids] = tuple(None if i < 0 else self.blobs[i] for i in ids)
        return blobs

    def meta(self) -> dict:
        return {"format": INDEX_FORMAT, "code": code_identity(), "folder": str(self.folder.resolve())}

    def _mac(self, body, cores, lengths: bytes) -> bytes:
        """The keyed hash of the body, the core sections (an iterable of their bytes, in file order) and the lengths."""
        mac = hmac.new(self.key, body, "sha256")
        for core in cores:
            mac.update(core)
        mac.update(lengths)
        return mac.digest()

    def _bound(self, wait: bool) -> tuple[int, int] | None:
        """(index_bound, the record files listed) of the folder's listing; None while it is being taken (wait: waited
        for)."""
        if self.bound is None:
            if self.listed is None:
                identities = _listed(self.folder)[1]
            elif wait or self.listed.done():
                identities = self.listed.result()[1]
            else:
                return None
            self.bound = index_bound(identities), len(identities)
        return self.bound

    def _check_size(self, path: Path, size: int, wait: bool) -> None:
        """IndexError_ where an index file of `size` bytes is larger than this folder's could be (INDEX_FLOOR); nothing
        where it is not, or may yet not be (not `wait`: the listing not yet taken)."""
        if size <= INDEX_FLOOR:
            return
        bound = self._bound(wait)
        if bound is not None and size > bound[0]:
            raise IndexError_(path, f"{size:,} bytes, larger than an index of the {bound[1]:,} record file(s) of "
                                    f"{self.folder} can be ({bound[0]:,} at most): not read")

    def _open(self, path: Path) -> _Mapped | None:
        """An index file in this code's format, mapped read-only (or read whole where its filesystem cannot map it),
        its size within the folder's bound and its keyed hash checked; None where there is none, or it is in an
        earlier format (rebuilt quietly); IndexError_ where it cannot be used."""
        try:
            with open_regular(path) as f:  # a link or a FIFO in its place is no index of ours (a FIFO would hang)
                st = os.fstat(f.fileno())
                if st.st_size < TRAILER:
                    raise IndexError_(path, "not a harness index")
                self._check_size(path, st.st_size, wait=False)
                try:
                    file = _Mapped(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), path, st.st_ino)
                except (OSError, ValueError):  # some network and FUSE filesystems: the same bytes, read
                    self._check_size(path, st.st_size, wait=True)  # read whole: only within the bound
                    file = _Mapped(f.read(), path, st.st_ino)
                return self._checked(file, f, st.st_size)
        except (FileNotFoundError, NotADirectoryError):  # none yet (where it cannot be written, save says so)
            return None
        except (OSError, ValueError) as exc:
            raise IndexError_(path, f"unreadable ({getattr(exc, 'strerror', None) or exc})") from None

    def _checked(self, file: _Mapped, f, size: int) -> _Mapped | None:
        """The file, where it is an index in this code's format whose keyed hash matches (its body and cores hashed
        HASH_CHUNK at a time, its size held to the folder's bound between two chunks where the listing is done)."""
        mapped, path = file.data, file.path
        end = len(mapped) - TRAILER
        magic = mapped[end + 16:end + 16 + len(MAGIC)] if end >= 0 else b""  # where every format has put its magic
        if magic in EARLIER_MAGICS:
            return None
        if magic != MAGIC:
            raise IndexError_(path, "not a harness index")
        lengths = mapped[end:end + 16]
        hashed = int.from_bytes(lengths[:8], "little") + int.from_bytes(lengths[8:], "little")
        if hashed <= end:
            mac = hmac.new(self.key, digestmod="sha256")
            for chunk in _head(f, mapped, hashed):
                mac.update(chunk)
                self._check_size(path, size, wait=False)
            mac.update(lengths)
            if hmac.compare_digest(mapped[-32:], mac.digest()):
                return file
        raise IndexError_(path, "damaged, or made by another user or machine (its keyed hash does not match)")

    def load(self) -> dict[str, tuple]:
        """key -> row of the stored index: the base's rows, then each delta's over them, in the order they were
        written; {} where there is no base or it is another harness code's (rebuilt quietly); IndexError_ for a file
        that cannot be trusted."""
        sweep_temp(self.path.parent, STALE_TEMP_S)  # a killed writer's temp files: gone, whether or not this run writes
        prefix = self.path.name + DELTA
        with contextlib.suppress(OSError):  # a file of that name only (a folder or a link is none of ours: left alone)
            self.deltas = sorted(self.path.with_name(e.name) for e in os.scandir(self.path.parent)
                                 if e.name.startswith(prefix) and e.is_file(follow_symlinks=False))
        rows = self._load(self.path)
        if rows is None:
            return {}
        for path in self.deltas:
            delta = self._load(path) or {}  # None: removed since it was listed (a new base has its rows), or not ours
            self.delta_rows += len(delta)
            for key, row in delta.items():
                if row[6] == GONE:
                    rows.pop(key, None)
                else:
                    rows[key] = row
        self.based = True  # not where a file failed its check: the index is rebuilt whole
        return rows

    def _load(self, path: Path) -> dict[str, tuple] | None:
        """key -> row of one index file; None where there is none or it is another harness code's."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        file = self._open(path)
        if file is None:
            return None
        end = len(file.data) - TRAILER
        body_length = int.from_bytes(file.data[end:end + 8], "little")
        cores_length = int.from_bytes(file.data[end + 8:end + 16], "little")
        view = memoryview(file.data)
        body, cores = view[:body_length], view[body_length:body_length + cores_length]
        try:  # a file that passed the keyed hash was written by save(): failing here means a bug, said in one line
            # ParquetFile, not read_table: read_table imports pyarrow.dataset (0.07-0.27 s here) for nothing
            table = pq.ParquetFile(pa.py_buffer(body), read_dictionary=list(SHARED)).read()
            meta = json.loads(table.schema.metadata[b"harness.index"])
        except (pa.ArrowException, OSError, ValueError, KeyError, TypeError) as exc:
            raise IndexError_(path, f"unreadable ({type(exc).__name__})") from None
        if meta.get("format") != INDEX_FORMAT or meta.get("code") != code_identity() or \
                meta.get("folder") != str(self.folder.resolve()):
            return None  # ours, but made by another version of the harness or for the folder this one was copied from
        self._check_size(path, len(file.data), wait=True)  # ours, but too large for the folder now: rebuilt too
        self.files.append(file)
        columns = [table.column(name).to_pylist() for name in STORED]
        core_at, core_length, at, length, digest = columns[len(COLUMNS) - 2:]
        explain_from = body_length + cores_length
        columns[len(COLUMNS) - 2:] = [
            [None if a is None else cores[a:a + n] for a, n in zip(core_at, core_length)],
            [None if a is None else StoredBlob(self, file, explain_from + a, n, d, k)
             for a, n, d, k in zip(at, length, digest, columns[0])]]
        for name in SHARED:
            ids = []
            for chunk in table.column(name).chunks:
                local = [self.blob_id(blob) for blob in chunk.dictionary.to_pylist()]
                ids += [-1 if i is None else local[i] for i in chunk.indices.to_pylist()]
            columns.append(ids)
        del table, body
        return {row[0]: row for row in zip(*columns)}

    @staticmethod
    def _places(blobs, size) -> tuple[list, list]:
        """(offsets, lengths) of the blobs laid one after another (None for a row without one)."""
        at, lengths, offset = [], [], 0
        for blob in blobs:
            n = None if blob is None else size(blob)
            at.append(None if n is None else offset)
            lengths.append(n)
            offset += n or 0
        return at, lengths

    def save(self, rows: list[tuple], changed: list[tuple], gone: list[str]) -> None:
        """Write what changed since the index was read: the rows read again (`changed`) and the keys of the files no
        longer there (`gone`) as a delta, where the base was read and its deltas are few and small; else every row as
        a new base, and the deltas it takes in removed. OSError if it cannot be written."""
        if self.based and len(self.deltas) < MAX_DELTAS and \
                self.delta_rows + len(changed) + len(gone) <= DELTA_SHARE * len(rows):
            name = f"{self.path.name}{DELTA}{time.time_ns():020d}-{secrets.token_hex(4)}"
            self._write([*changed, *((key, *(None,) * 5, GONE, *(None,) * 3, *(-1,) * len(SHARED)) for key in gone)],
                        self.path.with_name(name))
            return
        self._write(rows, self.path)
        for path in self.deltas:  # a delta written since the base was read is not among them: it stays, as safe
            with contextlib.suppress(OSError):
                path.unlink()

    def _write(self, rows: list[tuple], target: Path) -> None:
        """Write the rows as one index file: a temp file beside it, renamed to `target`."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns = list(zip(*rows)) if rows else [()] * (len(COLUMNS) + len(SHARED))
        cores, explains = columns[len(COLUMNS) - 2], columns[len(COLUMNS) - 1]
        core_at, core_lengths = self._places(cores, len)
        at, lengths = self._places(explains, lambda b: b.length if isinstance(b, StoredBlob) else len(b))
        digests = [None if b is None else b.digest if isinstance(b, StoredBlob) else
                   hashlib.blake2b(b, digest_size=16).digest() for b in explains]
        types = (pa.string(), pa.int64(), pa.int64(), pa.int64(), pa.uint64(), pa.binary(), pa.string(), pa.string(),
                 pa.int64(), pa.int64(), pa.int64(), pa.int64(), pa.binary())
        stored_columns = [*columns[:len(COLUMNS) - 2], core_at, core_lengths, at, lengths, digests]
        arrays = [pa.array(col, type=t) for col, t in zip(stored_columns, types)]
        # the SHARED sections these rows name, numbered anew (a delta of one row holds one environment, not all)
        used = {i: n for n, i in enumerate(sorted({i for ids in columns[len(COLUMNS):] for i in ids if i >= 0}))}
        dictionary = pa.array([self.blobs[i] for i in used], type=pa.binary())
        for ids in columns[len(COLUMNS):]:
            arrays.append(pa.DictionaryArray.from_arrays(
                pa.array([None if i < 0 else used[i] for i in ids], pa.int32()), dictionary))
        table = pa.table(arrays, names=[*STORED, *SHARED]).replace_schema_metadata(
            {"harness.index": json.dumps(self.meta())})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd", use_dictionary=list(SHARED))
        del table, arrays
        body = memoryview(sink.getvalue())
        cores_length = sum(n for n in core_lengths if n)
        lengths = len(body).to_bytes(8, "little") + cores_length.to_bytes(8, "little")
        cores = [core for core in cores if core is not None]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as f:  # a temp file beside it, fsynced, renamed into place; removed on any failure
            f.write(body)
            digest = self._mac(body, _written(f, _joined(cores)), lengths)  # the cores hashed as they are written
            f.writelines(_explain_bytes(explains))
            f.write(lengths + MAGIC + digest)

    def damaged(self, key: str, file: _Mapped) -> dict:
        """An explain section whose bytes do not match the hash its file's body holds: one warning; that file removed
        (when it is still the file read), so the next read rebuilds what it held; the section read from the record
        file."""
        if not self.warned:
            self.warned = True
            self.notice(f"warning: {file.path}: damaged (an explain section does not match its hash); the records' "
                        "own files read for it, and the index rebuilt on the next read")
        with contextlib.suppress(OSError):
            if os.stat(file.path).st_ino == file.inode:
                file.path.unlink()
        try:
            explain = read_record(self.folder / key).get(LAZY)
        except RecordError:
            explain = None
        return explain if isinstance(explain, dict) else {}


def _head(f, data, n: int):
    """The first n bytes of an index file, HASH_CHUNK at a time: read from f into one buffer where the file is mapped
    (hashed through the mapping, a file of gigabytes would be resident whole), else views of the bytes read."""
    if isinstance(data, bytes):  # read whole (not mapped)
        view = memoryview(data)
        for at in range(0, n, HASH_CHUNK):
            yield view[at:min(at + HASH_CHUNK, n)]
        return
    buffer = memoryview(bytearray(min(n, HASH_CHUNK)))
    f.seek(0)
    while n > 0:
        got = f.readinto(buffer[:min(n, HASH_CHUNK)])
        if not got:  # shorter now than when it was mapped: its hash does not match
            return
        yield buffer[:got]
        n -= got


def _joined(blobs: list, n: int = 4096):
    """The blobs' bytes, n of them at a time as one (a write and a hash update each for 100,000 cores: 0.9 s here)."""
    for i in range(0, len(blobs), n):
        yield b"".join(blobs[i:i + n])


def _written(f, chunks):
    """Each chunk, once written to f."""
    for chunk in chunks:
        f.write(chunk)
        yield chunk


def _explain_bytes(explains):
    """The explain sections' bytes, in order: those that lie side by side in one index file as one view of it (a
    new base copies its sections from the files read in a few writes, not one per section)."""
    run = None  # [file, start, end] of the sections gathered so far
    for blob in explains:
        if isinstance(blob, StoredBlob) and run is not None and run[0] is blob.file and run[2] == blob.at:
            run[2] += blob.length
            continue
        if run is not None:
            yield run[0].view(run[1], run[2])
            run = None
        if isinstance(blob, StoredBlob):
            run = [blob.file, blob.at, blob.at + blob.length]
        elif blob is not None:
            yield blob
    if run is not None:
        yield run[0].view(run[1], run[2])


def not_a_folder(where: Path) -> str | None:
    """What --index names where it is no folder to keep indexes in ('a FIFO', 'a file', ...), or None where it is one
    (a link to one included: the user's own choice) or nothing yet (made when an index is written)."""
    try:
        st = os.stat(where)
    except FileNotFoundError:
        return "a symbolic link to nothing" if os.path.islink(where) else None
    except OSError as exc:
        return f"unreachable ({exc.strerror or exc})"
    kinds = ((stat.S_ISDIR, None), (stat.S_ISREG, "a file"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((kind for test, kind in kinds if test(st.st_mode)), "something else")
