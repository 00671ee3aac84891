"""Everything a call made, back in at most 8 files, and into results/ again.

`pack` writes, into one folder (the device call's $OUT): `gpu-check-<device>-<UTC time>.tar.gz` (the whole results
folder of the call under `gpu-check/`: records, logs, compare.txt, report/, gpu-check.json), `summary.json` (the same
summary as gpu-check.json) and `summary.txt` (the closing table): three files. It is rewritten after every run, so a
call cut short still returns what finished. `unpack` extracts such an archive into `results/gpu-<device>-<date>/` with
a README.md of how it was made, as the committed GPU folders have, and never over an existing folder.

The archive `unpack` reads is someone else's: it is opened only if it is a regular file (a FIFO would hang), read
within bounds (members, bytes inflated, the summary's size and nesting: refused as soon as one is passed, before
what is past it is inflated), every summary field it uses checked (type, range, length) before it is used, and every
failure is one line (PackError) that leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import re
import secrets
import shutil
import tarfile
import zlib
from pathlib import Path

from harness.console.signals import held
from harness.console.textsafe import CELL, TEXT, WORD, bounded, markdown, markdown_cell, one_line
from harness.gpu_check.archive_summary import SUMMARY, PackError, error_line, named, parse_summary
from harness.record.files import TEMP_PREFIX, open_regular, publish_folder, write_atomic
from harness.store.layout import INDEX_DIR

TOP = "gpu-check"  # the archive's one top folder
MAX_FILE_BYTES = 16 * 2**20  # what one file back from a device call may weigh
MAX_UNPACKED_BYTES = 1024 * 2**20  # what an archive may unpack to in all (a 16 MiB one of records and logs: ~100 MiB)
MAX_MEMBERS = 10_000  # files and folders in an archive (a real call's: 25 to 45); 100,000 empty files took 20 s
MAX_MEMBER_NAME = 1_024  # characters of a member's name; each of its parts at most 255 bytes (a file name's limit)
MAX_MEMBER_DEPTH = 32  # folders a member is below gpu-check/ (a real call's: 3 at most)
HEADER_BYTES = 8 * tarfile.BLOCKSIZE  # a member's header, its long-name or pax header and its padding: the tar
# stream may inflate to MAX_UNPACKED_BYTES and this per member (and the end's padding), no further
MAX_SUMMARY_BYTES = 2**20  # the archive's gpu-check.json (a real one: 3 to 13 KB)
SLUG_LENGTH = 80  # a device's part of a folder or archive name: a 300-character GPU name named no file
# INDEX_DIR, compare's index of a folder, is keyed to the machine that made it (another rebuilds it with a warning):
# neither packed nor unpacked


def slug(gpu: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3' (the committed folders' names); one longer than SLUG_LENGTH keeps
    its head and a hash of the whole, so two long names still name two folders, the same ones every time."""
    words = re.sub(r"^nvidia\s+", "", (gpu or "unknown-gpu").strip(), flags=re.IGNORECASE)
    name = re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-") or "unknown-gpu"
    if len(name) > SLUG_LENGTH:
        name = f"{name[:SLUG_LENGTH - 9].rstrip('-')}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return name


def archive_name(summary: dict) -> str:
    stamp = summary["started_at"].replace("-", "").replace(":", "")[:15] + "Z"
    return f"gpu-check-{slug(summary.get('gpu'))}-{stamp}.tar.gz"


