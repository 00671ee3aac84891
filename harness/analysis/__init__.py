"""Comparing run records, apart from how the results are shown (no torch import: runs where only the results are).

Records are read through harness.record.view.RecordView only (tests/test_record_boundary.py): every per-record rule
(peak memory, tokens/s, the device label, the kernel profile) is written once, there.

  options.py   CompareOptions (what harness.compare and harness.report are asked, as keyword arguments) and analyse
  dataset.py   read records (Filters, load) into comparable groups (Dataset); the one comparability rule, RecordView.set_key
  group.py     Group: one (workload, flags, env, device) cell of RecordViews, its repeats merged; estimate()
  differ.py    what sets two groups apart (knob fields, flags) and the natural order of knob values
  cells.py     the values a table row holds (Cell = a stats.Delta with its style, Mfu), Table, number formats
  context.py   Compare: a dataset with its baselines and noise floor, and the memo of the typed results
  tables/      one module per theme: its typed result (ladder.Ladder, cross.Cross, knobs.Split, loss.ParityRow, ...)
               computed once per Compare, and the Table(s) built from it; tables/registry.py names them (TABLES)

  stats.py     the significance rule: cell estimates, closed-form intervals, verdicts (student.py: the t quantile)
  noise_model.py   what stats judges by: run-to-run and between-invocation spreads, a device's (noise.py fits it)
  cell_values.py   a cell's value and Estimate from its runs: tokens/s (median, rate), per-run counters (memory)
  fit.py       whether a run fits its device (peak + headroom <= usable): the batch search's rule, read by all
  fastest.py   the fastest loss-equivalent run found per device (beyond-ladder, harness.tune): Search, Overview
  questions.py each user question's result (TF32 memory, vocab padding, torch builds, batch size), computed once;
               fastest.py is the fastest run's and MFU's
  findings.py  findings worded from the typed results, each citing its run ids (the report's appendix)
  answers.py   the users' questions answered from the same results (answers_batch.py, answer_types.py), and the
               key findings
  series.py    what the report's charts draw: bars, points with their stats.interval, lines
  knob_pairs.py, kernel_split.py   the one-knob pairs findings use; the kernel-time split fastest shows

Rendering (text, markdown, CSV, JSON) is harness.console (render, verdict_text, csv_json); the report is harness.report; the command line is
harness.compare. Nothing here imports a command line (tests/test_layers.py).
"""
