"""harness.compare and harness.analysis.stats on hand-built records with known numbers (no torch)."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from records_factory import constant_ms, kernels, make_record, noisy_ms, write
from shipped import RESULTS

from harness import compare
from harness.analysis import cell_values, noise, noise_model, stats
from harness.analysis.cells import Cell
from harness.analysis.context import Compare
from harness.analysis.dataset import Filters, load, torch_version_key
from harness.analysis.tables import registry
from harness.analysis.tables.cross import cross
from harness.analysis.tables.ladder import ladders
from harness.analysis.tables.underneath import TOP_UNDERNEATH

ROOT = Path(__file__).resolve().parent.parent
BF16_SDPA = {"precision": "bf16", "attention": "sdpa", "sdpa_backend": "flash"}
VOCAB = dict(BF16_SDPA, vocab_size=50304)
TOKENS = 16 * 1024


def run(argv, capsys):
    code = compare.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def by(table, **match):
    rows = [r for r in table.rows if all(r.get(k) == v for k, v in match.items())]
    assert len(rows) == 1, (match, table.rows)
    return rows[0]


@pytest.fixture
def exact(tmp_path):
    """Zero-noise step times: every delta is known exactly."""
    ms = {  # (gpu, env) -> (sdpa-flash ms, vocab-50304 ms)
        ("H100", "torch212"): (150.0, 100.0),  # vocab +50%
        ("H100", "nightly"): (105.0, 100.0),  # +5%
        ("A100", "torch212"): (204.0, 200.0),  # +2%
        ("A100", "nightly"): (206.0, 200.0),  # +3%
    }
    records = []
    for (gpu, env), (a, b) in ms.items():
        mem = 20 * 2**30 if env == "torch212" else 16 * 2**30
        for rep in range(2):
            records.append(make_record(env=env, gpu=gpu, rung="sdpa-flash", repeat=rep, workload=BF16_SDPA, ms=constant_ms(a), memory=mem))
            records.append(make_record(env=env, gpu=gpu, rung="vocab-50304", repeat=rep, workload=VOCAB, ms=constant_ms(b), memory=mem))
    records.append(make_record(env="torch212", gpu="H100", rung="bf16", workload={"precision": "bf16"}, ms=constant_ms(300.0), memory=30 * 2**30))
    return write(tmp_path / "exact", records)


def test_exact_deltas(exact):
    cmp = Compare(load([exact], warn=lambda line: None))
    # ladder: bf16 300 ms -> sdpa-flash 150 ms (2x) -> vocab 100 ms (1.5x; 3x the first rung)
    ladder = next(t for t in registry.build(cmp, ["ladder"]) if "h100" in t.title and "torch212" in t.title)
    assert [r["rung"] for r in ladder.rows] == ["bf16", "sdpa-flash", "vocab-50304"]
    assert by(ladder, rung="bf16")["tokens_s"] == pytest.approx(TOKENS / 0.3)
    assert by(ladder, rung="sdpa-flash")["vs_previous"].delta.value == pytest.approx(1.0)
    vocab = by(ladder, rung="vocab-50304")
    assert vocab["vs_previous"].delta.value == pytest.approx(0.5)
    assert vocab["vs_first"].delta.value == pytest.approx(2.0)
    # zero noise: a zero-width interval, still shown; bf16 ran once, so it borrowed the device's (zero) spread
    assert vocab["vs_first"].text() == "3.00x [3.00x, 3.00x] (beyond noise; noise borrowed)"
    assert vocab["runs"] == "2x10" and vocab["ms"] == pytest.approx(100.0)

    # cross-version: H100 sdpa-flash 150 -> 105 ms = +42.857%; memory 20 -> 16 GiB = -20%
    versions = registry.one(cmp, "versions")
    row = by(versions, gpu="h100-80g", rung="sdpa-flash", env="nightly")
    assert row["baseline"] == "h100-80g / torch212"  # the baseline cell (same B and T as the row)
    assert row["d_tokens_s"].delta.value == pytest.approx(150 / 105 - 1)
    assert row["d_tokens_s"].delta.verdict == stats.BEYOND
    assert row["d_memory"].delta.value == pytest.approx(-0.2)
    assert row["d_memory"].delta.verdict == stats.BEYOND
    assert by(versions, gpu="h100-80g", rung="sdpa-flash", env="torch212")["baseline"] == "(baseline)"

    # cross-GPU: A100 is the baseline (lower capability); vocab torch212: 200 -> 100 ms = +100%
    row = by(registry.one(cmp, "gpus"), env="torch212", rung="vocab-50304", gpu="h100-80g")
    assert row["baseline"] == "a100-80g / torch212"
    assert row["d_tokens_s"].delta.value == pytest.approx(1.0)

    # knob effects per cell, and the 2x2 split
    knobs = registry.one(cmp, "knobs")
    vocab_rows = [r for r in knobs.rows if r["knob"] == "vocab_size 50257 -> 50304"]
    assert {(r["gpu"], r["env"]): round(r["d_tokens_s"].delta.value, 6) for r in vocab_rows} == {
        ("h100-80g", "torch212"): 0.5, ("h100-80g", "nightly"): 0.05, ("a100-80g", "torch212"): 0.02, ("a100-80g", "nightly"): 0.03}
    factors = registry.one(cmp, "factors")
    row = by(factors, knob="vocab_size 50257 -> 50304")
    assert row["gpus"] == "a100-80g -> h100-80g" and row["envs"] == "torch212 -> nightly"
    assert row["gpu_factor"].delta.value == pytest.approx(0.5 * (0.50 - 0.02) + 0.5 * (0.05 - 0.03))  # +25 pp
    assert row["version_factor"].delta.value == pytest.approx(0.5 * (0.03 - 0.02) + 0.5 * (0.05 - 0.50))  # -22 pp
    assert row["interaction"].delta.value == pytest.approx((0.05 - 0.50) - (0.03 - 0.02))  # -46 pp
    assert row["gpu_factor"].text() == "+25.0 pp [+25.0 pp, +25.0 pp] (beyond noise)"
    assert row["version_factor"].text() == "-22.0 pp [-22.0 pp, -22.0 pp] (beyond noise)"


def test_exact_deltas_in_every_format(exact, capsys):
    code, out, err = run([exact, "--format", "json"], capsys)
    assert code == 0 and err == ""
    doc = json.loads(out)
    versions = next(t for t in doc["tables"] if t["name"] == "versions")
    row = next(r for r in versions["rows"] if r["env"] == "nightly" and r["rung"] == "vocab-50304" and r["gpu"] == "a100-80g")
    assert row["d_tokens_s"]["value"] == pytest.approx(0.0)
    assert row["d_tokens_s"]["verdict"] == stats.WITHIN  # 200 ms both sides: no change is not a win

    code, out, _err = run([exact, "--format", "csv", "--table", "gpus"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    h100 = next(r for r in rows if r["gpu"] == "h100-80g" and r["rung"] == "vocab-50304" and r["env"] == "nightly")
    assert float(h100["d_tokens_s_fraction"]) == pytest.approx(1.0) and h100["d_tokens_s_verdict"] == stats.BEYOND

    code, out, _err = run([exact, "--format", "markdown", "--table", "factors"], capsys)
    assert "| vocab_size 50257 -> 50304" in out and "+25.0 pp [+25.0 pp, +25.0 pp] (beyond noise)" in out and stats.rule_text()[:40] in out

    code, out, _err = run([exact, "--detail"], capsys)
    assert "Significance:" in out and "beyond noise" in out  # the rule is in the footer


def _pair(tmp_path, a_ms, b_ms, name):
    recs = [make_record(env="torch212", rung="sdpa-flash", repeat=i, workload=BF16_SDPA, ms=m) for i, m in enumerate(a_ms)]
    recs += [make_record(env="nightly", rung="sdpa-flash", repeat=i, workload=BF16_SDPA, ms=m) for i, m in enumerate(b_ms)]
    cmp = Compare(load([write(tmp_path / name, recs)], warn=lambda line: None))
    return by(registry.one(cmp, "versions"), env="nightly")["d_tokens_s"].delta


def test_significance_labels(tmp_path):
    # clear: 100 -> 80 ms with +-2% jitter, 3 repeats of 10 steps each
    clear = _pair(tmp_path, [noisy_ms(100, 0.02, s) for s in range(3)], [noisy_ms(80, 0.02, s + 9) for s in range(3)], "clear")
    assert clear.verdict == stats.BEYOND and clear.low > 0.2 and clear.high < 0.3
    # noisy: 100 -> 98 ms under +-30% jitter: the interval spans 0
    noisy = _pair(tmp_path, [noisy_ms(100, 0.3, s) for s in range(3)], [noisy_ms(98, 0.3, s + 9) for s in range(3)], "noisy")
    assert noisy.verdict == stats.WITHIN and noisy.low < 0 < noisy.high
    assert Cell(noisy).text().endswith("(within noise)")
    # exact but tiny: 100 -> 99.6 ms with no jitter, runs that agree, is real but under the 1% floor
    tiny = _pair(tmp_path, [constant_ms(100)] * 2, [constant_ms(99.6)] * 2, "tiny")
    assert tiny.low > 0 and tiny.verdict == stats.WITHIN
    # one run a side and no other cell with two runs on the device: run-to-run noise unknown, never beyond noise
    lone = _pair(tmp_path, [constant_ms(100)], [constant_ms(50)], "lone")
    assert lone.verdict == stats.ONE_RUN and Cell(lone).text() == "+100.0% (one run a side, noise unknown)"
    # one timed sample a side (warm-up is 2 steps): no noise estimate; three: still too few
    single = _pair(tmp_path, [[5000, 150, 100]], [[5000, 150, 80]], "single")
    assert single.verdict == stats.SINGLE and Cell(single).text() == "+25.0% (single sample)"
    few = _pair(tmp_path, [[5000, 150, 100, 100, 100]], [[5000, 150, 80, 80, 80]], "few")
    assert few.verdict == stats.FEW and Cell(few).text() == "+25.0% (too few samples)"
    # repeats that disagree: each run is tight, but the runs are 20% apart -> the repeat level carries the noise
    spread = _pair(tmp_path, [constant_ms(90), constant_ms(110)], [constant_ms(95), constant_ms(105)], "spread")
    assert spread.verdict == stats.WITHIN


def _device(*cells) -> noise_model.DeviceSpread:
    """A device whose configurations are these cells (per-run values, one invocation each), as noise.fit makes it."""
    return noise.fit({i: [noise_model.CellRuns.of(list(c), [f"inv{i}"] * len(c))] for i, c in enumerate(cells)})


def test_stats_units():
    one = stats.Estimate(100.0, 1, 1)
    many = cell_values.throughput([[100.0] * 10] * 2, 1000)
    assert stats.ratio(one, many)[0].verdict == stats.SINGLE
    mem = lambda *values, device=None, config=0: cell_values.memory(list(values), device=device, config=config)
    both = _device([100, 104], [101, 103])  # the device's spread, pooled over the two configurations
    assert stats.counter(mem(100, 104, device=both), mem(101, 103, device=both, config=1)).verdict == stats.WITHIN
    both = _device([100, 101], [120, 121])
    assert stats.counter(mem(100, 101, device=both), mem(120, 121, device=both, config=1)).verdict == stats.BEYOND
    # two runs a side and nothing else: each side its own spread (1 df), Welch-Satterthwaite's df (about 2): a
    # 3% change between runs 4% apart is not decided, and the delta says how many runs a side would decide it
    undecided = stats.counter(mem(100, 104), mem(103, 107))
    assert undecided.verdict == stats.WITHIN and undecided.runs_to_decide > 2
    assert stats.counter(mem(100), mem(120)).verdict == stats.ONE_RUN
    # one run a side borrows the spread of a device whose configurations are alike, and says so
    device = _device([100, 101, 100.5], [50, 50.4, 50.2], [80, 80.6, 80.3])
    assert device.borrowable
    borrowed = stats.counter(mem(100, device=device, config="new"), mem(120, device=device, config="new"))
    assert borrowed.verdict == stats.BEYOND and borrowed.borrowed
    # ... but not from one configuration alone: whether another is as quiet is not known
    lone = _device([100, 101, 100.5])
    assert stats.counter(mem(100, device=lone, config="new"), mem(120, device=lone, config="new")).verdict == stats.ONE_RUN
    # a single run has no spread of its own: with no device estimate its tokens/s has none
    a = cell_values.throughput([np.full(10, 100.0)], 1000)
    assert a.point == pytest.approx(10_000) and not a.known and a.why == stats.ONE_RUN
    # runs are the unit: flat runs 20% apart give a wide interval, though every step inside a run agrees
    b = cell_values.throughput([np.full(10, 90.0), np.full(10, 110.0)], 1000)
    low, high = b.bounds()
    assert low < b.point * 0.5 and high > b.point * 1.5  # t with 1 degree of freedom
    # the t quantile: exact (a table's rows), the normal's at infinity
    assert stats.t_critical(2) == pytest.approx(9.925, abs=1e-3) and stats.t_critical(math.inf) == pytest.approx(2.5758, abs=1e-4)
    assert stats.t_critical(30) > stats.t_critical(35) > stats.t_critical(40)
    with pytest.raises(ValueError):
        stats.t_critical(0)


def test_device_spread_is_pooled_over_alike_configurations_and_a_noisier_one_keeps_its_own():
    quiet = [[100, 101, 99], [50, 50.5, 49.5]]  # about 1% between runs, two configurations
    pooled = noise_model.pooled_noise(quiet)
    assert pooled.df == 4 and pooled.cells == 2 and pooled.runs == 6 and 0.008 < pooled.sd < 0.012
    assert noise_model.pooled_noise([[100], [50]]) is None  # no cell with two runs: no estimate
    device = _device(*quiet)
    assert device.alike and device.pooled.df == 4 and device.spread_for(0) is device.spread_for(1) is device.pooled
    # a configuration clearly noisier than the rest keeps its own spread (and df)
    noisier = _device(*quiet, [80, 80.8, 79.2], [100, 104, 96])
    assert noisier.spread_for(3) is noisier.apart[3] and noisier.spread_for(3).df == 2
    assert noisier.spread_for(0) is noisier.pooled and noisier.pooled.df == 8  # it still counts in the pool
    # configurations not alike in noise (Bartlett): each its own, none pooled, a new one borrows nothing
    mixed = _device([100, 100.1, 99.9, 100.05], [50, 50.02, 49.99, 50.01], [100, 140, 70, 120], [60, 90, 45, 75])
    assert not mixed.alike and mixed.pooled is None and set(mixed.apart) == {0, 1, 2, 3}
    assert mixed.spread_for("new") is None
    assert noise.fit({0: [noise_model.CellRuns.of([100])]}) is None


def test_a_memory_that_peaks_at_two_levels_is_never_a_delta():
    """Peak RSS of one build at about 600 or 790 MiB, within one invocation: two modes, said, and no delta of that
    configuration decided, even where each side's runs sit in one mode (a delta from one mode against the other)."""
    mib = 2**20
    both = [600 * mib, 601 * mib, 790 * mib, 792 * mib, 600.5 * mib]
    assert noise_model.modes(noise_model.CellRuns.of(both)) == (pytest.approx(600.5 * mib, rel=1e-3), pytest.approx(791 * mib, rel=1e-3))
    assert noise_model.modes(noise_model.CellRuns.of([600 * mib, 601 * mib, 602 * mib, 790 * mib])) is None  # one run is no mode
    assert noise_model.modes(noise_model.CellRuns.of([600 * mib, 630 * mib, 660 * mib, 700 * mib])) is None  # a spread, no gap
    device = noise.fit({"bf16": [noise_model.CellRuns.of(both, ["i"] * 5)], "fp32": [noise_model.CellRuns.of([900 * mib] * 3)]},
                       find_modes=True)
    assert list(device.modes) == ["bf16"]
    low = cell_values.memory([600 * mib, 601 * mib, 600.5 * mib], device, config="bf16")
    high = cell_values.memory([790 * mib, 791 * mib, 792 * mib], device, config="bf16")
    d = stats.counter(low, high)
    assert d.verdict == stats.MODES and not d.beyond and Cell(d).text() == "+31.7% (two modes, not decided)"
    other = cell_values.memory([900 * mib] * 3, device, config="fp32")
    assert stats.counter(other, cell_values.memory([950 * mib] * 3, device, config="fp32")).beyond  # other configurations: as ever


