"""The options the measuring commands share (harness.run, batch_search, tune, calibrate, bisect, cluster): flag,
type, default and help, defined once; a command adds one with add_option(parser, name) and may word its help for its
own use. What they become: harness.runner.request.RunRequest.from_args. No torch import.
"""

from __future__ import annotations

import argparse
import os

from gpt.config import PRESETS
from harness import argtypes
from harness.runner.plan import builtin_plans
from harness.runner.request import DEFAULT_OUT, DEFAULT_TIMEOUT_S

# name -> (flags, argparse keywords); a CLI may word a help text for its own use (`help=`), the rest is the same everywhere
OPTIONS: dict[str, tuple[tuple[str, ...], dict]] = {
    "plan": (("--plan",), {"default": "seed-ladder", "type": argtypes.path_text, "help": f"built-in plan ({', '.join(builtin_plans())}) or a .yaml path"}),
    "preset": (("--preset",), {"default": "tiny", "choices": sorted(PRESETS), "help": "model shape (default: tiny)"}),
    "out": (("--out",), {"default": DEFAULT_OUT, "type": argtypes.path_text, "help": f"directory for the records (default: {DEFAULT_OUT}/)"}),
    "env": (("--env",), {"help": "env name the records belong to (default: $HARNESS_ENV or local)"}),
    "set": (("--set",), {"action": "append", "metavar": "FIELD=VALUE", "help": "override a workload field (repeatable)"}),
    "flag": (("--flag",), {"action": "append", "metavar": "NAME=VALUE", "help": "override a frozen flag (repeatable)"}),
    "steps": (("--steps",), {"type": argtypes.steps, "help": "steps per run (default: the preset's)"}),
    "warmup_steps": (("--warmup-steps",), {"dest": "warmup_steps", "type": argtypes.warmup_steps, "help": "warm-up steps excluded from the summary"}),
    "batch_size": (("--batch-size",), {"dest": "batch_size", "type": argtypes.batch_size, "help": "B (shorthand for --set batch_size=N)"}),
    "seq_len": (("--seq-len",), {"dest": "seq_len", "type": argtypes.seq_len, "help": "T (shorthand for --set seq_len=N)"}),
    "model": (("--model",), {"metavar": "MODEL", "help": "the model trained: ours (default: this project's GPT-2), "
                             "transformers (Hugging Face's GPT2LMHeadModel) or package.module:function (your own, "
                             "docs/quickstart.md); shorthand for --set model=MODEL"}),
    "device": (("--device",), {"choices": ["auto", "cpu", "cuda"], "help": "device (default: cuda if available, else cpu)"}),
    "timeout": (("--timeout",), {"type": argtypes.seconds, "default": DEFAULT_TIMEOUT_S, "help": "seconds per run before its worker is killed"}),
    "threads": (("--threads",), {"type": argtypes.threads, "help": "torch threads in each worker (default and most: the CPUs this process may "
                                           "use; more would time-slice each other and time the scheduler)"}),
}


def add_option(parser: argparse.ArgumentParser, name: str, **overrides) -> None:
    """Add one of the shared OPTIONS to a CLI's parser (`overrides`: its own help wording or default)."""
    flags, spec = OPTIONS[name]
    if name == "env":  # read when the parser is made, not when this module is imported
        spec = dict(spec, default=os.environ.get("HARNESS_ENV", "local"))
    parser.add_argument(*flags, **{**spec, **overrides})
