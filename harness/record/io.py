"""Reading, listing and writing record files: the one reader and the one writer.

Every record file is read through read_json (harness.compare, harness.report and harness.envs
verify-matrix alike): a hostile or broken file (too big, nested too deep, a number too long, not
JSON) is one RecordError, never a crash. read_record then brings an older record up to the current
schema version (harness.record.migrate) and validates it (harness.record.validator). iter_records reads
a folder's record files, one warning per file it leaves out. Writes are atomic and never replace a file.
No torch import here, and jsonschema only when validating: harness.envs reads records with a bare Python.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
from collections.abc import Iterator
from pathlib import Path, PurePath

try:
    import orjson as _orjson
except ImportError:  # a bare Python (harness.envs): the standard parser alone
    _orjson = None

from harness.record.files import TEMP_PREFIX, NotRegular, open_regular, temp_name, write_new
from harness.record.migrate import migrate
from harness.record.model import RecordError, record_filename
from harness.record.validator import validate

MAX_RECORD_BYTES = 16 * 2**20  # a real record is ~20-200 KB, one of 100,000 steps (the bound) ~7 MB; larger: unread
MAX_RECORD_DEPTH = 64  # a real record nests ~6 deep; deeper JSON would overflow the stack of whatever walks it


def _json_safe(obj):
    """NaN/inf are not JSON: store them as null (a NaN loss is still visible as a missing value)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def write_record(record: dict, out_dir: str | os.PathLike) -> Path:
    """Validate `record` and write it into out_dir as <run_id>.json; return the path. Never replaces a file:
    if that run_id is taken, the record gets a fresh one (<run_id>-<6 hex>), so the new measurement is kept
    beside the old."""
    record = validate(_json_safe(record))
    if Path(record["run_id"]).name != record["run_id"] or record["run_id"] in (".", ".."):
        raise RecordError(f"run_id {record['run_id']!r} is not a plain file name")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base_id = record["run_id"]
    for _ in range(100):
        final = out / record_filename(record)
        if not final.exists() and _write_once(record, out, final):
            return final
        record["run_id"] = f"{base_id}-{secrets.token_hex(3)}"
    raise RecordError(f"{out}: no free run_id after 100 tries from {base_id}")


def _write_once(record: dict, out: Path, final: Path) -> bool:
    """Write `final` whole or not at all; False if it exists. A temp file hard-linked to the final name is
    atomic; where the filesystem has no hard links, an exclusive create of the final name, written then
    fsynced, still never replaces anything."""
    text = json.dumps(record, indent=1, sort_keys=False, allow_nan=False)
    tmp = temp_name(final)
    write_new(tmp, text)
    try:
        os.link(tmp, final)
        return True
    except FileExistsError:
        return False
    except OSError as exc:  # EPERM, ENOTSUP, EXDEV, EMLINK...: no hard links here
        if exc.errno == errno.EEXIST:
            return False
    finally:
        os.unlink(tmp)
    try:
        write_new(final, text)
    except FileExistsError:
        return False
    return True


def check_writable(out_dir: str | os.PathLike) -> None:
    """Create out_dir if needed and prove a file can be written there (RecordError otherwise): checked before
    anything is measured, not when the first result is due."""
    out = Path(out_dir)
    try:
        if out.exists() and not out.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "it is a file, not a directory")
        out.mkdir(parents=True, exist_ok=True)
        probe = temp_name(out / "probe.json")
        write_new(probe, "{}")
        probe.unlink()
    except OSError as exc:
        raise RecordError(f"{out}: cannot write records there: {exc.strerror or exc}") from None


def read_json(path: str | os.PathLike):
    """The JSON in a record file, read defensively: a regular file of at most MAX_RECORD_BYTES, UTF-8, at most
    MAX_RECORD_DEPTH deep, within Python's integer-size limit. Anything else: RecordError."""
    return parse_json(file_bytes(path))


