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
import os
import re
import tarfile
import tempfile
from pathlib import Path

from harness.record.index import INDEX_DIR

TOP = "gpu-check"  # the archive's one top folder
SUMMARY = "gpu-check.json"  # the summary inside the results folder (and so inside the archive)
MAX_FILE_BYTES = 16 * 2**20  # what one file back from a device call may weigh
# INDEX_DIR, compare's index of a folder, is keyed to the machine that made it (another rebuilds it with a warning):
# neither packed nor unpacked


class PackError(ValueError):
    """An archive that cannot be unpacked as asked (one line)."""


def slug(gpu: str | None) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80gb-hbm3' (the committed folders' names)."""
    words = re.sub(r"^nvidia\s+", "", (gpu or "unknown-gpu").strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", words.lower()).strip("-") or "unknown-gpu"


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def archive_name(summary: dict) -> str:
    stamp = summary["started_at"].replace("-", "").replace(":", "")[:15] + "Z"
    return f"gpu-check-{slug(summary.get('gpu'))}-{stamp}.tar.gz"


def pack(results: Path, summary: dict, summary_text: str, into: Path) -> list[Path]:
    """Write the archive, summary.json and summary.txt into `into`; the paths written. The summary is also written
    to results/gpu-check.json first, so the archive carries it."""
    into.mkdir(parents=True, exist_ok=True)
    text = json.dumps(summary, indent=2) + "\n"
    _atomic_write(results / SUMMARY, text.encode())
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(results.rglob("*")):
            if path.is_file() and not path.name.startswith(".tmp-") and INDEX_DIR not in path.relative_to(results).parts:
                tar.add(path, arcname=f"{TOP}/{path.relative_to(results).as_posix()}")
    data = buf.getvalue()
    archive = into / archive_name(summary)
    _atomic_write(archive, data)
    digest = hashlib.sha256(data).hexdigest()
    outer = dict(summary, archive={"name": archive.name, "bytes": len(data), "sha256": digest})
    _atomic_write(into / "summary.json", (json.dumps(outer, indent=2) + "\n").encode())
    _atomic_write(into / "summary.txt", summary_text.encode())
    if len(data) > MAX_FILE_BYTES:
        print(f"gpu_check: warning: {archive.name} is {len(data) / 2**20:.1f} MiB, over the 16 MiB a device call returns")
    return [archive, into / "summary.json", into / "summary.txt"]


def read_summary(archive: Path) -> dict:
    try:
        with tarfile.open(archive, "r:gz") as tar:
            member = tar.extractfile(f"{TOP}/{SUMMARY}")
            return json.loads(member.read())
    except (OSError, tarfile.TarError, KeyError, json.JSONDecodeError) as exc:
        raise PackError(f"{archive}: not a gpu_check archive ({type(exc).__name__}: {exc})") from None


def target_for(summary: dict, results_root: Path) -> Path:
    return results_root / f"gpu-{slug(summary.get('gpu'))}-{summary['started_at'][:10].replace('-', '')}"


def unpack(archive: Path, results_root: Path = Path("results"), into: Path | None = None) -> Path:
    """Extract the archive's gpu-check/ into `into` (default results/gpu-<device>-<date>/) and write its README.md.
    Refuses a folder that exists: records once there are never overwritten."""
    summary = read_summary(archive)
    target = into or target_for(summary, results_root)
    if target.exists():
        raise PackError(f"{target} exists; records are never overwritten: name another folder with --into")
    with tarfile.open(archive, "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(f"{TOP}/") and (m.isfile() or m.isdir())
                   and INDEX_DIR not in m.name.split("/")]
        target.mkdir(parents=True)
        for m in members:
            m.name = m.name[len(TOP) + 1:]
        tar.extractall(target, members=[m for m in members if m.name], filter="data")
    (target / "README.md").write_text(readme(summary, target.name))
    return target


def readme(summary: dict, folder: str) -> str:
    """How the records in this folder were made, from the call's own summary (the committed GPU folders' form)."""
    runs = summary.get("runs", [])
    ran = [r for r in runs if r["status"] != "not started"]
    span = f"{summary['started_at'][11:16]}-{(summary.get('finished_at') or '?')[11:16]} UTC"
    src = summary.get("source", {})
    code = src.get("commit") or f"source sha256 {str(src.get('source_sha256'))[:12]}"
    san = summary.get("sanity") or {}
    lines = [
        f"# GPU records: {summary.get('gpu')}, torch {san.get('torch')}",
        "",
        f"Written by this project's own code ({code}: `python -m harness.gpu_check`, each run a `python -m harness.run`)",
        f"on a lent machine on {summary['started_at'][:10]}, {span}, in one budgeted call: budget {summary['budget_s']:.0f} s,",
        f"{len(ran)} of {len(runs)} planned runs started. Nothing here was estimated except the column 'estimate s', the plan's",
        "forecast from the committed records; the records are what the harness wrote. Unpacked from",
        f"`{summary.get('archive_name', '?')}` by `python -m harness.gpu_check unpack`.",
        "",
        "| | |",
        "|---|---|",
        f"| GPU | {summary.get('gpu')} (`logs/sanity.log`) |",
        f"| driver | {san.get('driver')} |",
        (f"| software | Python {san.get('python')}, torch {san.get('torch')}, CUDA {san.get('cuda')}, cuDNN {san.get('cudnn')}: "
        "the machine's own interpreter, env `local` |"),
        ("| workload | gpt2-124m, T=1024, synthetic data, `torch.compile` as the rung says, one fresh worker per run; steps "
        "per run as the table says (warm-up + timed), kernel capture (3 steps after the timed ones) where it says yes |"),
        f"| command | `{' '.join(summary.get('command', []))}` |",
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
        note = (r.get("note") or "").replace("|", "/")
        steps = f"{r['warmup_steps']}+{r['steps'] - r['warmup_steps']}"  # not a record: the call's summary of a run
        tokens = "" if r.get("tokens_s") is None else f"{r['tokens_s']:,.0f}"
        lines.append(f"| {i} | {r['tier']} | {r['key']} | {steps} | {'yes' if r['capture'] else 'no'} | {r['status']} | "
                     f"{r['estimate_s']:.0f} | {took} | {tokens} | {r.get('memory') or ''} | {note} |")
    lines += ["", "Corrections and gaps, so that nobody is misled (what the call itself knows; add what else a reader must):"]
    lines += gaps(summary)
    return "\n".join(lines) + "\n"


def compared(summary: dict) -> str:
    """What compare and report read, as a reader of the unpacked folder finds it: this folder, then the repository's
    own folders (the call ran in a copy of it, so their absolute paths were the machine's)."""
    paths = summary.get("compare", {}).get("paths", [])
    shown = ["this folder"] + [f"`{p[p.rindex('results/'):]}`" if "results/" in p else f"`{p}`" for p in paths[1:]]
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
            out.append(f"- {r['key']}: {r['status']}, {r.get('note') or 'no reason recorded'} (its record says more).")
    for tier, runs in by_tier.items():
        out.append(f"- not started, tier {tier}: {', '.join(r['rung'] for r in runs)} ({runs[0].get('note')}).")
    for step in ("compare", "report"):
        code = summary.get(step, {}).get("exit")
        if code:
            out.append(f"- harness.{step} exited {code}: its output is in " +
                       ("`compare.txt`." if step == "compare" else "`logs/report.log`."))
    return out