def pack(results: Path, summary: dict, summary_text: str, into: Path) -> list[Path]:
    """Write the archive, summary.json and summary.txt into `into`; the paths written. The summary is also written
    to results/gpu-check.json first, so the archive carries it."""
    into.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2) + "\n"
    write_atomic(results / SUMMARY, text.encode())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(results.rglob("*")):
            if path.is_file() and not path.name.startswith(TEMP_PREFIX) and \
                    INDEX_DIR not in path.relative_to(results).parts:
                tar.add(path, arcname=f"{TOP}/{path.relative_to(results).as_posix()}")
    data = buf.getvalue()
    archive = into / archive_name(summary)
    write_atomic(archive, data)
    digest = hashlib.sha256(data).hexdigest()
    outer = dict(summary, archive={"name": archive.name, "bytes": len(data), "sha256": digest})
    write_atomic(into / "summary.json", (json.dumps(outer, indent=2) + "\n").encode())
    write_atomic(into / "summary.txt", summary_text.encode())
    if len(data) > MAX_FILE_BYTES:
        print(f"gpu_check: warning: {archive.name} is {len(data) / 2**20:.1f} MiB, over the 16 MiB a device call returns")
    return [archive, into / "summary.json", into / "summary.txt"]


# ---------------------------------------------------------------- reading the archive, within bounds

def _too_much(archive) -> PackError:
    return PackError(f"{named(archive)}: unpacks to more than {MAX_UNPACKED_BYTES // 2**20:,} MiB; not unpacked")


class _Inflated:
    """The tar stream inside a .tar.gz as tarfile reads it, inflated as it goes, and refused (PackError) where a read
    or a seek would pass `limit` bytes: tarfile passes a member's data by seeking over it, so a header that claims
    a TB is refused before any of it is inflated, and a long-name or pax header of a GB before it is read."""

    def __init__(self, gz: gzip.GzipFile, limit: int, refuse):
        self.gz, self.limit, self.refuse = gz, limit, refuse

    def read(self, size: int = -1) -> bytes:
        room = self.limit - self.gz.tell()
        if size is None or size < 0 or size > room:
            raise self.refuse()
        return self.gz.read(size)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = offset if whence == io.SEEK_SET else self.gz.tell() + offset if whence == io.SEEK_CUR else None
        if target is not None and target > self.limit:
            raise self.refuse()
        return self.gz.seek(offset, whence)

    def tell(self) -> int:
        return self.gz.tell()


@contextlib.contextmanager
def _opened(archive: Path):
    """The archive as a TarFile whose stream is bounded (_Inflated). Opened only if it is a regular file, without
    blocking (a FIFO nobody writes to hung unpack): PackError, one line, otherwise. A link named on the command line
    is read where it points, as every command does."""
    try:
        f = open_regular(os.path.realpath(archive))
    except OSError as exc:
        raise PackError(f"{named(archive)}: cannot be read ({one_line(exc.strerror or exc)}); nothing unpacked") \
            from None
    with f, gzip.GzipFile(fileobj=f, mode="rb") as gz:
        limit = MAX_UNPACKED_BYTES + MAX_MEMBERS * HEADER_BYTES + tarfile.RECORDSIZE
        stream = _Inflated(gz, limit, lambda: _too_much(archive))
        with tarfile.TarFile(fileobj=stream, mode="r") as tar:
            yield tar


def read_summary(archive: Path) -> dict:
    """The call's summary inside an archive, checked (check_summary); PackError with one line otherwise."""
    try:
        with _opened(archive) as tar:
            return _scan(tar, archive)[0]
    except PackError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError, ValueError) as exc:
        raise PackError(f"{named(archive)}: not a gpu_check archive ({error_line(exc)})") from None


