"""The runner library: what to measure, and one fresh worker process per measurement (pyperf's runner/worker split).
The commands harness.run, harness.batch_search, harness.tune, harness.calibrate and harness.bisect are built on it.

  request.py      RunRequest: the typed request behind the commands, and the points (rung x repeat x sweep) it expands to
  plan.py         plans are data: harness/plans/*.yaml, each rung a set of workload fields and flag overrides
  flags.py        the frozen global performance flags: applied once before the model is built, read back every step
  worker_spec.py  WorkerSpec: what crosses the process boundary from the launcher to one worker, typed
  launcher.py     one worker process (and its process group) per point, its progress relayed, its record returned
  progress.py     what the runner prints while a worker runs, and the summary when it ends or is stopped

No torch import: the worker (harness.worker, its own process) is the only place torch runs.
"""