def test_bad_files_warned_once_each_and_rest_compared(tmp_path, capsys):
    good = write(tmp_path / "r", [make_record(env="torch212", rung="bf16", workload={"precision": "bf16"}),
                                  make_record(env="nightly", rung="bf16", workload={"precision": "bf16"}, ms=constant_ms(50))])
    (good / "truncated.json").write_text('{"schema_version": 1, "run_id": "x", "ki')
    (good / "foreign.json").write_text('{"name": "package.json", "version": "1.0.0"}')
    future = make_record(env="torch212", rung="fp32")
    future["schema_version"] = 4
    (good / "future.json").write_text(json.dumps(future))
    nan = make_record(env="torch212", rung="tf32", workload={"precision": "tf32"})
    (good / "nan.json").write_text(json.dumps(nan).replace('"ms": [5000.0', '"ms": [NaN'))
    (good / "empty").mkdir()
    code, out, err = run([good, good / "empty", "--detail"], capsys)
    assert code == 0
    lines = err.strip().splitlines()
    assert len(lines) == 5, lines
    for name in ("truncated.json", "foreign.json", "future.json", "nan.json", "empty"):
        assert sum(name in line for line in lines) == 1, name
    assert "schema_version 4" in err and "NaN" in err and "truncated" in err
    assert "+100.0%" in out  # the two good records were still compared
    assert "truncated.json" in out  # and the skipped files are listed as left out


