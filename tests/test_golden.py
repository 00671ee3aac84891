"""The README's no-torch commands give, on the committed records, exactly the outputs stored before the code was
restructured (issue 15): tests/golden.py lists them and rewrites tests/data/golden/ with --update."""

import pytest
from golden import COMMANDS, GOLDEN, run


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_output_as_before(name):
    expected = (GOLDEN / f"{name}.txt").read_text()
    assert run(name) == expected
