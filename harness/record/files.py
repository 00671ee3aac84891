"""Whole-file writes, the one helper every writer calls: a file is there whole (written, flushed, fsynced) or not at
all, and a failure half-way (a disk that fills up) leaves no partial or temp file behind.

    write_new(path, data)     create `path`, never replacing one (FileExistsError): the records (harness.record.io)
    stage(path, data)         a fsynced temp file beside `path`, for a caller that renames several at once (output)
    write_atomic(path, data)  stage, then rename over `path`: a manifest, a plan, a search state

It lives in the record package, the lowest layer, so that harness.record.io can use it and every other layer may
import it. Standard library only; no torch.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

TEMP_PREFIX = ".tmp-"  # readers of a folder skip these names (harness.record.io.iter_records)


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_new(path: str | os.PathLike, data: str | bytes) -> None:
    """Create `path` (mode 0666 less the umask, what any other tool would create, so a results volume written as
    root in a container stays readable by the host user) and write `data`, fsynced; FileExistsError if it exists.
    On a failure after it was created, it is removed again."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_bytes(data))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise


def stage(path: str | os.PathLike, data: str | bytes) -> Path:
    """`data` written whole into a fresh temp file beside `path` (same folder: the rename stays atomic)."""
    path = Path(path)
    tmp = path.with_name(f"{TEMP_PREFIX}{secrets.token_hex(8)}-{path.name}")
    write_new(tmp, data)
    return tmp


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Replace (or create) `path` with `data` atomically: a reader sees the old file or the new one, never a part."""
    path = Path(path)
    tmp = stage(path, data)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
