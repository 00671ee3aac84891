"""Issue 22: hostile records, plans and options. A record file is untrusted input (records travel between people
and clusters); so are plans and cluster configs. Each test is one reproduction of the issue."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import CPU_RECORDS, FORMULA, PAYLOAD, WRONG_TYPES, field_paths, with_value, write_hostile
from module_cli import ROOT, run_module
from shipped import RESULTS

from harness import compare
from harness.report import __main__ as report_main

CONTROL = ("\x1b", "\x07")


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    return write_hostile(tmp_path_factory.mktemp("hostile"), limit=4)


def test_terminal_escapes_never_reach_the_terminal(hostile, capsys, tmp_path):
    """1. compare (every format) and report print no ESC or BEL from a record, not even in a path."""
    for fmt in ("text", "markdown", "csv", "json"):
        assert compare.main([str(hostile), "--format", fmt]) == 0
        out, err = capsys.readouterr()
        assert "torch212" in out
        assert not any(c in out + err for c in CONTROL), fmt
    named = tmp_path / "named"
    named.mkdir()
    (named / "bad\x1b]0;pwned\x07.json").write_text("{}")  # a file name is record data too
    compare.main([str(hostile), str(named)])
    out, err = capsys.readouterr()
    assert "skipped" in err and not any(c in out + err for c in CONTROL)


def test_report_markdown_carries_no_html_links_or_images(hostile, tmp_path, capsys):
    """2. report.md (and compare --format markdown) has no raw HTML, no javascript: link, no external image."""
    assert report_main.main([str(hostile), "-o", str(tmp_path / "r")]) == 0
    out, _err = capsys.readouterr()
    assert not any(c in out for c in CONTROL)
    compare.main([str(hostile), "--format", "markdown"])
    for text in ((tmp_path / "r" / "report.md").read_text(), capsys.readouterr().out):
        assert "AMD EPYC" in text
        for bad in ("<script", "<img", "](javascript:", "](http://evil", "\x1b"):
            assert bad not in text
        assert "&lt;script>" in text  # shown, as text


def test_csv_cells_are_no_formulas(tmp_path, capsys):
    """3. A rung named like a spreadsheet formula reaches the CSV with a leading apostrophe."""
    def edit(r):
        r["rung"] = FORMULA
    records = write_hostile(tmp_path, edit=edit, limit=2)
    assert compare.main([str(records), "--format", "csv"]) == 0
    rows = [row for row in csv.reader(io.StringIO(capsys.readouterr().out)) if row and not row[0].startswith("#")]
    cells = [c for row in rows for c in row]
    assert "'" + FORMULA in cells
    assert not any(c.startswith(("=", "+", "@")) for c in cells)


def test_chart_file_names_stay_inside_out(tmp_path, capsys):
    """4. A plan named to climb out of -o: the report is written, every file inside -o, nothing above it."""
    def edit(r):
        r["plan"] = "x/../../../escaped-by-plan"
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    out = tmp_path / "a" / "b" / "out"
    (out / "ladder-x").mkdir(parents=True)
    assert report_main.main([str(records), "-o", str(out)]) == 0
    capsys.readouterr()
    written = {p.name for p in out.iterdir()}
    assert "report.md" in written and any(n.startswith("ladder-x_") for n in written)
    assert not list(tmp_path.rglob("escaped-by-plan*"))


def test_chart_labels_are_drawn_as_written():
    """4. Chart text from a record: no control characters, no mathtext (an unbalanced $ fails a chart)."""
    import matplotlib.pyplot as plt

    from harness.report import figures

    fig, ax = plt.subplots()
    ax.bar([0, 1], [1, 2], label="a" + PAYLOAD)
    ax.set_xticks([0, 1], ["$\\frac{", "y\x1b"])
    ax.set_title("t\x07")
    ax.legend()
    assert figures._png(fig).startswith(b"\x89PNG")
    texts = [t.get_text() for t in fig.findobj(plt.Text)] + [ax.xaxis.get_major_formatter()(0, 0)]
    assert not any(c in t for t in texts for c in CONTROL)


def _run_shell(command: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", command], check=False, cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)


@pytest.mark.parametrize("redirect", ["> /dev/full", ">&-"])
def test_stdout_that_takes_nothing(hostile, redirect):
    """9. compare into /dev/full or a closed stdout: one line, exit 1, no traceback."""
    p = _run_shell(f"{sys.executable} -m harness.compare {hostile} --format json {redirect}")
    assert p.returncode == 1
    assert p.stderr.strip().count("\n") == 0 and "cannot write the output to stdout" in p.stderr, p.stderr


def test_report_into_a_folder_it_cannot_write(hostile, tmp_path):
    """9. report -o onto a file, or into a read-only folder: one line, exit 1, nothing left behind."""
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    p = run_module("harness.report", hostile, "-o", a_file)
    assert p.returncode == 1 and "not a directory" in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0
    if os.geteuid() == 0:
        pytest.skip("root writes into a read-only folder")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        p = run_module("harness.report", hostile, "-o", ro)
        assert p.returncode == 1 and "Permission denied" in p.stderr and "Traceback" not in p.stderr
        assert not list(ro.iterdir())
    finally:
        ro.chmod(0o700)


def test_report_files_whole_or_not_at_all(tmp_path, monkeypatch):
    """6/9. A disk that fills up while the report is written: no partial file, no temp file."""
    from harness.console import output

    real = os.fsync
    calls = []

    def full(fd):
        calls.append(fd)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(fd)

    monkeypatch.setattr(output.os, "fsync", full)
    with pytest.raises(output.OutputError, match="No space left on device"):
        output.write_files(tmp_path, {"a.md": b"a", "b.html": b"b", "c.png": b"c"})
    assert not list(tmp_path.iterdir())
    with pytest.raises(output.OutputError, match="not a plain file name"):
        output.write_files(tmp_path, {"../x.png": b"x"})


def test_sbatch_values_cannot_add_a_line(tmp_path):
    """5. --partition $'p1\\ntouch /tmp/pwned' is refused (exit 2, one line, nothing written); a value with a space
    is one quoted word; a cluster config's setup line with a newline is refused too."""
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--partition", "p1\ntouch /tmp/pwned")
    assert p.returncode == 2 and "--partition" in p.stderr and "touch" not in p.stdout
    assert p.stderr.strip().count("\n") == 0 and not list(tmp_path.iterdir())
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--partition", "p 1")
    assert p.returncode == 0 and "#SBATCH '--partition=p 1'\n" in p.stdout
    config = tmp_path / "cluster.yaml"
    config.write_text('slurm:\n  setup: ["module load x\\ntouch /tmp/pwned"]\n')
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path, "--cluster-config", config)
    assert p.returncode == 2 and "slurm.setup" in p.stderr