def test_exit_codes(tmp_path, capsys):
    empty = tmp_path / "nothing"
    empty.mkdir()
    (empty / "bad.json").write_text("{")
    code = None
    with pytest.raises(SystemExit) as exc:
        compare.main([str(empty)])
    assert exc.value.code == 1
    assert "no valid record" in capsys.readouterr().err
    good = write(tmp_path / "r", [make_record(env="torch212", rung="bf16", workload={"precision": "bf16"})])
    for bad in (["--format", "xml"], ["--baseline-env", "nope"], ["--baseline-gpu", "V100"], ["--noise-floor", "2"]):
        with pytest.raises(SystemExit) as exc:
            compare.main([str(good), *bad])
        assert exc.value.code == 2, bad
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("python -m harness.compare: error:"), err
    with pytest.raises(SystemExit) as exc:
        compare.main([str(good), "--env", "nightly"])
    assert exc.value.code == 1 and "none matches the filters" in capsys.readouterr().err
    assert code is None


def test_env_filter_keeps_the_users_reference_records(tmp_path, capsys):
    """--env selects measured runs; the user's logged numbers (kind=reference) are not an env and stay beside them."""
    refs = RESULTS / "reference"
    measured = write(tmp_path / "m", [make_record(env=env, rung="vocab-50304", workload=VOCAB, ms=constant_ms(ms))
                                      for env, ms in (("torch212", 70.0), ("nightly", 60.0))])
    ds = load([refs, measured], warn=lambda line: None, filters=Filters(envs=["nightly"]))
    assert len(ds.references) == 21 and [g.env for g in ds.groups] == ["nightly"] and ds.filtered == 1
    beside = [r["measured"] for r in registry.one(Compare(ds), "reference").rows if r.get("measured") not in (None, "(none)")]
    assert beside == ["h100-80g / nightly"]  # the reference line 44 (vocab-50304, B=16) beside the filtered run
    code, out, _err = run([refs, measured, "--env", "nightly", "--table", "reference", "--format", "json"], capsys)
    doc = json.loads(out)
    assert code == 0 and doc["references"] == 21 and doc["groups"] == 1
    # filtered explicitly: --env reference keeps them alone; --rung and --gpu select them by their own rung and GPU class
    ds = load([refs, measured], warn=lambda line: None, filters=Filters(envs=["reference"]))
    assert len(ds.references) == 21 and not ds.groups
    ds = load([refs, measured], warn=lambda line: None, filters=Filters(rungs=["fp32"]))
    assert len(ds.references) == 2 and not ds.groups  # log lines 5 and 7
    ds = load([refs, measured], warn=lambda line: None, filters=Filters(gpus=["A100"]))
    assert not ds.references
    # an env that matches no record is still an error, though the references pass the filter
    with pytest.raises(SystemExit) as exc:
        compare.main([str(refs), str(measured), "--env", "nighty"])
    assert exc.value.code == 1 and "none matches the filters" in capsys.readouterr().err


