"""What sets two groups apart: their knob fields and requested flags, in the natural before -> after order.

Used by the knob tables (which one change a pair makes), the cross tables (why two runs were not compared) and the
dataset's variant notes (one rung run with different workloads or flags).
"""

from __future__ import annotations

from itertools import combinations

from harness.analysis.group import Group
from harness.record.model import ADDED_FIELD_DEFAULTS, FLAG_LEFT_AT_DEFAULT, measured_workload

# Natural "before -> after" order of knob values (anything else: numbers ascending, then text).
VALUE_ORDER = {
    "precision": ("fp32", "tf32", "bf16", "fp16"),
    "attention": ("naive", "sdpa"),
    "sdpa_backend": ("auto", "math", "efficient", "flash", "cudnn"),
    "compile": ("off", "default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"),
    "optimizer": ("foreach", "fused"),
    "lm_head_loss": ("plain", "cce-torch-compile", "cce", "liger"),
    "model": ("ours", "transformers"),  # a user's model (package.module:function@digest) after them
    "matmul_precision": ("highest", "high", "medium"),
}


def knob_fields(workload: dict) -> dict:
    return measured_workload(workload)


def show_value(v) -> str:
    return "null" if v is None else str(v)


def value_key(name: str, v) -> tuple:
    order = VALUE_ORDER.get(name)
    if order and v in order:
        return (0, order.index(v), "")
    if isinstance(v, bool):
        return (1, int(v), "")
    if isinstance(v, (int, float)):
        return (1, v, "")
    return (2, 0, str(v))


def field_diff(a: Group, b: Group) -> list[tuple[str, object, object]]:
    wa, wb = knob_fields(a.workload.to_dict()), knob_fields(b.workload.to_dict())
    # a field added after a record was written reads as its default there (lm_head_loss: plain)
    keys = sorted(set(wa) | set(wb))
    out = [(k, wa.get(k, ADDED_FIELD_DEFAULTS.get(k)), wb.get(k, ADDED_FIELD_DEFAULTS.get(k))) for k in keys]
    out = [(k, va, vb) for k, va, vb in out if va != vb]
    if a.flags_hash != b.flags_hash:
        fa, fb = a.flags, b.flags
        out += [(f"flag:{k}", requested(fa, k), requested(fb, k)) for k in sorted(set(fa) | set(fb))
                if requested(fa, k) != requested(fb, k)]
    return out


def requested(flags: dict, name: str):
    """A requested flag's value; one a run does not name was left at torch's default, as the flags hash reads it
    (a record from before a flag existed is not 'null -> default' from one that names it)."""
    return flags.get(name, FLAG_LEFT_AT_DEFAULT)  # an explicit null stays null: the hash keeps it


def differences(a: Group, b: Group) -> str:
    """What keeps two groups apart under the comparability rule, in words."""
    diff = field_diff(a, b)
    parts = [f"{'flag ' if n.startswith('flag:') else ''}{n.removeprefix('flag:')} {show_value(va)} vs {show_value(vb)}" for n, va, vb in diff]
    if a.workload_hash != b.workload_hash and not any(not n.startswith("flag:") for n, _va, _vb in diff):
        parts.append(f"workload_hash ({a.workload_hash[:8]} vs {b.workload_hash[:8]}) with equal workload fields")
    if a.flags_hash != b.flags_hash and not any(n.startswith("flag:") for n, _va, _vb in diff):
        parts.append(f"flags hash ({a.flags_hash[:8]} vs {b.flags_hash[:8]}) with equal requested flags")
    return "; ".join(parts) or "nothing recorded"


def variant_labels(groups: list[Group]) -> list[str]:
    """Short labels that tell apart groups of one rung which the comparability rule keeps apart."""
    names: set[str] = set()
    for a, b in combinations(groups, 2):
        names |= {n for n, _va, _vb in field_diff(a, b)}
    labels = []
    for g in groups:
        values = {**knob_fields(g.workload.to_dict()),
                  **{n: requested(g.flags, n.removeprefix("flag:")) for n in names if n.startswith("flag:")}}
        parts = [f"{n.removeprefix('flag:')}={show_value(values.get(n))}" for n in sorted(names)]
        labels.append(", ".join(parts) or f"workload_hash {g.workload_hash[:8]}, flags hash {g.flags_hash[:8]}")
    return labels
