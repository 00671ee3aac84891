"""What changed underneath a pair of comparable runs: their kernels (kernel_diff) and their library versions."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from harness.analysis.cells import Cell, Table, fmt_pct, shorten
from harness.analysis.group import Group
from harness.record.parts import Gemm, KernelRow, KernelTime
from harness.record.view_evidence import CPU_INDUCTOR

if TYPE_CHECKING:
    from harness.analysis.context import Compare


# Environment keys worth comparing between two envs (dotted paths, prefix match) and between two GPUs.
ENV_KEYS = ("torch.version", "torch.git", "torch.cuda", "torch.cudnn", "torch.nccl", "triton", "driver.",
            "python.version", "container.", "cpu.torch_capability")


GPU_KEYS = ("gpu.", "driver.", "cpu.", "machine.", "threads.torch")


TOP_UNDERNEATH = 5  # "what changed underneath": ranked rows shown per pair besides lm_head GEMM and attention (--all: every row)


def underneath_table(cx: Compare) -> Table:
    table = Table("underneath", "What changed underneath: kernels of the same rung, baseline vs other (lm_head GEMM and "
                  "attention first, then the largest changes in time per step)", [
        ("pair", "A -> B"), ("rung", "rung"), ("d_tokens", "tokens/s B vs A"), ("what", "what"), ("a", "A"), ("b", "B"),
        ("impact", "B - A us/step")])
    hidden = noise = 0
    for across, a, b in cx.pairs():
        pair = f"{cx.name(a.gpu)}: {a.env} -> {b.env}" if across == "env" else f"{a.env}: {cx.name(a.gpu)} -> {cx.name(b.gpu)}"
        result = kernel_diff(a, b, top=None if cx.show_all else TOP_UNDERNEATH)
        if result is None:
            continue
        rows, more = result
        hidden += more
        delta = cx.delta(a, b)
        noise += not delta.beyond
        for what, va, vb, impact in rows:
            table.rows.append({"pair": pair, "rung": f"{a.label} ({a.batch})", "d_tokens": Cell(delta), "what": what,
                               "a": va, "b": vb, "impact": impact})
    if hidden:
        table.notes.append(f"per pair: the lm_head GEMM, the attention kernels and the {TOP_UNDERNEATH} changes with the largest "
                           f"|B - A| time per step; {hidden} smaller changes not shown (--all shows every row)")
    if noise:
        table.notes.append(f"{noise} pair(s) of rungs whose tokens/s did not change beyond noise: their kernel times "
                           "differ by run-to-run noise too, and explain nothing (the verdict names none for them)")
    if not table.rows:
        table.notes.append("no pair of comparable runs has kernel profiles on both sides (explain.kernels)")
    return table


def libraries_table(cx: Compare) -> Table:
    table = Table("libraries", f"Library and driver versions that differ between paired envs (same {cx.word}) or "
                  f"{cx.word}s (same env)", [
        ("pair", "A -> B"), ("what", "what"), ("a", "A"), ("b", "B")])
    done = set()
    for across, a, b in cx.pairs():
        pair = f"{cx.name(a.gpu)}: {a.env} -> {b.env}" if across == "env" else f"{a.env}: {cx.name(a.gpu)} -> {cx.name(b.gpu)}"
        if pair in done:
            continue
        done.add(pair)
        fa, fb = _env_facts(a, across), _env_facts(b, across)
        for k in sorted(set(fa) | set(fb)):
            if fa.get(k) != fb.get(k):
                table.rows.append({"pair": pair, "what": k, "a": fa.get(k), "b": fb.get(k)})
    if not table.rows:
        table.notes.append("no paired envs or GPUs, or no library version differs between them")
    return table


def _flatten(obj, prefix="") -> dict:
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    elif not isinstance(obj, list):
        out[prefix[:-1]] = obj
    return out


CUDA_FACTS = ("torch.cuda", "torch.cudnn", "torch.nccl", "driver.", "gpu.", "triton", "library cu", "library nccl",
              "library nv", "library libcu", "library libnccl", "library libnv")  # what a CPU run loads but never uses


def _env_facts(g: Group, across: str) -> dict:
    keys = ENV_KEYS if across == "env" else GPU_KEYS
    facts = {k: v for k, v in _flatten(g.environment.to_dict()).items() if k.startswith(keys) and v is not None}
    # the libraries the worker process mapped (explain.libraries.mapped, harness/evidence/libraries.py)
    facts.update({f"library {lib}": version for lib, version in g.mapped_libraries.items()})
    if not g.first.is_cuda:  # a CPU run's CUDA library versions say nothing about its speed
        facts = {k: v for k, v in facts.items() if not k.startswith(CUDA_FACTS)}
    return facts


def _kernel_base(name: str) -> str:
    """A kernel's short name: no return type, namespace or template arguments ('void ns::flash_fwd_kernel<...>(...)'
    -> 'flash_fwd_kernel'), except for generic wrappers ('cutlass::Kernel2<fmha_...>' -> its first argument)."""
    text = str(name).removeprefix("void ").replace("(anonymous namespace)::", "").strip()
    head, _sep, args = text.partition("<")
    base = re.split(r"[(]", head, maxsplit=1)[0].split("::")[-1].strip()
    if re.fullmatch(r"[Kk]ernel\d*", base) and args:
        base = re.split(r"[,<>(]", args, maxsplit=1)[0].split("::")[-1].strip() or base
    return shorten(base or text, 60)


Timed = Gemm | KernelRow | KernelTime  # a profile's entry with a time per step (and a share of the kernel time)


def _us(entry: Timed | None, with_share: bool = True) -> str:
    if entry is None or entry.per_step_us is None:
        return "-"
    share = f" ({fmt_pct(entry.share)})" if with_share and entry.share is not None else ""
    return f"{entry.per_step_us:,.0f} us/step{share}"


def _impact(a: Timed | None, b: Timed | None) -> float | None:
    """B - A in us per step (a side without the entry counts 0); None when neither has it."""
    a_us, b_us = (None if e is None else e.per_step_us for e in (a, b))
    return None if a_us is None and b_us is None else (b_us or 0.0) - (a_us or 0.0)


def _fixed_rows(a: Group, b: Group) -> list[tuple]:
    """The rows every pair shows first: the lm_head GEMM, the attention kernels with their time, the SDPA backend."""
    ka, kb = a.kernels, b.kernels
    la, lb = ka.lm_head_gemm, kb.lm_head_gemm
    name = lambda g: shorten(g.name or "not identified", 70)
    rows = [("lm_head GEMM" + (" (changed)" if la.name != lb.name else " (same kernel)"),
             f"{name(la)}, {_us(la, False)}", f"{name(lb)}, {_us(lb, False)}", _impact(la, lb))]
    att_a, att_b = ka.attention_kernels or [], kb.attention_kernels or []
    ca, cb = a.kernel_categories, b.kernel_categories
    same_att = set(att_a) == set(att_b)
    names = lambda ks: ", ".join(_kernel_base(k) for k in ks) or "none"
    rows.append(("attention kernels" + (" (same)" if same_att else " (changed)") + ", time in attention",
                 f"{names(att_a)}; {_us(ca.get('attention'))}",
                 f"{'same kernels' if same_att and att_b else names(att_b)}; {_us(cb.get('attention'))}",
                 _impact(ca.get("attention"), cb.get("attention"))))
    if ka.sdpa_backend != kb.sdpa_backend:
        rows.append(("sdpa backend", ka.sdpa_backend, kb.sdpa_backend, None))
    if _one_side_missed_inductor(a, b):
        missed = "not captured (a profile from before the capture fix)"
        rows.append(("Inductor-generated kernels: left out of this comparison",
                     missed if a.inductor_kernels_missed else _us(ca.get("triton")),
                     missed if b.inductor_kernels_missed else _us(cb.get("triton")), None))
    return rows


# Inductor numbers the Triton kernels it generates in the order it generates them: one fused pattern is
# triton_per_fused_..._view_10 on one GPU and ..._view_14 on the other. The number is not part of what a kernel is.
_INDUCTOR_ORDINAL = re.compile(r"_\d+\Z")


def _kernel_key(k: KernelRow) -> str:
    """The name a kernel is matched by across two profiles: a generated Triton kernel's without its ordinal."""
    name = str(k.name)
    return _INDUCTOR_ORDINAL.sub("", name) if k.category == "triton" and name.startswith("triton_") else name


