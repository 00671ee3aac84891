"""Environment capture, from inside the running worker process: what actually ran, not what was asked.

No secrets and no GPU UUIDs: environment variables come from an allow-list, and GPU identity is
name / capability / SM count / memory only.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from harness.provenance import nvml
from harness.provenance.hardware_id import hashed_id
from harness.record.model import source_digest

# Variables that change what a run does, recorded by exact name (these always pass)...
ENV_VARS = (
    "HARNESS_ENV", "HARNESS_IMAGE", "HARNESS_IMAGE_DIGEST", "CUBLAS_WORKSPACE_CONFIG", "CUBLASLT_WORKSPACE_SIZE",
    "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "TORCH_CUDNN_SDPA_ENABLED", "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "CUDA_LAUNCH_BLOCKING", "CUDA_MODULE_LOADING", "CUDA_DEVICE_MAX_CONNECTIONS",
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TORCH_LOGS", "TIKTOKEN_CACHE_DIR", "LD_LIBRARY_PATH", "CUDA_HOME",
)
# ...and by prefix (the compiler stack's knobs), unless the name says it holds a secret.
ENV_PREFIXES = ("TORCHINDUCTOR_", "TORCH_COMPILE_", "TORCHDYNAMO_", "TRITON_")
SECRET_WORDS = re.compile(r"PASS|PWD|SECRET|AUTH|KEY|TOKEN|CREDENTIAL|PRIVATE|COOKIE", re.IGNORECASE)
# A recorded value may still carry a secret in it: user:password@ in a URL (redis://u:pw@h, postgres://u:pw@h/db),
# or password=... in a key-value DSN. Records travel; what they carry of these is "***".
URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s]+@")
DSN_PASSWORD = re.compile(r"(?P<key>\b(?:password|passwd|pwd|secret|token)\s*=\s*)(?:'[^']*'|\"[^\"]*\"|[^\s;&]+)",
                          re.IGNORECASE)


def scrub(value: str) -> str:
    """`value` without the credentials a URL or a DSN holds (user:password@ -> ***@, password=... -> password=***)."""
    return DSN_PASSWORD.sub(r"\g<key>***", URL_CREDENTIALS.sub(r"\g<scheme>***@", value))


def env_vars(environ=None) -> dict:
    """The allow-listed environment: ENV_VARS by exact name, ENV_PREFIXES names without a SECRET_WORDS word; every
    value scrubbed of URL and DSN credentials."""
    environ = os.environ if environ is None else environ
    return {k: scrub(v) for k, v in sorted(environ.items())
            if k in ENV_VARS or (k.startswith(ENV_PREFIXES) and not SECRET_WORDS.search(k))}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The CPU features that decide how fast each precision runs (x86 /proc/cpuinfo "flags", aarch64 "Features"):
# the vector width fp32 gets, and whether bf16/fp16 have native instructions or run emulated (bf16 on a CPU
# without avx512_bf16/amx_bf16 is converted in software, tens of times slower).
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",  # x86
             "asimd", "asimdhp", "bf16", "i8mm", "sve", "sve2", "svebf16")  # aarch64


def cpu_isa(cpuinfo: str | None = None) -> dict | None:
    """{flag: present} for every ISA_FLAGS entry of the CPU's architecture, from /proc/cpuinfo; None where it
    cannot be read (not Linux). Absent flags are recorded as false, so two records say what one CPU lacks."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() in ("flags", "Features"):
            present = set(value.split())
            arm = key.strip() == "Features"
            names = ISA_FLAGS[ISA_FLAGS.index("asimd"):] if arm else ISA_FLAGS[:ISA_FLAGS.index("asimd")]
            return {name: name in present for name in names}
    return None


MACHINE_ID_SOURCES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
MACHINE_ID_APP = b"gpt-harness machine id v1"  # the id is an HMAC of the raw id with this, as systemd's app-specific ids


def machine_id(sources=MACHINE_ID_SOURCES, environ=None) -> dict:
    """A stable, non-identifying id of the machine, so records of two machines never pass for repeats of one:
    HMAC-SHA256(raw id, MACHINE_ID_APP), 12 hex digits; never the raw id. The raw id: HARNESS_MACHINE_ID (set it
    to the host's value in containers, whose /etc/machine-id is the image's, or to name a machine yourself),
    else /etc/machine-id (systemd), else the D-Bus copy. None where there is none (then the label shows none)."""
    environ = os.environ if environ is None else environ
    candidates = [("HARNESS_MACHINE_ID", environ.get("HARNESS_MACHINE_ID"))]
    for path in sources:
        try:
            candidates.append((path, Path(path).read_text().strip()))
        except OSError:
            continue
    for source, raw in candidates:
        if raw and raw.strip():
            return {"id": hashed_id(raw, MACHINE_ID_APP), "source": source}
    return {"id": None, "source": None}


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's cpuset), else all."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def host_ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def installed_packages() -> dict:
    """`pip freeze` equivalent read from the interpreter's metadata (works in uv venvs with no pip)."""
    names = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions() if d.metadata["Name"]}, key=str.lower)
    return {"sha256": hashlib.sha256("\n".join(names).encode()).hexdigest(), "packages": names}


