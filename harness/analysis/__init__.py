"""Comparing run records, apart from how the results are shown (no torch import: runs where only the results are).

  dataset.py   read records (Filters, load) into comparable groups (Dataset); the one comparability rule, RecordView.set_key (harness/record/view.py)
  group.py     Group: one (workload, flags, env, device) cell with its repeats merged; the record accessors it uses
  differ.py    what sets two groups apart (knob fields, flags) and the natural order of knob values
  cells.py     the values a table row holds (Cell = a stats.Delta with its style, Mfu), Table, number formats
  context.py   Compare: a dataset with its baselines and noise floor, the context every table builder reads
  tables/      the table builders by theme: ladder, cross (versions, GPUs), knobs (and factors), underneath (kernels,
               libraries), loss, reference, sweeps (and left-out)

  stats.py     the significance rule: throughput estimates, bootstrap intervals, ranges, verdicts
  fastest.py   the fastest loss-equivalent run found per device (beyond-ladder, harness.tune) and its tables
  findings.py  findings computed from the tables, each citing its run ids (the report's section 1)
  knob_pairs.py, kernel_split.py   the one-knob pairs findings use; the kernel-time split fastest shows

Rendering (text, markdown, CSV, JSON) is harness.render; the report is harness.report; the command line is
harness.compare.
"""
