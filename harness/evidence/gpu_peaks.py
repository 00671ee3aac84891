"""Datasheet peak FLOP/s per GPU and dtype, for MFU. No torch.

Dense tensor-core peaks (NVIDIA datasheets print "with sparsity" numbers too; those are twice these and
are never used here). fp32 is the non-tensor-core IEEE rate; tf32/bf16/fp16 are tensor-core rates.
fp16 equals bf16 on every GPU listed. A GPU that is not matched gets no datasheet peak (MFU then uses
the peak measured on the device at the start of the run), rather than a guess.

Sources (NVIDIA datasheets / product pages, dense figures):
  A100 (SXM4 and PCIe, 40 and 80 GB): NVIDIA A100 Tensor Core GPU datasheet
  H100 SXM and H100 PCIe:             NVIDIA H100 Tensor Core GPU datasheet
  H800 SXM:                           same compute as H100 SXM (differs in NVLink / FP64)
  H200 (SXM):                         NVIDIA H200 product page (same tensor-core compute as H100 SXM)
  L4:                                 NVIDIA L4 Tensor Core GPU datasheet
  L40S:                               NVIDIA L40S datasheet
"""

from __future__ import annotations

import re

DTYPES = ("fp32", "tf32", "bf16", "fp16")


def _peaks(fp32: float, tf32: float, bf16: float) -> dict[str, float]:
    return {"fp32": fp32, "tf32": tf32, "bf16": bf16, "fp16": bf16}


PEAKS: dict[str, dict[str, float]] = {
    "A100 SXM": _peaks(19.5e12, 156e12, 312e12),
    "A100 PCIe": _peaks(19.5e12, 156e12, 312e12),
    "H100 SXM": _peaks(67e12, 494.5e12, 989e12),
    "H100 PCIe": _peaks(51e12, 378e12, 756e12),
    "H800 SXM": _peaks(67e12, 494.5e12, 989e12),
    "H200": _peaks(67e12, 494.5e12, 989e12),
    "L4": _peaks(30.3e12, 60e12, 121e12),
    "L40S": _peaks(91.6e12, 183e12, 362e12),
}
SOURCES = {
    "A100 SXM": "NVIDIA A100 datasheet, dense",
    "A100 PCIe": "NVIDIA A100 datasheet, dense",
    "H100 SXM": "NVIDIA H100 datasheet (SXM), dense",
    "H100 PCIe": "NVIDIA H100 datasheet (PCIe), dense",
    "H800 SXM": "H100 SXM figures (NVIDIA: H800 shares H100 SXM compute), dense",
    "H200": "NVIDIA H200 product page (SXM), dense",
    "L4": "NVIDIA L4 datasheet, dense",
    "L40S": "NVIDIA L40S datasheet, dense",
}


def match_gpu(device_name: str | None) -> str | None:
    """Table key for torch's device name ("NVIDIA H100 80GB HBM3" -> "H100 SXM"), or None when unsure.

    Variants with other clocks or power limits (H100 NVL, H200 NVL, H800 PCIe, plain "L40") are left
    unmatched on purpose: their peaks differ and are not in the table."""
    if not device_name:
        return None
    n = device_name.lower()

    def has(model: str) -> bool:  # whole model number: "a100" must not match "RTX A1000"
        return re.search(rf"(?<![a-z0-9]){model}(?![0-9])", n) is not None

    if has("h100"):
        if "nvl" in n:
            return None
        if "pcie" in n or "hbm2e" in n:  # the H100 PCIe card carries HBM2e
            return "H100 PCIe"
        if "sxm" in n or "hbm3" in n:
            return "H100 SXM"
        return None
    if has("h800"):
        return None if ("pcie" in n or "nvl" in n) else "H800 SXM"
    if has("h200"):
        return None if "nvl" in n else "H200"
    if has("a100"):
        if "pcie" in n:
            return "A100 PCIe"
        if "sxm" in n:
            return "A100 SXM"
        return None
    if has("l40s"):
        return "L40S"
    if re.search(r"(?<![a-z0-9])l4(?![0-9a-z])", n):
        return "L4"
    return None


def datasheet_peak(device_name: str | None, dtype: str) -> dict | None:
    """{"gpu", "dtype", "peak_flops", "source"} or None (CPU, or a GPU not in the table)."""
    key = match_gpu(device_name)
    if key is None or dtype not in PEAKS[key]:
        return None
    return {"gpu": key, "dtype": dtype, "peak_flops": PEAKS[key][dtype], "source": SOURCES[key]}
