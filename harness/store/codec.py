"""How an index keeps a record's sections: encoded, compressed, shared between records, or left unread until a
reader asks for them."""

from __future__ import annotations

import contextlib
import hashlib
import json
from functools import cache
from pathlib import Path

try:
    import orjson
except ImportError:
    orjson = None


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

    __slots__ = ("at", "digest", "file", "key", "length", "store")  # store: the file's harness.store.file._Store

    def __init__(self, store, file: _Mapped, at: int, length: int, digest: bytes, key: str):
        self.store, self.file, self.at, self.length, self.digest, self.key = store, file, at, length, digest, key

    def view(self) -> memoryview:
        return self.file.view(self.at, self.at + self.length)

    def section(self) -> dict:
        data = bytes(self.view())
        if len(data) == self.length and hashlib.blake2b(data, digest_size=16).digest() == self.digest:
            return decode(decompress(data))
        return self.store.damaged(self.key, self.file)
