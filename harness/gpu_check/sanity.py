"""The CUDA sanity check (`python -m harness.gpu_check.sanity`): torch sees a GPU and multiplies on it.

Prints what it found, and last one line `gpu_check sanity: {json}` (gpu name, torch, CUDA, cuDNN, driver) that
harness.gpu_check reads. Exit 3 with one line when there is nothing to check (no torch, no CUDA device).
This is the one file of harness.gpu_check that imports torch, and only when run as a program.
"""

from __future__ import annotations

import json
import sys

PREFIX = "gpu_check sanity: "


def main() -> int:
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - an ImportError or a broken install (a missing CUDA library): one line
        print(f"gpu_check: {sys.executable} cannot import torch ({type(exc).__name__}: {exc})")
        return 3
    if not torch.cuda.is_available():
        print(f"gpu_check: no CUDA device: torch {torch.__version__} (CUDA build {torch.version.cuda}) in "
              f"{sys.executable} sees none")
        return 3
    print(f"python {sys.version.split()[0]} ({sys.executable})")
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.device_count()} device(s) visible")
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"  cuda:{i} {p.name}, capability {p.major}.{p.minor}, {p.multi_processor_count} SMs, "
              f"{p.total_memory / 2**30:.1f} GiB")
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    c = (a @ a).float()
    torch.cuda.synchronize()
    finite = bool(torch.isfinite(c).all())
    print(f"bf16 matmul on cuda:0: mean |x| {float(c.abs().mean()):.3f}, finite: {finite}")
    driver = None
    try:
        import pynvml

        pynvml.nvmlInit()
        driver = pynvml.nvmlSystemGetDriverVersion()
        print(f"NVML ok, driver {driver}")
    except Exception as exc:  # noqa: BLE001 - no pynvml, no driver library, NVML errors: a warning, not a failure
        print(f"warning: NVML unavailable ({type(exc).__name__}: {exc}): explain.power and explain.memory_split will "
              "not be available (pip install nvidia-ml-py), and the explain check will fail")
    import harness.run  # noqa: F401  (the harness imports with this interpreter)

    found = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
             "cudnn": torch.backends.cudnn.version(), "driver": driver, "python": sys.version.split()[0]}
    print(PREFIX + json.dumps(found))
    return 0 if finite else 1


def parse(output: str) -> dict | None:
    """The sanity's findings from its output (its last PREFIX line), or None."""
    lines = [line for line in output.splitlines() if line.startswith(PREFIX)]
    return json.loads(lines[-1][len(PREFIX):]) if lines else None


if __name__ == "__main__":
    sys.exit(main())
