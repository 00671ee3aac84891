"""What tells two devices apart (harness.record.device.DeviceIdentity) and the verdict's line for a folder whose runs
share no device with the others' (harness.analysis.devices.apart): a user's first runs beside the shipped records."""

from __future__ import annotations

import json

from records_factory import make_record, write
from shipped import RESULTS

from harness import compare
from harness.analysis.devices import NOT_RECORDED, apart, identity_difference
from harness.record.device import DeviceIdentity
from harness.record.io import read_record
from harness.record.view import RecordView

ISA = {"avx2": True, "avx512f": True, "avx512_bf16": True}


def _cpu(env: str, rung: str, *, model="AMD EPYC", isa=None, threads=2, ms=100.0, repeat=0) -> dict:
    r = make_record(env=env, gpu=None, rung=rung, repeat=repeat, ms=[5000.0, 150.0] + [ms] * 10,
                    workload={"batch_size": 4, "seq_len": 64})
    r["environment"]["cpu"] = {"model": model, "count": 2, "usable": 2, **({"isa": isa} if isa else {})}
    r["environment"]["torch"]["num_threads"] = 2
    if threads:
        r["environment"]["threads"] = {"torch": threads}
    return r


def test_an_older_record_keeps_its_label_and_says_what_torch_used():
    old = RecordView(read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json"))))
    assert old.device_identity == DeviceIdentity("cpu", "AMD EPYC", None, None, 2)
    assert old.device_label == "cpu: AMD EPYC"  # relabelled, the shipped verdicts' Monte Carlo draws would move
    new = DeviceIdentity("cpu", "AMD EPYC", "AVX512+avx512_bf16", 2, 2)
    assert new.label == "cpu: AMD EPYC [AVX512+avx512_bf16; 2 threads]"
    same, differs = identity_difference(new, old.device_identity)
    assert same == ("model AMD EPYC",)
    assert differs == (("ISA flags", "AVX512+avx512_bf16", NOT_RECORDED),
                       ("threads", "2", f"{NOT_RECORDED} (torch used 2)"))


def test_gpus_differ_by_name_alone():
    assert identity_difference(DeviceIdentity("gpu", "NVIDIA H200"), DeviceIdentity("gpu", "NVIDIA H200")) == \
        (("name NVIDIA H200",), ())
    assert identity_difference(DeviceIdentity("gpu", "NVIDIA H200"), DeviceIdentity("gpu", "NVIDIA H100")) == \
        ((), (("name", "NVIDIA H200", "NVIDIA H100"),))


NEW = DeviceIdentity("cpu", "AMD EPYC", "AVX512+avx512_bf16", 2, 2)
OLD = DeviceIdentity("cpu", "AMD EPYC", None, None, 2)
XEON = DeviceIdentity("cpu", "Intel Xeon", "AVX512, no native bf16", 2, 2)
H100, H200 = DeviceIdentity("gpu", "NVIDIA H100 80GB HBM3"), DeviceIdentity("gpu", "NVIDIA H200")
IDS = {d.label: d for d in (NEW, OLD, XEON, H100, H200)}


def test_a_folder_of_another_cpu_without_the_shipped_builds_is_said_once_whatever_the_order():
    sources = {"results/runs": {NEW.label: {"latest"}},
               "results/cpu": {OLD.label: {"torch212", "latest"}, XEON.label: {"torch212"}}}
    (a,) = apart(IDS, sources)
    assert (a.folder, a.device, a.nearest, a.envs_missing) == ("results/runs", NEW.label, OLD.label, ("torch212",))
    assert apart(IDS, dict(reversed(sources.items()))) == [a]  # the nearest device does not depend on the order


def test_folders_compared_on_purpose_say_nothing():
    assert apart(IDS, {"a": {H100.label: {"local"}}, "b": {H200.label: {"local"}}}) == []  # two GPUs, one build
    assert apart(IDS, {"a": {NEW.label: {"latest"}}, "b": {H100.label: {"torch212", "latest"}}}) == []  # CPU and GPU
    assert apart(IDS, {"a": {NEW.label: {"latest"}}, "b": {NEW.label: {"torch212"}}}) == []  # one device in common
    # a ran both builds on its own CPU: only b, which lacks one, is told what would compare builds on its CPU
    assert [(x.folder, x.envs_missing) for x in apart(IDS, {"a": {NEW.label: {"latest", "torch212"}},
                                                            "b": {OLD.label: {"torch212"}}})] == [("b", ("latest",))]


def test_compare_says_which_two_machines_and_what_to_run(tmp_path, capsys):
    write(tmp_path / "results" / "runs", [_cpu("latest", r, isa=ISA) for r in ("fp32", "bf16")])
    write(tmp_path / "results" / "shipped", [_cpu(e, r, threads=None, repeat=k) for e in ("torch212", "latest")
                                             for r in ("fp32", "bf16") for k in (0, 1)])
    runs, shipped = str(tmp_path / "results" / "runs"), str(tmp_path / "results" / "shipped")
    assert compare.main([runs, shipped, "--no-index"]) == 0
    out = capsys.readouterr().out
    text = " ".join(out.split())
    assert (f"No device in common: {runs} ran on epyc-avx512bf16-2t, and the nearest device of {shipped} is epyc "
            "(both model AMD EPYC; ISA flags AVX512+avx512_bf16 vs not recorded; threads 2 vs not recorded (torch used 2)"
            ) in text
    assert f"to compare builds on epyc-avx512bf16-2t, run them there: nox -s bench-torch212, then nox -s compare -- {runs}" in text
    assert max(map(len, out.splitlines())) <= 120
    assert compare.main([runs, shipped, "--no-index", "--format", "json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["verdict"]["apart"]
    assert entry["folder"] == runs and entry["envs_missing"] == ["torch212"]
    assert {"what": "ISA flags", "here": "AVX512+avx512_bf16", "there": NOT_RECORDED} in entry["differs"]
    # the user's runs alone: nothing to say
    assert compare.main([runs, "--no-index", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["apart"] == []


def test_the_reports_key_findings_say_it_first_in_the_same_words(tmp_path):
    from harness.analysis.answers import key_findings
    from harness.analysis.options import CompareOptions, analyse
    from harness.analysis.verdict import verdict

    write(tmp_path / "runs", [_cpu("latest", r, isa=ISA) for r in ("fp32", "bf16")])
    write(tmp_path / "shipped", [_cpu(e, r, threads=None, repeat=k) for e in ("torch212", "latest")
                                 for r in ("fp32", "bf16") for k in (0, 1)])
    _ds, cx = analyse(CompareOptions((tmp_path / "runs", tmp_path / "shipped"), use_index=False), lambda line: None)
    (a,) = verdict(cx).apart
    what, run = a.said(cx.name)
    assert key_findings(cx)[0].text == f"{what}; {run}."