def test_not_comparable_runs_are_never_mixed(tmp_path):
    recs = [
        make_record(env="torch212", rung="bf16", workload={"precision": "bf16"}, ms=constant_ms(100)),
        make_record(env="nightly", rung="bf16", workload={"precision": "bf16", "batch_size": 32}, ms=constant_ms(150)),  # other B
        make_record(env="nightly", rung="tf32", workload={"precision": "tf32"}, ms=constant_ms(100)),
        make_record(env="torch212", rung="tf32", workload={"precision": "tf32"}, ms=constant_ms(100),
                    flags={"matmul_precision": "high", "cudnn_benchmark": True}),  # other flags
        make_record(env="torch212", rung="fp32", status="oom", reason="CUDA out of memory. Tried to allocate 2 GiB"),
    ]
    ds = load([write(tmp_path / "r", recs)], warn=lambda line: None)
    cmp = Compare(ds)
    assert registry.one(cmp, "versions").rows == []
    assert len(ds.groups) == 4  # nothing merged
    assert any("tf32" in n and "2 different workload/flags hashes" in n for n in ds.notes)
    left = registry.one(cmp, "left-out")
    assert any("status oom: CUDA out of memory" in r["why"] for r in left.rows)
    ladder = next(t for t in registry.build(cmp, ["ladder"]) if "torch212" in t.title and "B=16" in t.title)
    assert {k: ladder.rows[0][k] for k in ("rung", "runs")} == {"rung": "fp32", "runs": "oom"}


def test_env_with_two_torch_versions_is_split(tmp_path):
    recs = [make_record(env="nightly", rung="bf16", workload={"precision": "bf16"}, torch_version="2.6.0.dev20241203"),
            make_record(env="nightly", rung="bf16", workload={"precision": "bf16"}, torch_version="2.7.0.dev20250301", ms=constant_ms(90))]
    cmp = Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None))
    assert cmp.ds.envs() == ["nightly@2.6.0.dev20241203", "nightly@2.7.0.dev20250301"]
    row = by(registry.one(cmp, "versions"), env="nightly@2.7.0.dev20250301")
    assert row["d_tokens_s"].delta.value == pytest.approx(100 / 90 - 1)


def test_runs_inside_an_image_are_a_cell_beside_the_same_envs_other_runs(tmp_path):
    """Same env, same torch: a run in envs/latest (its own Python and base libraries) is compared with the nox run,
    not pooled with it."""
    nox_run = make_record(env="latest", rung="fp32")
    image_run = make_record(env="latest", rung="fp32", ms=constant_ms(110))
    image_run["environment"]["container"] = {"image": "envs/latest", "digest": "sha256:" + "d" * 64}
    cmp = Compare(load([write(tmp_path / "r", [nox_run, image_run])], warn=lambda line: None))
    assert cmp.ds.envs() == ["latest", "latest in envs/latest"]
    row = by(registry.one(cmp, "versions"), env="latest in envs/latest")
    assert row["d_tokens_s"].delta.value == pytest.approx(100 / 110 - 1)


def test_torch_version_order():
    versions = ["2.6.0", "2.1.2+cu121", "2.6.0.dev20241203+cu124", "2.3.1", "2.10.0", None, "2.6.0rc1"]
    ordered = sorted(versions, key=torch_version_key)
    assert ordered == ["2.1.2+cu121", "2.3.1", "2.6.0.dev20241203+cu124", "2.6.0rc1", "2.6.0", "2.10.0", None]


def test_baselines_and_filters(exact, capsys):
    ds = load([exact], warn=lambda line: None)
    cmp = Compare(ds, baseline_env="nightly", baseline_gpu="NVIDIA H100 80GB HBM3")
    row = by(registry.one(cmp, "versions"), gpu="h100-80g", rung="sdpa-flash", env="torch212")
    assert row["baseline"] == "h100-80g / nightly" and row["d_tokens_s"].delta.value == pytest.approx(105 / 150 - 1)
    row = by(registry.one(cmp, "gpus"), env="torch212", rung="vocab-50304", gpu="a100-80g")
    assert row["d_tokens_s"].delta.value == pytest.approx(-0.5)
    code, out, _err = run([exact, "--gpu", "a100", "--rung", "vocab-50304", "--format", "json"], capsys)
    doc = json.loads(out)
    assert doc["groups"] == 2
    code, out, _err = run([exact, "--baseline-gpu", "H100", "--baseline-env", "nightly", "--table", "gpus"], capsys)
    assert code == 0 and "(baseline)" in out


def test_kernels_and_libraries_underneath(tmp_path):
    slow = kernels("sm80_xmma_gemm_bf16_fallback", ["fmha_cutlassF"], [("sm80_xmma_gemm_bf16_fallback", "gemm", 30000, 0.5),
                                                                       ("fmha_cutlassF", "attention", 6000, 0.1),
                                                                       ("elementwise_kernel", "elementwise", 9000, 0.15)], backend="efficient")
    fast = kernels("sm90_xmma_gemm_bf16_128x128", ["flash_fwd_kernel"], [("sm90_xmma_gemm_bf16_128x128", "gemm", 12000, 0.3),
                                                                          ("flash_fwd_kernel", "attention", 5000, 0.12),
                                                                          ("elementwise_kernel", "elementwise", 4000, 0.1)], backend="flash")
    slow["libraries"] = {"available": True, "mapped": {"cublasLt": {"version": "12.1.3.1"}}}  # the worker's shape
    fast["libraries"] = {"available": True, "mapped": {"cublasLt": {"version": "12.4.5.8"}}}
    recs = [make_record(env="torch212", rung="vocab-50304", workload=VOCAB, explain=slow),
            make_record(env="nightly", rung="vocab-50304", workload=VOCAB, explain=fast)]
    cmp = Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None), show_all=True)
    rows = registry.one(cmp, "underneath").rows
    assert rows[0]["what"] == "lm_head GEMM (changed)" and rows[0]["b"].startswith("sm90_xmma_gemm_bf16_128x128")
    assert rows[1]["what"].startswith("attention kernels (changed)")
    whats = [r["what"] for r in rows]
    assert "sdpa backend" in whats
    assert any(w.startswith("appeared [gemm]: sm90_xmma") for w in whats)
    assert any(w.startswith("disappeared [attention]: fmha_cutlassF") for w in whats)
    assert any(w.startswith("changed [elementwise]: elementwise_kernel") for w in whats)
    libs = {r["what"]: (r["a"], r["b"]) for r in registry.one(cmp, "libraries").rows}
    assert libs["library cublasLt"] == ("12.1.3.1", "12.4.5.8")
    assert libs["torch.version"] == ("2.1.2+cu121", "2.6.0.dev20241203+cu124")