def _scan(tar: tarfile.TarFile, archive: Path) -> tuple[dict, list[tarfile.TarInfo]]:
    """Every member's header, read once in order, each bound checked as it is read: at most MAX_MEMBERS members and
    MAX_UNPACKED_BYTES of data in all (members not unpacked count too: their data is inflated on the way past them),
    so an archive past either is refused before what is past it is inflated. The summary (checked) and the members
    to unpack: files and folders under TOP/, renamed to below it, the index of another machine left out. PackError
    for a member that would land outside, a name that is no plain path, a name twice (the second would replace the
    first unseen) or below a file."""
    members: list[tarfile.TarInfo] = []
    kinds: dict[str, str] = {}  # name -> "file" or "folder", of each member to unpack
    folders: set[str] = set()  # every folder a member is in
    data, count, total = None, 0, 0
    while (m := tar.next()) is not None:
        count += 1
        if count > MAX_MEMBERS:
            raise PackError(f"{named(archive)}: holds more than {MAX_MEMBERS:,} members; not unpacked")
        total += max(m.size, 0)
        if total > MAX_UNPACKED_BYTES:
            raise _too_much(archive)
        parts = m.name.split("/")
        if parts[0] != TOP or not (m.isfile() or m.isdir()) or INDEX_DIR in parts:
            continue
        name = _member_name(m.name, parts, archive)
        if not name:
            continue  # TOP itself
        shown = one_line(bounded(name, WORD))
        if name in kinds:
            raise PackError(f"{named(archive)}: holds {shown!r} twice; not unpacked")
        rel = name.split("/")
        for i in range(1, len(rel)):
            folder = "/".join(rel[:i])
            if kinds.get(folder) == "file":
                raise PackError(f"{named(archive)}: {shown!r} would be inside a file; not unpacked")
            folders.add(folder)
        if m.isfile() and name in folders:
            raise PackError(f"{named(archive)}: {shown!r} is a file and a folder; not unpacked")
        kinds[name] = "file" if m.isfile() else "folder"
        if name == SUMMARY:
            if not m.isfile() or m.size > MAX_SUMMARY_BYTES:
                raise PackError(f"{named(archive)}: its {SUMMARY} is not a file of at most "
                                f"{MAX_SUMMARY_BYTES // 2**20} MiB")
            data = tar.extractfile(m).read()
        m.name = name
        members.append(m)
    if data is None:
        raise PackError(f"{named(archive)}: not a gpu_check archive (no {TOP}/{SUMMARY} in it)")
    return parse_summary(data, archive), members


def _member_name(name: str, parts: list[str], archive: Path) -> str:
    """A member's name below TOP/, checked: never outside it, a plain relative path of bounded length."""
    if ".." in parts or "\\" in name:
        raise PackError(f"{named(archive)}: a member would land outside its folder ({one_line(name[:80])!r}); "
                        "not unpacked")
    rel = parts[1:]
    if len(name) > MAX_MEMBER_NAME or len(rel) > MAX_MEMBER_DEPTH or \
            any(len(os.fsencode(p)) > 255 for p in rel):
        raise PackError(f"{named(archive)}: a member's name is longer or deeper than a file's may be "
                        f"({one_line(bounded(name, WORD))!r}); not unpacked")
    if any(p in ("", ".") for p in rel):
        raise PackError(f"{named(archive)}: a member's name is no plain path ({one_line(bounded(name, WORD))!r}); "
                        "not unpacked")
    return "/".join(rel)


# ---------------------------------------------------------------- unpacking

def target_for(summary: dict, results_root: Path) -> Path:
    return results_root / f"gpu-{slug(summary.get('gpu'))}-{summary['started_at'][:10].replace('-', '')}"


