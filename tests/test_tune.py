"""python -m harness.tune: the search's steps with workers stood in by known numbers (fast, exact), and end to end
on a CPU with real workers (slow): the CUDA-only knobs recorded as unsupported, the answer printed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from module_cli import run_module
from records_factory import make_record, noisy_ms, write

from harness import tune
from harness.analysis import fastest
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.record.io import iter_records
from harness.runner import launcher as runmod
from harness.runner.plan import load_plan

GIB = 2**30
STACK = "sdpa-auto+inductor-coordinate-descent"
MS = {"start": 100.0, "sdpa-auto": 90.0, "inductor-coordinate-descent": 95.0, "lm-head-liger": 85.0, STACK: 86.0}
BATCH_FACTOR = {16: 1.0, 32: 0.95, 48: 0.93, 56: 0.92, 64: 0.92}  # larger B: a little faster per token
LOSS = [10.0 - 0.1 * i for i in range(12)]


def fake_run_points(calls, oom=frozenset()):
    """harness.run.run_points with every worker replaced by a record of known numbers, written where the worker
    would write it: lm-head-cce unsupported, lm-head-liger faster but its loss drifts 5%, memory 1.5 GiB per B; the
    (rung, B) in `oom` out of memory."""
    def run_points(args, plan_name, points, records=None):
        records = [] if records is None else records
        for p in points:
            calls.append((p.rung, p.workload["batch_size"], p.sweep))
            b = p.workload["batch_size"]
            status = "unsupported" if p.rung == "lm-head-cce" else "oom" if (p.rung, b) in oom else "ok"
            ms = MS.get(p.rung, 100.0) * b / 16 * BATCH_FACTOR.get(b, 1.0) * p.workload.get("grad_accum", 1)
            loss = [x * 1.05 for x in LOSS] if p.rung == "lm-head-liger" else LOSS
            r = make_record(env=args.env, gpu="H100", rung=p.rung, plan=plan_name, workload=p.workload, flags=p.flags,
                            ms=noisy_ms(ms, 0.005, seed=len(calls)), loss=loss, status=status, sweep=p.sweep,
                            reason="Triton has no kernel here" if status != "ok" else None,
                            run_id=runmod.new_run_id(args.env, plan_name, p, args.out))
            r["rerun"] = {"command": runmod.rerun_command(args, p)}
            r["environment"]["gpu"]["memory_bytes"] = 80 * GIB
            if status == "ok":
                r["summary"]["device_used_bytes"] = int(b * 1.5 * GIB)
            write(Path(args.out), [r])
            records.append(r)
        return records
    return run_points


def test_the_search_steps_with_known_numbers(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runmod, "run_points", fake_run_points(calls))
    out = tmp_path / "tune"
    rc = tune.main(["--preset", "gpt2-124m", "--steps", "12", "--warmup-steps", "2", "--batch-size", "16", "--max-batch", "64",
                    "--knobs", "sdpa-auto,inductor-coordinate-descent,lm-head-liger,lm-head-cce", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    rungs = [(r, b) for r, b, _s in calls]
    # 1. the start (three runs) and the first knob (two: the spread each other knob's one run is judged by, shown
    # alike over two configurations), then each other knob alone at B=16
    assert rungs[:8] == [("start", 16)] * 3 + [("sdpa-auto", 16)] * 2 + [("inductor-coordinate-descent", 16),
                                                                         ("lm-head-liger", 16), ("lm-head-cce", 16)]
    # 2. the two that helped, stacked (liger is faster but not equivalent; cce unsupported)
    assert rungs[8] == (STACK, 16)
    # 3. the batch search on the winner from B=16 (its own run is the first try): 32, 64 (too big), 48, 56 (too big)
    assert rungs[9:13] == [(STACK, 32), (STACK, 64), (STACK, 48), (STACK, 56)]
    # 4. the start at the fastest B that fits, for the loss comparison, and nothing after
    assert rungs[13:] == [("start", 48)]
    assert all(s and s["name"] == "batch-search" for _r, _b, s in calls[9:])
    # the answer is fastest.searches' on the records the search wrote, and the search says it
    (search,) = fastest.searches(Compare(load([out], warn=lambda _line: None)))
    assert [c.group.label for c in search.helped] == ["sdpa-auto", "inductor-coordinate-descent"]
    assert search.best.group.label == f"{STACK} [batch_size=48]" and search.best.shape == (48, 1024)
    assert "helped (equivalent and faster than the start): sdpa-auto," in text
    assert f"best: {STACK} [batch_size=48] at B=48, T=1024" in text
    assert "NOT EQUIVALENT: loss final +5.00%" in text and "not equivalent (faster, but its loss drifts): lm-head-liger" in text
    assert "Triton has no kernel here" in text
    assert f"What explains it: {STACK} [batch_size=48] against" in text
    assert "no kernel profile (explain.kernels)" in text  # these stand-in records have none; real workers' do
    # the records: tagged plan fastest, each rerun command naming the plan file the search wrote
    plan_file = next(out.glob("fastest-*.yaml"))
    plan = load_plan(str(plan_file))
    assert plan.name == fastest.FASTEST_PLAN
    assert [r.name for r in plan.rungs] == ["start", "sdpa-auto", "inductor-coordinate-descent", "lm-head-liger", "lm-head-cce"]
    stacked = plan.rung(STACK)  # the stack is its knobs' rungs together: no line of its own in the plan file
    assert stacked.settings["sdpa_backend"] == "auto" and stacked.flags == {"inductor_coordinate_descent_tuning": "on"}
    records = [r for _p, r in iter_records([out])]
    assert len(records) == 14 and {r["plan"] for r in records} == {"fastest"}
    assert all(f"--plan {plan_file}" in r["rerun"]["command"] for r in records)


def test_the_start_that_does_not_fit_the_fastest_b_checks_its_loss_in_micro_batches(tmp_path, monkeypatch, capsys):
    """The batch search finds the stack fastest at B=48, where the start runs out of memory: the start runs again in
    two micro-batches of 24 (the same sequences per step), and the stack at 48 is judged against it."""
    calls = []
    monkeypatch.setattr(runmod, "run_points", fake_run_points(calls, oom={("start", 48)}))
    out = tmp_path / "tune"
    assert tune.main(["--preset", "gpt2-124m", "--steps", "12", "--warmup-steps", "2", "--batch-size", "16",
                      "--max-batch", "64", "--knobs", "sdpa-auto,inductor-coordinate-descent", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert [(r, b) for r, b, _s in calls][-2:] == [("start", 48), ("start", 24)]
    assert "start at B=48, to check the loss" in text and "start at B=24x2, to check the loss" in text
    (search,) = fastest.searches(Compare(load([out], warn=lambda _line: None)))
    assert search.best.group.label == f"{STACK} [batch_size=48]" and search.best.partner.batch == "B=24x2, T=1024"
    assert search.best.equivalent and search.unchecked is None
    assert "  loss against the start: ok (final +0.00%, mean +0.00%, against the start at B=24x2, T=1024)" in text


def test_a_search_from_earlier_measurements_stacks_what_helped_without_running_each_knob_alone(tmp_path, monkeypatch,
                                                                                               capsys):
    calls = []
    monkeypatch.setattr(runmod, "run_points", fake_run_points(calls))
    base = ["--preset", "gpt2-124m", "--steps", "12", "--warmup-steps", "2", "--batch-size", "16", "--no-batch-search",
            "--knobs", "sdpa-auto,inductor-coordinate-descent,lm-head-liger,lm-head-cce"]
    assert tune.main([*base, "--out", str(tmp_path / "first")]) == 0
    capsys.readouterr()
    calls.clear()
    assert tune.main([*base, "--from", str(tmp_path / "first"), "--out", str(tmp_path / "second")]) == 0
    text = capsys.readouterr().out
    # the start again (its deltas stay within this invocation), then the stack of the two that helped before: no knob
    # alone, not liger (faster there, but its loss drifted), not cce (unsupported there)
    assert [(r, b) for r, b, _s in calls] == [("start", 16)] * 3 + [(STACK, 16)] * 2  # twice: the spread a run borrows
    assert "helped before (--from, at B=16 on this device): sdpa-auto +11." in text
    (search,) = fastest.searches(Compare(load([tmp_path / "second"], warn=lambda _line: None)))
    assert search.winner.group.label == STACK and search.winner.equivalent
    # one knob that helped there (the other's runs left out): it runs here, twice, and can win here
    shutil.copytree(tmp_path / "first", tmp_path / "one")
    for f in (tmp_path / "one").glob("*inductor-coordinate-descent*.json"):
        f.unlink()
    calls.clear()
    assert tune.main([*base, "--from", str(tmp_path / "one"), "--out", str(tmp_path / "single")]) == 0
    assert "alone: sdpa-auto" in capsys.readouterr().out
    assert [(r, b) for r, b, _s in calls] == [("start", 16)] * 3 + [("sdpa-auto", 16)] * 2
    # --from records of another B: nothing measured there, so each knob runs alone as without --from
    calls.clear()
    at_32 = ["32" if a == "16" else a for a in base]
    assert tune.main([*at_32, "--from", str(tmp_path / "first"), "--out", str(tmp_path / "third")]) == 0
    assert "--from: no run of plan beyond-ladder or fastest on this device at B=32, T=1024: each knob runs alone" in \
        capsys.readouterr().out
    assert [r for r, _b, _s in calls][3:6] == ["sdpa-auto", "sdpa-auto", "inductor-coordinate-descent"]
    # what helped is read from the records the same way whatever the folders are called
    assert fastest.helped_before(Compare(load([tmp_path / "first"], warn=lambda _line: None)), search.gpu, (16, 1024)) \
        == fastest.helped_before(Compare(load([tmp_path / "second"], warn=lambda _line: None)), search.gpu, (16, 1024)) \
        | {"sdpa-auto": pytest.approx(0.111, abs=0.01), "inductor-coordinate-descent": pytest.approx(0.053, abs=0.01)}


def test_a_budget_tries_smaller_stacks_while_it_lasts_and_starts_none_that_would_not_finish(tmp_path, monkeypatch,
                                                                                            capsys):
    calls, now = [], [0.0]
    fake = fake_run_points(calls)

    def run_points(args, plan_name, points, records=None):  # each run takes 20 s
        now[0] += 20.0 * len(points)
        return fake(args, plan_name, points, records)

    monkeypatch.setattr(runmod, "run_points", run_points)
    monkeypatch.setattr(tune.time, "monotonic", lambda: now[0])
    helped = {"sdpa-auto": 0.11, "inductor-coordinate-descent": 0.05, "lm-head-cce": 0.04}
    session = tune.prepare(tune.make_parser(), tune.RunRequest(preset="gpt2-124m", out=str(tmp_path / "t")),
                           tune.TuneOptions(budget_s=1000.0))
    # three knobs that helped, none sharing a field: all three, then the pairs by expected gain
    assert tune.stacks(session, helped) == [
        "sdpa-auto+lm-head-cce+inductor-coordinate-descent", "sdpa-auto+inductor-coordinate-descent",
        "sdpa-auto+lm-head-cce", "lm-head-cce+inductor-coordinate-descent"]
    # two that change one field: the faster stays
    assert tune.stacks(session, {"sdpa-auto": 0.11, "sdpa-cudnn": 0.12, "lm-head-cce": 0.04}) == ["sdpa-cudnn+lm-head-cce"]
    assert tune.stacks(tune.prepare(tune.make_parser(), tune.RunRequest(preset="gpt2-124m", out=str(tmp_path / "u")),
                                    tune.TuneOptions()), helped) == ["sdpa-auto+lm-head-cce+inductor-coordinate-descent"]
    # a search with a budget of 130 s: the start (3 runs), the first knob (2) and the second (1) take 120 s; the
    # stack (20 s more) would not finish, nor would the batch search's first try
    rc = tune.main(["--preset", "gpt2-124m", "--steps", "12", "--warmup-steps", "2", "--batch-size", "16",
                    "--knobs", "sdpa-auto,inductor-coordinate-descent", "--budget-s", "130", "--out", str(tmp_path / "b")])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert [r for r, _b, _s in calls] == ["start"] * 3 + ["sdpa-auto"] * 2 + ["inductor-coordinate-descent"]
    assert "not started: sdpa-auto+inductor-coordinate-descent (~" in text and "s of --budget-s left)" in text
    assert "batch search stopped before B=32" in text


def test_bad_options_stop_before_any_worker(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(runmod, "run_points", fake_run_points(calls))
    for argv, message in ((["--knobs", "no-such-knob"], "no knob(s) no-such-knob"),
                          (["--start-rung", "nope"], "no rung 'nope' in plan seed-ladder"),
                          (["--knobs-plan", "seed-ladder"], "cumulative"),
                          (["--set", "lm_head_loss=fused"], "lm_head_loss='fused'"),
                          (["--from", str(tmp_path / "nowhere")], "--from: no such folder")):
        with pytest.raises(SystemExit) as exc:
            tune.main([*argv, "--out", str(tmp_path / "x")])
        assert exc.value.code == 2
        assert message in capsys.readouterr().err
    assert calls == []
    assert not list(tmp_path.rglob("fastest-*.yaml"))  # no plan file left behind


@pytest.mark.slow
def test_tune_end_to_end_on_cpu(tmp_path, capsys):
    """Real workers on the tiny preset, not compiled: the start, a knob that runs on a CPU, the CUDA-only knobs
    (unsupported, with their reasons), the batch search on the winner; the answer printed."""
    out = tmp_path / "tune"
    rc = tune.main(["--preset", "tiny", "--set", "compile=off", "--steps", "6", "--warmup-steps", "2", "--device", "cpu",
                    "--knobs", "sdpa-auto,sdpa-cudnn,lm-head-liger,lm-head-cce", "--max-batch", "8", "--multiple", "4",
                    "--include-contended",  # this test is about the search, not the machine's load
                    "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    records = {r["rung"] + (f"@{r['sweep']['value']}" if r.get("sweep") else ""): r for _p, r in iter_records([out])}
    assert records["start"]["status"] == "ok" and records["start"]["plan"] == "fastest"
    assert records["sdpa-auto"]["status"] == "ok"
    reasons = {k: records[k]["reason"] for k in ("sdpa-cudnn", "lm-head-liger", "lm-head-cce")}
    assert all(records[k]["status"] == "unsupported" for k in reasons), reasons
    assert "has no CPU kernel" in reasons["sdpa-cudnn"]
    assert "Triton has no cpu backend" in reasons["lm-head-liger"] or "not installed" in reasons["lm-head-liger"]
    assert any(k.endswith("@8") for k in records)  # the batch search tried B=8 on the winner
    assert "best: " in text and "tokens/s" in text and "MFU:" in text
    assert "SDPA backend 'cudnn' has no CPU kernel" in text
    json.dumps(records["start"])


def test_a_bad_out_is_refused_before_anything_runs(tmp_path):
    """--out that cannot hold records: one line and exit 2 before the plan file or any worker (as harness.run)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    proc = run_module("harness.tune", "--preset", "tiny", "--device", "cpu", "--out", str(blocker / "sub"))
    assert proc.returncode == 2 and "cannot write records there" in proc.stderr.strip().splitlines()[-1]
    assert blocker.read_text() == ""
