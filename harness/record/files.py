"""Whole-file writes, the one helper every writer calls: a file is there whole (written, flushed, fsynced) or not at
all, and a failure half-way (a disk that fills up) leaves no partial or temp file behind.

    write_new(path, data)     create `path`, never replacing one (FileExistsError): the records (harness.record.io)
    stage(path, data)         a fsynced temp file beside `path`, for a caller that renames several at once (output)
    write_atomic(path, data)  stage, then rename over `path`: a manifest, a plan, a search state

and the two rules for the harness's own files inside a results folder (its index, its charts), which a folder from
someone else may have replaced:

    not_own_folder(path)      why it is no real folder (a symbolic link would put them elsewhere), or None
    open_regular(path, limit) a regular file opened for reading: never through a link, never a FIFO that would hang

It lives in the record package, the lowest layer, so that harness.record.io can use it and every other layer may
import it. Standard library only; no torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
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


def not_own_folder(path: str | os.PathLike) -> str | None:
    """Why `path` is no folder the harness may keep its own files in ('a symbolic link', 'not a folder'), or None
    where it is a real folder or nothing yet. A link is someone else's: followed, it would put the index or the charts
    wherever it points."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode):
        return "a symbolic link"
    return None if stat.S_ISDIR(st.st_mode) else "not a folder"


class NotRegular(OSError):
    """open_regular's refusal of a FIFO, a device or a folder."""


def open_regular(path: str | os.PathLike, limit: int | None = None):
    """`path` opened for reading in binary, if it is a regular file of at most `limit` bytes: never through a symbolic
    link (OSError ELOOP), and never blocking (a FIFO in its place would hang the reader: NotRegular). OSError
    otherwise. The one way the harness opens a file a results folder may hold: records, the index, kept charts."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file", str(path))
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit:,} bytes", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
