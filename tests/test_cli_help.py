"""Every command a user types answers --help: `python -m harness.run --help` raised ValueError (a bare '%' in one
option's help, which argparse formats with %) until 2026-11-27. And every option of it says what it does (the help
texts' golden files, which failed on every rewording, are replaced by this rule)."""

import importlib

import pytest

COMMANDS = ("harness.run", "harness.compare", "harness.report.__main__", "harness.bisect.__main__", "harness.tune",
            "harness.batch_search", "harness.calibrate", "harness.gpu_check.__main__", "harness.cluster.__main__",
            "harness.docker")


@pytest.mark.parametrize("module", COMMANDS)
def test_every_command_prints_its_help(module, capsys):
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(["--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def _parser(module: str):
    mod = importlib.import_module(module)
    for name in ("make_parser", "parser", "build_parser"):
        if callable(getattr(mod, name, None)):
            return getattr(mod, name)()
    return None


@pytest.mark.parametrize("module", COMMANDS)
def test_every_option_says_what_it_does_and_the_help_shows_it(module, capsys):
    parser = _parser(module)
    if parser is None:
        pytest.skip(f"{module} builds its parser inside main")
    actions = [a for p in [parser, *_subparsers(parser)] for a in p._actions if a.option_strings and a.dest != "help"]
    assert actions, module
    silent = [a.option_strings[-1] for a in actions if not (a.help or "").strip()]
    assert not silent, f"{module}: options without a help text: {silent}"
    text = "".join(p.format_help() for p in [parser, *_subparsers(parser)])
    assert all(a.option_strings[-1] in text for a in actions if a.help != "==SUPPRESS==")


def _subparsers(parser) -> list:
    """Every subcommand's parser, nested ones too (harness.cluster slurm submit)."""
    subs = [sub for a in parser._actions if a.__class__.__name__ == "_SubParsersAction" for sub in a.choices.values()]
    return [deep for sub in subs for deep in [sub, *_subparsers(sub)]]
