"""Gradient accumulation as a way to check a loss at a batch size the start does not fit: B=2x2 (grad_accum=2)
trains on the same sequences, in the same order, as B=4 (gpt/data.py's batches are sequential), so a candidate at
B=4 is judged against a start at 2x2 where no start ran at 4 (harness.analysis.fastest.candidate). The records:
real CPU runs of plan beyond-ladder, tiny preset, 12 steps, made on the 2-core AMD EPYC on 2026-11-30 with
`python -m harness.run --plan beyond-ladder --preset tiny --rungs best-of-ladder --batch-size 2 --set grad_accum=2
--steps 12 --warmup-steps 2 --device cpu` and the same at --batch-size 4 with --rungs best-of-ladder,sdpa-auto."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.fastest import beyond_candidates
from harness.analysis.tables.fastest import where_start

DATA = Path(__file__).parent / "data" / "accum-cpu"
START_2X2 = "20261130T001604Z-local-beyond-ladder-best-of-ladder-r0-accf63"
START_4 = "20261130T001640Z-local-beyond-ladder-best-of-ladder-r0-9aa521"
KNOB_4 = "20261130T001714Z-local-beyond-ladder-sdpa-auto-r0-731a5a"


def folder(tmp_path, *run_ids) -> Path:
    out = tmp_path / "records"
    out.mkdir()
    for run_id in run_ids:
        shutil.copy(DATA / f"{run_id}.json", out)
    return out


def knob(path: Path):
    cmp = Compare(load([path], warn=lambda line: None))
    (c,) = [c for gpu in cmp.ds.gpus() for c in beyond_candidates(cmp, gpu) if c.group.label == "sdpa-auto"]
    return cmp, c


def loss(run_id: str) -> list[float]:
    return json.loads((DATA / f"{run_id}.json").read_text())["steps"]["loss"]


def test_micro_batches_train_on_the_same_sequences():
    """The recorded losses step by step: B=2x2 and B=4 within float noise (the accumulated gradient is the same
    mean over the same 4 sequences)."""
    a, b = loss(START_2X2), loss(START_4)
    assert len(a) == len(b) == 12
    assert max(abs(x / y - 1) for x, y in zip(a, b, strict=True)) < 1e-4


def test_a_knob_is_judged_against_the_start_on_as_many_sequences_per_step(tmp_path):
    cmp, c = knob(folder(tmp_path, START_2X2, KNOB_4))
    assert c.shape == (4, 64) and c.partner is not None
    assert (c.partner.batch, c.partner.workload.samples_per_step) == ("B=2x2, T=64", 4)
    assert c.parity["parity"] == "ok" and c.equivalent
    # said wherever the loss check is shown: the start it was checked against trained in micro-batches
    assert c.parity_text(cmp.loss_tol).endswith(", against the start at B=2x2, T=64)")
    assert where_start(c.partner, c.group) == "at B=2x2, T=64: as many sequences per step, in micro-batches"
    assert c.delta is not None and c.delta.value == pytest.approx(cmp.delta(c.partner, c.group).value)


def test_the_start_at_the_same_micro_batch_comes_first(tmp_path):
    cmp, c = knob(folder(tmp_path, START_2X2, START_4, KNOB_4))
    assert c.partner.batch == "B=4, T=64" and "against the start" not in c.parity_text(cmp.loss_tol)
    assert where_start(c.partner, c.group) == "at the same B and T"


def test_no_start_on_as_many_sequences_leaves_the_loss_unchecked(tmp_path):
    records = folder(tmp_path, START_2X2, KNOB_4)
    start = json.loads((records / f"{START_2X2}.json").read_text())
    start["workload"]["grad_accum"] = 1  # now B=2: half the sequences of the knob's step
    (records / f"{START_2X2}.json").write_text(json.dumps(start))
    cmp, c = knob(records)
    assert c.partner is None and c.parity_text(cmp.loss_tol) == "unchecked: no start run at B=4"