def _by_kernel(rows) -> dict[str, KernelRow]:
    """A profile's top kernels by _kernel_key; several generated kernels of one fused pattern are one entry, their
    calls, times and shares summed (each profile lists each of them once)."""
    out: dict[str, KernelRow] = {}
    for k in rows:
        key = _kernel_key(k)
        if key in out:
            o = out[key]
            add = lambda x, y: None if x is None and y is None else (x or 0) + (y or 0)
            out[key] = replace(o, calls=add(o.calls, k.calls), total_us=add(o.total_us, k.total_us),
                               per_step_us=add(o.per_step_us, k.per_step_us), share=add(o.share, k.share))
        else:
            out[key] = k
    return out


def _one_side_missed_inductor(a: Group, b: Group) -> bool:
    """One profile captured Inductor's kernels and the other did not (a profile from before the capture fix): their
    Triton kernels would seem to appear or vanish, and every other share moves with the missing time."""
    return a.inductor_kernels_missed != b.inductor_kernels_missed


def _moved(a: KernelTime | None, b: KernelTime | None, change_min: float, by_share: bool) -> bool:
    """A category worth a row: on one side only, or its share of kernel time moved by 2 points or more (by_share),
    else its time per step by change_min or more (shares of two profiles that captured different things mislead)."""
    if a is None or b is None:
        return True
    if by_share:
        return a.share is None or b.share is None or abs(a.share - b.share) >= 0.02
    return not a.per_step_us or abs((b.per_step_us or 0.0) / a.per_step_us - 1) >= change_min


