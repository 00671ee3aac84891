"""explain.libraries: the CUDA math/communication libraries this process actually mapped, with their versions.

/proc/self/maps names the files (two copies of one library in a process is exactly the question); each
file is asked for its own version, beside what torch reports.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import torch

from gpt import torch_compat
from harness.evidence import NOT_ON_CPU, unavailable

LIBRARY_FILES = {  # key -> basename pattern; "-<hash>" covers wheels that bundle renamed copies
    "cublas": re.compile(r"^libcublas(-[0-9a-f]+)?\.so(\.\d+)*\Z"),
    "cublasLt": re.compile(r"^libcublasLt(-[0-9a-f]+)?\.so(\.\d+)*\Z"),
    "cudnn": re.compile(r"^libcudnn(-[0-9a-f]+)?\.so(\.\d+)*\Z"),
    "nccl": re.compile(r"^libnccl(-[0-9a-f]+)?\.so(\.\d+)*\Z"),
}


def parse_mapped_libraries(maps_text: str) -> dict[str, list[str]]:
    """Paths of each library in a /proc/<pid>/maps text, in order of first appearance, without duplicates."""
    found: dict[str, list[str]] = {key: [] for key in LIBRARY_FILES}
    for line in maps_text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        path = parts[5].strip()
        path = path.removesuffix(" (deleted)")
        base = os.path.basename(path)
        for key, pattern in LIBRARY_FILES.items():
            if pattern.match(base) and path not in found[key]:
                found[key].append(path)
    return found


def decode_version(key: str, raw: int | None) -> str | None:
    """Dotted version from a library's integer version."""
    if raw is None:
        return None
    if key == "cudnn" and raw < 90000:  # cuDNN 8: major*1000 + minor*100 + patch (8902); 9+: *10000 (90100)
        return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"
    if key == "nccl" and raw < 10000:  # NCCL before 2.9: major*1000 + minor*100 + patch
        return f"{raw // 1000}.{raw % 1000 // 100}.{raw % 100}"
    return f"{raw // 10000}.{raw % 10000 // 100}.{raw % 100}"  # cuBLAS(Lt) 120103, NCCL 21801, cuDNN 9


def _int_out(path: str, symbol: str, *args) -> int | None:
    """Call `status fn(..., int *out)` in a mapped library; the int when status is 0."""
    try:
        fn = getattr(ctypes.CDLL(path), symbol)
    except (OSError, AttributeError):
        return None
    value = ctypes.c_int()
    status = fn(*args, ctypes.byref(value))
    return int(value.value) if status == 0 else None


def library_version_raw(key: str, path: str) -> int | None:
    if key == "cublasLt":
        return torch_compat.library_version(path, "cublasLtGetVersion")
    if key == "cudnn":
        return torch_compat.library_version(path, "cudnnGetVersion")
    if key == "nccl":
        return _int_out(path, "ncclGetVersion")
    if key == "cublas":  # cublasGetProperty(MAJOR_VERSION=0 / MINOR=1 / PATCH=2, int*): needs no handle
        parts = [_int_out(path, "cublasGetProperty", t) for t in (0, 1, 2)]
        return None if None in parts else parts[0] * 10000 + parts[1] * 100 + parts[2]
    return None


def loaded_libraries(device_type: str, maps_path: str = "/proc/self/maps") -> dict:
    """The CUDA libraries this process mapped, read after the first matmul so torch's copy is the one seen."""
    torch_reports = {
        "cuda": torch.version.cuda,
        "cudnn": decode_version("cudnn", torch_compat.cudnn_version()),
        "nccl": torch_compat.nccl_version(),
    }
    try:
        paths = parse_mapped_libraries(Path(maps_path).read_text())
    except OSError as exc:
        return unavailable(f"cannot read {maps_path}: {exc}", mapped=None, torch_reports=torch_reports)
    mapped: dict[str, dict | None] = {}
    for key, found in paths.items():
        if not found:
            mapped[key] = None
            continue
        versions = [(p, library_version_raw(key, p)) for p in found]
        mapped[key] = {"path": versions[0][0], "version": decode_version(key, versions[0][1]), "version_raw": versions[0][1]}
        if len(versions) > 1:  # two copies in one process: which one served torch is exactly the question
            mapped[key]["also_mapped"] = [{"path": p, "version": decode_version(key, v)} for p, v in versions[1:]]
    disagree = [
        f"{key}: mapped {mapped[key]['version']} but torch reports {torch_reports[key]}"
        for key in ("cudnn", "nccl")
        if mapped.get(key) and mapped[key]["version"] and torch_reports[key] and mapped[key]["version"] != torch_reports[key]
    ]
    if not any(mapped.values()):
        where = NOT_ON_CPU if device_type == "cpu" else "not available"
        return unavailable(
            f"{where}: none of libcublas, libcublasLt, libcudnn, libnccl is mapped in this process "
            f"(torch.version.cuda={torch.version.cuda})",
            mapped=mapped, torch_reports=torch_reports, source=maps_path,
        )
    return {"available": True, "reason": None, "mapped": mapped, "torch_reports": torch_reports,
            "disagreements": disagree, "source": maps_path}
