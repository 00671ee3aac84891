"""Short names for devices, and the word for a set of them.

A device label (harness.record.view.device_label) is exact but long: 'cpu: Intel(R) Xeon(R) Processor @ 2.80GHz
[AVX512+avx512_bf16; 2 threads]' is 70 characters, and a table that repeats it three times a row wraps. Every row,
title and chart names a device by its alias instead ('xeon-avx512bf16-2t', 'h100-80g', 'h200'), and one legend line
gives each alias its full label. No torch import.
"""

from __future__ import annotations

import re

CPU_FAMILIES = ("xeon", "epyc", "threadripper", "ryzen", "opteron", "core", "graviton", "neoverse", "ampere", "apple",
                "atom", "celeron", "pentium")


def is_cpu(label: str) -> bool:
    """A CPU's device label ('cpu: <model> [...]', harness.record.view.device_label), not a GPU's."""
    return label.startswith("cpu: ")


def _cpu_alias(label: str) -> str:
    model, _sep, details = label.removeprefix("cpu: ").partition(" [")
    words = re.findall(r"[A-Za-z]+|\d+[A-Za-z]*", re.sub(r"\(\w+\)|@.*$", " ", model))
    family = next((f for f in CPU_FAMILIES if f in model.lower()), (words[0].lower() if words else "cpu"))
    number = next((w.lower() for w in words if re.fullmatch(r"\d{3,5}[A-Za-z]*", w)), None)
    parts = [family, number]
    for detail in details.rstrip("]").split("; "):
        if detail.endswith(" threads"):
            parts.append(detail.split()[0] + "t")
        elif detail:
            base = detail.split(",")[0].split("+")
            parts.append(base[0].lower() + ("bf16" if any("bf16" in x for x in base[1:]) else ""))
    return "-".join(p for p in parts if p)


def _gpu_alias(label: str) -> str:
    name = re.sub(r"^(NVIDIA|AMD|Intel)\s+(GeForce\s+|Radeon\s+)?", "", label).split(" [")[0]
    tokens = [t for t in re.split(r"[\s_-]+", name) if t]
    if not tokens:
        return "gpu"
    parts = [tokens[0].lower()]
    if not re.search(r"\d", tokens[0]) and len(tokens) > 1:  # 'RTX 4090', 'Tesla V100'
        parts.append(tokens[1].lower())
    memory = next((t for t in tokens if re.fullmatch(r"\d+GB", t, re.IGNORECASE)), None)
    if memory:
        parts.append(memory[:-2] + "g")
    return "-".join(parts)


def device_alias(label: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100-80g'; 'cpu: AMD EPYC 7763 64-Core Processor [AVX2, no native bf16; 8 threads]'
    -> 'epyc-7763-avx2-8t'; 'cpu: AMD EPYC' -> 'epyc'."""
    if is_cpu(label):
        return _cpu_alias(label)
    if label == "unknown device":
        return "unknown"
    return _gpu_alias(label)


def aliases(labels) -> dict[str, str]:
    """label -> alias for every label, unique: two labels that would share an alias get -2, -3 ... in label order."""
    out: dict[str, str] = {}
    taken: dict[str, int] = {}
    for label in sorted(set(labels)):
        alias = device_alias(label)
        taken[alias] = taken.get(alias, 0) + 1
        out[label] = alias if taken[alias] == 1 else f"{alias}-{taken[alias]}"
    return out


def device_word(labels) -> str:
    """What to call a column of these devices: 'CPU' or 'GPU' when all are one kind, else 'device'."""
    kinds = {"CPU" if is_cpu(label) else "GPU" for label in labels}
    return kinds.pop() if len(kinds) == 1 else "device"
