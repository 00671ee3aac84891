"""Every command a user types answers --help: `python -m harness.run --help` raised ValueError (a bare '%' in one
option's help, which argparse formats with %) until 2026-11-27."""

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
