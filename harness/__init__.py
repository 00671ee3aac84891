"""Runs the gpt/ workload, one worker process per measurement; captures, records, compares, reports.

Modules that only read results (record, compare, report) never import torch.
"""