def test_loss_parity_flags_drift(tmp_path):
    base = [10.0 - 0.1 * i for i in range(12)]
    recs = [make_record(env="torch212", rung="bf16", workload={"precision": "bf16"}, loss=base),
            make_record(env="torch23", rung="bf16", workload={"precision": "bf16"}, loss=[x * 1.001 for x in base]),
            make_record(env="nightly", rung="bf16", workload={"precision": "bf16"}, loss=[x * 1.05 for x in base])]
    cmp = Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None), loss_tol=0.01)
    table = registry.one(cmp, "loss")
    assert [r["parity"] for r in table.rows] == ["baseline", "ok", "DRIFT"]
    assert by(table, env="nightly")["d_mean"] == "+5.00%"
    assert "1.0%" in table.title


# ---------------------------------------------------------------- one comparability rule, and tables a person can read

def _two_by_two(tmp_path, name, nightly_flags=None, nightly_hash=None):
    """The exact 2x2 (H100/A100 x torch212/nightly, vocab effect +50/+5/+2/+3%), optionally with nightly's runs
    under another frozen flag or another workload hash."""
    ms = {("H100", "torch212"): (150.0, 100.0), ("H100", "nightly"): (105.0, 100.0),
          ("A100", "torch212"): (204.0, 200.0), ("A100", "nightly"): (206.0, 200.0)}
    records = []
    for (gpu, env), (a, b) in ms.items():
        for rung, w, step in (("sdpa-flash", BF16_SDPA, a), ("vocab-50304", VOCAB, b)):
            for rep in range(2):
                flags = dict(nightly_flags, matmul_precision="high") if env == "nightly" and nightly_flags else None
                r = make_record(env=env, gpu=gpu, rung=rung, repeat=rep, workload=w, ms=constant_ms(step), flags=flags, memory=2**30)
                if env == "nightly" and nightly_hash:
                    r["workload_hash"] = nightly_hash(r["workload_hash"])
                records.append(r)
    return Compare(load([write(tmp_path / name, records)], warn=lambda line: None))


@pytest.mark.parametrize("variant", ["flag", "hash"])
def test_2x2_never_mixes_runs_that_the_rule_keeps_apart(tmp_path, variant):
    """nightly's runs differ in a frozen flag (or in workload_hash): the cross-version and loss tables refuse them,
    and so must the 2x2 split, with the reason. (The old code split it: a 'version factor' that mixed the flag in.)"""
    assert by(registry.one(_two_by_two(tmp_path, "same"), "factors"), knob="vocab_size 50257 -> 50304")  # comparable: split
    kwargs = {"nightly_flags": {"cudnn_benchmark": True}} if variant == "flag" else {"nightly_hash": lambda h: "f" + h[1:]}
    cmp = _two_by_two(tmp_path, variant, **kwargs)
    factors = registry.one(cmp, "factors")
    assert factors.rows == []
    why = "cudnn_benchmark" if variant == "flag" else "workload_hash"
    assert any(n.startswith("not split: vocab_size 50257 -> 50304") and why in n for n in factors.notes), factors.notes
    versions = registry.one(cmp, "versions")
    assert versions.rows == [] and any(n.startswith("not compared:") and why in n for n in versions.notes), versions.notes
    base_env = None
    for r in registry.one(cmp, "loss").rows:  # each comparison set compares GPUs within one env, never torch212 with nightly
        base_env = r["env"] if r["parity"] == "baseline" else base_env
        assert r["env"] == base_env
    # the knob's effect is still shown in every cell, with the variant named
    knobs = registry.one(cmp, "knobs")
    assert len([r for r in knobs.rows if r["knob"] == "vocab_size 50257 -> 50304"]) == 4
    if variant == "flag":
        assert {r["at"] for r in knobs.rows} == {"sdpa-flash (B=16, T=1024) [cudnn_benchmark=default]",
                                                 "sdpa-flash (B=16, T=1024) [cudnn_benchmark=True]"}


def test_cross_gpu_rows_in_rung_order_baseline_named_and_failed_baseline_said(tmp_path):
    recs = []
    for gpu, base_ms in (("A100", 200.0), ("H100", 100.0)):
        for b in (64, 16):  # written B=64 first: the table must still order by rung, then B
            for rung, w in (("sdpa-flash", BF16_SDPA), ("bf16", {"precision": "bf16"})):
                w = dict(w, batch_size=b)
                if (gpu, b, rung) == ("A100", 64, "bf16"):  # the baseline GPU ran out of memory here
                    recs.append(make_record(env="torch212", gpu=gpu, rung=rung, workload=w, status="oom", reason="CUDA out of memory"))
                else:
                    recs.append(make_record(env="torch212", gpu=gpu, rung=rung, workload=w, ms=constant_ms(base_ms * b / 16)))
    table = registry.one(Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None)), "gpus")
    assert [(r["rung"], r["batch"], r["gpu"]) for r in table.rows] == [
        ("bf16", "B=16, T=1024", "a100-80g"), ("bf16", "B=16, T=1024", "h100-80g"),
        ("bf16", "B=64, T=1024", "a100-80g"), ("bf16", "B=64, T=1024", "h100-80g"),
        ("sdpa-flash", "B=16, T=1024", "a100-80g"), ("sdpa-flash", "B=16, T=1024", "h100-80g"),
        ("sdpa-flash", "B=64, T=1024", "a100-80g"), ("sdpa-flash", "B=64, T=1024", "h100-80g")]
    oom, h100 = table.rows[2], table.rows[3]
    assert oom["runs"] == "oom" and oom["baseline"] == "(baseline)"
    assert h100["baseline"] == "a100-80g / torch212" and h100["tokens_s"] == pytest.approx(64 * 1024 / 0.4)
    assert h100["d_tokens_s"].text() == "n/a (the baseline ran out of memory)"
    assert any("did not run ok" in n for n in table.notes)


