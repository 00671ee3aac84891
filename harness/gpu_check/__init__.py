"""One budgeted GPU call: `python -m harness.gpu_check` (or `GPU_CHECK_STEPS=quick bash scripts/gpu_check.sh`).

The CUDA sanity check, then single runs in order of value (plan.py) while a time budget lasts: a run starts only
when its estimate (estimate.py: the committed records of this GPU, scaled by this call's runs) fits before the
budget less the closing reserve (budget.py); then harness.compare and harness.report on what exists; everything
packed into three files (pack.py), and `python -m harness.gpu_check unpack ARCHIVE` puts it into
results/gpu-<device>-<date>/ (its summary checked field by field first: archive_summary.py). docs/gpu-check.md says
why each choice was made and what it costs.
"""
