"""The record index: what reading each record file gave, kept beside the records, so a warm compare parses and
validates nothing.

harness.compare and harness.report read a folder's records through RecordIndex.read instead of io.read_record. For
each record file under the folder the index holds what read_record gave (the record, migrated and validated, or why
the file is skipped: io.validate refuses NaN and infinity with every other out-of-bounds value), keyed by the file's
path and identity: size, mtime, ctime and inode (no tool sets a ctime back, so a rewritten file is noticed even
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

import ast
import contextlib
import hashlib
import hmac
import json
import mmap
import os
import secrets
import stat
import time
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from functools import cache
from pathlib import Path

from harness.record.files import STALE_TEMP_S, atomic_file, not_own_folder, open_regular, stage, sweep_temp
from harness.record.io import MAX_RECORD_BYTES, file_bytes, read_record, record_names, record_of
from harness.record.model import SCHEMA_VERSION, RecordError, source_digest
from harness.record.view import RecordView

try:
    import orjson
except ImportError:
    orjson = None

INDEX_FORMAT = 2
INDEX_DIR = ".harness-index"
RACY_NS = 3 * 10**9  # a file changed this close to being indexed is also checked by content on every read
SHARED = ("environment", "flags", "workload")  # sections stored once per distinct value
LAZY = "explain"
MAGIC = b"HARNESS-INDEX-2\n"  # the file ends with two lengths (8 bytes each), MAGIC and the 32-byte keyed hash
EARLIER_MAGICS = (b"HARNESS-INDEX-1\n",)  # an earlier harness's layout: rebuilt quietly, as after a code change
TRAILER = 16 + len(MAGIC) + 32
PARALLEL_FROM = 256  # files to read before a process per CPU pays for itself
DELTA = ".delta-"  # a delta's name: the base's name, this, when it was written (ns) and a random part
# STALE_TEMP_S (harness.record.files): a temp file older than this in an index folder is a killed writer's, removed
# whenever the folder is opened (read, not only written: a warm compare writes nothing)
# How large an index file may be before it is read. Its keyed hash covers all but its explain sections, so a file of
# the index's magic and lengths, sparse or not, would be read whole to be refused (20 GiB: 33 s). An index holds, per
# record file, its path and a few numbers (a row: ROW_BYTES, a path of PATH_MAX and a reason of io.MAX_REASON
# included) and its record re-encoded (the core: the record less its explain and shared sections, plus what its view
# derives, which names the steps' own lists instead of repeating them; the explain section compressed; the shared
# sections once per distinct value): at most GROWTH times the record's JSON even where the record writes its numbers
# shorter than the index does ("1e5" kept as 100000.0), where a real index holds a quarter of it (the benchmark's: 2.3
# MB for 322 records of 10 MB, ~7 KB a record; CPU records ~350 bytes). So a file larger than INDEX_FLOOR plus that
# much for each record file listed (at most io.MAX_RECORD_BYTES each: a larger one is not read) is no index of this
# folder: not read, one warning, rebuilt. A file up to INDEX_FLOOR is read without that bound (hashing it: ~0.2 s,
# HASH_CHUNK at a time); a larger one is held to it as soon as the folder's listing (taken while the index is read) is
# done: before its hash where it is done by then, else between two chunks of it, and in any case before its rows are
# used (an index of 100,000 benchmark records, ~700 MB, is hashed and parsed while the folder is listed, not after).
INDEX_FLOOR = 64 * 2**20
GROWTH = 8
ROW_BYTES = 8192
HASH_CHUNK = 8 * 2**20  # an index file is hashed this many bytes at a time, never read whole into memory to be hashed
MAX_DELTAS = 16  # deltas read before the next change writes a new base that takes them in
DELTA_SHARE = 0.1  # ... or the share of the rows that they hold
GONE = "gone"  # a delta's row for a file no longer there
COLUMNS = ("key", "size", "mtime_ns", "ctime_ns", "ino", "digest", "outcome", "why", "core", "explain")  # a row
# The body's columns: a row's core and explain sections are where they lie in the file
STORED = (*COLUMNS[:-2], "core_at", "core_length", "explain_at", "explain_length", "explain_digest")


PROJECT = Path(__file__).resolve().parents[2]  # the checkout: harness/ and gpt/


def identity_files(root: Path = PROJECT) -> list[Path]:
    """Every file an indexed record's outcome and value depend on: all of harness/record/ (its modules and the data
    they read: the schema, the workload-code history) and of harness/store/ (the index's own code), and each module of
    this project that those modules import, directly or not (gpt/config.py's bounds decide validity), found by reading
    their imports."""
    files = {p for package in ("record", "store") for p in (root / "harness" / package).rglob("*")
             if p.is_file() and "__pycache__" not in p.parts}
    todo = [p for p in files if p.suffix == ".py"]
    while todo:
        for node in ast.walk(ast.parse(todo.pop().read_bytes())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                if name.split(".")[0] not in ("harness", "gpt"):
                    continue
                base = root.joinpath(*name.split("."))
                for module in (base.with_suffix(".py"), base / "__init__.py"):
                    if module.is_file() and module not in files:
                        files.add(module)
                        todo.append(module)
    return sorted(files)


def code_identity(root: Path = PROJECT) -> str:
    """What the index's contents depend on: its own format, the schema version, and every identity_files() file by
    its path and bytes. A change to any of them rebuilds the index: a warm compare reads as --no-index does."""
    files = ((path.relative_to(root).as_posix(), path.read_bytes()) for path in identity_files(root))
    return source_digest(files, hashlib.sha256(f"{INDEX_FORMAT}:{SCHEMA_VERSION}".encode())).hexdigest()


def _key_file() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpt-harness" / "index-key"


def user_key() -> bytes:
    """This user's key for the index's keyed hash, made once (mode 0600; linked into place whole)."""
    path = _key_file()
    with contextlib.suppress(FileNotFoundError):
        key = path.read_bytes()
        if len(key) == 32:
            return key
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = stage(path, secrets.token_bytes(32), mode=0o600)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    key = path.read_bytes()
    if len(key) != 32:
        raise OSError(f"{path}: not a key (delete it)")
    return key


def encode(value) -> bytes:
    """JSON bytes of a record section: orjson's where it can (it refuses integers past 64 bits and lone surrogates),
    else json's after one space (which tells decode to read it with json: orjson would make a long integer a float)."""
    if orjson is not None:
        with contextlib.suppress(TypeError, orjson.JSONEncodeError):
            return orjson.dumps(value)
    return b" " + json.dumps(value, ensure_ascii=True, allow_nan=False).encode()


def decode(blob: bytes | memoryview):
    return json.loads(bytes(blob)) if orjson is None or blob[:1] == b" " else orjson.loads(blob)


@cache
def _lz4():
    import pyarrow as pa

    return pa.Codec("lz4")


def compress(blob: bytes) -> bytes:
    """The explain section as it is kept until read: LZ4 (pyarrow's codec: 6x faster than zlib's fastest level
    here, at 4.7 KB a record against 3.5), its length first (LZ4's decompression must be told it)."""
    return len(blob).to_bytes(8, "little") + _lz4().compress(blob, asbytes=True)


def decompress(blob: bytes) -> bytes:
    return _lz4().decompress(blob[8:], decompressed_size=int.from_bytes(blob[:8], "little"), asbytes=True)


class LazySection(dict):
    """A record section kept as compressed JSON until first read (then an ordinary dict): RecordView and every
    reader see a dict. Read-only, as every record section is for its readers. json.dumps reads a dict's storage
    directly, so it sees an unread section as {}: dump dict(section) (no reader dumps a record's explain)."""

    __slots__ = ("_blob",)

    def __init__(self, blob: bytes):
        super().__init__()
        self._blob = blob

    def peek(self, key: str, default=None):
        """One key's value, the section left unread where it is (a reader of one small object of every run's explain
        does not hold every run's kernel profile)."""
        if self._blob is None:
            return dict.get(self, key, default)
        return self._opened().get(key, default)

    def _opened(self) -> dict:
        """The section, from where it is kept: in the index file (checked then), or in memory (read just now)."""
        return self._blob.section() if isinstance(self._blob, StoredBlob) else decode(decompress(self._blob))

    def _fill(self) -> LazySection:
        if self._blob is not None:
            section, self._blob = self._opened(), None
            dict.update(self, section)
        return self

    def __getitem__(self, key):
        return dict.__getitem__(self._fill(), key)

    def get(self, key, default=None):
        return dict.get(self._fill(), key, default)

    def __contains__(self, key):
        return dict.__contains__(self._fill(), key)

    def __iter__(self):
        return dict.__iter__(self._fill())

    def __len__(self):
        return dict.__len__(self._fill())

    def __eq__(self, other):
        return dict.__eq__(self._fill(), other._fill() if isinstance(other, LazySection) else other)

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def __repr__(self):
        return dict.__repr__(self._fill())

    def keys(self):
        return dict.keys(self._fill())

    def values(self):
        return dict.values(self._fill())

    def items(self):
        return dict.items(self._fill())

    def copy(self):
        return dict(self.items())

    def __reduce__(self):
        return dict, (dict(self.items()),)


class SharedSection(dict):
    """A section value many records share (SHARED), read-only as every section is; `typed` keeps its typed reading
    (harness.record.view.RecordView), made once for all of them instead of once per record."""

    __slots__ = ("typed",)

    def __init__(self, value: dict):
        super().__init__(value)
        self.typed: dict = {}


class IndexedRecord(dict):
    """A record read from the index; known: what its RecordView derived when it was indexed (view.INDEXED: the view
    starts with them)."""

    __slots__ = ("known",)


def _identity(st: os.stat_result) -> tuple:
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _stat(path: str) -> os.stat_result | None:
    """The file's stat, None where it cannot be had (gone, unreadable)."""
    try:
        return os.stat(path)
    except OSError:
        return None


def _digest(path: Path) -> bytes | None:
    """A hash of a record file's bytes (None where it is not one: read_record says what it is)."""
    try:
        return hashlib.blake2b(file_bytes(path), digest_size=16).digest()
    except RecordError:
        return None


def index_file(job: tuple[str, str]) -> tuple[tuple | None, tuple]:
    """(row, outcome) for one record file: the outcome read_record gives it (the record encoded, or why it is
    skipped), and its index row, None where the file changed while it was read (used now, read again next time).
    The file is read once: the bytes hashed are those parsed."""
    key, path = job
    before = _stat(path)
    racy = before is not None and time.time_ns() - max(before.st_mtime_ns, before.st_ctime_ns) < RACY_NS
    digest = None
    try:
        data = file_bytes(path)
        digest = hashlib.blake2b(data, digest_size=16).digest() if racy else None
        record = record_of(data)
    except RecordError as exc:
        record, why = None, str(exc)
    after = _stat(path)
    stable = before is not None and after is not None and _identity(before) == _identity(after)
    if record is None:
        outcome = ("bad", why, None, None, (None,) * len(SHARED))
    else:
        split = {name: encode(record[name]) for name in (*SHARED, LAZY) if isinstance(record.get(name), dict)}
        core = encode([{k: (None if k in split else v) for k, v in record.items()}, RecordView(record).indexed()])
        explain = compress(split[LAZY]) if LAZY in split else None
        outcome = ("record", None, core, explain, tuple(split.get(name) for name in SHARED))
    if not stable or (racy and digest is None):
        return None, outcome
    return (key, *_identity(before), digest, *outcome[:4], *outcome[4]), outcome


def _listed(folder: Path) -> tuple[list[str], list[tuple | None]]:
    """The folder's record files (io.record_names) and each one's identity (None where it cannot be read)."""
    listing = record_names(folder)
    return listing, [None if (st := _stat(path)) is None else _identity(st) for path in listing]


def index_bound(identities: list[tuple | None]) -> int:
    """The most bytes an index file can hold for a folder whose record files have these identities (_listed): see
    INDEX_FLOOR."""
    return INDEX_FLOOR + sum(ROW_BYTES + GROWTH * min(i[0] if i else 0, MAX_RECORD_BYTES) for i in identities)


def _relative(paths: list[str], folder: Path) -> list[str]:
    """Path(path).relative_to(folder).as_posix() of each path listed under folder, by slicing where it can (100,000
    files: 0.9 s saved)."""
    prefix = "" if str(folder) == "." else str(folder).rstrip(os.sep) + os.sep
    if os.sep != "/":
        return [Path(path).relative_to(folder).as_posix() for path in paths]
    return [path[len(prefix):] if path.startswith(prefix) else Path(path).relative_to(folder).as_posix()
            for path in paths]


class _Mapped:
    """One index file as read: its bytes (mapped), where it is and which file it was (its inode)."""

    __slots__ = ("data", "inode", "path")

    def __init__(self, data, path: Path, inode: int):
        self.data, self.path, self.inode = data, path, inode

    def view(self, start: int, end: int) -> memoryview:
        """Its bytes from start to end, where they lie (not copied)."""
        return memoryview(self.data)[start:end]


class StoredBlob:
    """An explain section's compressed bytes where an index file keeps them: after the body, outside what the keyed
    hash covers (at 100,000 records they are 450 MB, and a compare reads a few of them), each checked against the hash
    of it the body holds when a reader asks for it. A mismatch (the file damaged since it was written) is one warning,
    the section read from the record file itself, and that index file removed (the base: the index is rebuilt; a delta:
    its records are read again)."""

    __slots__ = ("at", "digest", "file", "key", "length", "store")

    def __init__(self, store: _Store, file: _Mapped, at: int, length: int, digest: bytes, key: str):
        self.store, self.file, self.at, self.length, self.digest, self.key = store, file, at, length, digest, key

    def view(self) -> memoryview:
        return self.file.view(self.at, self.at + self.length)

    def section(self) -> dict:
        data = bytes(self.view())
        if len(data) == self.length and hashlib.blake2b(data, digest_size=16).digest() == self.digest:
            return decode(decompress(data))
        return self.store.damaged(self.key, self.file)


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
