"""Short names for devices, and the word for a set of them.

A device label (harness.record.device.device_label) is exact but long: 'cpu: Intel(R) Xeon(R) Processor @ 2.80GHz
[AVX512+avx512_bf16; 2 threads]' is 70 characters, and a table that repeats it three times a row wraps. Every row,
title and chart names a device by its alias instead ('xeon-avx512bf16-2t', 'h100-80g', 'h200'), and one legend line
gives each alias its full label. No torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CPU_FAMILIES = ("xeon", "epyc", "threadripper", "ryzen", "opteron", "core", "graviton", "neoverse", "ampere", "apple",
                "atom", "celeron", "pentium")


def is_cpu(label: str) -> bool:
    """A CPU's device label ('cpu: <model> [...]', harness.record.device.device_label), not a GPU's."""
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


@dataclass(frozen=True)
class Apart:
    """A path given to compare whose measured runs share no device with the other paths' runs, while those ran builds
    its devices did not (a user's first runs beside the shipped records): why its device is another one, and what
    would compare builds on it. folder: the path as given; device: its device label (the one nearest to the others');
    nearest: the other paths' device most like it; same: what the two have in common, differs: (what, here, there)
    for what tells them apart ("not recorded" where a record does not say); envs_missing: the builds the others ran
    that its devices did not (each a nox session: bench-<env>)."""

    folder: str
    device: str
    others: tuple  # the other paths, as given
    nearest: str
    same: tuple  # ("model AMD EPYC", "2 threads")
    differs: tuple  # (("ISA flags", "AVX512+avx512_bf16", "not recorded"), ...)
    envs_missing: tuple

    def said(self, name) -> tuple[str, str]:
        """(what it is, what to run), in the words the verdict and the report's key findings both use; name: device
        label -> alias."""
        others = self.others[0] if len(self.others) == 1 else f"the {len(self.others)} other folders"
        why = [f"both {', '.join(self.same)}"] if self.same else []
        why += [f"{what} {here} vs {there}" for what, here, there in self.differs]
        if any(x.startswith(NOT_RECORDED) for _what, here, there in self.differs for x in (here, there)):
            why[-1] += ", and what a record does not say is never taken as the same"
        what = (f"No device in common: {self.folder} ran on {name(self.device)}, and the nearest device of {others} is "
                f"{name(self.nearest)} ({'; '.join(why)}): no build of theirs is compared with yours on one machine")
        sessions = " ".join(f"bench-{env}" for env in self.envs_missing)
        return what, (f"to compare builds on {name(self.device)}, run them there: nox -s {sessions}, then "
                      f"nox -s compare -- {self.folder}")


NOT_RECORDED = "not recorded"
_FIELDS = (("name", "model"), ("isa", "ISA flags"), ("threads", "threads"))


def identity_difference(a, b) -> tuple[tuple, tuple]:
    """(same, differs) between two DeviceIdentity of one kind (CPU or GPU): what they share, in words, and each field
    that tells them apart as (what, a's, b's), where one side that does not say is NOT_RECORDED (never taken as a
    match; for threads, with what torch reported using where the record has that)."""
    def said(identity, key):
        value = getattr(identity, key)
        if value is not None:
            return str(value)
        if key == "threads" and identity.torch_threads:
            return f"{NOT_RECORDED} (torch used {identity.torch_threads})"
        return NOT_RECORDED
    same, differs = [], []
    fields = _FIELDS if a.kind == "cpu" else (("name", "name"),)  # a GPU is told by its name alone
    for key, what in fields:
        va, vb = getattr(a, key), getattr(b, key)
        if va is not None and va == vb:
            same.append(f"{va} threads" if key == "threads" else f"{what} {va}")
        elif va is not None or vb is not None:
            differs.append((what, said(a, key), said(b, key)))
    return tuple(same), tuple(differs)


def apart(identities: dict, sources: dict, env_rank: dict | None = None, device_rank: dict | None = None) -> list[Apart]:
    """Each given path whose CPUs (or GPUs) appear under no other given path, while the others ran builds on CPUs (or
    GPUs) that its own did not: the one line that tells a user why their first runs are compared with none of the
    shipped builds. Folders of a CPU and of GPUs, or of two GPUs under the same builds (compared on purpose), say
    nothing here. env_rank, device_rank: the dataset's orders (oldest torch first; the baseline device first), which
    order the builds named and break a tie between devices, so no name does."""
    env_rank, device_rank = env_rank or {}, device_rank or {}
    out = []
    for folder, devices in sources.items():
        for kind in sorted({identities[label].kind for label in devices}):
            here = {label: envs for label, envs in devices.items() if identities[label].kind == kind}
            others = {f: {label: envs for label, envs in d.items() if identities[label].kind == kind}
                      for f, d in sources.items() if f != folder}
            others = {f: d for f, d in others.items() if d}
            there = {label for d in others.values() for label in d}
            if not there or set(here) & there:
                continue
            envs_here = set().union(*here.values())
            missing = tuple(sorted(set().union(*(envs for d in others.values() for envs in d.values())) - envs_here,
                                   key=lambda e: (env_rank.get(e, 1 << 30), e)))
            if not missing:
                continue
            pairs = [(h, t, *identity_difference(identities[h], identities[t])) for h in here for t in there]
            # the pair sharing most, then in the devices' order: one answer whatever the order or the names
            device, nearest, same, differs = min(pairs, key=lambda p: (-len(p[2]), len(p[3]), device_rank.get(p[0], 0),
                                                                       device_rank.get(p[1], 0), p[0], p[1]))
            out.append(Apart(folder, device, tuple(others), nearest, same, differs, missing))
    return out
