"""Which machine ran a record: the CPU ISA that decides speed per precision, torch's CPU kernel path, the thread
count and a hashed machine id, in the record and in the device label; compare never pools two machines and says
"different CPU ISA". A missing C++ compiler is one line, not a traceback from inside Inductor."""

from __future__ import annotations

import copy
import subprocess
import sys

import pytest
from records_factory import make_record, write

from gpt import torch_compat
from harness.analysis.context import Compare
from harness.analysis.dataset import load
from harness.analysis.tables import registry
from harness.provenance import envinfo
from harness.record.device import device_label, isa_tag

XEON_NO_BF16 = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.80GHz\nflags\t\t: fpu sse4_2 fma avx avx2 avx512f avx512bw avx512vl avx512_vnni\n"
EPYC_BF16 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 fma avx avx2 avx512f avx512bw avx512vl avx512_vnni avx512_bf16\n"
ZEN2 = "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 fma avx avx2\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes asimdhp cpuid sve sve2 bf16 i8mm svebf16\n"


def test_cpu_isa_reads_the_flags_that_decide_precision_speed():
    xeon = envinfo.cpu_isa(XEON_NO_BF16)
    assert xeon["avx512f"] and xeon["avx2"] and not xeon["avx512_bf16"] and not xeon["amx_bf16"]
    assert "asimd" not in xeon  # the other architecture's flags are not listed
    assert isa_tag(xeon) == "AVX512, no native bf16"
    assert isa_tag(envinfo.cpu_isa(EPYC_BF16)) == "AVX512+avx512_bf16"
    assert isa_tag(envinfo.cpu_isa(ZEN2)) == "AVX2, no native bf16"
    arm = envinfo.cpu_isa(GRAVITON)
    assert arm["sve2"] and arm["bf16"] and "avx2" not in arm and isa_tag(arm) == "SVE2+bf16+svebf16"
    assert envinfo.cpu_isa("no flags here\n") is None and isa_tag(None) is None


def test_machine_id_is_stable_hashed_and_never_the_raw_id(tmp_path):
    raw = "0123456789abcdef0123456789abcdef"
    (tmp_path / "machine-id").write_text(raw + "\n")
    sources = [str(tmp_path / "missing"), str(tmp_path / "machine-id")]
    first = envinfo.machine_id(sources, environ={})
    assert first == envinfo.machine_id(sources, environ={}) and first["source"] == str(tmp_path / "machine-id")
    assert len(first["id"]) == 12 and raw[:8] not in first["id"]
    (tmp_path / "other").write_text("fedcba9876543210fedcba9876543210\n")
    assert envinfo.machine_id([str(tmp_path / "other")], environ={})["id"] != first["id"]
    # a container's /etc/machine-id is the image's: HARNESS_MACHINE_ID (the host's raw id) wins, hashed the same way
    assert envinfo.machine_id([str(tmp_path / "other")], environ={"HARNESS_MACHINE_ID": raw})["id"] == first["id"]
    assert envinfo.machine_id([str(tmp_path / "missing")], environ={}) == {"id": None, "source": None}


def cpu_env(model="AMD EPYC", cpuinfo=EPYC_BF16, machine="aaaaaaaaaaaa", threads=2, capability="AVX512"):
    return {"device": "cpu", "cpu": {"model": model, "count": 2, "isa": envinfo.cpu_isa(cpuinfo),
                                     "torch_capability": capability},
            "machine": {"id": machine, "source": "/etc/machine-id"}, "threads": {"torch": threads}}


def test_the_device_label_tells_cpus_apart_and_keeps_old_records_as_they_were():
    """The label carries what tells two CPUs of one name apart (ISA, threads), not the machine id: VMs made from one
    image share /etc/machine-id (two hosts here with different ISA had the same id), so it told nothing apart."""
    assert device_label({"device": "cpu", "cpu": {"model": "AMD EPYC", "count": 2}}) == "cpu: AMD EPYC"  # an older record
    assert device_label({"gpu": {"name": "NVIDIA H100 80GB HBM3"}}) == "NVIDIA H100 80GB HBM3"
    new = device_label(cpu_env())
    assert new == "cpu: AMD EPYC [AVX512+avx512_bf16; 2 threads]"
    assert device_label(cpu_env(cpuinfo=ZEN2)) != new  # same CPU name, another ISA
    assert device_label(cpu_env(machine="bbbbbbbbbbbb")) == new  # the recorded machine id does not split cells
    assert device_label(cpu_env(threads=1)) != new  # another thread count
    gpu = {"gpu": {"name": "NVIDIA H100 80GB HBM3"}, "machine": {"id": "cccccccccccc"}}
    assert device_label(gpu) == "NVIDIA H100 80GB HBM3"