def file_bytes(path: str | os.PathLike) -> bytes:
    """A record file's bytes: a regular file of at most MAX_RECORD_BYTES, not a symbolic link (one in a results folder
    could bring any file of the machine into a report; a link named on the command line is read where it points:
    iter_records). RecordError for anything else."""
    try:
        with open_regular(path) as f:  # a FIFO named *.json must not hang us
            data = f.read(MAX_RECORD_BYTES + 1)
    except NotRegular:
        raise RecordError("not a regular file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise RecordError("a symbolic link, not followed (name the file it points to, to read it)") from None
        raise RecordError(f"unreadable: {exc.strerror or exc}") from None
    if len(data) > MAX_RECORD_BYTES:
        raise RecordError(f"larger than {MAX_RECORD_BYTES // 2**20} MiB, not read")
    return data


def parse_json(data: bytes):
    """The JSON in a record file's bytes (NaN and infinity read as floats: the bounds refuse them, naming the field);
    RecordError as read_json says."""
    value = _fast_loads(data)
    if value is _SLOW:
        try:
            value = json.loads(data.decode("utf-8"), parse_constant=lambda c: float(c))
        except UnicodeDecodeError as exc:
            raise RecordError(f"unreadable: not UTF-8 ({exc.reason} at byte {exc.start})") from None
        except json.JSONDecodeError as exc:
            raise RecordError(f"not JSON (truncated?): {exc.msg} at line {exc.lineno}") from None
        except RecursionError:
            raise RecordError(f"not a record: JSON nested deeper than {MAX_RECORD_DEPTH} levels") from None
        except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
            raise RecordError(f"not a record: {str(exc).split(';')[0]}") from None
    if json_depth(value) > MAX_RECORD_DEPTH:
        raise RecordError(f"not a record: JSON nested deeper than {MAX_RECORD_DEPTH} levels")
    return value


_SLOW = object()  # _fast_loads' answer when the standard parser must decide
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _long_integer(digits: bytes) -> bool:
    """`digits` (JSON text, every digit made 0) may hold an integer past 64 bits: 20 digits not after a decimal point
    or an exponent's e or sign, or a minus and 19 (a longer fraction or exponent is not an integer; a float whose
    integer part is that long is parsed alike by both)."""
    at = digits.find(b"0" * 19)
    while at != -1:
        before = digits[at - 1:at]
        if before == b"-":
            if digits[at - 2:at - 1] not in (b"e", b"E"):
                return True
        elif before not in (b".", b"e", b"E", b"+", b"0") and digits[at + 19:at + 20] == b"0":
            return True
        at = digits.find(b"0" * 19, at + 19)
    return False


def _fast_loads(data: bytes):
    """The JSON in `data` parsed by orjson (several times faster than json) where that gives exactly what json.loads
    gives, else _SLOW: orjson missing, or it refused the text (NaN, a number past a double, a lone surrogate, invalid
    UTF-8: json decides, and names the error), or a run of 20 digits or a minus and 19 (an integer past 64 bits,
    which orjson would make a float; a shorter one is exact)."""
    if _orjson is None or _long_integer(data.translate(_DIGITS_AS_ZERO)):
        return _SLOW
    try:
        return _orjson.loads(data)
    except (_orjson.JSONDecodeError, RecursionError):
        return _SLOW


_CONTAINERS = frozenset((dict, list))  # what parsed JSON nests in (json and orjson make exactly these types)


def json_depth(value) -> int:
    """Nesting depth of parsed JSON, level by level, without recursion."""
    if type(value) not in _CONTAINERS:
        return 0
    level, depth = [value], 0
    while level:
        depth += 1
        below = []
        for item in level:  # only dicts and lists
            children = item.values() if type(item) is dict else item
            if not _CONTAINERS.isdisjoint(map(type, children)):  # most lists hold only numbers: skipped at C speed
                below += [v for v in children if type(v) is dict or type(v) is list]
        level = below
    return depth


def read_record(path: str | os.PathLike) -> dict:
    """The record in a file, read defensively, brought up to the current schema version, every number and string in
    its bounds (harness.record.bounds), and validated."""
    return record_of(file_bytes(path))


def record_of(data: bytes) -> dict:
    """The record in a file's bytes, as read_record reads it."""
    return validate(migrate(parse_json(data)))


MAX_SKIP_WARNINGS = 20  # bad files named one per line; past that, one line counts the rest


class BadFile(str):
    """A path iter_records could not read as a record, and why: what its `warn` callback receives. It is the warning
    line (a str, so print and list.append take it as it is; a file name is record data too, so whoever prints it
    shows it through harness.console.textsafe.one_line: a name with a newline must not print a second, forged line); a reader that lists what was left out takes .path,
    .what, .why, .skipped and .count instead of parsing the line back."""

    def __new__(cls, path, why: str, skipped: bool = True):
        line = super().__new__(cls, f"warning: {path}: {'skipped: ' if skipped else ''}{why}")
        line.path, line.why, line.skipped = Path(path), why, skipped  # skipped False: a path that is not there
        line.what, line.count = str(path), 1  # what the line names, and how many bad files it stands for
        return line

    @classmethod
    def more(cls, count: int, total: int) -> BadFile:
        """The one line for the bad files past MAX_SKIP_WARNINGS, unnamed: .path is None, .count says how many."""
        what = f"{count:,} more file(s)"
        why = (f"skipped, {total:,} in all (not records, or records out of range; the first {MAX_SKIP_WARNINGS} are "
               "named above)")
        line = str.__new__(cls, f"warning: {what} {why}")
        line.path, line.what, line.why, line.skipped, line.count = None, what, why, True, count
        return line


# JSON files a folder of records may hold beside them that are not records (skipped when a folder is read; a file
# named on the command line is still read): harness.bisect's search state, OUT/bisect-<metric>.json and
# OUT/landscape-<metric>.json next to OUT/records/, and harness.gpu_check's summary of a call, gpu-check.json
# (run ids, hence record names, start with a timestamp).
NOT_RECORDS = ("bisect-*.json", "landscape-*.json", "gpu-check.json")


# The names that may be left out start with one of these (a name's start is tested first: Path.match is slow)
_LEFT_OUT_STARTS = (TEMP_PREFIX, *(pattern.split("*")[0] for pattern in NOT_RECORDS))


def record_files(folder: Path) -> list[Path]:
    """The record files under a folder, in the order they are read: every *.json, recursively, less the writer's temp
    files and NOT_RECORDS."""
    return list(map(Path, record_names(folder)))


def record_names(folder: Path) -> list[str]:
    """record_files as path strings, in the same order: a listing of 100,000 files without 100,000 Paths made, sorted
    and turned back into strings."""
    names = [entry.path for entry in json_entries(folder) if _is_record_name(entry.name)]
    if os.fspath(folder) == os.curdir:  # scandir's "./x.json" is Path's "x.json"
        names = [name[len(os.curdir + os.sep):] for name in names]
    # by components, as Paths sort ('a/x.json' before 'a-b/x.json'): each path shares the folder's prefix, and with
    # its separators made the lowest character a string sorts as its list of components (without 100,000 lists)
    return sorted(names, key=lambda name: name.replace(os.sep, "\0"))


def _is_record_name(name: str) -> bool:
    if not name.lower().startswith(_LEFT_OUT_STARTS):
        return True
    return not name.startswith(TEMP_PREFIX) and not any(PurePath(name).match(pattern) for pattern in NOT_RECORDS)


def json_entries(folder: Path) -> Iterator[os.DirEntry]:
    """What folder.rglob("*.json") finds (every entry named *.json in the folder and every folder below it, linked
    folders and the writers' temp folders not followed, a folder that cannot be read skipped), with one scandir per
    folder instead of its two (at 100,000 files: half the time); as it is found, so a reader asking whether a folder
    holds any stops at the first."""
    folders = [os.fspath(folder)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.name.endswith(".json"):
                        yield entry
                    try:
                        if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(TEMP_PREFIX):
                            folders.append(entry.path)  # a temp folder is a write under way (an unpack), not records
                    except OSError:
                        pass
        except (PermissionError, FileNotFoundError, NotADirectoryError):  # unreadable, or gone while listed
            continue


def iter_records(paths, warn=print, read=read_record, files=record_files):
    """(path, record) for every valid *.json under the paths (recursively), a file that two of them reach (a folder
    and a file in it, a link and its target) once; one BadFile to `warn` per bad file
    (print writes its line) for the first MAX_SKIP_WARNINGS, then one BadFile.more line with how many more (a folder
    of 10,000 other JSON files is not 10,000 lines). read=read_json gives the raw JSON of every readable file,
    unvalidated; files(folder) lists a folder's record files (record_files, or record_names: the listing an index
    just made, path strings; each path is yielded as files gives it)."""
    skipped, roots = 0, [Path(p) for p in paths]
    seen = set() if len(roots) > 1 else None  # (device, inode) of each file read: one named twice is read once
    for root in roots:
        if not root.exists():
            warn(BadFile(root, "no such file or directory", skipped=False))
            continue
        for path in [root] if root.is_file() else files(root):
            if seen is not None:  # a link is itself (not followed) unless named: then it is the file it names
                try:
                    st = os.stat(path) if path is root else os.lstat(path)
                except OSError:  # gone, or unreadable: read says why
                    st = None
                if st is not None:
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
            try:  # a file named as a path is read where it points (the user's choice); one found in a folder is not
                yield path, read(root.resolve() if path is root and root.is_symlink() else path)
            except RecordError as exc:
                skipped += 1
                if skipped <= MAX_SKIP_WARNINGS:
                    warn(BadFile(path, str(exc)))
    if skipped > MAX_SKIP_WARNINGS:
        warn(BadFile.more(skipped - MAX_SKIP_WARNINGS, skipped))
