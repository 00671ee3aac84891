"""The README's no-torch commands give, on the committed records, exactly the outputs stored before the code was
restructured (issue 15): tests/golden.py lists them and rewrites tests/data/golden/ with --update."""

import pytest
from golden import COMMANDS, GOLDEN, run


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_output_as_before(name):
    expected = (GOLDEN / f"{name}.txt").read_text()
    assert run(name) == expected


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_no_golden_output_is_a_traceback(name):
    """A golden file pins what a command printed when it was written: one that pinned a traceback (help-harness.run,
    until 2026-11-27) kept a crash passing. An error a user can meet is one line (the guide's bad-input rule)."""
    assert "Traceback (most recent call last)" not in (GOLDEN / f"{name}.txt").read_text()


def test_every_golden_file_is_a_command_and_there_are_at_most_12():
    """Goldens pin only what users read; a file left behind by a removed command would be checked by nothing."""
    assert sorted(p.stem for p in GOLDEN.glob("*.txt")) == sorted(COMMANDS) and len(COMMANDS) <= 12