def unpack(archive: Path, results_root: Path = Path("results"), into: Path | None = None) -> Path:
    """Extract the archive's gpu-check/ into `into` (default results/gpu-<device>-<date>/) and write its README.md.
    Refuses a folder that exists: records once there are never overwritten. The archive is someone else's: every
    member's header is read and checked, and its summary, before anything is named or written (_scan); its members
    are files and folders under gpu-check/ only, extracted by tarfile's "data" filter; everything goes into a temp
    folder beside the target, renamed into place at the end, and nothing is left behind on a failure (PackError, one
    line), nor on a stop signal (harness.console.output.run_process turns it into an exception), nor folders made for it."""
    if not hasattr(tarfile, "data_filter"):  # Python 3.11.4+, 3.10.12+: without it no archive is extracted safely
        raise PackError(f"this Python's tarfile has no extraction filters (3.11.4 or later has them): "
                        f"{named(archive)} is not unpacked")
    staging: Path | None = None
    made: list[Path] = []  # folders made for the target, removed again on a failure
    reading, done = True, False
    try:
        with _opened(archive) as tar:
            summary, members = _scan(tar, archive)
            reading = False
            target = Path(into) if into is not None else target_for(summary, results_root)
            if os.path.lexists(target):
                raise PackError(f"{named(target)} exists; records are never overwritten: name another folder with "
                                "--into")
            _make_folders(target.parent, made)
            staging = target.parent / f"{TEMP_PREFIX}unpack-{secrets.token_hex(6)}"
            staging.mkdir()
            tar.extractall(staging, members=members, filter="data")
        write_atomic(staging / "README.md", readme(summary, target.name))  # over one the archive may hold, as before
        publish_folder(staging, target)  # every file in it fsynced, then the one rename
        done = True
    except PackError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError, ValueError) as exc:
        if reading:
            raise PackError(f"{named(archive)}: not a gpu_check archive ({error_line(exc)})") from None
        raise PackError(f"{named(archive)}: not unpacked ({error_line(exc)}); nothing left behind") from None
    finally:
        if not done:
            _remove(staging, made)
    return target


def _make_folders(folder: Path, made: list[Path]) -> None:
    """`folder` and the folders above it that are missing, each listed in `made` as it is made."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for path in reversed(missing):
        path.mkdir()
        made.append(path)


def _remove(staging: Path | None, made: list[Path]) -> None:
    """What a failed or stopped unpack wrote: its temp folder, then the folders made for it (if empty). A stop signal
    waits until it is gone (it would cut the removal short), then is raised as usual."""
    with held():
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()


# ---------------------------------------------------------------- the README, from the checked summary

def _cell(text) -> str:
    """A summary's text in the README: bounded, then escaped (no markup, link or table cell of its own)."""
    return markdown_cell(bounded(text, CELL, WORD))


def _line(text) -> str:
    return markdown(bounded(text, TEXT, WORD))


