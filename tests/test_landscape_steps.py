"""scripts/landscape_steps.py on the committed landscapes: the 2-thread one (results/cpu-bisect-2t) against the
1-thread one (results/cpu-bisect), the numbers results/cpu-bisect-2t/README.md quotes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import landscape_steps
from shipped import RESULTS

TWO, ONE = RESULTS / "cpu-bisect-2t" / "records", RESULTS / "cpu-bisect" / "records"


def test_the_whole_range_is_the_same_at_one_and_two_threads_and_each_step_is_judged(capsys):
    assert landscape_steps.main([str(TWO), "--against", str(ONE), "--pair", "2.9.1:2.15.0"]) == 0
    out = capsys.readouterr().out.splitlines()
    whole = out.index(next(line for line in out if line.strip().startswith("2.1.2 -> 2.15.0")))
    assert out[whole].endswith("(beyond noise)") and "+67.5%" in out[whole]
    assert "there +70.7%" in out[whole + 1] and out[whole + 1].endswith("(within noise)")  # here/there
    steps = [line for line in out if " -> " in line]
    assert len(steps) == 13 + 1 + 1  # 14 builds (2.5.1 failed): 13 steps, the whole range, the asked pair
    assert not any(line.endswith("(beyond noise)") for line in steps if "2.1.2 -> 2.15.0" not in line)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        landscape_steps.main([str(TWO), "--pair", "2.5.1:2.15.0"])  # 2.5.1 never compiled: no cell
    assert e.value.code == 2 and "2.5.1: not a build" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        landscape_steps.main([str(tmp_path / "none")])
    assert e.value.code == 2
