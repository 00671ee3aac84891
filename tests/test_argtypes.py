"""harness.argtypes, the one set of option types: every command's numeric options refuse NaN, inf, -1, '' and huge
values, and its path options an empty path, as argparse's usage error (exit 2) naming the option, before anything
runs. Every parser of every command is walked, so an option added with a bare int, float or Path fails here."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from module_cli import ROOT

from harness import argtypes, batch_search, calibrate, compare, docker, run, tune
from harness.bisect import __main__ as bisect_main
from harness.cluster import __main__ as cluster_main
from harness.envs import __main__ as envs_main
from harness.gpu_check import __main__ as gpu_check_main
from harness.report import __main__ as report_main

PARSERS = {
    "harness.run": run.make_parser, "harness.compare": compare.make_parser, "harness.report": report_main.make_parser,
    "harness.tune": tune.make_parser, "harness.batch_search": batch_search.make_parser,
    "harness.calibrate": calibrate.make_parser, "harness.bisect": bisect_main.make_parser,
    "harness.gpu_check": gpu_check_main.make_parser, "harness.gpu_check unpack": gpu_check_main.make_unpack_parser,
    "harness.cluster": cluster_main.make_parser, "harness.docker": docker.make_parser, "harness.envs": envs_main.make_parser,
}
TYPES = {value for value in vars(argtypes).values() if callable(value) and getattr(value, "__module__", "") == argtypes.__name__}
PATHS = (argtypes.path_text, argtypes.path_arg)
BAD_NUMBERS = ["nan", "NaN", "inf", "-inf", "-1", "", "abc", "1e400", "9" * 5000, "1e300"]
# dests that name a file or folder: each must be a path type, so '' is refused instead of meaning '.'
PATH_DESTS = {"out", "paths", "path", "dir", "results", "into", "index", "venv", "project", "archive", "records",
              "pack_to", "export_parquet", "venvs", "find_links", "cluster_config", "o", "output"}


def _options():
    """(command, argv prefix that reaches the parser, action) for every action of every parser and subparser."""
    def walk(name, parser, prefix):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    yield from walk(f"{name} {sub_name}", sub, [*prefix, sub_name])
            elif action.nargs != 0 and not isinstance(action, argparse._HelpAction):
                yield name, prefix, action
    for name, make in PARSERS.items():
        yield from walk(name, make(), [])


OPTIONS = list(_options())
NUMERIC = [o for o in OPTIONS if o[2].type in TYPES and o[2].type not in PATHS]
PATH_OPTIONS = [o for o in OPTIONS if o[2].type in PATHS]


def _ids(options) -> list[str]:
    return [f"{name} {action.option_strings[0] if action.option_strings else action.dest}" for name, _p, action in options]


def _parser(command: str) -> argparse.ArgumentParser:
    """A fresh parser of the command an option belongs to (its subcommands reached through the option's prefix)."""
    return PARSERS[max((k for k in PARSERS if command == k or command.startswith(k + " ")), key=len)]()


def test_no_option_takes_a_bare_int_float_or_path():
    bare = [f"{name} {a.option_strings or a.dest}" for name, _p, a in OPTIONS if a.type in (int, float, Path, str)]
    assert bare == []


def test_every_option_that_names_a_file_or_folder_refuses_an_empty_path():
    untyped = [f"{name} {a.option_strings or a.dest}" for name, _p, a in OPTIONS
               if a.dest in PATH_DESTS and a.type not in PATHS and not a.choices]
    assert untyped == []


@pytest.mark.parametrize("command, prefix, action", NUMERIC, ids=_ids(NUMERIC))
def test_every_numeric_option_refuses_nan_inf_negative_empty_and_huge(command, prefix, action, capsys):
    parser = _parser(command)
    flag = action.option_strings[0] if action.option_strings else None
    for bad in BAD_NUMBERS:
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([*prefix, f"{flag}={bad}"] if flag else [*prefix, bad])  # '-1' as a value, not a flag
        assert exc.value.code == 2, (command, flag, bad)
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert "expected a" in last and (flag is None or flag in last), (command, flag, bad, last)


@pytest.mark.parametrize("command, prefix, action", PATH_OPTIONS, ids=_ids(PATH_OPTIONS))
def test_every_path_option_refuses_an_empty_path(command, prefix, action, capsys):
    parser = _parser(command)
    flag = action.option_strings[0] if action.option_strings else None
    for bad in ("", "  "):
        with pytest.raises(SystemExit) as exc:
            parser.parse_args([*prefix, flag, bad] if flag else [*prefix, bad])
        assert exc.value.code == 2
        assert "an empty path" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("make, good, bad", [
    (argtypes.number(0, 1, high_open=True), ["0", "0.5", "0.999"], ["1", "-0.0001"]),
    (argtypes.number(0, 10, low_open=True), ["1e-9", "10"], ["0", "10.0001"]),
    (argtypes.whole(1, 5), ["1", "5", " 3 ", "+2"], ["0", "6", "2.0", "1e0", "0x2", "٣"]),
])
def test_bounds_are_exact(make, good, bad):
    for text in good:
        make(text)
    for text in bad:
        with pytest.raises(argparse.ArgumentTypeError, match="expected a"):
            make(text)


def test_no_script_declares_a_bare_int_float_or_path_either():
    """The scripts' parsers are built inside their main(): read as text, as are harness's, so none slips past."""
    root = Path(__file__).resolve().parent.parent
    bare = re.compile(r"\btype=(int|float|Path|str)\b")
    found = [f"{p.relative_to(root)}:{n}" for p in sorted([*root.glob("scripts/*.py"), *root.glob("harness/**/*.py")])
             for n, line in enumerate(p.read_text().splitlines(), 1) if bare.search(line)]
    assert found == []


def test_options_made_in_code_follow_the_command_lines_rule():
    from harness.analysis.options import CompareOptions, UsageError

    for bad in ({"noise_floor": float("nan")}, {"noise_floor": 1.0}, {"loss_tol": float("nan")}, {"loss_tol": 0.0},
                {"loss_tol": float("inf")}):
        with pytest.raises(UsageError, match="expected a finite fraction"):
            CompareOptions(paths=("results",), **bad).check()
    CompareOptions(paths=("results",), noise_floor=0.0, loss_tol=1.0).check()


# Hostile input (issues 22 and 31), beside this module's other tests since issue 51: a docstring's leading number
# is an item of issue 22, its class one of issue 31.


@pytest.mark.parametrize("args", [
    ["harness.report", "results/cpu-amd-epyc-2core", "-o", ""], ["harness.compare", ""], ["harness.run", "--out", ""],
    ["harness.run", "--plan", ""], ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--out", ""],
    ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--venvs", " "],
    ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--find-links", ""],
    ["harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--results", ""],
    ["harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--cluster-config", ""],
    ["harness.cluster", "k8s", "render", "--envs", "latest", "--gpus", "a100", "-o", ""],
    ["harness.docker", "run", "latest", "--results", ""]])
def test_an_empty_path_is_bad_input(tmp_path, args):
    """Class 13 of issue 31: every path option given '' (or blanks): exit 2, one line, nothing written (an empty -o
    wrote the report into the current folder)."""
    p = subprocess.run([sys.executable, "-m", *args], check=False, cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 2 and "an empty path" in p.stderr.strip().splitlines()[-1], p.stderr[-300:]
    assert not list(tmp_path.iterdir())

