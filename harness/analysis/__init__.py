"""Comparing run records, apart from how the results are shown (no torch import: runs where only the results are).

  dataset.py   read records (Filters, load) into comparable groups (Dataset); the one comparability rule, RecordView.set_key (harness/record/view.py)
  group.py     Group: one (workload, flags, env, device) cell with its repeats merged; the record accessors it uses
  differ.py    what sets two groups apart (knob fields, flags) and the natural order of knob values
  cells.py     the values a table row holds (Cell = a stats.Delta with its style, Mfu), Table, number formats
  context.py   Compare: a dataset with its baselines and noise floor, the context every table builder reads
  tables/      the table builders by theme: ladder, cross (versions, GPUs), knobs (and factors), underneath (kernels,
               libraries), loss, reference, sweeps (and left-out)

Rendering (text, markdown, CSV, JSON) is harness.render; the command line is harness.compare; the significance rule
is harness.stats.
"""
