"""Whole-file writes, the one helper every writer calls: a file is there whole (written, flushed, fsynced) or not at
all, and a failure half-way (a disk that fills up, Ctrl-C, a SIGTERM that harness.console.output.run_process turned into an
exception) leaves no partial or temp file behind. Every temp file is named TEMP_PREFIX... beside its target (same
folder: the rename stays atomic), a name the readers of a folder skip. No module of the harness but this one renames a
file into place (tests/test_files.py holds them to it).

    write_new(path, data)     create `path`, never replacing one (FileExistsError): the records (harness.record.io)
    stage(path, data)         a fsynced temp file beside `path`, for a caller that renames several at once (output)
    publish(tmp, path)        rename a staged temp file over `path` (the temp removed if that fails)
    write_atomic(path, data)  stage, then publish: a manifest, a plan, a search state, a kept chart
    atomic_file(path)         the same for a writer that streams: a context manager yielding a binary file (its
                              .name the temp path), fsynced and renamed over `path` when the block ends, removed when
                              it raises (the record index, a Parquet export)
    publish_folder(tmp, path) a folder filled in a temp folder beside `path` (everything in it fsynced), renamed to
                              `path`, which must not exist (gpu_check's unpack)

and the two rules for the harness's own files inside a results folder (its index, its charts), which a folder from
someone else may have replaced:

    not_own_folder(path)      why it is no real folder (a symbolic link would put them elsewhere), or None
    open_regular(path, limit) a regular file opened for reading: never through a link, never a FIFO that would hang
    sweep_temp(folder)        remove the temp files a killed writer left there (SIGKILL, a power cut): those
                              STALE_TEMP_S old; called whenever such a folder is opened, for reading too

It lives in the record package, the lowest layer, so that harness.record.io can use it and every other layer may
import it. Standard library only; no torch.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import Path

TEMP_PREFIX = ".tmp-"  # readers of a folder skip these names (harness.record.io.iter_records)
TEMP_SUFFIX = ".partial"
STALE_TEMP_S = 3600  # a temp file this old is no live writer's (writing 100,000 records' index takes about a minute)


def _bytes(data: str | bytes) -> bytes:
    return data.encode("utf-8") if isinstance(data, str) else data


def write_new(path: str | os.PathLike, data: str | bytes, mode: int = 0o666) -> None:
    """Create `path` (by default mode 0666 less the umask, what any other tool would create, so a results volume
    written as root in a container stays readable by the host user) and write `data`, fsynced; FileExistsError if it
    exists. On a failure after it was created, it is removed again."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(_bytes(data))
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise


def temp_name(path: str | os.PathLike) -> Path:
    """A fresh temp name beside `path`: TEMP_PREFIX, a random part, the target's name, then TEMP_SUFFIX, so no glob for
    the target's kind (`*.json`: pathlib's matches names that start with a dot) ever takes a half-written file for
    one."""
    path = Path(path)
    return path.with_name(f"{TEMP_PREFIX}{secrets.token_hex(8)}-{path.name}{TEMP_SUFFIX}")


def stage(path: str | os.PathLike, data: str | bytes, mode: int = 0o666) -> Path:
    """`data` written whole into a fresh temp file beside `path` (same folder: the rename stays atomic)."""
    tmp = temp_name(path)
    write_new(tmp, data, mode)
    return tmp


def publish(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Rename the staged (fsynced) temp file `tmp` over `path`; if that fails, `tmp` is removed and the error raised."""
    path = Path(path)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Replace (or create) `path` with `data` atomically: a reader sees the old file or the new one, never a part."""
    return publish(stage(path, data), path)


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator:
    """write_atomic for a writer that streams: yields a binary file open on a fresh temp file beside `path` (its
    .name is the temp's path). When the block ends the file is flushed, fsynced, closed and renamed over `path`; when
    the block (or any of that) raises, whatever the exception, the temp file is closed and removed and `path` is as it
    was."""
    tmp = temp_name(path)
    f = open(tmp, "xb")  # noqa: SIM115 - closed below on every path; mode 0666 less the umask, as write_new
    try:
        try:
            yield f
            f.flush()
            os.fsync(f.fileno())
        finally:
            f.close()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _fsync_path(path: str | os.PathLike, flags: int = os.O_RDONLY) -> None:
    fd = os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish_folder(tmp: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Rename the folder `tmp` (filled by the caller, beside `path`) to `path`: every regular file and folder in it
    fsynced first, so the folder appears whole or not at all. FileExistsError where `path` exists (a rename would
    replace an empty folder there). On a failure `tmp` stays, for the caller to remove (it made it)."""
    tmp, path = Path(tmp), Path(path)
    for folder, _folders, names in os.walk(tmp):
        for name in names:
            if stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode):
                _fsync_path(os.path.join(folder, name))
        _fsync_path(folder, getattr(os, "O_DIRECTORY", 0))
    if os.path.lexists(path):
        raise FileExistsError(errno.EEXIST, "exists; records are never overwritten", str(path))
    os.rename(tmp, path)
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


def sweep_temp(folder: str | os.PathLike, older_than_s: float = STALE_TEMP_S) -> None:
    """Remove the temp files (TEMP_PREFIX names, regular files only: a link or a folder of that name is left alone) in
    `folder` last written more than `older_than_s` ago: a killed writer's, which it could not remove itself. One
    listing of the folder; nothing said, nothing raised (a folder that is not there has none)."""
    now = time.time()
    with contextlib.suppress(OSError), os.scandir(folder) as it:
        for entry in it:
            if entry.name.startswith(TEMP_PREFIX):
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and now - st.st_mtime > older_than_s:
                        os.unlink(entry.path)


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
