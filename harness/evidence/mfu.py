"""explain.mfu and summary.mfu: model FLOPs utilisation, the nanoGPT estimate beside the parameter count.

FLOPs per token come from the model (gpt/models.py: exact for GPT-2's shapes, approximate for a user's model); the peaks from the datasheet table
(harness/evidence/gpu_peaks.py) and from the GEMM calibration (calibration.py).
"""

from __future__ import annotations

import torch

from harness.evidence import NOT_ON_CPU, gpu_peaks

MFU_FORMULA = "flops_per_token = 6*N + 12*n_layer*n_head*head_dim*seq_len (nanoGPT estimate_mfu, PaLM appendix B)"
N_DEFINITION = ("all parameters except the position embedding wpe; the token embedding is tied to lm_head and "
                "counted once (nanoGPT's non-embedding N)")
# A user's model (gpt/models.py UserModel): its shapes are its own, so N is every parameter and the attention term
# the configured shape's: the FLOPs, and so the MFU, are approximate
APPROXIMATE = ("approximate: a user's model; N = all its parameters, the attention term from the configured n_layer, "
               "n_head, n_embd and seq_len")


def model_flops_utilisation(model, tokens_per_s: float | None, device: torch.device, run_dtype: str, measured: dict | None) -> dict:
    """Model FLOPs utilisation against the datasheet peak (when the GPU is in the table) and the measured one."""
    flops_per_token = model.flops_per_token()
    achieved = flops_per_token * tokens_per_s if tokens_per_s else None
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else None
    datasheet = gpu_peaks.datasheet_peak(device_name, run_dtype) if device_name else None
    measured_peak = None
    if measured and measured.get("available"):
        measured_peak = {k: measured.get(k) for k in ("dtype", "flops", "method", "n", "sizes")}
    if device.type == "cuda":
        datasheet_reason = None if datasheet else f"{device_name!r} is not in harness/evidence/gpu_peaks.py"
    else:
        datasheet_reason = f"{NOT_ON_CPU}: no datasheet peak for CPUs"
    result = {
        "available": achieved is not None and (datasheet is not None or measured_peak is not None),
        "reason": None,
        "formula": MFU_FORMULA,
        "n_params": model.num_params(),
        "n_params_definition": N_DEFINITION if getattr(model, "flops_exact", True) else APPROXIMATE,
        "flops_exact": getattr(model, "flops_exact", True),
        "flops_per_token": flops_per_token,
        "tokens_per_s": tokens_per_s,
        "achieved_flops": achieved,
        "dtype": run_dtype,
        "device_name": device_name,
        "datasheet": datasheet,
        "datasheet_reason": datasheet_reason,
        "mfu_datasheet": achieved / datasheet["peak_flops"] if (achieved and datasheet) else None,
        "measured_peak": measured_peak,
        "measured_peak_reason": None if measured_peak else (measured or {}).get("reason", "not calibrated"),
        "mfu_measured": achieved / measured_peak["flops"] if (achieved and measured_peak) else None,
    }
    if not result["available"]:
        result["reason"] = "no throughput" if achieved is None else "neither a datasheet nor a measured peak"
    return result


def summary_mfu(mfu_part: dict | None) -> float | None:
    if not mfu_part:
        return None
    return mfu_part.get("mfu_datasheet") if mfu_part.get("mfu_datasheet") is not None else mfu_part.get("mfu_measured")