def with_env(record: dict, environment: dict) -> dict:
    record = copy.deepcopy(record)
    record["environment"] = {**record["environment"], **copy.deepcopy(environment), "gpu": None}
    return record


def test_compare_never_pools_two_cpus_of_another_isa_and_names_the_difference(tmp_path):
    """The issue's case: bf16 at 65 ms/step on an EPYC with avx512_bf16, 5,000 ms/step on a CPU of the same name
    without it. Before: one 'cpu: AMD EPYC' cell, 3 runs pooled, every delta within noise."""
    fast = [with_env(make_record(env="latest", gpu=None, rung=rung, repeat=r, ms=[900.0] + [65.0 + r] * 11), cpu_env())
            for r in range(2) for rung in ("bf16",)]
    slow = [with_env(make_record(env="latest", gpu=None, rung="bf16", repeat=r, ms=[9000.0] + [5059.0 + 40 * r] * 11),
                     cpu_env(cpuinfo=ZEN2, machine="dddddddddddd", capability="AVX2")) for r in range(2)]
    write(tmp_path, fast + slow)
    ds = load([tmp_path], warn=lambda line: None)
    assert sorted(len(g.records) for g in ds.groups) == [2, 2]  # two cells, nothing pooled across CPU ISAs
    table = registry.one(Compare(ds), "gpus")
    assert len(table.rows) == 2 and abs(table.rows[1]["d_tokens_s"].delta.value) > 10  # 77x apart, beyond noise
    assert table.rows[1]["d_tokens_s"].delta.verdict == "beyond noise"
    note = next(n for n in table.notes if "different CPU ISA" in n)
    assert "AVX2, no native bf16 vs AVX512+avx512_bf16" in note  # the baseline (first in label order) first
    assert "only the second has avx512_bf16, avx512_vnni, avx512bw, avx512f, avx512vl" in note
    assert "torch's CPU kernels AVX2 vs AVX512" in note
    libraries = registry.one(Compare(ds), "libraries")
    assert any(r["what"] == "cpu.isa.avx512_bf16" and {r["a"], r["b"]} == {True, False} for r in libraries.rows)


def test_compare_says_when_only_one_side_recorded_its_isa(tmp_path):
    old = make_record(env="latest", gpu=None, rung="bf16", ms=[900.0] + [65.0] * 11)  # "cpu: Test CPU", no ISA
    new = with_env(make_record(env="latest", gpu=None, rung="bf16", ms=[9000.0] + [5059.0] * 11), cpu_env(cpuinfo=ZEN2))
    write(tmp_path, [old, new])
    table = registry.one(Compare(load([tmp_path], warn=lambda line: None)), "gpus")
    assert any("CPU ISA recorded for one side only (AVX2, no native bf16)" in n for n in table.notes)


def test_this_machines_record_facts():
    isa = envinfo.cpu_isa()
    if isa is None:
        pytest.skip("no /proc/cpuinfo flags here")
    assert set(isa) <= set(envinfo.ISA_FLAGS) and any(isa.values())
    assert torch_compat.cpu_capability() in (None, "DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256", "NEON") or \
        torch_compat.cpu_capability().isupper()


def test_a_missing_cpp_compiler_is_one_line(tmp_path):
    """CXX naming no compiler: torch's own search fails, and the harness says what to install in one line."""
    code = "from gpt import torch_compat; print(torch_compat.cpp_compiler_missing())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=300,
                         env={**__import__("os").environ, "CXX": str(tmp_path / "no-such-g++")},
                         cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("torch.compile on CPU needs a C++ compiler and none was found (tried ")
    assert "no-such-g++" in out.stdout and "apt-get install g++" in out.stdout
    assert torch_compat.cpp_compiler_missing() is None  # this machine has one (the compiled tests need it)


def test_the_worker_records_a_missing_compiler_as_one_line_error(tmp_path, monkeypatch):
    from test_worker import spec_for

    from harness.worker import measure

    monkeypatch.setattr(torch_compat, "cpp_compiler_missing", lambda: "torch.compile on CPU needs a C++ compiler (test)")
    record = measure(spec_for(tmp_path, compile="default", device="cpu"))
    assert record["status"] == "error" and record["reason"] == "torch.compile on CPU needs a C++ compiler (test)"
    assert not any(n.startswith("traceback") for n in record["notes"])
