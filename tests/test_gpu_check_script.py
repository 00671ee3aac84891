"""scripts/gpu_check.sh, checked without a GPU: every `python -m harness.X ...` it runs is accepted by that
module's own argparse parser (and by harness.run's plan/preset/--set checks), the script is valid bash
(and shellcheck-clean where shellcheck exists), and scripts/check_explain_records.py passes a complete
CUDA record and fails incomplete ones. Nothing here trains or imports torch."""

from __future__ import annotations

import importlib
import importlib.util
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from records_factory import kernels, make_record, write

from harness.runner.request import build_points

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_check.sh"
CHECKER = ROOT / "scripts" / "check_explain_records.py"
SHELL_OPERATORS = {"|", "||", "&&", ";", "&", ">", ">>", "<", "2>&1", "|&"}


def harness_commands() -> list[tuple[str, list[str]]]:
    """(module, argv) of every `-m harness.X` in the script; shell words with a $ become the placeholder 1."""
    text = SCRIPT.read_text().replace("\\\n", " ")
    commands = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        m = re.search(r"-m\s+(harness(?:\.\w+)+)(.*)$", line)
        if not m:
            continue
        rest = m.group(2)
        if "$(" in line[:m.start()] or "=(" in line[:m.start()]:  # inside $(...) or an array (...): up to its ')'
            rest = rest.split(")")[0]
        argv = []
        for word in shlex.split(rest):
            if word in SHELL_OPERATORS:
                break
            argv.append("1" if "$" in word else word)
        commands.append((m.group(1), argv))
    return commands


def parser_of(module):
    build = getattr(module, "make_parser", None) or module.parser
    return build()


COMMANDS = harness_commands()


def test_the_script_runs_every_step_it_documents():
    modules = [m for m, _ in COMMANDS]
    assert modules.count("harness.run") == 3  # explain, ladder, padding
    assert {"harness.run", "harness.batch_search", "harness.compare", "harness.report", "harness.gpu_check",
            "harness.gpu_check.sanity"} <= set(modules)


@pytest.mark.parametrize("module_name, argv", COMMANDS, ids=[f"{m} {' '.join(a)}"[:80] for m, a in COMMANDS])
def test_every_option_is_accepted_by_the_modules_parser(module_name, argv):
    # the module `python -m NAME` runs: NAME.__main__ where NAME is a package
    is_package = importlib.util.find_spec(module_name).submodule_search_locations is not None
    module = importlib.import_module(module_name + ".__main__" if is_package else module_name)
    if not hasattr(module, "make_parser") and not hasattr(module, "parser"):  # a program without options
        assert argv == [], f"{module_name} takes no options"
        return
    parser = parser_of(module)
    known = {s for action in parser._actions for s in action.option_strings}
    for word in argv:
        if word.startswith("-"):
            assert word.split("=", 1)[0] in known, f"{module_name} has no option {word}"
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse printed why on stderr
        pytest.fail(f"{module_name} {shlex.join(argv)}: rejected by its parser (exit {exc.code})")
    if module_name == "harness.run":  # plan, rung names, preset and --set fields exist; the configs validate
        _plan, points = build_points(module.parse_request(argv))
        assert points and all(p.workload["preset"] == "gpt2-124m" and p.workload["device"] == "cuda" for p in points)
    if module_name == "harness.batch_search":
        from harness.runner.plan import load_plan

        assert args.rung in {r.name for r in load_plan(args.plan).rungs}
        _plan, (point,) = build_points(module.run_args(args, args.start))
        assert (point.workload["precision"], point.workload["compile"], point.workload["seq_len"]) == ("bf16", "default", 1024)


def test_explain_runs_capture_kernels_and_include_an_sdpa_rung():
    (argv,) = [a for m, a in COMMANDS if m == "harness.run" and "--rungs" in a]
    from harness import run as runmod

    _plan, points = build_points(runmod.parse_request(argv))
    assert all(p.workload["profile_steps"] > 0 for p in points)
    assert any(p.workload["attention"] == "sdpa" for p in points)


