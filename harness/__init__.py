"""Runs the gpt/ workload, one worker process per measurement; captures, records, compares, reports.

The commands (`python -m harness.NAME`; the records' rerun commands name them too):

  run, batch_search, tune, calibrate   measure: a plan, the largest batch that fits, the fastest configuration, the noise
  compare                              the verdict and tables from records (report/: the same as a document)
  docker                               the env images: render, check, build, run (envs/: the env specs' own CLI)
  bisect/, cluster/, gpu_check/        which release changed it; Slurm and Kubernetes; one prepared GPU call
  worker, lifeline, image_entry        entry points the commands start: one measurement; tied to its runner; an image's
  argtypes                             the types of every command's options

Each command is harness/NAME.py, or harness/NAME/__main__.py for one with modules of its own, and has make_parser()
and main(argv=None) -> int; the options commands share are defined once, in cli/ (tests/test_cli_help.py).

The packages under them:

  cli/         the command lines' shared options: the measuring commands', and compare's and report's
  runner/      what to measure and one worker process per point (request, plan, flags, launcher, progress)
  evidence/    why a number is what it is, gathered in the worker (kernels, memory, power, MFU, libraries)
  provenance/  where, under what load and by what code a run was measured (envinfo, nvml, contention, workload_code)
  record/      the record: its schema, model, typed view, validation, and every write in a results folder
  store/       the record index kept beside a folder's records (.harness-index/), so a warm compare reads nothing twice
  analysis/    comparing records: groups, the noise rule, typed results, the users' questions answered
  console/     a command's edges: compare's renderings, safe text, output that may fail, stop signals, bounded YAML
  envs/        the env specs (envs/<name>/env.yaml), installs, pins, the Dockerfiles rendered from them

Modules that only read results (record, analysis, console, report, compare) never import torch (tests/test_no_torch.py).
"""
