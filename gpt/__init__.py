"""The GPT-2 training workload: model, data and one training step.

Nothing here imports from `harness`; the harness runs this, the workload does not know it is measured.
"""