def test_failure_records_without_an_environment_are_no_device(tmp_path, capsys):
    """A worker that died before capturing its environment: not an 'unknown device' ladder; listed under left out.
    The runner's newer failure records name the device they were meant for: then they stand in its ladder."""
    from records_factory import failure_record

    recs = [make_record(env="torch212", rung="bf16", workload={"precision": "bf16"}),
            failure_record(env="torch212", rung="sdpa-flash", workload=BF16_SDPA),
            failure_record(env="torch212", rung="vocab-50304", workload=VOCAB, gpu="H100")]
    cmp = Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None))
    # one ladder, on the H100 the newer failure record names: no ladder of an unknown device
    assert [(lad.plan, cmp.name(lad.gpu), lad.env, lad.batch_size) for lad in ladders(cmp)] == \
        [("seed-ladder", "h100-80g", "torch212", 16)]
    assert len(registry.build(cmp, ["ladder"])) == 1
    ladder = registry.build(cmp, ["ladder"])[0]
    assert [(r["rung"], r["runs"]) for r in ladder.rows] == [("bf16", "1x10"), ("vocab-50304", "error")]
    left = registry.one(cmp, "left-out").rows
    died = next(r for r in left if "sdpa-flash" in r["what"])
    assert "device not recorded" in died["what"] and "does not say which device" in died["why"]
    code, out, _err = run([tmp_path / "r"], capsys)
    assert code == 0 and "unknown device" not in out


def test_pooled_runs_from_separate_invocations_are_named(tmp_path):
    """A ladder rung, a batch-search point and an overhead-check run of the same workload share a hash: pooled, and said."""
    w = dict(VOCAB, batch_size=64)
    recs = [make_record(env="local", rung="vocab-50304", workload=w, run_id="ladder-run"),
            make_record(env="local", rung="vocab-50304", workload=w, run_id="overhead-run"),
            make_record(env="local", rung="vocab-50304", workload=w, run_id="search-run",
                        sweep={"name": "batch-search", "field": "batch_size", "value": 64}),
            make_record(env="local", rung="bf16", workload={"precision": "bf16"}, repeat=0),  # one invocation's repeats:
            make_record(env="local", rung="bf16", workload={"precision": "bf16"}, repeat=1)]  # not flagged
    cmp = Compare(load([write(tmp_path / "r", recs)], warn=lambda line: None))
    rows = {r["rung"]: r for t in registry.build(cmp, ["ladder"]) for r in t.rows}
    assert rows["vocab-50304"]["runs"] == "3x10 pooled" and rows["bf16"]["runs"] == "2x10"
    note = next(n for t in registry.build(cmp, ["ladder"]) for n in t.notes if n.startswith("vocab-50304"))
    assert "3 runs from separate invocations pooled" in note
    assert "search-run (sweep batch-search batch_size=64)" in note and "ladder-run (plan seed-ladder repeat 0)" in note


def test_memory_deltas_are_intervals_and_narrow_intervals_keep_digits():
    device = _device([100, 101], [120, 121])
    mem = Cell(stats.counter(cell_values.memory([100, 101], device=device, config=0),
                             cell_values.memory([120, 121], device=device, config=1)))
    assert mem.text().startswith("+19.9% [") and mem.text().endswith("(beyond noise)")  # geometric means 100.5 -> 120.5
    assert Cell(stats.Delta(0.2, 0.1, 0.3, stats.WITHIN, borrowed=True)).text() == "+20.0% [+10.0%, +30.0%] (within noise; noise borrowed)"
    narrow = Cell(stats.Delta(0.0351, 0.0348, 0.0353, stats.BEYOND))
    assert narrow.text() == "+3.51% [+3.48%, +3.53%] (beyond noise)"  # was "+3.5% beyond": the interval vanished
    assert Cell(stats.Delta(0.0351, 0.0351, 0.0351, stats.BEYOND)).text() == "+3.5% [+3.5%, +3.5%] (beyond noise)"
    assert Cell(stats.Delta(0.004, 0.0035, 0.0042, stats.WITHIN), "ratio").text() == "1.0040x [1.0035x, 1.0042x] (within noise)"
    # but a counter's near-point interval adds no digits to a value that already shows 4 significant ones
    counter = Cell(stats.Delta(2.841312, 2.841310, 2.841314, stats.BEYOND, borrowed=True))
    assert counter.text() == "+284.1% [+284.1%, +284.1%] (beyond noise; noise borrowed)"  # was "+284.1312% [+284.1310,+284.1314]"
    assert Cell(stats.Delta(0.093193, 0.093193, 0.093194, stats.BEYOND)).text() == "+9.319% [+9.319%, +9.319%] (beyond noise)"