def test_dockerfile_values_are_one_line():
    from dataclasses import replace

    from harness.envs.dockerfiles import render_dockerfile
    from harness.envs.spec import SpecError, load_spec

    spec = load_spec("latest")
    assert "FROM" in render_dockerfile(spec)
    with pytest.raises(SpecError, match="control character"):
        render_dockerfile(replace(spec, base_image="nvidia/cuda:12\nRUN touch /tmp/pwned"))


def _laughs(levels: int = 9) -> str:
    """A YAML flow value of 9**levels strings in a few hundred bytes, every anchor inside it."""
    text = '&l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
    for i in range(1, levels):
        text = f"[{text}, " + ", ".join([f"*l{i - 1}"] * 8) + "]"
        text = f"&l{i} " + text
    return text


@pytest.mark.parametrize("key", ["description", "cumulative"])
def test_billion_laughs_plan_is_refused(tmp_path, key):
    """8. A plan whose aliases expand to a billion values: refused at once, one line, exit 2, nothing run."""
    plan = tmp_path / "laughs.yaml"
    plan.write_text(f"name: laughs\n{key}: {_laughs()}\nrungs:\n  - name: r\n    set: {{steps: 3}}\n")
    out = tmp_path / "out"
    p = run_module("harness.run", "--plan", plan, "--out", out, timeout=60)
    assert p.returncode == 2 and "aliases" in p.stderr.strip().splitlines()[-1] and not out.exists()