def package_version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


CODE_DIRS = ("gpt", "harness")  # the code that makes a measurement what it is
CODE_SUFFIXES = (".py", ".json", ".yaml")


def source_sha256() -> tuple[str, int]:
    """A sha256 over the gpt/ and harness/ sources (relative path and content of each, in order), which holds
    wherever the code sits (a checkout, a copy, an installed package), and how many files it covers."""
    root = Path(__file__).resolve().parents[2]
    files = sorted(p for d in CODE_DIRS for p in (root / d).rglob("*")
                   if p.is_file() and p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts)
    return source_digest((path.relative_to(root).as_posix(), path.read_bytes()) for path in files).hexdigest(), len(files)


def code_identity() -> dict:
    """What code measured: source_sha256, plus the git commit only when the repository around the code is the
    project's own (a copy inside another checkout would otherwise report that checkout's commit)."""
    root = Path(__file__).resolve().parents[2]
    sha256, count = source_sha256()
    identity = {"source_sha256": sha256, "source_files": count, "commit": None, "dirty": None}
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "HEAD"], check=False,
                             capture_output=True, text=True, timeout=5)
        lines = top.stdout.split()
        if top.returncode or len(lines) != 2 or Path(lines[0]).resolve() != root:
            identity["commit_note"] = "no git commit: the code is not at the root of its own git checkout"
            return identity
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--", *CODE_DIRS],
                               check=False, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        identity["commit_note"] = "no git commit: git is not available"
        return identity
    identity.update(commit=lines[1], dirty=bool(dirty.stdout.strip()))
    return identity


def device_used_bytes(device) -> int | None:
    """Device-level used memory (all processes, CUDA context included) of this torch device, via NVML."""
    return nvml.device_used_bytes(nvml.torch_device_index(device))


def torch_source(prefix: str | None = None) -> dict | None:
    """Which wheel file this interpreter's torch was installed from, when harness.envs installed it from a wheel
    folder (harness.envs.install.TORCH_SOURCE_FILE in the venv: folder, file, sha256, where its dependencies came
    from); None for a torch from an index."""
    import json

    from harness.envs.install import TORCH_SOURCE_FILE

    try:
        source = json.loads((Path(prefix or sys.prefix) / TORCH_SOURCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return {k: source.get(k) for k in ("folder", "file", "sha256", "dependencies")} if isinstance(source, dict) else None


def capture(env_name: str, device) -> dict:
    import torch

    from gpt import torch_compat

    device_type = device.type
    build = torch_compat.build_version_fields()
    gpu = None
    if device_type == "cuda":
        props = torch.cuda.get_device_properties(device)
        gpu = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "sm_count": props.multi_processor_count,
            "memory_bytes": props.total_memory,
            "l2_cache_bytes": torch_compat.l2_cache_bytes(props),
            "count_visible": torch.cuda.device_count(),
        }
    return {
        "env_name": env_name,
        "device": device_type,
        "python": {"version": platform.python_version(), "implementation": platform.python_implementation(), "executable": sys.executable},
        "os": {"platform": platform.platform(), "kernel": platform.release()},
        "cpu": {"model": cpu_model(), "count": os.cpu_count(), "usable": usable_cpus(), "isa": cpu_isa(),
                "torch_capability": torch_compat.cpu_capability()},
        "machine": machine_id(),
        "host_ram_bytes": host_ram_bytes(),
        "torch": {
            "version": torch.__version__,
            "git": build["git"],
            "cuda": torch.version.cuda,
            "cuda_compiled": torch_compat.cuda_compiled_version(),
            "hip": build["hip"],
            "debug": build["debug"],
            "cudnn": torch_compat.cudnn_version(),
            "nccl": torch_compat.nccl_version(),
            "num_threads": torch.get_num_threads(),
        },
        "triton": package_version("triton", "pytorch-triton"),
        "driver": {"cuda_driver_api": torch_compat.driver_version(),
                   "nvml": nvml.driver_facts(nvml.torch_device_index(device)) if device_type == "cuda" else None},
        "gpu": gpu,
        # the env images set HARNESS_IMAGE, _REVISION and _BASE (a local stand-in base says so); the digest comes
        # from outside (harness.docker run, or docker run -e): an image cannot know its own id
        "container": {"image": os.environ.get("HARNESS_IMAGE"), "digest": os.environ.get("HARNESS_IMAGE_DIGEST"),
                      "revision": os.environ.get("HARNESS_IMAGE_REVISION"),
                      "base": os.environ.get("HARNESS_BASE_IMAGE")},
        "harness": code_identity(),
        **({"torch_source": source} if (source := torch_source()) else {}),  # only for a torch from a wheel folder
        "packages": installed_packages(),
        "env_vars": env_vars(),
    }