def _ranked_rows(a: Group, b: Group, share_min: float, change_min: float) -> list[tuple]:
    """Categories that moved (_moved), kernels that appeared, disappeared or changed, by impact. Where one profile
    missed Inductor's kernels, those kernels and their category are left out (_fixed_rows says so)."""
    ka, kb, ca, cb = a.kernels, b.kernels, a.kernel_categories, b.kernel_categories
    cpu = ka.device == "cpu"
    cat_name = lambda entry: CPU_INDUCTOR if cpu and entry.category == "triton" else entry.category
    one_sided = _one_side_missed_inductor(a, b)
    us = lambda entry: _us(entry, with_share=not one_sided)  # shares of two profiles that captured different things
    ranked = []
    for cat in sorted(set(ca) | set(cb)):
        if cat == "attention" or (one_sided and cat == "triton"):
            continue
        if _moved(ca.get(cat), cb.get(cat), change_min, by_share=not one_sided):
            ranked.append((f"time in category {cat}", us(ca.get(cat)), us(cb.get(cat)), _impact(ca.get(cat), cb.get(cat))))
    kept = lambda k: k.name and not (one_sided and k.category == "triton")
    ta = _by_kernel(k for k in ka.top or () if kept(k))
    tb = _by_kernel(k for k in kb.top or () if kept(k))
    for n in set(tb) - set(ta):
        if (tb[n].share or 0) >= share_min:
            ranked.append((f"appeared [{cat_name(tb[n])}]: {shorten(n, 70)}", "-", us(tb[n]), _impact(None, tb[n])))
    for n in set(ta) - set(tb):
        if (ta[n].share or 0) >= share_min:
            ranked.append((f"disappeared [{cat_name(ta[n])}]: {shorten(n, 70)}", us(ta[n]), "-", _impact(ta[n], None)))
    for n in set(ta) & set(tb):
        a_us, b_us = ta[n].per_step_us or 0, tb[n].per_step_us or 0
        if a_us and abs(b_us / a_us - 1) >= change_min and max(ta[n].share or 0, tb[n].share or 0) >= share_min:
            ranked.append((f"changed [{cat_name(ta[n])}]: {shorten(n, 70)}", us(ta[n]), us(tb[n]), _impact(ta[n], tb[n])))
    ranked.sort(key=lambda r: (-abs(r[3] or 0.0), r[0]))
    return ranked


def kernel_diff(a: Group, b: Group, share_min: float = 0.01, change_min: float = 0.2, top: int | None = TOP_UNDERNEATH):
    """How the kernels of B differ from A: (rows, hidden), rows = (what, A, B, B - A us/step). The lm_head GEMM,
    the attention kernels and the SDPA backend come first; then category time shares that moved by 2 points or
    more, kernels that appeared or disappeared (>= share_min of kernel time) and kernels whose per-step time
    changed by change_min or more, ranked by time impact |B - A| per step: the first `top` (None: all), and
    hidden = how many were left out. None when neither side has a kernel profile."""
    if not a.kernels and not b.kernels:
        return None
    if not a.kernels or not b.kernels:
        return [("kernel profile", a.kernels_reason, b.kernels_reason, None)], 0
    ranked = _ranked_rows(a, b, share_min, change_min)
    shown = ranked if top is None else ranked[:top]
    return _fixed_rows(a, b) + shown, len(ranked) - len(shown)