def test_billion_laughs_cluster_config_is_refused(tmp_path):
    config = tmp_path / "cluster.yaml"
    config.write_text(f"slurm:\n  sbatch_options: {_laughs()}\n")
    p = run_module("harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                   "--results", tmp_path / "results", "--cluster-config", config, timeout=60)
    assert p.returncode == 2 and "aliases" in p.stderr


def test_yaml_that_refers_to_itself_is_refused():
    from harness.console.yamlfile import YamlTooLarge, load_yaml

    assert load_yaml("a: &x [1, 2]\nb: *x\n") == {"a": [1, 2], "b": [1, 2]}  # an alias used sanely still works
    with pytest.raises(YamlTooLarge, match="contains it"):
        load_yaml("a: &x [1, *x]\n")


@pytest.mark.parametrize("args, message", [
    (["--steps", "1000000000"], "--steps: '1000000000': expected a number of steps from 1 to 100,000"),
    (["--seq-len", "100000"], "--seq-len: '100000': expected a sequence length from 1 to 65,536"),
    (["--batch-size", "1000000"], "--batch-size: '1000000': expected a batch size from 1 to 65,536"),
    (["--set", "steps=1000000000"], "steps=1000000000: must be at most 100,000"),  # --set: the workload's own bounds
    (["--set", "vocab_size=1"], "vocab_size=1: must be at least 2"),
    (["--batch-size", "8192", "--seq-len", "8192"], "batch_size x seq_len = 67,108,864: must be at most 16,777,216 tokens per micro-step"),
    (["--repeats", "1000000"], "--repeats: '1000000': expected a number of runs, or 'auto', from 1 to 1,000"),
])
def test_sizes_are_bounded_before_any_worker(tmp_path, args, message):
    """7. Every size a user sets has a bound, checked before a worker starts: one line naming field and bound."""
    out = tmp_path / "out"
    p = run_module("harness.run", "--out", out, *args, timeout=60)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith(message) and not out.exists()


def test_plan_steps_are_bounded(tmp_path):
    plan = tmp_path / "big.yaml"
    plan.write_text("name: big\nrungs:\n  - name: a\n    set: {steps: 1000000000}\n")
    p = run_module("harness.run", "--plan", plan, "--out", tmp_path / "out", timeout=60)
    assert p.returncode == 2 and "steps=1000000000: must be at most 100,000" in p.stderr


@pytest.mark.parametrize("edit, why", [
    (lambda r: r["steps"].update(ms=[0.0] * len(r["steps"]["ms"])), "steps.ms[0] = 0.0: out of range for a time in ms (from 1e-06"),
    (lambda r: r["steps"].update(ms=[-abs(v) for v in r["steps"]["ms"]]), "out of range for a time in ms"),
    (lambda r: r["summary"].update(peak_rss_bytes=-1), "summary.peak_rss_bytes = -1: out of range for a size in bytes"),
])
def test_out_of_range_measurements_are_refused_on_read(tmp_path, capsys, edit, why):
    """10. A record whose step times are 0 or negative, or whose peak RSS is -1, passes the schema; it is left out
    with one warning when read, and the rest is compared as without it."""
    import shutil
    import warnings

    sources = sorted((RESULTS / "cpu-amd-epyc-2core").glob("*.json"))[:4]
    good = tmp_path / "good"
    good.mkdir()
    for s in sources[1:]:
        shutil.copy(s, good)
    bad = json.loads(sources[0].read_text())
    edit(bad)
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy divide-by-zero on the way
        assert compare.main([str(good), str(tmp_path / "bad.json"), "--detail"]) == 0
    out, err = capsys.readouterr()
    assert err.count("warning:") == 1 and why in err
    assert "Left out: 1 unreadable" in out  # the verdict counts it
    # in the left-out table, with its reason (whole in CSV; the text table may wrap the cell at WIDTH)
    assert compare.main([str(good), str(tmp_path / "bad.json"), "--table", "left-out", "--format", "csv"]) == 0
    assert why in capsys.readouterr().out
    assert compare.main([str(good), "--detail"]) == 0
    alone = capsys.readouterr().out

    def tables(text: str) -> str:  # after the verdict, before the left-out table
        return text.split("--format markdown|csv|json\n", 1)[1].split("== Left out")[0]

    assert tables(out) == tables(alone)  # the same tables as without the bad file
    assert "nan" not in out


def test_ten_thousand_other_json_files_are_summarised(tmp_path, capsys):
    """Also seen: 10,000 non-record JSON files beside the records: 20 named, one line for the rest."""
    import shutil

    for s in sorted((RESULTS / "cpu-amd-epyc-2core").glob("*.json"))[:2]:
        shutil.copy(s, tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    for i in range(10_000):
        (other / f"{i:05}.json").write_text("{}")
    assert compare.main([str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 21 and "9,980 more file(s) skipped, 10,000 in all" in err[-1]


def _disk_full(monkeypatch, module, after: int = 0):
    """os.fsync in `module` raises ENOSPC from its (after+1)-th call on: a disk that fills up."""
    import errno

    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) > after:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(module.os, "fsync", fsync)


def test_disk_full_leaves_no_partial_or_temp_file(tmp_path, monkeypatch):
    """6. A disk full from the start: --out's check is one RecordError and leaves no 0-byte probe; a record whose
    write fails half-way leaves neither the record nor its .tmp-*.partial."""
    from harness.record import io as record_io
    from harness.record.model import RecordError

    record = record_io.read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")))
    _disk_full(monkeypatch, record_io)
    with pytest.raises(RecordError, match="No space left on device"):
        record_io.check_writable(tmp_path)
    with pytest.raises(OSError, match="No space left on device"):
        record_io.write_record(record, tmp_path)
    assert not list(tmp_path.iterdir())


def test_disk_full_mid_run_stops_with_one_line_and_keeps_what_finished(tmp_path, monkeypatch, capsys):
    """6. The worker could not write its record and not even the failure record fits: the run stops with one line
    (exit 1), lists the runs that finished with their records, and leaves no partial file."""
    from harness import run
    from harness.record import io as record_io
    from harness.runner import launcher

    finished = record_io.read_record(min((RESULTS / "cpu-amd-epyc-2core").glob("*.json")))
    out = tmp_path / "out"

    def run_point(spec, timeout_s, progress=None, python=None):
        if not run_point.calls:
            run_point.calls = 1
            return {**finished, "run_id": spec.run_id}
        _disk_full(monkeypatch, record_io)
        return launcher._record_or_failure(spec, "", "worker exited with code 1: harness.worker: cannot write its "
                                           "record: No space left on device")
    run_point.calls = 0
    monkeypatch.setattr(launcher, "run_point", run_point)
    code = run.main(["--rungs", "fp32,tf32,bf16", "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.err.strip().count("\n") == 0 and "No space left on device" in captured.err
    assert "the run stops here; 1 run(s) finished" in captured.err and "Traceback" not in captured.err
    assert "finished before the stop: 1 of 3 run(s)" in captured.out and "fp32 #0: ok" in captured.out
    assert not [p for p in out.iterdir()]  # the stub kept its record in memory; nothing half-written on disk


def test_credentials_in_recorded_values_are_stripped():
    """11. Allow-listed variables whose values hold credentials are recorded without them; TRITON_PWD not at all."""
    from harness.provenance.envinfo import env_vars

    got = env_vars({"TORCHINDUCTOR_REDIS_URL": "redis://u:pw@h", "TORCH_COMPILE_DSN": "postgres://u:pw@h/db",
                    "TRITON_PWD": "pw", "TORCHINDUCTOR_DSN": "host=h password=pw user=u",
                    "TORCHINDUCTOR_CACHE_DIR": "/tmp/a@b", "HARNESS_ENV": "latest"})
    assert got == {"TORCHINDUCTOR_REDIS_URL": "redis://***@h", "TORCH_COMPILE_DSN": "postgres://***@h/db",
                   "TORCHINDUCTOR_DSN": "host=h password=*** user=u", "TORCHINDUCTOR_CACHE_DIR": "/tmp/a@b",
                   "HARNESS_ENV": "latest"}
    assert "pw" not in json.dumps(got)


def test_a_killed_workers_reason_names_the_signal():
    """Also seen: a SIGKILLed worker that printed nothing got the reason "worker exited with code -9: "."""
    from harness.runner.launcher import exit_reason

    assert exit_reason(-9, "") == ("worker killed by SIGKILL (exit code -9), from outside: the kernel's OOM killer does "
                                   "this (dmesg says); it printed nothing")
    assert exit_reason(-15, "step 3") == "worker killed by SIGTERM (exit code -15): step 3"
    assert exit_reason(1, "") == "worker exited with code 1; it printed nothing"


def test_an_env_that_does_not_exist_is_refused(tmp_path):
    """Also seen: --env nosuchenv ran and tagged its records with that name."""
    out = tmp_path / "out"
    p = run_module("harness.run", "--env", "nosuchenv", "--out", out, timeout=60)
    assert p.returncode == 2 and "--env nosuchenv: no such env" in p.stderr.strip().splitlines()[-1]
    assert not out.exists()


def test_wrong_typed_fields_never_crash_compare_or_report(tmp_path, capsys):
    """Class 3 of issue 31: every field of a CPU and a GPU record given a value of each other JSON type. The schema
    refuses it (the file is left out with one warning naming the file and the field) or compare (every format) and
    report read it without a traceback; the rest is compared."""
    from harness.record.migrate import migrate
    from harness.record.model import RecordError
    from harness.record.validator import validate

    sources = [CPU_RECORDS / "20261123T011151Z-torch212-seed-ladder-fp32-r0-2d048b.json",
               RESULTS / "gpu-h100-80gb-hbm3/ladder/20261123T081330Z-local-seed-ladder-tf32-r0-1ed9a9.json"]
    good = tmp_path / "good"
    good.mkdir()
    for s in [*sources, CPU_RECORDS / "20261123T012147Z-latest-seed-ladder-fp32-r0-436177.json"]:
        shutil.copy(s, good)
    passing, refused = tmp_path / "passing", []
    passing.mkdir()
    for source in sources:
        record = json.loads(source.read_text())
        for path in list(field_paths(record))[1:]:
            for value in WRONG_TYPES:
                if type(value) is type(_at(record, path)) or path[0] == "schema_version":
                    continue
                bad = with_value(record, path, value)
                bad["run_id"] = f"{record['run_id']}-{len(refused)}-{len(list(passing.iterdir()))}"
                try:
                    validate(migrate(bad))
                except RecordError as exc:
                    refused.append((path, str(exc)))
                    continue
                (passing / f"{bad['run_id']}.json").write_text(json.dumps(bad))
    assert len(refused) > 500 and all(str(p[-1]) in why for p, why in refused if not isinstance(p[-1], int))
    for fmt in ("text", "markdown", "csv", "json"):
        assert compare.main([str(good), str(passing), "--detail", "--format", fmt]) == 0, fmt
    assert report_main.main([str(good), str(passing), "-o", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    one = tmp_path / "one"
    one.mkdir()
    (one / "bad.json").write_text(json.dumps(with_value(json.loads(sources[0].read_text()), ("workload", "batch_size"), "4")))
    assert compare.main([str(good), str(one)]) == 0
    _out, err = capsys.readouterr()
    assert err.count("warning:") == 1 and "bad.json: skipped: workload.batch_size: '4' is not of type" in err


def _at(record, path):
    for key in path:
        record = record[key]
    return record


def test_markdown_from_a_record_links_nothing_as_github_renders_it(tmp_path, capsys):
    """Class 1 of issue 31: record text with a link reference definition, bare URLs, www. and email addresses in
    env, rung, plan, CPU model and notes: report.md and compare --format markdown, rendered as GitHub renders them,
    have no link or image that a record made (no href or src naming the record's host)."""
    from hostile import LIVE_MARKDOWN, gfm_html

    def edit(r):
        for key in ("env", "rung", "plan"):
            r[key] += LIVE_MARKDOWN
        r["environment"]["env_name"] = r["env"]
        r["environment"]["cpu"]["model"] += LIVE_MARKDOWN
        r["notes"] = [LIVE_MARKDOWN]
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    assert report_main.main([str(records), "-o", str(tmp_path / "r")]) == 0
    texts = [(tmp_path / "r" / "report.md").read_text()]
    for args in ([], ["--detail"], ["--table", "ladder"]):
        assert compare.main([str(records), "--format", "markdown", *args]) == 0
        texts.append(capsys.readouterr().out)
    for text in texts:
        html = gfm_html(text)
        assert "evil.example" in html  # shown, as text
        assert not re.search(r"(href|src)=\"[^\"]*evil", html), re.findall(r"<(?:a|img) [^>]*evil[^>]*>", html)[:3]


def test_csv_title_lines_hold_no_formula(tmp_path, capsys):
    """Class 2 of issue 31: a name with a comma, a quote and a formula splits no '# title' line into a formula cell."""
    def edit(r):
        r["env"] = r["environment"]["env_name"] = "x,=cmd|' /C calc'!A0"
        r["plan"] = 'p," =1+2",+sum'
    records = write_hostile(tmp_path, edit=edit, limit=4)
    assert compare.main([str(records), "--format", "csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert any(row and row[0].startswith("# ") for row in rows)
    cells = [c.strip() for row in rows for c in row]
    assert "'=cmd|' /C calc'!A0" in " ".join(cells)
    assert not any(c.startswith(("=", "+", "@")) for c in cells), [c for c in cells if c.startswith(("=", "+", "@"))]


def test_a_lone_surrogate_is_shown_as_an_escape(tmp_path):
    """Class 4 of issue 31: a lone surrogate in a record's text: compare (every format) and report print it as
    \\ud800, exit 0, no traceback."""
    from hostile import SURROGATE

    def edit(r):
        r["env"] = r["environment"]["env_name"] = r["env"] + SURROGATE
        r["rung"] += SURROGATE
        r["environment"]["cpu"]["model"] += SURROGATE
    records = write_hostile(tmp_path / "records", edit=edit, limit=4)
    for fmt in ("text", "markdown", "csv", "json"):
        p = run_module("harness.compare", records, "--format", fmt, "--detail", timeout=120)
        assert p.returncode == 0 and "\\ud800" in p.stdout and not p.stderr, (fmt, p.stderr[-300:])
    p = run_module("harness.report", records, "-o", tmp_path / "r", timeout=300)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-300:]
    assert "\\ud800" in (tmp_path / "r" / "report.md").read_text() and "\\ud800" in (tmp_path / "r" / "report.html").read_text()


def _yaml_command(kind: str, tmp_path: Path) -> tuple[Path, list[str], dict]:
    """Where a plan, a cluster config or an env spec goes, the command that reads it, and its environment."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if kind == "plan":
        return tmp_path / "in.yaml", ["-m", "harness.run", "--plan", str(tmp_path / "in.yaml"),
                                      "--out", str(tmp_path / "out")], env
    if kind == "cluster config":
        return tmp_path / "in.yaml", ["-m", "harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus",
                                      "a100", "--dry-run", "--results", str(tmp_path / "out"), "--cluster-config",
                                      str(tmp_path / "in.yaml")], env
    (tmp_path / "envs" / "x").mkdir(parents=True)
    return tmp_path / "envs" / "x" / "env.yaml", ["-m", "harness.envs", "show", "x"], \
        {**env, "HARNESS_ENVS_DIR": str(tmp_path / "envs")}


@pytest.mark.parametrize("kind", ["plan", "cluster config", "env spec"])
@pytest.mark.parametrize("content, message", [
    ("name: deep\nrungs: " + "[" * 30_000 + "\n", "nested deeper than 64 levels"),
    (b"name: caf\xe9\nrungs:\n  - name: r\n", "not UTF-8 (invalid continuation byte at byte 9)"),
    (300 * 2**20, "larger than 1 MiB"),  # a sparse file of 300 MB: refused from its size, not read
])
def test_yaml_that_is_deep_not_utf8_or_huge_is_refused_in_one_line(tmp_path, kind, content, message):
    """Classes 5 and 6 of issue 31: a plan, cluster config or env spec nested 30,000 deep, in Latin-1, or of 300 MB:
    refused with one line naming the file (exit 2 for the options harness.run and harness.cluster take), never a
    traceback; the 300 MB file under a 300 MB memory limit, so reading it whole would fail."""
    path, args, env = _yaml_command(kind, tmp_path)
    if isinstance(content, int):
        path.touch()
        os.truncate(path, content)
    else:
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    p = subprocess.run(["bash", "-c", 'ulimit -v 300000; exec "$@"', "-", sys.executable, *args], check=False,
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    last = p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.stdout.strip().splitlines()[-1]
    assert "Traceback" not in p.stderr + p.stdout and message in last and "refused" in last, p.stderr[-400:] + p.stdout[-400:]
    assert p.returncode == (1 if kind == "env spec" else 2)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_stop_signal_while_the_report_is_written_leaves_nothing(hostile, tmp_path, monkeypatch, capsys, signum):
    """Class 7 of issue 31: Ctrl-C or SIGTERM arriving while report's files are written (the signal sent for real,
    after the first file reached the disk): one line, exit 128 + the signal, no temp file, no report file."""
    from harness.console import output

    real, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        real(fd)
        if len(calls) == 1:
            os.kill(os.getpid(), signum)

    monkeypatch.setattr(output.os, "fsync", fsync)
    out = tmp_path / "r"
    code = output.run_main("python -m harness.report", lambda: report_main.main([str(hostile), "-o", str(out)]))
    err = capsys.readouterr().err.strip()
    assert code == 128 + signum and calls
    assert err.splitlines()[-1] == f"python -m harness.report: stopped by {signal.Signals(signum).name}; no output " \
                                   "file is left half-written"
    assert not list(out.iterdir())


@pytest.mark.parametrize("module", [compare, report_main])
def test_a_stop_signal_during_the_analysis_is_one_line(hostile, tmp_path, monkeypatch, capsys, module):
    """Class 7 of issue 31: Ctrl-C during compare's or report's analysis: one line, exit 130, nothing written."""
    from harness.analysis import options
    from harness.console import output

    real = options.load

    def load(*args, **kwargs):  # the signal arrives while the records are read
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    monkeypatch.setattr(options, "load", load)
    out = tmp_path / "r"
    code = output.run_main("python -m x", lambda: module.main([str(hostile), *(["-o", str(out)] if module is report_main else [])]))
    captured = capsys.readouterr()
    assert code == 130 and captured.err.strip() == "python -m x: stopped by SIGINT; no output file is left half-written"
    assert not captured.out and not out.exists()


def _fake_torch_wheel(folder: Path, version: str, tag: str = "py3-none-any") -> Path:
    """A small installable wheel that calls itself torch `version` (a module and its dist-info)."""
    import base64
    import hashlib
    import zipfile

    info = f"torch-{version}.dist-info"
    files = {"torch/__init__.py": f"__version__ = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
                     f"{len(text.encode())}\n" for name, text in files.items()) + f"{info}/RECORD,,\n"
    path = folder / f"torch-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in {**files, f"{info}/RECORD": record}.items():
            z.writestr(name, text)
    return path


def test_a_wheel_folder_installs_torch_from_the_folder_alone_and_says_which_wheel(tmp_path, monkeypatch):
    """Class 8 of issue 31: bisect --find-links DIR installs torch from DIR alone (--no-index: an index's build of the
    same version never wins), its dependencies from the folder and then the index (said in the record), and the
    record names the wheel file and its sha256. Run for real on a small wheel (offline: a step that would reach an
    index is recorded, not run)."""
    import hashlib

    from harness.bisect.candidates import Candidate, candidate_spec
    from harness.envs import install as install_mod
    from harness.provenance import envinfo

    if install_mod.find_uv() is None:
        pytest.skip("needs uv")
    folder = tmp_path / "wheels"
    folder.mkdir()
    wheel = _fake_torch_wheel(folder, "2.1.2+cpu")
    _fake_torch_wheel(folder, "2.1.1")  # another version beside it
    spec = candidate_spec(Candidate("2.1.2"), f"{sys.version_info.major}.{sys.version_info.minor}")
    venv = tmp_path / "venv"
    real, skipped = subprocess.run, []

    def run(cmd, **kwargs):  # the venv and the folder-alone torch step run; a step that may reach an index does not
        if "venv" in cmd or "--no-index" in cmd:
            return real(cmd, **kwargs)
        skipped.append(cmd)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(install_mod.subprocess, "run", run)
    install_mod.install(spec, venv, ROOT, find_links=folder)
    torch_step = install_mod.folder_install_steps(spec, ["pip"], folder)[0]
    assert torch_step[1:] == [spec.torch_requirement, "--no-index", "--find-links", str(folder), "--no-deps"]
    assert "--no-index" not in skipped[0] and spec.torch_requirement in skipped[0] and "--find-links" in skipped[0]
    installed = real([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"], capture_output=True,
                     text=True, check=True)
    assert installed.stdout.strip() == "2.1.2+cpu"  # the folder's build
    assert envinfo.torch_source(str(venv)) == {
        "folder": str(folder), "file": wheel.name, "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "dependencies": "the folder, then the default index"}
    assert envinfo.torch_source(str(tmp_path)) is None  # a torch from an index: no such entry


def test_no_pattern_ends_at_a_dollar_that_passes_a_trailing_newline():
    """Class 9 of issue 31: '$' also matches before a final newline, so '2.1.2\\n' passed the version check. Every
    regular expression in harness/ and gpt/ that checks a value is anchored at the true end (\\Z or fullmatch)."""
    import ast

    offenders = []
    for path in sorted([*(ROOT / "harness").rglob("*.py"), *(ROOT / "gpt").rglob("*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in
                    ("compile", "match", "search", "fullmatch") and getattr(node.func.value, "id", None) == "re"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                    and node.args[0].value.endswith("$") and not node.args[0].value.endswith("\\$")
                    and "MULTILINE" not in ast.dump(node)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders


@pytest.mark.parametrize("field, value", [("torch", "2.1.2\n"), ("python", "3.11\n"), ("cuda", "12.1\n")])
def test_a_trailing_newline_is_no_version(tmp_path, field, value):
    """Class 9 of issue 31: --at '2.1.2\\n' and an env.yaml value with a trailing newline are refused in one line."""
    from harness.envs.spec import SpecError, load_spec

    p = run_module("harness.bisect", "--at", "2.1.2\n", "--rung", "bf16", "--out", tmp_path / "b", timeout=60)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "neither an env name" in p.stderr
    assert "--at '2.1.2\\n'" in p.stderr
    (tmp_path / "envs" / "x").mkdir(parents=True)
    spec = {"name": "x", "description": "d", "torch": "2.1.2", "cuda": "12.1", "index_url": None, "pre": False,
            "python": "3.11", "extra_pins": [], "base_image": None, "base_image_digest": None, field: value}
    (tmp_path / "envs" / "x" / "env.yaml").write_text(json.dumps(spec))  # JSON is YAML
    with pytest.raises(SpecError, match=field):
        load_spec("x", tmp_path / "envs")


@pytest.mark.parametrize("payload", ["x; touch {mark}", "x$(touch {mark})", "x`touch {mark}`", "x && touch {mark}",
                                     "x\ntouch {mark}"])
@pytest.mark.parametrize("runner", ["nox", "container"])
def test_no_cluster_config_value_runs_as_a_command(tmp_path, capsys, payload, runner):
    """Class 10 of issue 31: every slurm value of a cluster config (but `setup`, which is shell by design) goes into
    the sbatch script as words that run nothing, or is refused (exit 2). Each script is run for real by bash, with
    every command it calls a stub and `touch` a stub that leaves the mark."""
    from harness.cluster import __main__ as cluster_main

    stubs = tmp_path / "bin"
    stubs.mkdir()
    mark = tmp_path / "PWNED"
    for name in ("mkdir", "flock", "hostname", "srun", "nox"):
        (stubs / name).write_text("#!/bin/sh\nexit 0\n")
    (stubs / "touch").write_text(f"#!/bin/sh\necho ran > {mark}\n")
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    value = payload.format(mark=mark)
    slurm = {"runner": runner, "nox": "nox"}
    keys = ["partition", "time", "cpus_per_task", "mem", "nox", "container_image", "container_results", "gpu_types",
            "sbatch_options", "gpu_select"]
    for key in keys:
        config = {**slurm, key: {"a100": value} if key == "gpu_types" else [value] if key == "sbatch_options" else value}
        path = tmp_path / f"{key}.yaml"
        path.write_text(json.dumps({"slurm": config}))
        try:
            code = cluster_main.main(["slurm", "submit", "--envs", "latest", "--gpus", "a100", "--dry-run",
                                      "--results", str(tmp_path / "results"), "--cluster-config", str(path)])
        except SystemExit as exc:  # the parser's usage error
            code = exc.code
        out, err = capsys.readouterr()
        if code == 2:
            assert "Traceback" not in err and f"slurm.{key}" in err.strip().splitlines()[-1], (key, err)
            continue
        assert code == 0, (key, err[-300:])
        script = out[out.index("#!/bin/bash"):]
        subprocess.run([shutil.which("bash"), "-c", script], env={"PATH": str(stubs), "SLURM_ARRAY_TASK_ID": "0"}, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60, check=False)
        assert not mark.exists(), (key, script)


@pytest.mark.parametrize("args", [["run", "latest"], ["run", "latest", "--no-gpus"], ["build", "latest"]])
def test_docker_commands_without_the_docker_sdk_say_so_in_one_line(tmp_path, args):
    """Class 11 of issue 31: every harness.docker command that needs the docker SDK, where it is not installed: one
    line naming it, exit 2, no traceback."""
    blocker = tmp_path / "blocker"
    (blocker / "docker").mkdir(parents=True)
    (blocker / "docker" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'docker'\", name='docker')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    p = subprocess.run([sys.executable, "-m", "harness.docker", *args, "--results", str(tmp_path / "r")]
                       if args[0] == "run" else [sys.executable, "-m", "harness.docker", *args], check=False,
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2 and p.stderr.strip() == "the docker SDK is not installed (pip install docker)", p.stderr


def test_a_newline_in_a_file_name_or_a_record_forges_no_line(tmp_path, capsys):
    """Class 12 of issue 31: a record file named 'bad<newline>warning: forged line.json', and env, rung and plan names
    with a newline: compare (text, markdown; --detail and the left-out table) starts no line with the forged text;
    each name stays on its line (or its table cell), its newline shown as \\n."""
    def edit(r):
        for key in ("env", "rung", "plan"):
            r[key] += f"\nwarning: forged {key}"
        r["environment"]["env_name"] = r["env"]
    records = tmp_path / "records"
    records.mkdir()
    for path in sorted(CPU_RECORDS.glob("*.json"))[:4]:
        r = json.loads(path.read_text())
        edit(r)
        (records / path.name).write_text(json.dumps(r))
    (records / "bad\nwarning: forged file.json").write_text("{}")
    for args in ([], ["--detail"], ["--table", "left-out"], ["--format", "markdown", "--detail"]):
        assert compare.main([str(records), *args]) == 0
        out, err = capsys.readouterr()
        assert not re.search(r"(?m)^[ |`-]*warning: forged", out + err), args
        assert "bad\\nwarning: forged file.json" in err


@pytest.mark.parametrize("args", [
    ["harness.report", "results/cpu-amd-epyc-2core", "-o", ""], ["harness.compare", ""], ["harness.run", "--out", ""],
    ["harness.run", "--plan", ""], ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--out", ""],
    ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--venvs", " "],
    ["harness.bisect", "--at", "2.1.2", "--rung", "fp32", "--find-links", ""],
    ["harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--results", ""],
    ["harness.cluster", "slurm", "submit", "--envs", "latest", "--gpus", "a100", "--cluster-config", ""],
    ["harness.cluster", "k8s", "render", "--envs", "latest", "--gpus", "a100", "-o", ""],
    ["harness.docker", "run", "latest", "--results", ""]])
def test_an_empty_path_is_bad_input(tmp_path, args):
    """Class 13 of issue 31: every path option given '' (or blanks): exit 2, one line, nothing written (an empty -o
    wrote the report into the current folder)."""
    p = subprocess.run([sys.executable, "-m", *args], check=False, cwd=tmp_path, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 2 and "an empty path" in p.stderr.strip().splitlines()[-1], p.stderr[-300:]
    assert not list(tmp_path.iterdir())


def test_threads_are_bounded_by_the_cpus_this_process_may_use(tmp_path):
    """Class 14 of issue 31: --threads above the usable CPUs (10,000 on 2 cores ran at 9,674 ms/step) is refused
    before any worker starts, saying the bound and why."""
    from harness.provenance.envinfo import usable_cpus

    out = tmp_path / "out"
    p = run_module("harness.run", "--threads", usable_cpus() + 1, "--out", out, timeout=60)
    assert p.returncode == 2 and not out.exists()
    assert f"--threads {usable_cpus() + 1}: at most the {usable_cpus()} CPU(s) this process may use" in p.stderr


def test_step_series_are_checked_in_linear_time_and_bounded(monkeypatch):
    """Class 14 of issue 31: a record's step series are bounded by the steps bound (a 2,000,000-step record took
    compare 87 s, 50 s of it in jsonschema) and checked in one pass: jsonschema never walks them."""
    from harness.record import bounds, validator
    from harness.record.io import read_record
    from harness.record.model import RecordError

    record = read_record(min(CPU_RECORDS.glob("*.json")))  # as read: upgraded to the current version
    seen = []
    real = validator._validator()

    class Spy:  # whatever jsonschema is handed, the whole record or one section of it, holds no step series
        def __init__(self, validator):
            self.validator = validator

        def iter_errors(self, instance):
            steps = instance.get("steps", instance) if isinstance(instance, dict) else {}
            seen.append(len(steps.get("ms") or []) if isinstance(steps, dict) else 0)
            return self.validator.iter_errors(instance)

        def evolve(self, **kwargs):
            return Spy(self.validator.evolve(**kwargs))

    monkeypatch.setattr(validator, "_validator", lambda: Spy(real))
    validator._section_validator.cache_clear()
    validator._VALID_SECTIONS.clear()
    record["steps"] = {k: [1.0] * bounds.MAX_STEPS for k in ("ms", "loss", "grad_norm")}
    assert validator.validate(record)["steps"]["ms"] == [1.0] * bounds.MAX_STEPS  # the record itself, whole
    assert seen and all(n == 0 for n in seen)
    record["steps"]["ms"] = [1.0] * (bounds.MAX_STEPS + 1)
    with pytest.raises(RecordError, match="steps.ms: 100,001 items; at most 100,000 \\(no run records more steps\\)"):
        validator.validate(record)
    record["steps"]["ms"] = [1.0, "x", None]
    with pytest.raises(RecordError, match=r"steps.ms\[1\]: 'x' is not a number or null"):
        validator.validate(record)


def test_many_series_are_drawn_so_they_can_be_told_apart(tmp_path, capsys):
    """Class 14 of issue 31: 25 envs (300 made a chart of 300 bars in 10 repeating colours): the ladder is drawn in
    parts of at most 20 series, each in colours of its own, and the caption says so."""
    from harness.report import figures

    records = tmp_path / "records"
    records.mkdir()
    for path in sorted(CPU_RECORDS.glob("*-fp32-r*.json"))[:2]:
        for i in range(25):
            r = json.loads(path.read_text())
            r["env"] = r["environment"]["env_name"] = f"env{i:02}"
            r["run_id"] += f"-{i}"
            (records / f"{r['run_id']}.json").write_text(json.dumps(r))
    assert report_main.main([str(records), "-o", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    text = (tmp_path / "r" / "report.md").read_text()
    assert "(series 1-20 of 25)" in text and "(series 21-25 of 25)" in text
    assert len({tuple(c) for c in figures.series_colors(figures.MAX_SERIES)}) == figures.MAX_SERIES
