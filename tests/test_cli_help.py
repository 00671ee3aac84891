"""Every command a user types answers --help: `python -m harness.run --help` raised ValueError (a bare '%' in one
option's help, which argparse formats with %) until 2026-11-27. And every option of it says what it does (the help
texts' golden files, which failed on every rewording, are replaced by this rule)."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INTERNAL = {"harness.worker", "harness.lifeline", "harness.image_entry"}  # started by the commands, never typed


def _commands() -> list[str]:
    """Every `python -m harness.NAME` a user types: a module harness/NAME.py that runs as a program, or a package's
    harness/NAME/__main__.py (harness/__init__.py)."""
    top = [f"harness.{p.stem}" for p in sorted((ROOT / "harness").glob("*.py")) if 'if __name__ == "__main__"' in p.read_text()]
    packages = [f"harness.{p.parent.name}.__main__" for p in sorted((ROOT / "harness").glob("*/__main__.py"))]
    return [c for c in top + packages if c not in INTERNAL]


COMMANDS = tuple(_commands())


def test_the_commands_are_found():
    """The discovery above finds the commands the README and docs name (else the tests below could check nothing)."""
    for name in ("harness.run", "harness.compare", "harness.report.__main__", "harness.bisect.__main__", "harness.tune",
                 "harness.batch_search", "harness.calibrate", "harness.gpu_check.__main__", "harness.cluster.__main__",
                 "harness.docker", "harness.envs.__main__"):
        assert name in COMMANDS


@pytest.mark.parametrize("module", COMMANDS)
def test_every_command_has_the_one_convention(module):
    """make_parser() builds its parser and main(argv=None) runs it; the options it shares with other commands come from
    harness.cli, so no command imports another command's module for them."""
    mod = importlib.import_module(module)
    assert callable(getattr(mod, "make_parser", None)), f"{module}: no make_parser()"
    params = list(inspect.signature(mod.main).parameters.values())
    assert [p.name for p in params] == ["argv"] and params[0].default is None, f"{module}: main{inspect.signature(mod.main)}"
    tree = ast.parse(Path(mod.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module} | \
               {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    others = {c.removesuffix(".__main__") for c in COMMANDS} - {module.removesuffix(".__main__")}
    assert not imported & (others | {c for c in COMMANDS if c != module}), f"{module} imports another command"


@pytest.mark.parametrize("module", COMMANDS)
def test_every_command_prints_its_help(module, capsys):
    with pytest.raises(SystemExit) as exit_:
        importlib.import_module(module).main(["--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("usage: ")


def _parser(module: str):
    mod = importlib.import_module(module)
    return mod.make_parser()


@pytest.mark.parametrize("module", COMMANDS)
def test_every_option_says_what_it_does_and_the_help_shows_it(module, capsys):
    parser = _parser(module)
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
