"""Everything a call made, back in at most 8 files, and into results/ again.

`pack` writes, into one folder (the device call's $OUT): `gpu-check-<device>-<UTC time>.tar.gz` (the whole results
folder of the call under `gpu-check/`: records, logs, compare.txt, report/, gpu-check.json), `summary.json` (the same
summary as gpu-check.json) and `summary.txt` (the closing table): three files. It is rewritten after every run, so a
call cut short still returns what finished. `unpack` extracts such an archive into `results/gpu-<device>-<date>/` with
a README.md of how it was made, as the committed GPU folders have, and never over an existing folder.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import secrets
import shutil
import tarfile
import zlib
from pathlib import Path

from harness.record.files import TEMP_PREFIX, publish_folder, write_atomic
from harness.record.index import INDEX_DIR
from harness.textsafe import markdown, markdown_cell

TOP = "gpu-check"  # the archive's one top folder
SUMMARY = "gpu-check.json"  # the summary inside the results folder (and so inside the archive)
MAX_FILE_BYTES = 16 * 2**20  # what one file back from a device call may weigh
MAX_UNPACKED_BYTES = 1024 * 2**20  # what an archive may unpack to in all (a 16 MiB one of records and logs: ~100 MiB)
STARTED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[^/\\]{0,40}")  # ISO time, as runner writes it
# INDEX_DIR, compare's index of a folder, is keyed to the machine that made it (another rebuilds it with a warning):
# neither packed nor unpacked


class PackError(ValueError):
    """An archive that cannot be unpacked as asked (one line)."""


def slug(gpu: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3' (the committed folders' names)."""
    words = re.sub(r"^nvidia\s+", "", (gpu or "unknown-gpu").strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-") or "unknown-gpu"


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


def read_summary(archive: Path) -> dict:
    """The call's summary inside an archive, checked (check_summary); PackError with one line otherwise."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.getmember(f"{TOP}/{SUMMARY}")
            if not member.isfile() or member.size > MAX_FILE_BYTES:
                raise PackError(f"{archive}: its {SUMMARY} is not a file of at most {MAX_FILE_BYTES // 2**20} MiB")
            summary = json.loads(tar.extractfile(member).read())
    except PackError:
        raise
    except (OSError, EOFError, zlib.error, tarfile.TarError, KeyError, ValueError) as exc:
        raise PackError(f"{archive}: not a gpu_check archive ({type(exc).__name__}: {exc})") from None
    check_summary(summary, archive)
    return summary


# What unpack and the README read of a summary: field -> the types it may have (None: may be absent or null)
SUMMARY_FIELDS = {"started_at": (str,), "budget_s": (int, float), "gpu": (str, None), "finished_at": (str, None),
                  "runs": (list,), "source": (dict, None), "sanity": (dict, None), "command": (list, None),
                  "compare": (dict, None), "report": (dict, None), "archive_name": (str, None)}
RUN_FIELDS = {"status": (str,), "tier": (str,), "key": (str,), "rung": (str,), "steps": (int,), "warmup_steps": (int,),
              "capture": (bool,), "estimate_s": (int, float), "seconds": (int, float, None), "tokens_s": (int, float, None),
              "memory": (str, None), "note": (str, None)}


def _typed(value, kinds) -> bool:
    if value is None:
        return None in kinds
    if isinstance(value, bool) and bool not in kinds:
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return isinstance(value, tuple(k for k in kinds if k is not None))


def check_summary(summary, archive: Path) -> None:
    """Every field unpack and its README read, of the type they read, the time it names a date (PackError, one
    line): the archive is someone else's, and its summary decides a folder's name."""
    def bad(what: str) -> PackError:
        return PackError(f"{archive}: its {SUMMARY} is not a gpu_check summary ({what})")
    if not isinstance(summary, dict):
        raise bad("not an object")
    for name, kinds in SUMMARY_FIELDS.items():
        if not _typed(summary.get(name), kinds):
            raise bad(f"{name}: {str(summary.get(name))[:40]!r}")
    if not STARTED_AT.fullmatch(summary["started_at"]):
        raise bad(f"started_at: {summary['started_at'][:40]!r} is no ISO time")
    for i, run in enumerate(summary["runs"]):
        if not isinstance(run, dict):
            raise bad(f"runs[{i}]: not an object")
        for name, kinds in RUN_FIELDS.items():
            if not _typed(run.get(name), kinds):
                raise bad(f"runs[{i}].{name}: {str(run.get(name))[:40]!r}")


def target_for(summary: dict, results_root: Path) -> Path:
    return results_root / f"gpu-{slug(summary.get('gpu'))}-{summary['started_at'][:10].replace('-', '')}"


def unpack(archive: Path, results_root: Path = Path("results"), into: Path | None = None) -> Path:
    """Extract the archive's gpu-check/ into `into` (default results/gpu-<device>-<date>/) and write its README.md.
    Refuses a folder that exists: records once there are never overwritten. The archive is someone else's: its
    summary is checked before it names anything, its members are files and folders under gpu-check/ only, extracted
    by tarfile's "data" filter, at most MAX_UNPACKED_BYTES in all; everything goes into a temp folder beside the
    target, renamed into place at the end, and nothing is left behind on a failure (PackError, one line)."""
    if not hasattr(tarfile, "data_filter"):  # Python 3.11.4+, 3.10.12+: without it no archive is extracted safely
        raise PackError(f"this Python's tarfile has no extraction filters (3.11.4 or later has them): {archive} is "
                        "not unpacked")
    summary = read_summary(archive)
    target = into or target_for(summary, results_root)
    if target.exists() or target.is_symlink():
        raise PackError(f"{target} exists; records are never overwritten: name another folder with --into")
    staging = target.parent / f"{TEMP_PREFIX}unpack-{secrets.token_hex(6)}"
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = _members(tar, archive)
            target.parent.mkdir(parents=True, exist_ok=True)
            staging.mkdir()
            tar.extractall(staging, members=members, filter="data")
        write_atomic(staging / "README.md", readme(summary, target.name))  # over one the archive may hold, as before
        publish_folder(staging, target)  # every file in it fsynced, then the one rename
    except (OSError, EOFError, zlib.error, tarfile.TarError) as exc:
        raise PackError(f"{archive}: not unpacked ({type(exc).__name__}: {exc}); nothing left behind") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _members(tar: tarfile.TarFile, archive: Path) -> list[tarfile.TarInfo]:
    """The archive's files and folders under TOP/, renamed to below it (the index of another machine left out);
    PackError for a member that would land outside, or an archive that unpacks to more than MAX_UNPACKED_BYTES."""
    members, total = [], 0
    for m in tar.getmembers():
        parts = m.name.split("/")
        if parts[0] != TOP or not (m.isfile() or m.isdir()) or INDEX_DIR in parts:
            continue
        if ".." in parts or m.name.startswith("/") or "\\" in m.name:
            raise PackError(f"{archive}: a member would land outside its folder ({m.name[:80]!r}); not unpacked")
        total += m.size
        if total > MAX_UNPACKED_BYTES:
            raise PackError(f"{archive}: unpacks to more than {MAX_UNPACKED_BYTES // 2**20:,} MiB; not unpacked")
        m.name = "/".join(parts[1:])
        if m.name:
            members.append(m)
    return members


def readme(summary: dict, folder: str) -> str:
    """How the records in this folder were made, from the call's own summary (the committed GPU folders' form)."""
    md = markdown_cell  # the summary is the archive's: its text adds no markup, link or table cell to the README
    runs = summary.get("runs", [])
    ran = [r for r in runs if r["status"] != "not started"]
    span = f"{summary['started_at'][11:16]}-{(summary.get('finished_at') or '?')[11:16]} UTC"
    src = summary.get("source", {})
    code = md(src.get("commit") or f"source sha256 {str(src.get('source_sha256'))[:12]}")
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
        f"| command | `{md(' '.join(map(str, summary.get('command') or [])))}` |",
        "",
        "| folder | what |",
        "|---|---|",
        "| `padding/` | plan padding at B=16: the compiler's own padding at default and off (each record's rerun.command) |",
        "| `beyond/` | plan beyond-ladder: the seed ladder's best rung and the knobs at B=64 (and B=96) |",
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
    lines += ["", "Corrections and gaps, so that nobody is misled (what the call itself knows; add what else a reader must):"]
    lines += gaps(summary)
    return "\n".join(lines) + "\n"


def compared(summary: dict) -> str:
    """What compare and report read, as a reader of the unpacked folder finds it: this folder, then the repository's
    own folders (the call ran in a copy of it, so their absolute paths were the machine's)."""
    paths = (summary.get("compare") or {}).get("paths")  # not a record: the call's summary
    paths = [str(p) for p in paths] if isinstance(paths, list) else []
    shown = ["this folder"] + [f"`{markdown_cell(p[p.rindex('results/'):] if 'results/' in p else p)}`" for p in paths[1:]]
    return ", ".join(shown) if paths else "nothing (they did not run)"


def gaps(summary: dict) -> list[str]:
    """The README's list of what is missing or failed, from the summary: runs not started (by tier, with why), runs
    that left no measurement, a failed compare or report."""
    out = ["- 'estimate s' is the plan's forecast from the committed records of this GPU, not a measurement."]
    by_tier: dict[str, list[dict]] = {}
    for r in summary.get("runs", []):
        if r["status"] == "not started":
            by_tier.setdefault(r["tier"], []).append(r)
        elif r["status"] in ("error", "timeout"):
            out.append(f"- {markdown(r['key'])}: {r['status']}, {markdown(r.get('note') or 'no reason recorded')} (its "
                       "record says more).")
    for tier, runs in by_tier.items():
        out.append(f"- not started, tier {markdown(tier)}: {markdown(', '.join(r['rung'] for r in runs))} "
                   f"({markdown(runs[0].get('note'))}).")
    for step in ("compare", "report"):
        code = (summary.get(step) or {}).get("exit")  # not a record: the call's summary
        if code:
            out.append(f"- harness.{step} exited {code}: its output is in " +
                       ("`compare.txt`." if step == "compare" else "`logs/report.log`."))
    return out