def test_csv_headers_carry_units(exact, capsys):
    code, out, _err = run([exact, "--format", "csv", "--table", "ladder"], capsys)
    header = out.splitlines()[1].split(",")
    for name in ("ms_per_step", "tokens_per_s", "memory_bytes", "vs_previous_fraction", "vs_previous_ci_low_fraction"):
        assert name in header, header
    assert "memory" not in header and "ms" not in header
    code, out, _err = run([exact, "--format", "csv", "--table", "versions"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    row = next(r for r in rows if r["env"] == "nightly" and r["rung"] == "vocab-50304" and r["gpu"] == "h100-80g")
    assert code == 0 and float(row["memory_bytes"]) == 16 * 2**30
    assert float(row["d_memory_fraction"]) == pytest.approx(-0.2) and "d_memory_ci_low_fraction" in row


def test_underneath_ranked_by_time_top_few_and_all(tmp_path, capsys):
    top_a = [("gemm_lm_head", "gemm", 10000, 0.3), ("flash_fwd", "attention", 5000, 0.1)]
    top_b = [("gemm_lm_head", "gemm", 9000, 0.3), ("flash_fwd", "attention", 4000, 0.1)]
    for i in range(12):  # twelve kernels that changed, by 1000+100*i us each
        top_a.append((f"kernel_{i}", "elementwise", 3000.0, 0.02))
        top_b.append((f"kernel_{i}", "elementwise", 3000.0 + 1000 + 100 * i, 0.02))
    ea, eb = kernels("gemm_lm_head", ["flash_fwd"], top_a), kernels("gemm_lm_head", ["flash_fwd"], top_b)
    recs = [make_record(env="torch212", rung="vocab-50304", workload=VOCAB, explain=ea),
            make_record(env="nightly", rung="vocab-50304", workload=VOCAB, explain=eb)]
    path = write(tmp_path / "r", recs)
    table = registry.one(Compare(load([path], warn=lambda line: None)), "underneath")
    whats = [r["what"] for r in table.rows]
    assert whats[0] == "lm_head GEMM (same kernel)" and whats[1].startswith("attention kernels (same)")
    ranked = table.rows[2:]
    assert len(ranked) == TOP_UNDERNEATH
    impacts = [abs(r["impact"]) for r in ranked]
    assert impacts == sorted(impacts, reverse=True)
    assert ranked[0]["what"] == "changed [elementwise]: kernel_11" and ranked[0]["impact"] == pytest.approx(2100)
    assert ranked[-1]["what"] == "changed [elementwise]: kernel_7"
    assert any("not shown (--all shows every row)" in n for n in table.notes)
    everything = registry.one(Compare(load([path], warn=lambda line: None), show_all=True), "underneath")
    assert len(everything.rows) == 2 + 12 and not any("not shown" in n for n in everything.notes)
    code, out, _err = run([path, "--table", "underneath", "--all"], capsys)
    assert code == 0 and "kernel_0" in out


def test_cross_version_note_names_the_real_reason(tmp_path):
    one_env = [make_record(env="local", gpu=gpu, rung="bf16", workload={"precision": "bf16"}) for gpu in ("H100", "A100")]
    cmp = Compare(load([write(tmp_path / "one", one_env)], warn=lambda line: None))
    assert cross(cmp, "env").rows == []
    (note,) = registry.one(cmp, "versions").notes  # the reason: one env, named
    assert note.startswith("only one env in these records (local)")
    apart = [make_record(env="torch212", gpu="A100", rung="bf16", workload={"precision": "bf16"}),
             make_record(env="nightly", gpu="H100", rung="bf16", workload={"precision": "bf16"})]
    cmp = Compare(load([write(tmp_path / "apart", apart)], warn=lambda line: None))
    assert cross(cmp, "env").rows == []
    (note,) = registry.one(cmp, "versions").notes  # the reason: two envs, never on one GPU; which ran where
    assert note.startswith("no rung ran under two envs on the same GPU: ")
    assert note.split(": ", 1)[1].split("; ") == ["nightly on NVIDIA H100 80GB HBM3", "torch212 on NVIDIA A100-SXM4-80GB"]


def test_mfu_above_100_percent_is_never_shown_bare(tmp_path, capsys):
    recs = [make_record(env="local", gpu=None, rung="fp32", mfu=1.62),
            make_record(env="local", gpu=None, rung="tf32", workload={"precision": "tf32"}, mfu=0.4)]
    path = write(tmp_path / "r", recs)
    ladder = registry.build(Compare(load([path], warn=lambda line: None)), ["ladder"])[0]
    assert by(ladder, rung="fp32")["mfu"].text() == "162.0% (peak suspect)"
    assert by(ladder, rung="tf32")["mfu"].text() == "40.0%"
    assert any("peak suspect" in n for n in ladder.notes)
    code, out, _err = run([path, "--table", "ladder"], capsys)
    assert "162.0% (peak" in out and "suspect)" in out and "162.0%  " not in out  # the cell may wrap at WIDTH
    code, out, _err = run([path, "--table", "ladder", "--format", "csv"], capsys)
    row = next(csv.DictReader(io.StringIO(out)))
    assert code == 0 and float(row["mfu_fraction"]) == pytest.approx(1.62) and row["mfu_peak_suspect"] == "True"


def _gpu_records() -> list[Path]:
    """The real H100 and H200 records: committed under results/, else the shared copy beside the checkout."""
    committed = [RESULTS / "gpu-h100-80gb-hbm3", RESULTS / "gpu-h200"]
    shared = [ROOT.parent / "shared" / "gpu-records" / d for d in ("h100-80gb-hbm3-torch2.11", "h200-torch2.11")]
    for paths in (committed, shared):
        if all(p.is_dir() for p in paths):
            return paths
    pytest.skip("the real GPU records are neither in results/gpu-h100-80gb-hbm3 + results/gpu-h200 nor in ../shared/gpu-records")


def test_real_gpu_records_read_as_a_person_would():
    cmp = Compare(load(_gpu_records(), warn=lambda line: None))
    gpus = registry.one(cmp, "gpus")
    order = [(r["rung"], r["batch"]) for r in gpus.rows]
    rung_index = {rung: i for i, rung in enumerate(("fp32", "tf32", "bf16", "sdpa-flash", "vocab-50304", "fused-adamw-clip"))}
    assert order == sorted(order, key=lambda rb: (rung_index[rb[0]], int(rb[1].split(",")[0][2:])))
    for rung in ("fp32", "tf32", "bf16"):  # H100 B=64 ran out of memory where the H200 ran: said, not dropped
        h100 = by(gpus, rung=rung, batch="B=64, T=1024", gpu="h100-80g")
        h200 = by(gpus, rung=rung, batch="B=64, T=1024", gpu="h200")
        assert h100["runs"] == "oom" and h200["tokens_s"] > 0
        assert h200["d_tokens_s"].text() == "n/a (the baseline ran out of memory)"
    fp32 = by(gpus, rung="fp32", batch="B=16, T=1024", gpu="h200")
    # one run a side, and in these two folders the H200 repeated one configuration only: nothing to borrow
    assert fp32["baseline"] == "h100-80g / local" and fp32["d_tokens_s"].text() == "+3.5% (one run a side, noise unknown)"
    ladder = next(t for t in registry.build(cmp, ["ladder"]) if "h100-80g" in t.title and "B=64" in t.title)
    assert by(ladder, rung="fused-adamw-clip")["runs"] == "3x40 pooled"
    assert any("sweep batch-search batch_size=64" in n for n in ladder.notes)
    assert cross(cmp, "env").rows == [] and {g.env for g in cmp.ds.groups} == {"local"}
    (note,) = registry.one(cmp, "versions").notes
    assert note.startswith("only one env in these records (local)")
    under = registry.one(cmp, "underneath")
    per_pair: dict = {}
    for r in under.rows:
        per_pair.setdefault(r["rung"], []).append(r)
    assert per_pair, "no underneath rows: the two all() below would pass on nothing"
    assert all(len(rows) <= 2 + TOP_UNDERNEATH for rows in per_pair.values())
    assert all(rows[0]["what"].startswith("lm_head GEMM") and rows[1]["what"].startswith("attention") for rows in per_pair.values())


def test_the_output_does_not_depend_on_the_hash_seed():
    """Every table of the committed records, printed by two processes with other hash seeds, is the same text: the
    knob table once took its pairs from a set, so which cell's label named a knob's row, and the rows' order, changed
    from one run to the next."""
    import os
    import subprocess
    import sys

    outs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(ROOT)}
        proc = subprocess.run([sys.executable, "-m", "harness.compare", str(RESULTS), "--table", "knobs",
                               "--no-index"], check=False, capture_output=True, text=True, env=env, cwd=ROOT,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert "precision fp32 ->" in outs[0] and outs[0] == outs[1]


def _rows_a(cx):
    return ["a"]


def _rows_b(cx):
    return ["b"]


def test_a_memo_name_is_one_analysiss():
    """Compare.cached: the same function asking again reads its one result; another function asking for that name is
    told at once (a second analysis named 'ladders' once read the ladder table's results as its own rows)."""
    cx = Compare(load([RESULTS / "cpu-amd-epyc-2core"], warn=lambda line: None))
    first = cx.cached("rows", _rows_a)
    assert cx.cached("rows", _rows_a) is first == ["a"]
    with pytest.raises(RuntimeError, match="'rows' is .*_rows_a's, asked for by .*_rows_b"):
        cx.cached("rows", _rows_b)


_HOLDING_MAIN = """
import gc, os, sys, weakref
from harness.console.output import hold, run_process

class Held:
    pass

refs = []

def main():
    assert not gc.isenabled()  # off for the whole command: its objects all live until the end
    held = Held()
    refs.append(weakref.ref(held))
    hold(held)
    sys.stdout.write("x" * 200_000)  # more than a pipe holds: block-buffered, written out only when flushed
    return int(sys.argv[1])

def ended_at_once(code, end=os._exit):
    gc.collect()
    sys.stderr.write(f"ended at once, what main held alive: {refs[0]() is not None}\\n")
    end(code)

os._exit = ended_at_once
if sys.argv[2] == "profiled":
    sys.setprofile(lambda *_args: None)  # as python -m cProfile does: it writes its profile on the way out
run_process("t", main)
"""


@pytest.mark.parametrize("code, profiled", [(0, ""), (3, ""), (0, "profiled")])
def test_a_command_ends_with_its_output_whole_and_what_it_held_not_freed(code, profiled):
    """run_process (compare's and the report's __main__): main runs with the cyclic collector off; every byte it wrote
    reaches the pipe and its exit code is the process's; on success it ends at once, what main held not freed first; on
    failure or under a profiler, the usual exit."""
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-c", _HOLDING_MAIN, str(code), profiled], check=False, cwd=ROOT,
                       capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.returncode == code and p.stdout == "x" * 200_000
    at_once = "ended at once, what main held alive: True\n"
    assert p.stderr == (at_once if code == 0 and not profiled else ""), p.stderr


def test_main_called_in_a_process_that_goes_on_holds_nothing(tmp_path, capsys):
    """hold() outside run_process (a test, a notebook calling main) keeps nothing: the comparison is freed."""
    import gc
    import weakref

    from harness.console import output

    class Held:
        pass

    held = Held()
    ref = weakref.ref(held)
    output.hold(held)
    del held
    gc.collect()
    assert ref() is None and output._held is None



def test_underneath_leaves_out_inductor_kernels_one_profile_missed(tmp_path):
    """The H100 and H200 profiles of one rung, the H200's made as a profile from before the capture fix makes it (no
    Triton kernel): its Triton kernels must not read as 'disappeared', nor its shares be set beside the complete
    profile's; a row says Inductor's kernels are left out, and which side missed them."""
    runs = {"h100": "20261126T101859Z-local-padding-bf16-50257-r0-7c8005",
            "h200": "20261126T202819Z-local-padding-bf16-50257-r0-80b864"}
    for name, run_id in runs.items():
        r = json.loads(next(RESULTS.glob(f"gpu-*/**/{run_id}.json")).read_text())
        k = r["explain"]["kernels"]
        assert k["by_category"].get("triton") and r["workload"]["compile"] not in (None, "off")
        if name == "h200":
            k["by_category"].pop("triton")
            k["top"] = [e for e in k["top"] if e.get("category") != "triton"]
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{run_id}.json").write_text(json.dumps(r))
    cx = Compare(load([tmp_path / "h100", tmp_path / "h200"], warn=lambda line: None))
    [(_across, a, b)] = [p for p in cx.pairs() if p[1].kernels and p[2].kernels]
    assert b.inductor_kernels_missed and not a.inductor_kernels_missed
    from harness.analysis.tables.underneath import kernel_diff

    rows, _hidden = kernel_diff(a, b, top=None)
    assert not any("triton" in what for what, *_ in rows)
    [left_out] = [r for r in rows if r[0].startswith("Inductor-generated kernels: left out")]
    assert left_out[2].startswith("not captured") and "us/step" in left_out[1]
    assert not any("%" in str(va) + str(vb) for what, va, vb, _ in rows if what.startswith(("time in", "appeared",
                                                                                            "disappeared", "changed")))


def test_underneath_matches_inductors_kernels_by_pattern_not_by_their_number(tmp_path):
    """The H100 and H200 profiles of one rung: Inductor numbered one fused softmax-backward kernel _10 on the H100 and
    _14 on the H200. It must not read as 'disappeared' on one GPU and 'appeared' on the other (the verdict's underneath
    line said so); kernels of one pattern are one entry, their times summed."""
    runs = {"h100": "20261126T101859Z-local-padding-bf16-50257-r0-7c8005",
            "h200": "20261126T202819Z-local-padding-bf16-50257-r0-80b864"}
    pattern = "triton_per_fused__softmax__softmax_backward_data__to_copy_eq_masked_fill_mul_view"
    summed = {}
    for name, run_id in runs.items():
        r = json.loads(next(RESULTS.glob(f"gpu-*/**/{run_id}.json")).read_text())
        named = [e for e in r["explain"]["kernels"]["top"] if e["name"].rsplit("_", 1)[0] == pattern]
        assert len({e["name"] for e in named}) == 2  # two kernels of the pattern on each side, numbered differently
        summed[name] = sum(e["per_step_us"] for e in named)
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{run_id}.json").write_text(json.dumps(r))
    cx = Compare(load([tmp_path / "h100", tmp_path / "h200"], warn=lambda line: None))
    [(_across, a, b)] = [p for p in cx.pairs() if p[1].kernels and p[2].kernels]
    from harness.analysis.tables.underneath import kernel_diff

    rows, _hidden = kernel_diff(a, b, top=None)
    assert not any(pattern in what for what, *_ in rows if what.startswith(("appeared", "disappeared")))
    [changed] = [r for r in rows if r[0].startswith(f"changed [triton]: {pattern[:60]}")]  # names shortened to 70
    assert changed[3] == pytest.approx(summed["h200"] - summed["h100"])