def readme(summary: dict, folder: str) -> str:
    """How the records in this folder were made, from the call's own summary (the committed GPU folders' form). The
    summary is checked (check_summary): its numbers are numbers within bounds, and its text goes in only through
    _cell and _line (the summary is the archive's: its text adds no markup, link or table cell to the README)."""
    md = _cell
    runs = summary.get("runs") or []
    ran = [r for r in runs if r["status"] != "not started"]
    finished = summary.get("finished_at")
    span = f"{summary['started_at'][11:16]}-{finished[11:16] if finished else '?'} UTC"  # checked ISO times: digits
    src = summary.get("source") or {}
    code = md(src.get("commit") or (f"source sha256 {src['source_sha256'][:12]}" if src.get("source_sha256")
                                    else "source unknown"))
    san = summary.get("sanity") or {}
    lines = [
        f"# GPU records: {md(summary.get('gpu'))}, torch {md(san.get('torch'))}",
        "",
        f"Written by this project's own code ({code}: `python -m harness.gpu_check`, each run a `python -m harness.run`)",
        f"on a lent machine on {summary['started_at'][:10]}, {span}, in one budgeted call: budget {summary['budget_s']:.0f} s,",
        f"{len(ran)} of {len(runs)} planned runs started. Nothing here was estimated except the column 'estimate s', the plan's",
        "forecast from the committed records; the records are what the harness wrote. Unpacked from",
        f"`{md(summary.get('archive_name') or '?')}` by `python -m harness.gpu_check unpack`.",
        "",
        "| | |",
        "|---|---|",
        f"| GPU | {md(summary.get('gpu'))} (`logs/sanity.log`) |",
        f"| driver | {md(san.get('driver'))} |",
        (f"| software | Python {md(san.get('python'))}, torch {md(san.get('torch'))}, CUDA {md(san.get('cuda'))}, "
         f"cuDNN {md(san.get('cudnn'))}: "
        "the machine's own interpreter, env `local` |"),
        ("| workload | gpt2-124m, T=1024, synthetic data, `torch.compile` as the rung says, one fresh worker per run; steps "
        "per run as the table says (warm-up + timed), kernel capture (3 steps after the timed ones) where it says yes |"),
        f"| command | `{md(' '.join(summary.get('command') or []))}` |",
        "",
        "| folder | what |",
        "|---|---|",
        "| `padding/` | plan padding at B=16: the compiler's own padding at default and off (each record's rerun.command) |",
        ("| `beyond/` | plan beyond-ladder: the seed ladder's best rung (the baseline), knobs and stacks of knobs "
         "(`a+b`) at B=64 and at the B the call chose (below) |"),
        "| `logs/` | the console output of each tier; `sanity.log` (nvidia-smi, torch) |",
        f"| `compare.txt`, `report/` | harness.compare and harness.report over {compared(summary)} |",
        "",
        "| # | tier | run | steps | capture | status | estimate s | took s | tokens/s | peak MiB | note |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        took = "" if r["seconds"] is None else f"{r['seconds']:.0f}"
        note = md(r.get("note") or "")
        steps = f"{r['warmup_steps']}+{r['steps'] - r['warmup_steps']}"  # not a record: the call's summary of a run
        tokens = "" if r.get("tokens_s") is None else f"{r['tokens_s']:,.0f}"
        lines.append(f"| {i} | {md(r['tier'])} | {md(r['key'])} | {steps} | {'yes' if r['capture'] else 'no'} | "
                     f"{md(r['status'])} | {r['estimate_s']:.0f} | {took} | {tokens} | {md(r.get('memory') or '')} | {note} |")
    choices = summary.get("choices") or []
    if choices:  # what the call decided from its own runs (harness.gpu_check.choose)
        lines += ["", "What the call decided from its runs as it went (the best stack, the largest B that fits):", ""]
        lines += [f"- {_line(c)}" for c in choices]
    lines += ["", "Corrections and gaps, so that nobody is misled (what the call itself knows; add what else a reader must):"]
    lines += gaps(summary)
    return "\n".join(lines) + "\n"


def compared(summary: dict) -> str:
    """What compare and report read, as a reader of the unpacked folder finds it: this folder, then the repository's
    own folders (the call ran in a copy of it, so their absolute paths were the machine's)."""
    paths = (summary.get("compare") or {}).get("paths") or []  # not a record: the call's summary; checked: a list of texts
    shown = ["this folder"] + [f"`{_cell(p[p.rindex('results/'):] if 'results/' in p else p)}`" for p in paths[1:]]
    return ", ".join(shown) if paths else "nothing (they did not run)"


def gaps(summary: dict) -> list[str]:
    """The README's list of what is missing or failed, from the summary: runs not started (by tier, with why), runs
    that left no measurement, a failed compare or report (its exit code: checked, a whole number)."""
    out = ["- 'estimate s' is the plan's forecast from the committed records of this GPU, not a measurement."]
    by_tier: dict[str, list[dict]] = {}
    for r in summary.get("runs") or []:
        if r["status"] == "not started":
            by_tier.setdefault(r["tier"], []).append(r)
        elif r["status"] in ("error", "timeout"):
            out.append(f"- {_line(r['key'])}: {_line(r['status'])}, {_line(r.get('note') or 'no reason recorded')} "
                       "(its record says more).")
    for tier, runs in by_tier.items():
        out.append(f"- not started, tier {_line(tier)}: {_line(', '.join(r['rung'] for r in runs))} "
                   f"({_line(runs[0].get('note') or 'no reason recorded')}).")
    for step in ("compare", "report"):
        code = (summary.get(step) or {}).get("exit")  # not a record: the call's summary; checked: None or a whole number
        if code:
            out.append(f"- harness.{step} exited {int(code)}: its output is in " +
                       ("`compare.txt`." if step == "compare" else "`logs/report.log`."))
    return out
