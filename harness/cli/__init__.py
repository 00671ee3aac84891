"""The command lines' shared options, one home (as asv's common_args): a command adds them, never defines its own copy.

  run_options.py      the options of the measuring commands (run, batch_search, tune, calibrate, bisect, cluster):
                      flag, type, default and help of each, made into a RunRequest by harness.runner.request
  compare_options.py  the options of harness.compare and harness.report: made into CompareOptions
                      (harness.analysis.options), and the one edge that loads the records or exits with one line

Every command is `python -m harness.NAME`: a module harness/NAME.py, or harness/NAME/__main__.py for a command with
modules of its own; each has make_parser() and main(argv=None) -> int (tests/test_cli_help.py). Every option's type:
harness.argtypes.
"""