def test_scripts_the_script_calls_exist():
    text = SCRIPT.read_text()
    for path in re.findall(r"\b(scripts/[\w./-]+\.py)\b", text):
        assert (ROOT / path).is_file(), path


def test_bash_syntax():
    proc = subprocess.run(["bash", "-n", str(SCRIPT)], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean():
    proc = subprocess.run(["shellcheck", str(SCRIPT)], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------- the record checker

def load_checker():
    spec = importlib.util.spec_from_file_location("check_explain_records", CHECKER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_record(rung="sdpa-flash", **drop):
    sdpa = rung != "bf16"
    w = {"precision": "bf16", "attention": "sdpa" if sdpa else "naive", "sdpa_backend": "flash" if sdpa else "auto",
         "profile_steps": 3}
    explain = kernels("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", ["pytorch_flash::flash_fwd_kernel"] if sdpa else [],
                      [("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN", "gemm", 900.0, 0.5)], backend="flash" if sdpa else None)
    explain["kernels"]["lm_head_gemm"]["precision"] = "bf16"
    explain["memory_split"] = {"available": True, "reason": None, "tensors_bytes": 9 * 2**30, "allocator_cache_bytes": 2**30,
                               "outside_allocator_bytes": 2**29, "method": "nvml-process"}
    explain["power"] = {"available": True, "reason": None, "mean_w": 600.0, "sm_clock_mhz_mean": 1980.0, "throttled": False}
    explain["mfu"] = {"available": True, "reason": None, "mfu_datasheet": 0.4, "datasheet": {"gpu": "H100 SXM"}, "dtype": "bf16",
                      "mfu_measured": 0.5}
    for part, reason in drop.items():
        explain[part] = {"available": False, "reason": reason}
    r = make_record(env="local", gpu="H100", rung=rung, workload=w, explain=explain)
    r["environment"]["gpu"]["memory_bytes"] = 80 * 2**30
    return r


def run_checker(tmp_path, records):
    lines: list[str] = []
    status = load_checker().check([write(tmp_path / "explain", records)], out=lines.append)
    return status, lines


def test_checker_passes_complete_cuda_records(tmp_path):
    status, lines = run_checker(tmp_path, [cuda_record("bf16"), cuda_record("sdpa-flash")])
    assert status == 0, lines
    assert not [x for x in lines if x.startswith("FAIL")]
    assert any("pytorch_flash::flash_fwd_kernel" in x and "nvjet_tst" in x for x in lines)
    assert any("no fused attention kernel expected" in x for x in lines)
    assert lines[-1] == "2 record(s) checked: ok"


def test_checker_fails_loudly_on_missing_evidence(tmp_path):
    status, lines = run_checker(tmp_path, [cuda_record("sdpa-flash", power="nvidia-ml-py (pynvml) is not installed")])
    assert status == 1
    assert any(x.startswith("FAIL") and "explain.power not available: nvidia-ml-py" in x for x in lines)


def test_checker_needs_an_attention_kernel_somewhere(tmp_path):
    status, lines = run_checker(tmp_path, [cuda_record("bf16")])
    assert status == 1 and any("no record names an attention kernel" in x for x in lines)


def test_checker_rejects_cpu_and_failed_runs(tmp_path):
    cpu = cuda_record("sdpa-flash")
    cpu["environment"]["device"] = "cpu"
    oom = make_record(env="local", gpu="H100", rung="bf16", status="oom", reason="CUDA out of memory")
    status, lines = run_checker(tmp_path, [cpu, oom])
    assert status == 1
    assert any("ran on 'cpu'" in x for x in lines) and any("status oom: CUDA out of memory" in x for x in lines)


def test_checker_with_nothing_to_check(tmp_path):
    lines: list[str] = []
    assert load_checker().check([tmp_path / "missing"], out=lines.append) == 1
    assert lines[-1].startswith("FAIL: no measured record")
