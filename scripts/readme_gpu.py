"""The README's GPU section and docs/gpu.md's details, generated from the committed GPU records (never typed in).

    python scripts/readme_gpu.py            # print both sections
    python scripts/readme_gpu.py --write    # replace them in README.md and docs/gpu.md (between their markers)
    python scripts/readme_gpu.py --check    # exit 1 when either differs from the records

The README keeps the headline (the seed ladder beside the user's numbers); docs/gpu.md the padding A/B, the batch
search, the SDPA backend and the fastest step, the overhead check and the peer. tests/test_readme_gpu.py runs --check,
so a number in either that disagrees with the records fails the tests. Sources: results/gpu-h100-80gb-hbm3/,
results/gpu-h200/ and the budgeted calls' results/gpu-h100-80gb-hbm3-20261126-call{1,2,3}/,
results/gpu-h200-20261126-call{1,2}/ and -20261127-call{1,2}/ (records, the peer's records transcribed from its JSON
lines, overhead YAML and logs) and results/reference/ (the user's logged numbers). No torch import.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import yaml

from harness import argtypes
from harness.analysis import fit, sweep
from harness.record.io import iter_records
from harness.record.view import RecordView

README = ROOT / "README.md"
GPU_DOC = ROOT / "docs" / "gpu.md"
START, END = "<!-- gpu-section:start (python scripts/readme_gpu.py --write) -->", "<!-- gpu-section:end -->"
DOC_START, DOC_END = "<!-- gpu-details:start (python scripts/readme_gpu.py --write) -->", "<!-- gpu-details:end -->"
GPUS = (("H100", ROOT / "results/gpu-h100-80gb-hbm3"), ("H200", ROOT / "results/gpu-h200"))
GPUS_BY_NAME = dict(GPUS)
# The budgeted calls of `python -m harness.gpu_check` on a lent GPU (docs/gpu-check.md), one folder per call
CALLS = {"H100": tuple(ROOT / f"results/gpu-h100-80gb-hbm3-20261126-call{n}" for n in (1, 2, 3)),
         "H200": (*(ROOT / f"results/gpu-h200-20261126-call{n}" for n in (1, 2)),
                  *(ROOT / f"results/gpu-h200-20261127-call{n}" for n in (1, 2)))}
REFERENCE = ROOT / "results/reference"
LADDER = ("fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip")
MIB = 2**20


def _fail(line: str) -> None:
    raise SystemExit(f"readme_gpu: {line}")  # a bad record here is a broken checkout, not something to skip


def tok(record: RecordView | None, memory: str = "device used") -> str:
    """'464,440 (48,571 MiB)': tokens/s and a memory metric (NVML's device used; the padding A/B reads the allocator's
    peak, since device used moves with the allocator's cache)."""
    if record is None:
        return "-"
    if not record.ok:
        return record.status
    return f"{record.summary_number('tokens_per_s'):,.0f} ({record.memory(memory) / MIB:,.0f} MiB)"


def first(items, folder: str | None = None, **match) -> RecordView | None:
    """The first record (by run id) of (folder, record) items in that folder whose fields match."""
    found = [r for f, r in items if folder in (None, f) and all(_get(r, k) == v for k, v in match.items())]
    return min(found, key=lambda r: r.run_id) if found else None


def _get(record: RecordView, key: str):
    if key in ("batch_size", "vocab_size", "sdpa_backend"):
        return getattr(record.workload, key)
    if key in ("torch", "line"):
        return getattr(record.reference, key)
    return getattr(record, key)


def load() -> dict:
    """(sub-folder, record) of each GPU folder (ladder, explain, ...) and the references."""
    data = {gpu: [(path.parent.name, RecordView(r)) for path, r in iter_records([folder], warn=_fail)] for gpu, folder in GPUS}
    data["user-log"] = [RecordView(r) for _path, r in iter_records([REFERENCE], warn=_fail)]
    for gpu, calls in CALLS.items():
        data[f"{gpu} calls"] = [(path.parents[1].name, RecordView(r))
                                for path, r in iter_records(list(calls), warn=_fail)]
    return data


def pct(a: RecordView, b: RecordView) -> str:
    return f"{b.summary_number('tokens_per_s') / a.summary_number('tokens_per_s') - 1:+.1%}"


def padding_lines(data: dict, gpu: str) -> list[str]:
    """The compiler-padding A/B of a GPU's first call: each rung at torch's default, shape_padding off, both off.
    Where that call lacks the default-padding fp32/tf32 pair (its tier did not fit), the seed ladder's fp32 and tf32
    at B=16 stand in: the same workloads, read for their memory (a counter), marked so."""
    call = [(f, r) for f, r in data[f"{gpu} calls"] if f == CALLS[gpu][0].name or r.rung.endswith("-no-shape-pad")]
    stand_ins = {f"{p}-50257": first(data[gpu], folder="ladder", rung=p, batch_size=16)
                 for p in ("fp32", "tf32") if first(call, rung=f"{p}-50257") is None}

    def run(rung: str) -> RecordView | None:
        return first(call, rung=rung) or stand_ins.get(rung)

    def cell(rung: str) -> str:
        return tok(run(rung), "peak alloc") + (" ¹" if rung in stand_ins else "")
    lines = [(f"| rung ({gpu}, B=16) | torch's default padding | shape_padding off | "
              "shape and comprehensive padding off |"),
             "|---|---|---|---|"]
    for rung in ("fp32-50257", "tf32-50257", "bf16-50257", "bf16-50304"):
        cells = [cell(rung + suffix) for suffix in ("", "-no-shape-pad", "-no-pad")]
        lines.append(f"| {rung} | " + " | ".join(cells) + " |")
    if stand_ins:
        ladder = next(iter(stand_ins.values()))
        lines += ["", (f"¹ The seed ladder's {' and '.join(r.rung for r in stand_ins.values())} at B=16 "
                       f"(`results/{GPUS_BY_NAME[gpu].name}/ladder/`, {day(ladder)}, 10 + 40 steps): the same "
                       "workloads, in another call; their allocator peaks are read beside this call's, their tokens/s "
                       "are not compared with it.")]
    mib = {k: run(k).memory("peak alloc") / MIB for k in ("fp32-50257", "tf32-50257", "tf32-50257-no-pad",
                                                          "fp32-50257-no-pad", "tf32-50257-no-shape-pad",
                                                          "bf16-50257", "bf16-50257-no-pad")}
    return lines + ["", (
        f"{gpu}: TF32 raises the allocator's peak by {mib['tf32-50257'] - mib['fp32-50257']:+,.0f} MiB at torch's "
        f"default and by {mib['tf32-50257-no-pad'] - mib['fp32-50257-no-pad']:+,.0f} MiB with Inductor's padding off "
        f"({mib['tf32-50257-no-shape-pad'] - mib['fp32-50257']:+,.0f} MiB with shape_padding alone off, against the "
        "default fp32 run): the rise is the compiler's shape padding, which costs bf16-50257 "
        f"{mib['bf16-50257'] - mib['bf16-50257-no-pad']:+,.0f} MiB too (default against both off). The vocab pad "
        "50257 -> 50304 gives "
        f"{pct(run('bf16-50257'), run('bf16-50304'))} tokens/s at torch's default and "
        f"{pct(run('bf16-50257-no-pad'), run('bf16-50304-no-pad'))} with the padding off: the kernel capture of "
        f"bf16-50257 finds its lm_head GEMMs at torch's default: {padded(run('bf16-50257'))}; with the padding off: "
        f"{padded(run('bf16-50257-no-pad'))}. One run each, 5 warm-up + 25 timed steps; the report reads them with the "
        "noise rule.")]


def day(record: RecordView) -> str:
    """'2026-11-23' from a run id (its UTC start)."""
    return f"{record.run_id[:4]}-{record.run_id[4:6]}-{record.run_id[6:8]}"


def padded(record: RecordView) -> str:
    """'forward and backward-input padded to N = 50264' from a run's kernel capture of its lm_head GEMMs."""
    sizes = {}
    for g in record.vocab_gemms:
        sizes.setdefault(g.padded_to or record.workload.vocab_size, []).append(g.role)

    def names(roles: list[str]) -> str:
        return ", ".join(roles[:-1]) + " and " + roles[-1] if len(roles) > 1 else roles[0]
    return ", ".join(f"{names(roles)} {'padded to' if n != record.workload.vocab_size else 'at'} N = {n}"
                     for n, roles in sorted(sizes.items(), reverse=True))


# What each rung of plan beyond-ladder changes against the seed ladder's best rung (harness/plans/beyond-ladder.yaml)
KNOBS = {
    "best-of-ladder": "nothing: the call's baseline (SDPA flash)",
    "sdpa-cudnn": "cuDNN attention forced",
    "sdpa-auto": "SDPA left to choose its backend",
    "compile-reduce-overhead": "torch.compile mode reduce-overhead (CUDA graphs)",
    "compile-max-autotune-no-cudagraphs": "torch.compile mode max-autotune-no-cudagraphs",
    "inductor-coordinate-descent": "Inductor's coordinate-descent tuning",
    "lm-head-liger": "lm_head + loss fused by Liger-Kernel",
    "lm-head-cce": "lm_head + loss fused by Cut Cross-Entropy (its Triton kernel)",
    "lm-head-cce-torch-compile": "lm_head + loss by Cut Cross-Entropy's torch.compile code",
}


def call_name(folder: Path) -> str:
    """'2026-11-26 call 1' from results/gpu-h200-20261126-call1."""
    date, n = re.search(r"-(\d{8})-call(\d+)$", folder.name).groups()
    return f"{date[:4]}-{date[4:6]}-{date[6:]} call {n}"


def knob_table(data: dict) -> list[str]:
    """The B=64 runs of every budgeted call, each against the seed ladder's best rung run in the same call (speed is
    compared within a call: calls land on different GPUs of a kind, at different clocks under the power cap)."""
    lines = ["| GPU | call | rung: what it changes | tokens/s | against the call's baseline | allocator peak MiB |",
             "|---|---|---|---|---|---|"]
    for gpu, folders in CALLS.items():
        for folder in folders:
            runs = sorted((r for f, r in data[f"{gpu} calls"] if f == folder.name and r.plan == "beyond-ladder"
                           and r.workload.batch_size == 64), key=lambda r: r.run_id)
            base = first(data[f"{gpu} calls"], folder=folder.name, rung="best-of-ladder", batch_size=64)
            for r in runs:
                if r.rung not in KNOBS:
                    _fail(f"{folder.name}: rung {r.rung} is not in KNOBS (what it changes, for the table)")
                what = f"`{r.rung}`: {KNOBS[r.rung]}"
                if not r.ok:
                    reason = r.reason if len(r.reason) <= 70 else r.reason[:69] + "…"
                    lines.append(f"| {gpu} | {call_name(folder)} | {what} | {r.status} | {reason} | - |")
                    continue
                delta = "baseline" if r is base else pct(base, r)
                lines.append(f"| {gpu} | {call_name(folder)} | {what} | {r.summary_number('tokens_per_s'):,.0f} | "
                             f"{delta} | {r.memory('peak alloc') / MIB:,.0f} |")
    return lines


def ladder_table(data: dict) -> list[str]:
    refs = data["user-log"]
    head = ["rung", "user's log B=16", "H100 B=16", "H200 B=16", "user's log B=64", "H100 B=64", "H200 B=64"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rung in LADDER:
        cells = [rung]
        for b in (16, 64):
            logged = [r for r in refs if r.rung == rung and r.workload.batch_size == b and r.ok
                      and r.workload.compile != "off"]
            logged.sort(key=lambda r: r.reference.line)
            cells.append("; ".join(f"{tok(r)}" + (f" torch {r.reference.torch}" if r.reference.torch else "")
                                   for r in logged) or "-")
            for gpu in ("H100", "H200"):
                cells.append(tok(first(data[gpu], folder="ladder", rung=rung, batch_size=b)))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def batch_table(data: dict) -> list[str]:
    tries = sorted((r for f, r in data["H100"] if f == "batch-search"), key=lambda r: r.workload.batch_size)
    judged = [fit.judge(r) for r in tries]  # the batch search's own default headroom
    fits = [j.batch_size for j in judged if j.fits]
    knee = sweep.knee([(j.batch_size, j.tokens_per_s) for j in judged if j.fits])
    logged = {r.workload.batch_size: r for r in data["user-log"]
              if r.sweep and r.sweep.field == "batch_size" and r.ok}
    lines = ["| B | H100, torch 2.11 | fits with the default headroom | user's log (nightly) |", "|---|---|---|---|"]
    for j in judged:
        note = "yes" if j.fits else "no"
        if j.batch_size == max(fits, default=None):
            note += " (largest that fits)"
        if j.batch_size == knee:
            note += " (knee)"
        if not j.fits and j.status == "ok":
            note += f": peak {j.peak_bytes / 2**30:.2f} GiB + {j.headroom_bytes / 2**30:.0f} GiB headroom > {j.usable_bytes / 2**30:.2f} GiB"
        lines.append(f"| {j.batch_size} | {tok(j.record)} | {note} | {tok(logged.get(j.batch_size))} |")
    return lines


def overhead_lines(data: dict) -> list[str]:
    h200 = yaml.safe_load(next((GPUS[1][1] / "overhead-check").glob("overhead-*.yaml")).read_text())
    log = (GPUS[0][1] / "logs/overhead.log").read_text()
    m = re.search(r"round 1/\d+: harness ([\d,]+) tokens/s .*?bare loop ([\d,]+) tokens/s, harness/bare ([\d.]+)", log)
    h100_record = first(data["H100"], folder="overhead-check")
    if m is None or int(m.group(1).replace(",", "")) != round(h100_record.summary_number("tokens_per_s")):
        raise SystemExit("readme_gpu: the H100 overhead log and its record disagree")
    rounds = ", ".join(f"{x['harness_tokens_per_s']:,.0f} vs {x['bare_tokens_per_s']:,.0f}" for x in h200["rounds"])
    return [
        (f"- H200: {len(h200['rounds'])} alternated rounds ({rounds} tokens/s, harness vs bare loop): median "
        f"harness/bare {h200['median_ratio']:.4f}, {'PASS' if h200['passed'] else 'FAIL'} at {h200['tolerance']:.0%} "
        "(`results/gpu-h200/overhead-check/`)."),
        (f"- H100: one round completed (the next one's worker was lost to the machine's file sync, see its README): harness {m.group(1)} vs "
        f"bare loop {m.group(2)} tokens/s, harness/bare {m.group(3)} (`results/gpu-h100-80gb-hbm3/logs/overhead.log`)."),
    ]


def peers(items) -> list[RecordView]:
    """The peer's runs: records of kind peer (results/transcribe_peers.py), in the order of their source lines."""
    return sorted((r for _f, r in items if r.kind == "peer"), key=lambda r: r.peer.line)


def peer_lines(data: dict) -> list[str]:
    out = ["| GPU | peer build-nanogpt (SDPA: every backend on) | ours, sdpa-auto rung | ours, seed ladder's last rung (SDPA flash) |",
           "|---|---|---|---|"]
    for gpu, _folder in GPUS:
        runs = peers(data[gpu])
        peer = " / ".join(f"{p.summary_number('tokens_per_s'):,.0f}" for p in runs)
        ours_auto = first(data[gpu], folder="beyond", rung="sdpa-auto") or (
            first(data["H100 calls"], rung="sdpa-auto") if gpu == "H100" else None)
        ours = first(data[gpu], folder="ladder", rung="fused-adamw-clip", batch_size=64)
        out.append(f"| {runs[0].device_label} | {peer} tokens/s ({len(runs)} run{'s' if len(runs) > 1 else ''}) | "
                   f"{tok(ours_auto) if ours_auto else 'not run'} | {tok(ours)} |")
    return out


def sdpa_lines(data: dict) -> list[str]:
    auto = first(data["H200"], folder="beyond", rung="sdpa-auto")
    cudnn = first(data["H200"], folder="beyond", rung="sdpa-cudnn")
    flash = first(data["H200"], folder="ladder", rung="fused-adamw-clip", batch_size=64)
    picked = auto.kernels.sdpa_backend
    return [(f"- H200, B=64, the seed ladder's last rung with SDPA left to choose (`auto`): it picked **{picked}** attention "
            f"(`{auto.kernels.attention_kernels[0][:60]}...`), {tok(auto)}; cuDNN forced: {tok(cudnn)}; "
            f"flash forced (the seed ladder's rung): {tok(flash)}.")]


def provenance(data: dict) -> str:
    versions = first(data["H100"], folder="ladder").versions
    return (f"Measured with this project's code on 2026-11-23 on lent machines: an NVIDIA H100 80GB HBM3 and an NVIDIA "
            f"H200, driver {versions['driver']}, torch {versions['torch']}, Python {versions['python']} (env `local`). "
            "gpt2-124m, T=1024, synthetic data, `torch.compile` default, 50 steps of which 10 warm-up, one worker process "
            "and one run per rung. Records, logs and how they were made: `results/gpu-h100-80gb-hbm3/` and "
            "`results/gpu-h200/` (their READMEs). On 2026-11-26 budgeted calls on a lent H100 and a lent H200 (the same "
            "driver and torch) added the compiler-padding A/B and the fastest step: "
            "`results/gpu-h100-80gb-hbm3-20261126-call{1,2,3}/` and `results/gpu-h200-20261126-call{1,2}/`; on "
            "2026-11-27 two calls on a lent H200 added the other knobs: `results/gpu-h200-20261127-call{1,2}/`. "
            "The user's numbers are their own log (`results/reference/`, H100/H800 class, single samples).")


def section(data: dict) -> str:
    """The README's part: the seed ladder, ours beside the user's."""
    parts = [
        START,
        "## GPU numbers (H100 and H200, torch 2.11)",
        "",
        provenance(data),
        "",
        ("To measure more in one lent call of at most 9 minutes (the fastest step: cuDNN attention, knobs stacked, the "
         "largest B the stack fits with its loss checked against the baseline in micro-batches, the call's own "
         "spread; the answered compiler-padding A/B only when asked): "
         "`bash scripts/gpu_check.sh`, planned on any machine by `python -m "
         "harness.gpu_check --dry-run` (docs/gpu-check.md); its first calls' results are in docs/gpu.md."),
        "",
        ("**The seed ladder** (cumulative rungs; tokens/s from the median timed step, and NVML device-used memory; the "
        "user's memory is nvidia-smi's):"),
        "",
        *ladder_table(data),
        "",
        ("Generated from those records by `python scripts/readme_gpu.py --write` (`tests/test_readme_gpu.py` fails when "
         "a number here disagrees). The batch search, the SDPA backend, the overhead check and a peer: docs/gpu.md; the "
         "report: docs/report-gpu/report.html."),
        END,
    ]
    return "\n".join(parts) + "\n"


def report_folders() -> str:
    """The folders docs/report-gpu is rendered from: each GPU's first folder and its calls', then the user's log."""
    return " ".join(f"results/{path.name}" for gpu, folder in GPUS for path in (folder, *CALLS[gpu])) + " results/reference"


def details(data: dict) -> str:
    """docs/gpu.md's part: the padding A/B, the batch search, the SDPA backend and the fastest step, the overhead check
    and the peer."""
    parts = [
        DOC_START,
        provenance(data),
        "",
        ("This part is generated from those files by `python scripts/readme_gpu.py --write`; `tests/test_readme_gpu.py` "
         "fails when a number here disagrees with them. The rendered report: `docs/report-gpu/report.html` "
         f"(`python -m harness.report {report_folders()} -o docs/report-gpu`)."),
        "",
        ("**The compiler's own padding** (`python -m harness.gpu_check`, plan `padding`: Inductor's shape_padding and "
         "comprehensive_padding at torch's default and off; tokens/s and the allocator's peak):"),
        "",
        *padding_lines(data, "H100"),
        "",
        *padding_lines(data, "H200"),
        "",
        ("**Batch search** on the H100 (`python -m harness.batch_search ... --rung fused-adamw-clip --start 64`; "
        f"headroom {fit.GPU_HEADROOM_GIB:.0f} GiB), beside the user's own B sweep:"),
        "",
        *batch_table(data),
        "",
        "**Which SDPA backend:**",
        "",
        *sdpa_lines(data),
        "",
        ("**The fastest step and the other knobs** (`python -m harness.gpu_check`, plan `beyond-ladder`, B=64, 10 + 40 "
         "steps, one run each; each knob changes one thing against the seed ladder's best rung, run again in every "
         "call, since calls land on different GPUs and clocks; the noise rule's verdicts, with every run of a rung "
         "pooled: the report):"),
        "",
        *knob_table(data),
        "",
        ("The 2026-11-27 call 1 errors were the harness's own: it set TF32 through torch 2.9's new API alone, and "
         "torch's own readers of the legacy setting (max-autotune's lowering, CCE) then raised; mended in 620dda1, "
         "and the CCE rungs ran in call 2. Liger-Kernel and Cut Cross-Entropy are not in the lent machine's image: "
         "they travelled as wheels (liger-kernel 0.8.5, cut-cross-entropy 25.1.1)."),
        "",
        ("**The harness against a bare training loop** of the same workload and flags (`scripts/overhead_check.py`, "
        "fused-adamw-clip, B=64):"),
        "",
        *overhead_lines(data),
        "",
        ("**A peer on the same machine, same session**: build-nanogpt's `train_gpt2.py` model and loop (B=64, T=1024, "
        "vocab 50304, bf16 autocast, fused AdamW, compiled; its own timing, median of steps 10-49):"),
        "",
        *peer_lines(data),
        DOC_END,
    ]
    return "\n".join(parts) + "\n"


def current(text: str, start: str = START, end: str = END) -> str | None:
    if start not in text or end not in text:
        return None
    return text[text.index(start): text.index(end) + len(end)] + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python scripts/readme_gpu.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--write", action="store_true", help="replace the sections in README.md and docs/gpu.md")
    p.add_argument("--check", action="store_true", help="exit 1 when either section differs from the records")
    p.add_argument("--readme", type=argtypes.path_arg, default=README, help="the README to check or write (default: the repository's)")
    p.add_argument("--gpu-doc", type=argtypes.path_arg, default=GPU_DOC, help="docs/gpu.md to check or write (default: the repository's)")
    args = p.parse_args(argv)
    data = load()
    files = [(args.readme, section(data), START, END), (args.gpu_doc, details(data), DOC_START, DOC_END)]
    if args.check:
        wrong = [path.name for path, text, start, end in files if current(path.read_text(encoding="utf-8"), start, end) != text]
        if wrong:
            print(f"{' and '.join(wrong)}: the GPU section differs from the records: run python scripts/readme_gpu.py --write",
                  file=sys.stderr)
            return 1
        print("README.md's GPU section and docs/gpu.md's details match the records")
        return 0
    if args.write:
        for path, text, start, end in files:
            old = current(path.read_text(encoding="utf-8"), start, end)
            if old is None:
                print(f"{path} has no {start} ... {end} markers", file=sys.stderr)
                return 2
            path.write_text(path.read_text(encoding="utf-8").replace(old, text), encoding="utf-8")
            print(f"{path.name}: GPU section written")
        return 0
    sys.stdout.write("".join(text for _p, text, _s, _e in files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
